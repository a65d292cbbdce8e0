// Register-blocked flash attention on plain ALUs (f32 arithmetic over any storage dtype through the
// ld_/st_ helpers of the generated header), the fast form of attention_plain.wgsl's FWD, DQ and DKDV.
//
// Every tile lives in workgroup memory row-major, 4 columns an element, rows padded by one element
// (DP) so that neighbouring rows start on other banks. The element is vec4<f32>, or with PX (PG for
// dO's tile) four 16-bit values of the input's own dtype packed in a vec2<u32>: exact, half the
// memory, an unpack at each read; the host packs only where f32 tiles do not fit (head dim 128).
// TX/TG and tx_ld/tx_st/tg_ld/tg_st come with the header (attention.ts blockedTileCode). An invocation (tr, tc) of a TR×8 grid owns 4 query rows
// tr + TR·i and 4 keys tc + 8·jj of a 4TR×32 score tile (16 dot products of vec4s per column step:
// 8 vec4 loads for 64 FMAs), and 4 rows × DV column vec4s tc + 8·u of the output (or, in DKDV, 4 keys
// × DV column vec4s of dk and dv). Products with a probability tile go through workgroup memory
// (Ps: [row][key] in FWD and DQ, Pt/Dt: [key][row] in DKDV), read back a vec4 at a time.
//   FWD   one block of BQ = 4TR query rows of one (batch, head) per workgroup; online softmax: each
//         invocation's row maxima over its 4 keys meet in Red, every invocation of a row takes the
//         same maximum, rescales its own partial row sums and O columns; the sums meet once at the end.
//   DQ    as FWD (TR = 8): P = exp(s − lse), dS = P·(dO·v − delta), dq = scale·Σ dS·k.
//   DKDV  a block of 32 keys of one (batch, kv head) per workgroup of 64; loops over the query heads
//         of its GQA group and the blocks of 32 query rows that can see the keys.
// Masked scores are −BIG and give P = 0 explicitly (a row that sees no key: out 0, lse −∞); blocks
// wholly inside the visible region skip the per-element test. Columns past d load as zero.
// FOX (Forgetting Transformer, specs/fpa_depth.md §1; causal only): every score gains c[p_i] − c[j],
// c per query head read from the f32 buffer ex behind P.xoff (the backward reads lse and delta from
// its front, [lse | delta | c], to stay within 8 storage bindings). DQ also writes the row sums of
// dS (diagonal j = p_i left out) to aux[row], DKDV the column sums per query head to
// aux[nrows + (b, h, j)]: fox_fpa_attention.wgsl's COMBINE turns them into dc.
// FPA (First Passage Attention, the [P] design of specs/fpa_depth.md §2.2: φ, ℓ, λ per kv head; causal
// only): every score loses λ·relu(ℓ_j − M_ij), M_ij = min φ over the visible keys in (j, p_i] (BIG
// when there are none, so the last visible key of a row has no penalty), with [φ | ℓ | λ] read from
// ex behind P.xoff (the backward's ex is [lse | delta | φ | ℓ | λ], as FOX's). φ and ℓ of the key
// block sit in Fk and Lk; every invocation walks Fk from the block's end (broadcast reads, no extra
// barrier) to take the in-block suffix minima at its 4 keys, once for a block that every row sees
// whole (M = min(suffix, C) with C the row's min φ past the block), once per row for the diagonal
// and kvlen-cut blocks (the walk stops at the row's last visible key). The outputs are the tiled
// passes' of fox_fpa_attention.wgsl, into the same buffers, so its REDUCE follows the backward.
//   FWD, DQ  key blocks from the diagonal backwards (§2.4; the online softmax does not care), each
//         invocation keeping C per owned row across the blocks. Only the minimum matters in FWD.
//         DQ then runs the CPU reference's row sweep over each block (invocation r < BQ for row r,
//         keeping M, its argmin t* with ties to the latest index, and dλ's row partial): λ·dS·act
//         goes to t*. While t* is a key of the later blocks it adds to the row's carry, settled when
//         t* first moves inside the block (at most once per block: FT, FV); after that it goes into
//         Ps, which the sweep turns into the row's accumulator per target key (slot j is read and
//         zeroed before any earlier key can name j). Column sums of Ps and the settled carries go
//         into the workgroup's own (query block, t) dφ cells of aux, invocation t mod WG owning
//         cell t throughout: no atomics, a fixed order. dλ's row partial into aux[row].
//   DKDV  C of a row is min φ over [the block's end, p_i]: the gap carry up to the query block's
//         first position (strided over the workgroup once, then extended block by block) and a
//         prefix minimum over the query block's own positions (Fq, read by every invocation).
//         dℓ_j = −λ·Σ dS·act over the group's rows into aux[nrows + (b, g, j)].
// MASK (softmax attention only): the blocks a block mask lists instead of the causal/window range
// (attention_mask.wgsl; BQ and BK divide its 128 × 64 blocks), with SEG the pair predicate of
// segments (the VISIBLE placeholder: pair_visible) and whole blocks only where the mask's entry says so.
{{HEADER}}
{{COMMON}}
{{MASKING}}

