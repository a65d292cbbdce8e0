// Flash attention on plain ALUs, f32 arithmetic over any storage dtype (ld_/st_ helpers from the
// generated header). One file, four entry variants:
//   FWD   a block of BQ query rows of one (batch, head) per workgroup; loops over key blocks of BK
//         inside the causal/window bound only, online softmax (running max and sum per row in f32),
//         O accumulated in registers (BQ·DM/WG elements per invocation), then out = O/l, lse = m + log l.
//   DELTA delta[row] = Σ dO·O, one invocation per row (the backward's precomputed term).
//   DQ    as FWD over query blocks: P = exp(s − lse), dS = P·(dO·v − delta), dq = scale·Σ dS·k.
//   DKDV  a block of BK keys of one (batch, kv head) per workgroup; loops over the query heads of its
//         GQA group and the query blocks that can see these keys: dv += Pᵀ·dO, dk += scale·dSᵀ·q.
// Tiles live in workgroup memory as f32 (rows padded to DM, the head dim rounded up), scores in an
// f32 tile; masked scores are −BIG and give P = 0 explicitly, so a row that sees no key ends with
// l = 0: out 0 and lse −∞, never NaN. Shapes travel in uniforms; BQ, BK, DM are variant constants.
// MASK: the blocks a block mask lists instead of the causal/window range (attention_mask.wgsl; BQ
// and BK divide its 128 × 64 blocks), with SEG the pair predicate of segments (the VISIBLE
// placeholder: pair_visible).
{{HEADER}}
{{COMMON}}
{{MASKING}}

const WG = 64u;
const BQ = {{BQ}}u;
const BK = {{BK}}u;
const DM = {{DM}}u;

#if BWD
fn row_lse(row: u32) -> f32 { return lse[row]; }
fn row_delta(row: u32) -> f32 { return delta[row]; }
#endif



// Keys [lo, hi) that query rows [i0, i1) can see (i1 > i0).
fn key_range(i0: u32, i1: u32) -> vec2<u32> {
  let p0 = i32(i0) + P.qoff;
  let p1 = i32(i1) - 1 + P.qoff;
  var hi = i32(P.kvlen);
  if (P.causal != 0u) { hi = min(hi, p1 + 1); }
  var lo = 0;
  if (P.window != 0u) { lo = max(0, p0 - i32(P.window) + 1); }
  return vec2<u32>(u32(lo), u32(max(hi, lo)));
}

#if DELTA
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let row = gid.x + gid.y * nw.x * WG;
  if (row >= P.b * P.h * P.tq) { return; }
  var s = 0.0;
  for (var c = 0u; c < P.d; c++) { s += ld_o(row * P.d + c) * ld_g(row * P.d + c); }
  delta[row] = s;
}
#else

{{TILES}}

#if DKDV
const R = BK * DM / WG;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let kvh = wid.y;
  let b = wid.z;
  let j0 = wid.x * BK;
  let kbase = (b * P.hkv + kvh) * P.tk * P.d;
  load_keys(lid, kbase, j0);
  var ak: array<f32, R>;
  var av: array<f32, R>;
  for (var t = 0u; t < R; t++) { ak[t] = 0.0; av[t] = 0.0; }
  let rows = query_rows(j0, BK);
  let ilo = rows.x;
  let ihi = rows.y;
  for (var hh = 0u; hh < P.group; hh++) {
    let qrow0 = (b * P.h + kvh * P.group + hh) * P.tq;
#if MASK
    let mrow = mask_key_row(b, kvh * P.group + hh, j0);
    seg_start(b);
    let nblocks = mask_count(mrow, MASK_QB, BQ, lid);
    for (var it = 0u; it < nblocks; it++) {
      let i0 = visit(it, 0u, BQ, MASK_QB, mrow, lid);
#else
    for (var i0 = u32(ilo) / BQ * BQ; i32(i0) < ihi; i0 += BQ) {
#endif
      workgroupBarrier();
      load_queries(lid, qrow0, i0);
      workgroupBarrier();
      for (var e = lid; e < BQ * BK; e += WG) {
        let r = e / BK;
        let j = e % BK;
        var p = 0.0;
        var ds = 0.0;
        if ({{VISIBLE}}(i0 + r, j0 + j)) {
          p = exp(dot_qk(r, j) * P.scale - Rl[r]);
          ds = p * (dot_gv(r, j) - Rd[r]) * P.scale;
        }
        Ss[e] = p;
        Ds[e] = ds;
      }
      workgroupBarrier();
      for (var t = 0u; t < R; t++) {
        let e = lid + t * WG;
        let j = e / DM;
        let c = e % DM;
        var sk = ak[t];
        var sv = av[t];
        for (var r = 0u; r < BQ; r++) {
          sv += Ss[r * BK + j] * Gs[r * DM + c];
          sk += Ds[r * BK + j] * Qs[r * DM + c];
        }
        ak[t] = sk;
        av[t] = sv;
      }
    }
  }
  for (var t = 0u; t < R; t++) {
    let e = lid + t * WG;
    let j = e / DM;
    let c = e % DM;
    if (j0 + j < P.tk && c < P.d) {
      let o = kbase + (j0 + j) * P.d + c;
      st_dk(o, ak[t]);
      st_dv(o, av[t]);
    }
  }
}
#else

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let b = wid.z;
  let i0 = wid.x * BQ;
  let qrow0 = (b * P.h + h) * P.tq;
  let kbase = (b * P.hkv + h / P.group) * P.tk * P.d;
  load_queries(lid, qrow0, i0);