const TR = {{TR}}u;
const TC = 8u;
const WG = TR * TC;
const BQ = 4u * TR;
const BK = 32u;
const DM = {{DM}}u;
const D4 = DM / 4u;
const DP = D4 + 1u;
const DV = DM / 32u;

#if FOX
fn cval(bh: u32, t: u32) -> f32 { return ex[P.xoff + bh * P.tk + t]; }

// c of query head bh at keys t0 + 8·jj (0 at or past tk).
fn ckeys(bh: u32, t0: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var jj = 0u; jj < 4u; jj++) { let t = t0 + 8u * jj; if (t < P.tk) { x[jj] = cval(bh, t); } }
  return x;
}

// c of query head bh at the positions of rows r0 + TR·i (0 outside the rows or [0, tk)).
fn cqueries(bh: u32, r0: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i++) {
    let p = i32(r0 + TR * i) + P.qoff;
    if (r0 + TR * i < P.tq && p >= 0 && p < i32(P.tk)) { x[i] = cval(bh, u32(p)); }
  }
  return x;
}

// Whether rows [i0, i0 + BQ) and keys [k0, k0 + BK) share a diagonal cell (key j at the row's position p).
fn has_diag(i0: u32, k0: u32) -> bool {
  let p0 = i32(i0) + P.qoff;
  return i32(k0) < p0 + i32(BQ) && p0 < i32(k0 + BK);
}

// ds of row `row` at keys kc + 8·jj with the diagonal cell as 0 (dc leaves it out: its bias is 0 whatever c is).
fn off_diag(ds: vec4<f32>, row: u32, kc: u32) -> vec4<f32> {
  var x = ds;
  for (var jj = 0u; jj < 4u; jj++) { if (i32(kc + 8u * jj) == i32(row) + P.qoff) { x[jj] = 0.0; } }
  return x;
}
#endif

#if FPA
// φ and ℓ of the current key block of this kv head (φ = BIG past kvlen: it never lowers a minimum).
var<workgroup> Fk: array<vec4<f32>, BK / 4u>;
var<workgroup> Lk: array<f32, BK>;

fn load_walk(lid: u32, bg: u32, k0: u32) {
  for (var t = lid; t < BK; t += WG) {
    var f = BIG;
    var l = 0.0;
    if (k0 + t < P.kvlen) {
      f = ex[P.xoff + bg * P.tk + k0 + t];
      l = ex[P.xoff + P.nkv + bg * P.tk + k0 + t];
    }
    Fk[t / 4u][t % 4u] = f;
    Lk[t] = l;
  }
}

// M at keys tc + 8·jj of the block and the carry after it, for one row.
struct WalkMin { m: vec4<f32>, carry: f32 }

// Walks φ of block indices last … 0 from the carry c (min φ past the block): m[jj] = min(c, φ over
// (tc + 8·jj, last]) for keys up to last (BIG past it: those scores are masked), carry = min(c, φ over [0, last]).
fn walk_min(tc: u32, last: i32, c: f32) -> WalkMin {
  var m = c;
  var mk = vec4<f32>(BIG);
  for (var t4 = BK / 4u; t4 > 0u; t4--) {
    let f = Fk[t4 - 1u];
    for (var x = 4u; x > 0u; x--) {
      let t = 4u * (t4 - 1u) + x - 1u;
      if (i32(t) <= last) {
        if (t % 8u == tc) { mk[t / 8u] = m; }
        m = min(m, f[x - 1u]);
      }
    }
  }
  return WalkMin(mk, m);
}
#if DKDV
// φ at the positions of the query block's rows, BIG outside [the key block's end, kvlen).
var<workgroup> Fq: array<vec4<f32>, BQ / 4u>;
#endif
#if DQ
// Per query row: the argmin the row's sweep left behind in this key block (−1: none) and what it owed it.
var<workgroup> FT: array<i32, BQ>;
var<workgroup> FV: array<f32, BQ>;
#endif
#endif

// Whether every key of [k0, k0 + BK) is visible from every row of [i0, i0 + BQ).
fn block_visible(i0: u32, k0: u32) -> bool {
  if (i0 + BQ > P.tq || k0 + BK > P.kvlen) { return false; }
  let first = i32(i0) + P.qoff;
  let last = i32(i0 + BQ) - 1 + P.qoff;
  if (P.causal != 0u && i32(k0 + BK) - 1 > first) { return false; }
  if (P.window != 0u && i32(k0) <= last - i32(P.window)) { return false; }
  return true;
}

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

var<workgroup> Ks: array<TX, BK * DP>;
var<workgroup> Vs: array<TX, BK * DP>;
var<workgroup> Qs: array<TX, BQ * DP>;
#if DKDV
var<workgroup> Gs: array<TG, BQ * DP>;
const QP = BQ / 4u + 1u;
var<workgroup> Pt: array<vec4<f32>, BK * QP>;
var<workgroup> Dt: array<vec4<f32>, BK * QP>;

// Sums over the TR row-invocations of one f32 per key of the block (this invocation's x at keys
// tc + 8·jj), met in Pt (free after a barrier): key lid's sum, for lid < BK (0 for the others).
fn key_sums(lid: u32, tr: u32, tc: u32, x: vec4<f32>) -> f32 {
  workgroupBarrier();
  for (var jj = 0u; jj < 4u; jj++) { let e = tr * BK + tc + 8u * jj; Pt[e / 4u][e % 4u] = x[jj]; }
  workgroupBarrier();
  var a = 0.0;
  if (lid < BK) {
    for (var t = 0u; t < TR; t++) { let e = t * BK + lid; a += Pt[e / 4u][e % 4u]; }
  }
  return a;
}
#else
const KP = BK / 4u + 1u;
var<workgroup> Ps: array<vec4<f32>, BQ * KP>;
#if FWD
var<workgroup> Red: array<vec4<f32>, BQ * TC / 4u>;
#else
var<workgroup> Gs: array<TG, BQ * DP>;
#endif
#endif

// Rows [k0, k0 + BK) of k and v (row kbase is the first of this (batch, kv head)); rows past kvlen are zero.
fn load_keys(lid: u32, kbase: u32, k0: u32) {
  for (var e = lid; e < BK * D4; e += WG) {
    let j = e / D4;
    let c4 = e % D4;
    var kx = vec4<f32>(0.0);
    var vx = vec4<f32>(0.0);
    if (k0 + j < P.kvlen) {
      let o = (kbase + k0 + j) * P.d + c4 * 4u;
      kx = ld4_k(o, c4 * 4u);
      vx = ld4_v(o, c4 * 4u);
    }
    Ks[j * DP + c4] = tx_st(kx);
    Vs[j * DP + c4] = tx_st(vx);
  }
}

// Rows [i0, i0 + BQ) of q (and dO) of the (batch, head) whose first row is qrow0; rows past tq are zero.
fn load_queries(lid: u32, qrow0: u32, i0: u32) {
  for (var e = lid; e < BQ * D4; e += WG) {
    let r = e / D4;
    let c4 = e % D4;
    var x = vec4<f32>(0.0);
#if FWD
#else
    var g = vec4<f32>(0.0);
#endif
    if (i0 + r < P.tq) {
      let o = (qrow0 + i0 + r) * P.d + c4 * 4u;
      x = ld4_q(o, c4 * 4u);
#if FWD
#else
      g = ld4_g(o, c4 * 4u);
#endif
    }
    Qs[r * DP + c4] = tx_st(x);
#if FWD
#else
    Gs[r * DP + c4] = tg_st(g);
#endif
  }
}

#if DKDV
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tr = lid / TC;
  let tc = lid % TC;
  let kvh = wid.y;
  let b = wid.z;
  let j0 = wid.x * BK;
  let kbase = (b * P.hkv + kvh) * P.tk;
  load_keys(lid, kbase, j0);
  var ak: array<vec4<f32>, 4u * DV>;
  var av: array<vec4<f32>, 4u * DV>;
  for (var t = 0u; t < 4u * DV; t++) { ak[t] = vec4<f32>(0.0); av[t] = vec4<f32>(0.0); }
  let rows = query_rows(j0, BK);
  let ilo = rows.x;
  let ihi = rows.y;