#if FWD
  if (lid < BQ) { Ms[lid] = -BIG; Ls[lid] = 0.0; }
#endif
  const R = BQ * DM / WG;
  var acc: array<f32, R>;
  for (var t = 0u; t < R; t++) { acc[t] = 0.0; }
  let kr = key_range(i0, min(i0 + BQ, P.tq));
#if MASK
  let mrow = mask_row(b, h, i0);
  seg_start(b);
  let nblocks = mask_count(mrow, MASK_KB, BK, lid);
  for (var it = 0u; it < nblocks; it++) {
    let k0 = visit(it, 0u, BK, MASK_KB, mrow, lid);
#else
  for (var k0 = kr.x / BK * BK; k0 < kr.y; k0 += BK) {
#endif
    workgroupBarrier();
    load_keys(lid, kbase, k0);
    workgroupBarrier();
#if FWD
    for (var e = lid; e < BQ * BK; e += WG) {
      let r = e / BK;
      let j = e % BK;
      var s = -BIG;
      if ({{VISIBLE}}(i0 + r, k0 + j)) { s = dot_qk(r, j) * P.scale; }
      Ss[e] = s;
    }
    workgroupBarrier();
    if (lid < BQ) {
      var m = Ms[lid];
      for (var j = 0u; j < BK; j++) { let s = Ss[lid * BK + j]; if (s > VIS) { m = max(m, s); } }
      let alpha = exp(Ms[lid] - m);
      var sum = 0.0;
      for (var j = 0u; j < BK; j++) {
        let s = Ss[lid * BK + j];
        let p = select(0.0, exp(s - m), s > VIS);
        Ss[lid * BK + j] = p;
        sum += p;
      }
      Ls[lid] = Ls[lid] * alpha + sum;
      Ms[lid] = m;
      As[lid] = alpha;
    }
    workgroupBarrier();
    for (var t = 0u; t < R; t++) {
      let e = lid + t * WG;
      let r = e / DM;
      let c = e % DM;
      var a = acc[t] * As[r];
      for (var j = 0u; j < BK; j++) { a += Ss[r * BK + j] * Vs[j * DM + c]; }
      acc[t] = a;
    }
#else
    for (var e = lid; e < BQ * BK; e += WG) {
      let r = e / BK;
      let j = e % BK;
      var ds = 0.0;
      if ({{VISIBLE}}(i0 + r, k0 + j)) {
        let p = exp(dot_qk(r, j) * P.scale - Rl[r]);
        ds = p * (dot_gv(r, j) - Rd[r]);
      }
      Ds[e] = ds;
    }
    workgroupBarrier();
    for (var t = 0u; t < R; t++) {
      let e = lid + t * WG;
      let r = e / DM;
      let c = e % DM;
      var a = acc[t];
      for (var j = 0u; j < BK; j++) { a += Ds[r * BK + j] * Ks[j * DM + c]; }
      acc[t] = a;
    }
#endif
  }
  workgroupBarrier();
  for (var t = 0u; t < R; t++) {
    let e = lid + t * WG;
    let r = e / DM;
    let c = e % DM;
    if (i0 + r < P.tq && c < P.d) {
      let o = (qrow0 + i0 + r) * P.d + c;
#if FWD
      let l = Ls[r];
      st_out(o, select(0.0, acc[t] / l, l > 0.0));
#else
      st_dq(o, acc[t] * P.scale);
#endif
    }
  }
#if FWD
  if (lid < BQ && i0 + lid < P.tq) {
    let l = Ls[lid];
    lse[qrow0 + i0 + lid] = select(f32_from_bits(0xff800000u), Ms[lid] + log(l), l > 0.0);
  }
#endif
}
#endif
#endif