#if FPA
  let lam = ex[P.xoff + 2u * P.nkv + kvh];
  load_walk(lid, b * P.hkv + kvh, j0);
  // Keys from jend on come after the block; φ of position t is ex[P.xoff + kbase + t].
  let jend = i32(min(j0 + BK, P.kvlen));
  // The gap carry at the first query block: min φ over [jend, its first position) (BIG when empty),
  // strided over the workgroup; the partial minima meet in Pt (not yet in use).
  let pfirst = min(i32(u32(ilo) / BQ * BQ) + P.qoff, i32(P.kvlen));
  var gm0 = BIG;
  for (var t = jend + i32(lid); t < pfirst; t += i32(WG)) { gm0 = min(gm0, ex[P.xoff + kbase + u32(t)]); }
  Pt[lid / 4u][lid % 4u] = gm0;
  workgroupBarrier();
  for (var t = 0u; t < WG; t++) { gm0 = min(gm0, Pt[t / 4u][t % 4u]); }
  // The in-block suffix minima at the owned keys, for the rows that see the whole block.
  let w0 = walk_min(tc, i32(BK) - 1, BIG);
  let lv = vec4<f32>(Lk[tc], Lk[tc + 8u], Lk[tc + 16u], Lk[tc + 24u]);
  // Σ dS·act at the owned keys over the rows this invocation sees, the whole group's.
  var cl = vec4<f32>(0.0);
#endif
  for (var hh = 0u; hh < P.group; hh++) {
    let qrow0 = (b * P.h + kvh * P.group + hh) * P.tq;
#if FOX
    let bh = b * P.h + kvh * P.group + hh;
    let ck = ckeys(bh, j0 + tc);
    var cs = vec4<f32>(0.0);
#endif
#if FPA
    var gm = gm0;
#endif
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
#if FPA
      for (var r = lid; r < BQ; r += WG) {
        let t = i32(i0 + r) + P.qoff;
        var f = BIG;
        if (t >= jend && t < i32(P.kvlen)) { f = ex[P.xoff + kbase + u32(t)]; }
        Fq[r / 4u][r % 4u] = f;
      }
#endif
      workgroupBarrier();
#if FPA
      // The owned rows' carries C = min φ over [jend, p_i]: the gap carry, then a prefix minimum of Fq;
      // the whole block's minimum is the next query block's gap carry.
      var rq = vec4<f32>(BIG);
      for (var r4 = 0u; r4 < BQ / 4u; r4++) {
        let f = Fq[r4];
        for (var x = 0u; x < 4u; x++) {
          gm = min(gm, f[x]);
          if ((4u * r4 + x) % TR == tr) { rq[(4u * r4 + x) / TR] = gm; }
        }
      }
#endif
      var lr = vec4<f32>(0.0);
      var dr = vec4<f32>(0.0);
      for (var i = 0u; i < 4u; i++) {
        let r = i0 + tr + TR * i;
#if FOX
        if (r < P.tq) { lr[i] = ex[qrow0 + r]; dr[i] = ex[P.nrows + qrow0 + r]; }
#else
#if FPA
        if (r < P.tq) { lr[i] = ex[qrow0 + r]; dr[i] = ex[P.nrows + qrow0 + r]; }
#else
        if (r < P.tq) { lr[i] = lse[qrow0 + r]; dr[i] = delta[qrow0 + r]; }
#endif
#endif
      }
#if FOX
      let cq = cqueries(bh, i0 + tr);
      let dg = has_diag(i0, j0);
#endif
      var s: array<vec4<f32>, 4>;
      var dp: array<vec4<f32>, 4>;
      for (var i = 0u; i < 4u; i++) { s[i] = vec4<f32>(0.0); dp[i] = vec4<f32>(0.0); }
      for (var c4 = 0u; c4 < D4; c4++) {
        let k0v = tx_ld(Ks[tc * DP + c4]);
        let k1v = tx_ld(Ks[(tc + 8u) * DP + c4]);
        let k2v = tx_ld(Ks[(tc + 16u) * DP + c4]);
        let k3v = tx_ld(Ks[(tc + 24u) * DP + c4]);
        let v0v = tx_ld(Vs[tc * DP + c4]);
        let v1v = tx_ld(Vs[(tc + 8u) * DP + c4]);
        let v2v = tx_ld(Vs[(tc + 16u) * DP + c4]);
        let v3v = tx_ld(Vs[(tc + 24u) * DP + c4]);
        for (var i = 0u; i < 4u; i++) {
          let qv = tx_ld(Qs[(tr + TR * i) * DP + c4]);
          let gv = tg_ld(Gs[(tr + TR * i) * DP + c4]);
          s[i] += vec4<f32>(dot(qv, k0v), dot(qv, k1v), dot(qv, k2v), dot(qv, k3v));
          dp[i] += vec4<f32>(dot(gv, v0v), dot(gv, v1v), dot(gv, v2v), dot(gv, v3v));
        }
      }
#if SEG
      let full = block_visible(i0, j0) && mask_whole(mrow, it, MASK_QB, BQ);
#else
      let full = block_visible(i0, j0);
#endif
      for (var i = 0u; i < 4u; i++) {
        let r = tr + TR * i;
        var ok = vec4<bool>(true);
        if (!full) {
          for (var jj = 0u; jj < 4u; jj++) { ok[jj] = {{VISIBLE}}(i0 + r, j0 + tc + 8u * jj); }
        }
#if FOX
        let p = select(vec4<f32>(0.0), exp(s[i] * P.scale + (cq[i] - ck) - lr[i]), ok);
        let d0 = p * (dp[i] - dr[i]);
        if (dg) { cs += off_diag(d0, i0 + r, j0 + tc); } else { cs += d0; }
        let ds = d0 * P.scale;
#else
#if FPA
        // M of this row at the owned keys: from its carry and the block's suffix minima where it sees
        // the whole block, else its own walk (stopping at its last visible key).
        var last = i32(BK) - 1;
        if (!full) {
          last = -1;
          if (i0 + r < P.tq) { last = min(i32(i0 + r) + P.qoff, i32(P.kvlen) - 1) - i32(j0); }
        }
        var mk = min(w0.m, vec4<f32>(rq[i]));
        if (last < i32(BK) - 1) { mk = walk_min(tc, last, rq[i]).m; }
        let gap = lv - mk;
        let p = select(vec4<f32>(0.0), exp(s[i] * P.scale - lam * max(gap, vec4<f32>(0.0)) - lr[i]), ok);
        let d0 = p * (dp[i] - dr[i]);
        cl += select(vec4<f32>(0.0), d0, gap > vec4<f32>(0.0));
        let ds = d0 * P.scale;
#else
        let p = select(vec4<f32>(0.0), exp(s[i] * P.scale - lr[i]), ok);
        let ds = p * (dp[i] - dr[i]) * P.scale;
#endif
#endif
        for (var jj = 0u; jj < 4u; jj++) {
          let at = (tc + 8u * jj) * QP + r / 4u;
          Pt[at][r % 4u] = p[jj];
          Dt[at][r % 4u] = ds[jj];
        }
      }
      workgroupBarrier();
      for (var r4 = 0u; r4 < BQ / 4u; r4++) {
        var pt: array<vec4<f32>, 4>;
        var dt: array<vec4<f32>, 4>;
        for (var jj = 0u; jj < 4u; jj++) {
          pt[jj] = Pt[(tr + 8u * jj) * QP + r4];
          dt[jj] = Dt[(tr + 8u * jj) * QP + r4];
        }
        for (var x = 0u; x < 4u; x++) {
          let r = r4 * 4u + x;
          for (var u = 0u; u < DV; u++) {
            let gv = tg_ld(Gs[r * DP + tc + 8u * u]);
            let qv = tx_ld(Qs[r * DP + tc + 8u * u]);
            for (var jj = 0u; jj < 4u; jj++) {
              av[jj * DV + u] += pt[jj][x] * gv;
              ak[jj * DV + u] += dt[jj][x] * qv;
            }
          }
        }
      }
    }
#if FOX
    // Column sums of this query head.
    let colsum = key_sums(lid, tr, tc, cs);
    if (lid < BK && j0 + lid < P.tk) { aux[P.nrows + bh * P.tk + j0 + lid] = colsum; }
#endif
  }
#if FPA
  // dℓ = −λ·Σ dS·act of the owned keys.
  let dl = key_sums(lid, tr, tc, cl);
  if (lid < BK && j0 + lid < P.tk) { aux[P.nrows + kbase + j0 + lid] = -lam * dl; }
#endif
  for (var jj = 0u; jj < 4u; jj++) {
    let j = j0 + tr + 8u * jj;
    if (j < P.tk) {
      for (var u = 0u; u < DV; u++) {
        let c = (tc + 8u * u) * 4u;
        for (var x = 0u; x < 4u; x++) {
          if (c + x < P.d) {
            let o = (kbase + j) * P.d + c + x;
            st_dk(o, ak[jj * DV + u][x]);
            st_dv(o, av[jj * DV + u][x]);
          }
        }
      }
    }
  }
}
#else
#if FPA
#if DQ
// The dφ sums of key block k0 into this workgroup's (query block, t) cells from cell0: column t of Ps
// (key k0 + t, rows in order), by the invocation that owns cell k0 + t. Invocation t mod WG owns
// cell t for the whole pass, so no two invocations touch one cell and each adds in a fixed order.
fn add_block(lid: u32, cell0: u32, k0: u32) {
  let t = (lid + WG - k0 % WG) % WG;
  if (t < BK && k0 + t < P.kvlen) {
    var a = 0.0;
    for (var r = 0u; r < BQ; r++) { a += Ps[r * KP + t / 4u][t % 4u]; }
    if (a != 0.0) { aux[cell0 + k0 + t] += a; }
  }
}

// The amounts the rows settled with their earlier argmins (FT, FV: cells of blocks already visited), rows in order.
fn add_settled(lid: u32, cell0: u32) {
  for (var r = 0u; r < BQ; r++) {
    let t = FT[r];
    if (t >= 0 && u32(t) % WG == lid) { aux[cell0 + u32(t)] += FV[r]; }
  }
}
#endif
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tr = lid / TC;
  let tc = lid % TC;
  let h = wid.y;
  let b = wid.z;
  let i0 = wid.x * BQ;
  let qrow0 = (b * P.h + h) * P.tq;
  let kbase = (b * P.hkv + h / P.group) * P.tk;
  load_queries(lid, qrow0, i0);
#if FOX
  let bh = b * P.h + h;
  let cq = cqueries(bh, i0 + tr);
#if FWD
#else
  var rs = vec4<f32>(0.0);
#endif
#endif
#if FPA
  let bg = b * P.hkv + h / P.group;
  let lam = ex[P.xoff + 2u * P.nkv + h / P.group];
  // Per owned row: min φ over the visible keys of the blocks already visited (BIG before the first).
  var cy = vec4<f32>(BIG);
#if DQ
  // The CPU reference's row sweep, invocation lid < BQ serving row i0 + lid: M over the keys swept so
  // far, its argmin (−1: none yet), λ·Σ dS·act owed to that argmin from the blocks already visited,
  // and dλ's row partial −Σ dS·relu(ℓ − M).
  var sm = BIG;
  var sa = -1;
  var sc = 0.0;
  var sl = 0.0;
  let cell0 = P.nrows + P.nkv + ((b * P.h + h) * ((P.tq + BQ - 1u) / BQ) + wid.x) * P.tk;
#endif
#endif
  var acc: array<vec4<f32>, 4u * DV>;
  for (var t = 0u; t < 4u * DV; t++) { acc[t] = vec4<f32>(0.0); }
#if FWD
  var m = vec4<f32>(-BIG);
  var l = vec4<f32>(0.0);
#else
  var lr = vec4<f32>(0.0);
  var dr = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i++) {
    let r = i0 + tr + TR * i;
#if FOX
    if (r < P.tq) { lr[i] = ex[qrow0 + r]; dr[i] = ex[P.nrows + qrow0 + r]; }
#else
#if FPA
    if (r < P.tq) { lr[i] = ex[qrow0 + r]; dr[i] = ex[P.nrows + qrow0 + r]; }
#else
    if (r < P.tq) { lr[i] = lse[qrow0 + r]; dr[i] = delta[qrow0 + r]; }
#endif
#endif
  }
#endif
  let kr = key_range(i0, min(i0 + BQ, P.tq));
#if FPA
  // From the diagonal backwards: a block's M needs the carry of the keys after it.
  let kfirst = kr.x / BK * BK;
  for (var kb = (kr.y - kfirst + BK - 1u) / BK; kb > 0u; kb--) {
    let k0 = kfirst + (kb - 1u) * BK;
#else
#if MASK
  let mrow = mask_row(b, h, i0);
  seg_start(b);
  let nblocks = mask_count(mrow, MASK_KB, BK, lid);
  for (var it = 0u; it < nblocks; it++) {
    let k0 = visit(it, 0u, BK, MASK_KB, mrow, lid);
#else
  for (var k0 = kr.x / BK * BK; k0 < kr.y; k0 += BK) {
#endif
#endif
    workgroupBarrier();
    load_keys(lid, kbase, k0);
#if FPA
    load_walk(lid, bg, k0);
#endif
    workgroupBarrier();
    // s[i].jj: row tr + TR·i, key tc + 8·jj
    var s: array<vec4<f32>, 4>;
    for (var i = 0u; i < 4u; i++) { s[i] = vec4<f32>(0.0); }
#if FWD
#else
    var dp: array<vec4<f32>, 4>;
    for (var i = 0u; i < 4u; i++) { dp[i] = vec4<f32>(0.0); }
#endif
    for (var c4 = 0u; c4 < D4; c4++) {
      let k0v = tx_ld(Ks[tc * DP + c4]);
      let k1v = tx_ld(Ks[(tc + 8u) * DP + c4]);
      let k2v = tx_ld(Ks[(tc + 16u) * DP + c4]);
      let k3v = tx_ld(Ks[(tc + 24u) * DP + c4]);
#if FWD
#else
      let v0v = tx_ld(Vs[tc * DP + c4]);
      let v1v = tx_ld(Vs[(tc + 8u) * DP + c4]);
      let v2v = tx_ld(Vs[(tc + 16u) * DP + c4]);
      let v3v = tx_ld(Vs[(tc + 24u) * DP + c4]);
#endif
      for (var i = 0u; i < 4u; i++) {
        let qv = tx_ld(Qs[(tr + TR * i) * DP + c4]);
        s[i] += vec4<f32>(dot(qv, k0v), dot(qv, k1v), dot(qv, k2v), dot(qv, k3v));
#if FWD
#else
        let gv = tg_ld(Gs[(tr + TR * i) * DP + c4]);
        dp[i] += vec4<f32>(dot(gv, v0v), dot(gv, v1v), dot(gv, v2v), dot(gv, v3v));
#endif
      }
    }
#if SEG
    let full = block_visible(i0, k0) && mask_whole(mrow, it, MASK_KB, BK);
#else
    let full = block_visible(i0, k0);
#endif
#if FOX
    let ck = ckeys(bh, k0 + tc);
#if FWD
#else
    let dg = has_diag(i0, k0);
#endif
#endif
#if FPA
    // mk[i].jj = M of row tr + TR·i at key tc + 8·jj; the rows' carries move past the block.
    let lv = vec4<f32>(Lk[tc], Lk[tc + 8u], Lk[tc + 16u], Lk[tc + 24u]);
    var mk: array<vec4<f32>, 4>;
    if (full) {
      let w = walk_min(tc, i32(BK) - 1, BIG);
      for (var i = 0u; i < 4u; i++) {
        mk[i] = min(w.m, vec4<f32>(cy[i]));
        cy[i] = min(cy[i], w.carry);
      }
    } else {
      for (var i = 0u; i < 4u; i++) {
        let r = i0 + tr + TR * i;
        var last = -1;
        if (r < P.tq) { last = min(i32(r) + P.qoff, i32(P.kvlen) - 1) - i32(k0); }
        let w = walk_min(tc, last, cy[i]);
        mk[i] = w.m;
        cy[i] = w.carry;
      }
    }
#endif
#if FWD
    for (var i = 0u; i < 4u; i++) {
      var x = s[i] * P.scale;
#if FOX
      x += cq[i] - ck;
#endif
#if FPA
      x -= lam * max(lv - mk[i], vec4<f32>(0.0));
#endif
      if (!full) {
        for (var jj = 0u; jj < 4u; jj++) { if (!{{VISIBLE}}(i0 + tr + TR * i, k0 + tc + 8u * jj)) { x[jj] = -BIG; } }
      }
      s[i] = x;
      let r = tr + TR * i;
      Red[(r * TC + tc) / 4u][tc % 4u] = max(max(x.x, x.y), max(x.z, x.w));
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
      let r = tr + TR * i;
      let a = max(Red[r * 2u], Red[r * 2u + 1u]);
      let mx = max(m[i], max(max(a.x, a.y), max(a.z, a.w)));
      let alpha = exp(m[i] - mx);
      let p = select(vec4<f32>(0.0), exp(s[i] - mx), s[i] > vec4<f32>(VIS));
      l[i] = l[i] * alpha + (p.x + p.y) + (p.z + p.w);
      m[i] = mx;
      for (var u = 0u; u < DV; u++) { acc[i * DV + u] *= alpha; }
      for (var jj = 0u; jj < 4u; jj++) { Ps[r * KP + (tc + 8u * jj) / 4u][tc % 4u] = p[jj]; }
    }
#else
    for (var i = 0u; i < 4u; i++) {
      let r = tr + TR * i;
      var ok = vec4<bool>(true);
      if (!full) {
        for (var jj = 0u; jj < 4u; jj++) { ok[jj] = {{VISIBLE}}(i0 + r, k0 + tc + 8u * jj); }
      }
#if FOX
      let p = select(vec4<f32>(0.0), exp(s[i] * P.scale + (cq[i] - ck) - lr[i]), ok);
      let ds = p * (dp[i] - dr[i]);
      if (dg) { rs[i] += dot(off_diag(ds, i0 + r, k0 + tc), vec4<f32>(1.0)); } else { rs[i] += dot(ds, vec4<f32>(1.0)); }
#else
#if FPA
      let p = select(vec4<f32>(0.0), exp(s[i] * P.scale - lam * max(lv - mk[i], vec4<f32>(0.0)) - lr[i]), ok);
#else
      let p = select(vec4<f32>(0.0), exp(s[i] * P.scale - lr[i]), ok);
#endif
      let ds = p * (dp[i] - dr[i]);
#endif
      for (var jj = 0u; jj < 4u; jj++) { Ps[r * KP + (tc + 8u * jj) / 4u][tc % 4u] = ds[jj]; }
    }
#endif
    workgroupBarrier();
    // acc[i][u] += Σ_j Ps[row i][j] · (V or K)[j][column vec4 tc + 8u]
    for (var j4 = 0u; j4 < BK / 4u; j4++) {
      var pv: array<vec4<f32>, 4>;
      for (var i = 0u; i < 4u; i++) { pv[i] = Ps[(tr + TR * i) * KP + j4]; }
      for (var x = 0u; x < 4u; x++) {
        let j = j4 * 4u + x;
        for (var u = 0u; u < DV; u++) {
#if FWD
          let w = tx_ld(Vs[j * DP + tc + 8u * u]);
#else
          let w = tx_ld(Ks[j * DP + tc + 8u * u]);
#endif
          for (var i = 0u; i < 4u; i++) { acc[i * DV + u] += pv[i][x] * w; }
        }
      }
    }
#if FPA
#if DQ
    // dφ and dλ: row i0 + lid's sweep of this block from its end. Ps (dS, read by the products above)
    // becomes the row's accumulator of λ·dS·act per target: slot j is read, then zeroed, before any
    // key before it can name key j its argmin. What the row owed its argmin from the later blocks
    // stays in sc until M first moves inside the block, then is settled (FT, FV).
    workgroupBarrier();
    if (lid < BQ) {
      var last = -1;
      if (i0 + lid < P.tq) { last = min(min(i32(i0 + lid) + P.qoff, i32(P.kvlen) - 1) - i32(k0), i32(BK) - 1); }
      var ft = -1;
      var fv = 0.0;
      var moved = false;
      for (var jj = 0u; jj < BK; jj++) {
        let j = BK - 1u - jj;
        let at = lid * KP + j / 4u;
        let ds = Ps[at][j % 4u];
        Ps[at][j % 4u] = 0.0;
        if (i32(j) <= last) {
          let gap = Lk[j] - sm;
          if (gap > 0.0) {
            sl -= ds * gap;
            if (moved) { let u = u32(sa) - k0; Ps[lid * KP + u / 4u][u % 4u] += lam * ds; } else { sc += lam * ds; }
          }
          let f = Fk[j / 4u][j % 4u];
          // Only a strictly smaller φ moves the argmin: ties go to the latest index.
          if (f < sm) {
            if (!moved) { ft = sa; fv = sc; sc = 0.0; moved = true; }
            sm = f;
            sa = i32(k0 + j);
          }
        }
      }
      FT[lid] = ft;
      FV[lid] = fv;
    }
    workgroupBarrier();
    add_block(lid, cell0, k0);
    add_settled(lid, cell0);
#endif
#endif
  }
#if FPA
#if DQ
  // What each row still owes its last argmin, and its dλ partial.
  workgroupBarrier();
  if (lid < BQ) {
    FT[lid] = sa;
    FV[lid] = sc;
    if (i0 + lid < P.tq) { aux[qrow0 + i0 + lid] = sl; }
  }
  workgroupBarrier();
  add_settled(lid, cell0);
#endif
#endif
#if FWD
  workgroupBarrier();
  for (var i = 0u; i < 4u; i++) {
    let r = tr + TR * i;
    Red[(r * TC + tc) / 4u][tc % 4u] = l[i];
  }
  workgroupBarrier();
#else
#if FOX
  // Row sums of dS: the TC partials of each row meet in Ps (free after a barrier).
  workgroupBarrier();
  for (var i = 0u; i < 4u; i++) {
    let r = tr + TR * i;
    Ps[(r * TC + tc) / 4u][tc % 4u] = rs[i];
  }
  workgroupBarrier();
#endif
#endif
  for (var i = 0u; i < 4u; i++) {
    let r = tr + TR * i;
    if (i0 + r < P.tq) {
      let row = qrow0 + i0 + r;
#if FWD
      let a = Red[r * 2u] + Red[r * 2u + 1u];
      let lt = (a.x + a.y) + (a.z + a.w);
      let inv = select(0.0, 1.0 / lt, lt > 0.0);
      if (tc == 0u) { lse[row] = select(f32_from_bits(0xff800000u), m[i] + log(lt), lt > 0.0); }
#else
#if FOX
      if (tc == 0u) { let a = Ps[r * 2u] + Ps[r * 2u + 1u]; aux[row] = (a.x + a.y) + (a.z + a.w); }
#endif
#endif
      for (var u = 0u; u < DV; u++) {
        let c = (tc + 8u * u) * 4u;
        for (var x = 0u; x < 4u; x++) {
          if (c + x < P.d) {
#if FWD
            st_out(row * P.d + c + x, acc[i * DV + u][x] * inv);
#else
            st_dq(row * P.d + c + x, acc[i * DV + u][x] * P.scale);
#endif
          }
        }
      }
    }
  }
}
#endif
