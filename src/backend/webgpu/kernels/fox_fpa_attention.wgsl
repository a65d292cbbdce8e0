// FoX and FPA attention (specs/fpa_depth.md §1.1, §2.2, §2.4) on plain ALUs: attention_plain.wgsl's
// tiled form (f32 arithmetic over any storage dtype, tiles as f32 in workgroup memory, no float
// atomics) with a per-score term. FOX adds c[p_i] − c[j] (c per query head); otherwise FPA subtracts
// λ·relu(ℓ_j − M_ij), M_ij = min φ over (j, p_i], φ, ℓ, λ per kv head. Entry variants:
//   FWD    BQ query rows of one (batch, head) per workgroup; key blocks from the diagonal backwards.
//          FPA keeps per row the carry R = min φ over the keys already visited (those after the
//          block); a row-thread sweep of the block from its end gives M_ij = min(suffix, R) and
//          folds the block into R. Online softmax as attention_plain.wgsl.
//   DELTA  ex[nrows + row] = Σ dO·O (ex holds lse, delta and the per-position inputs).
//   DQ     as FWD: P from lse, dS = P·(dO·v − delta), dq = scale·Σ dS·k. FOX: the row sum Σ dS
//          (diagonal left out) into aux[row]. FPA: the row sweep keeps the argmin t* of the carry
//          (ties to the latest index: only a strictly smaller φ moves it) and λ·Σ dS·act of the
//          keys whose argmin it is, owed to t* when t* moves. The moves of one key block are
//          recorded per row in workgroup memory, then added into the workgroup's own (query block,
//          t) cells of aux (zeroed beforehand), invocation t mod WG serving target t, rows in
//          order: no atomics, fixed order. dλ's row partial −Σ dS·relu(ℓ − M) into aux[row].
//   DKDV   BK keys of one (batch, kv head) per workgroup, looping the query heads of the GQA group
//          and the query blocks that see them: dv += Pᵀ·dO, dk += scale·dSᵀ·q. FOX: the column
//          sums Σ_i dS per query head into aux[nrows + (b, h, j)]. FPA: M_ij from the gap carry
//          G = min φ over [block end, first row of the query block) (thread 0 extends it block by
//          block), a row prefix-min over the query block up to p_i, then the sweep inside the key
//          block; dℓ_j = −λ Σ dS·act per owned column into aux[nrows + (b, g, j)].
//   REDUCE (FPA) dφ[t] = Σ of the group's (query block, t) cells; dℓ copied;
//          dλ[g] = Σ of the group's row partials. One invocation per output, fixed order.
//   COMBINE (FOX) dc[t] = dcRow[t − qoff] − dcCol[t].
{{HEADER}}
{{COMMON}}

const WG = 64u;
const BQ = {{BQ}}u;
const BK = {{BK}}u;
const DM = {{DM}}u;

#if TILED
#if FOX
// c of query head bh at position t.
fn cval(bh: u32, t: u32) -> f32 { return ex[P.xoff + bh * P.tk + t]; }
#else
fn phi_at(bg: u32, t: u32) -> f32 { return ex[P.xoff + bg * P.tk + t]; }
fn lvl_at(bg: u32, t: u32) -> f32 { return ex[P.xoff + P.nkv + bg * P.tk + t]; }
fn lam_of(g: u32) -> f32 { return ex[P.xoff + 2u * P.nkv + g]; }
#endif
#endif

// Keys [0, hi) that query rows [i0, i1) can see (causal, inside kvlen).
fn key_end(i1: u32) -> u32 {
  let p1 = i32(i1) - 1 + P.qoff;
  return u32(max(0, min(i32(P.kvlen), p1 + 1)));
}

#if DELTA
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let row = gid.x + gid.y * nw.x * WG;
  if (row >= P.nrows) { return; }
  var s = 0.0;
  for (var c = 0u; c < P.d; c++) { s += ld_o(row * P.d + c) * ld_g(row * P.d + c); }
  ex[P.nrows + row] = s;
}
#else
#if REDUCE
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let e = gid.x + gid.y * nw.x * WG;
  if (e < P.nkv) {
    let bg = e / P.tk;
    let t = e % P.tk;
    let b = bg / P.hkv;
    let g = bg % P.hkv;
    var s = 0.0;
    let nqb = (P.tq + BQ - 1u) / BQ;
    for (var hh = 0u; hh < P.group; hh++) {
      let cell0 = (b * P.h + g * P.group + hh) * nqb;
      for (var qb = 0u; qb < nqb; qb++) { s += aux[P.nrows + P.nkv + (cell0 + qb) * P.tk + t]; }
    }
    dphi[e] = s;
    dlevel[e] = aux[P.nrows + e];
  } else if (e < P.nkv + P.hkv) {
    let g = e - P.nkv;
    var s = 0.0;
    for (var b = 0u; b < P.b; b++) {
      for (var hh = 0u; hh < P.group; hh++) {
        let row0 = (b * P.h + g * P.group + hh) * P.tq;
        for (var i = 0u; i < P.tq; i++) { s += aux[row0 + i]; }
      }
    }
    dlam[g] = s;
  }
}
#else
#if COMBINE
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let e = gid.x + gid.y * nw.x * WG;
  if (e >= P.b * P.h * P.tk) { return; }
  let bh = e / P.tk;
  let i = i32(e % P.tk) - P.qoff;
  var s = -aux[P.nrows + e];
  if (i >= 0 && i < i32(P.tq)) { s += aux[bh * P.tq + u32(i)]; }
  dc[e] = s;
}
#else

{{TILES}}
// Per key of the block: FOX c; FPA φ then ℓ.
var<workgroup> Xk: array<f32, 2u * BK>;
// Per query row: FOX c[p]; FPA the carry (min φ over the keys visited after this block).
var<workgroup> Xq: array<f32, BQ>;
#if FWD
#else
#if FOX
#else
// Gap ℓ_j − M_ij of each score (FPA backward).
var<workgroup> Gp: array<f32, BQ * BK>;
#endif
#endif

#if FOX
#else
// φ and ℓ of keys [k0, k0 + BK) of kv head bg into Xk (0 past kvlen: never read there).
fn load_walk(lid: u32, bg: u32, k0: u32) {
  if (lid < BK) {
    var f = 0.0;
    var l = 0.0;
    if (k0 + lid < P.kvlen) { f = phi_at(bg, k0 + lid); l = lvl_at(bg, k0 + lid); }
    Xk[lid] = f;
    Xk[BK + lid] = l;
  }
}
#endif

#if BWD
// Where the tiles' loader finds the saved statistics: ex holds lse, then delta.
fn row_lse(row: u32) -> f32 { return ex[row]; }
fn row_delta(row: u32) -> f32 { return ex[P.nrows + row]; }

// Absolute position of query row i.
fn pos(i: u32) -> i32 { return i32(i) + P.qoff; }
#endif

#if DKDV
const R = BK * DM / WG;
#if FOX
#else
var<workgroup> Gm: f32;
#endif
// Per owned column: FOX Σ dS of the current query head; FPA Σ dS·act over the group.
var<workgroup> Acol: array<f32, BK>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let kvh = wid.y;
  let b = wid.z;
  let j0 = wid.x * BK;
  let bg = b * P.hkv + kvh;
  let kbase = bg * P.tk * P.d;
  load_keys(lid, kbase, j0);
#if FOX
#else
  load_walk(lid, bg, j0);
  let lam = lam_of(kvh);
  // Keys from here on are after the block: the gap carry starts there.
  let jend = min(j0 + BK, P.kvlen);
#endif
  var ak: array<f32, R>;
  var av: array<f32, R>;
  for (var t = 0u; t < R; t++) { ak[t] = 0.0; av[t] = 0.0; }
  if (lid < BK) { Acol[lid] = 0.0; }
  let rows = query_rows(j0, BK);
  let ilo = rows.x;
  let ihi = rows.y;
  for (var hh = 0u; hh < P.group; hh++) {
    let bh = b * P.h + kvh * P.group + hh;
    let qrow0 = bh * P.tq;
#if FOX
    if (lid < BK) { Acol[lid] = 0.0; }
#else
    if (lid == 0u && ilo < ihi) {
      var m = BIG;
      let pfirst = min(pos(u32(ilo) / BQ * BQ), i32(P.kvlen));
      for (var t = i32(jend); t < pfirst; t++) { m = min(m, phi_at(bg, u32(t))); }
      Gm = m;
    }
#endif
    for (var i0 = u32(ilo) / BQ * BQ; i32(i0) < ihi; i0 += BQ) {
      workgroupBarrier();
      load_queries(lid, qrow0, i0);
#if FOX
      if (lid < BK) { var cj = 0.0; if (j0 + lid < P.tk) { cj = cval(bh, j0 + lid); } Xk[lid] = cj; }
      if (lid < BQ) { var ci = 0.0; let p = pos(i0 + lid); if (i0 + lid < P.tq && p >= 0) { ci = cval(bh, u32(p)); } Xq[lid] = ci; }
#endif
      workgroupBarrier();
#if FOX
#else
      if (lid < BQ) {
        let r = lid;
        let p = pos(i0 + r);
        var m = Gm;
        if (i0 + r < P.tq) {
          for (var t = max(i32(jend), pos(i0)); t <= p; t++) { m = min(m, phi_at(bg, u32(t))); }
        }
        for (var jj = 0u; jj < BK; jj++) {
          let j = BK - 1u - jj;
          var gap = 0.0;
          if (visible(i0 + r, j0 + j)) {
            gap = Xk[BK + j] - m;
            m = min(m, Xk[j]);
          }
          Gp[r * BK + j] = gap;
        }
      }
      workgroupBarrier();
      if (lid == 0u) {
        var m = Gm;
        let hi = min(pos(i0 + BQ), i32(P.kvlen));
        for (var t = max(i32(jend), pos(i0)); t < hi; t++) { m = min(m, phi_at(bg, u32(t))); }
        Gm = m;
      }
#endif
      for (var e = lid; e < BQ * BK; e += WG) {
        let r = e / BK;
        let j = e % BK;
        var p = 0.0;
        var ds = 0.0;
        if (visible(i0 + r, j0 + j)) {
#if FOX
          let s = dot_qk(r, j) * P.scale + (Xq[r] - Xk[j]);
#else
          let s = dot_qk(r, j) * P.scale - lam * max(Gp[e], 0.0);
#endif
          p = exp(s - Rl[r]);
          ds = p * (dot_gv(r, j) - Rd[r]);
        }
        Ss[e] = p;
        Ds[e] = ds;
      }
      workgroupBarrier();
      if (lid < BK) {
        var a = Acol[lid];
        for (var r = 0u; r < BQ; r++) {
#if FOX
          if (pos(i0 + r) != i32(j0 + lid)) { a += Ds[r * BK + lid]; }
#else
          if (Gp[r * BK + lid] > 0.0) { a += Ds[r * BK + lid]; }
#endif
        }
        Acol[lid] = a;
      }
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
#if FOX
    if (lid < BK && j0 + lid < P.tk) { aux[P.nrows + bh * P.tk + j0 + lid] = Acol[lid]; }
#endif
  }
#if FOX
#else
  if (lid < BK && j0 + lid < P.tk) { aux[P.nrows + bg * P.tk + j0 + lid] = -lam * Acol[lid]; }
#endif
  for (var t = 0u; t < R; t++) {
    let e = lid + t * WG;
    let j = e / DM;
    let c = e % DM;
    if (j0 + j < P.tk && c < P.d) {
      let o = kbase + (j0 + j) * P.d + c;
      st_dk(o, ak[t] * P.scale);
      st_dv(o, av[t]);
    }
  }
}
#else

#if DQ
// FPA row state across key blocks: argmin of the carry (−1: none yet), λ·Σ dS·act owed to it, dλ partial.
var<workgroup> Ca: array<i32, BQ>;
var<workgroup> Cc: array<f32, BQ>;
var<workgroup> Cl: array<f32, BQ>;
// FPA: the dφ flushes of each row's sweep over the current key block (target position, amount).
var<workgroup> FT: array<i32, BQ * BK>;
var<workgroup> FV: array<f32, BQ * BK>;
var<workgroup> FN: array<u32, BQ>;

// Adds the recorded flushes into the workgroup's (query block, t) cells from cell0: the thread
// t mod WG owns target t, rows in order, so no two invocations touch one cell and the order is fixed.
fn apply_flushes(lid: u32, cell0: u32) {
  for (var r = 0u; r < BQ; r++) {
    for (var n = 0u; n < FN[r]; n++) {
      let t = u32(FT[r * BK + n]);
      if (t % WG == lid) { aux[cell0 + t] += FV[r * BK + n]; }
    }
  }
}
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let b = wid.z;
  let i0 = wid.x * BQ;
  let bh = b * P.h + h;
  let qrow0 = bh * P.tq;
  let g = h / P.group;
  let bg = b * P.hkv + g;
  let kbase = bg * P.tk * P.d;
#if FOX
#else
  let lam = lam_of(g);
#if DQ
  // This workgroup's (query block, t) dφ cells.
  let cell0 = P.nrows + P.nkv + (bh * ((P.tq + BQ - 1u) / BQ) + wid.x) * P.tk;
#endif
#endif
  load_queries(lid, qrow0, i0);
  if (lid < BQ) {
#if FOX
    var ci = 0.0;
    let p = i32(i0 + lid) + P.qoff;
    if (i0 + lid < P.tq && p >= 0) { ci = cval(bh, u32(p)); }
    Xq[lid] = ci;
#else
    Xq[lid] = BIG;
#endif
#if FWD
    Ms[lid] = -BIG;
    Ls[lid] = 0.0;
#endif
#if DQ
    Ca[lid] = -1;
    Cc[lid] = 0.0;
    Cl[lid] = 0.0;
#endif
  }
  const R = BQ * DM / WG;
  var acc: array<f32, R>;
  for (var t = 0u; t < R; t++) { acc[t] = 0.0; }
  let nb = (key_end(min(i0 + BQ, P.tq)) + BK - 1u) / BK;
  for (var kb = nb; kb > 0u; kb--) {
    let k0 = (kb - 1u) * BK;
    workgroupBarrier();
    load_keys(lid, kbase, k0);
#if FOX
    if (lid < BK) { var cj = 0.0; if (k0 + lid < P.tk) { cj = cval(bh, k0 + lid); } Xk[lid] = cj; }
#else
    load_walk(lid, bg, k0);
#endif
    workgroupBarrier();
#if FOX
#else
#if FWD
#else
    // Sweep 1: the gap of every score from the carry, without moving the carry.
    if (lid < BQ) {
      var m = Xq[lid];
      for (var jj = 0u; jj < BK; jj++) {
        let j = BK - 1u - jj;
        var gap = 0.0;
        if (visible(i0 + lid, k0 + j)) {
          gap = Xk[BK + j] - m;
          m = min(m, Xk[j]);
        }
        Gp[lid * BK + j] = gap;
      }
    }
    workgroupBarrier();
#endif
#endif
#if FWD
    for (var e = lid; e < BQ * BK; e += WG) {
      let r = e / BK;
      let j = e % BK;
      var s = -BIG;
#if FOX
      if (visible(i0 + r, k0 + j)) { s = dot_qk(r, j) * P.scale + (Xq[r] - Xk[j]); }
#else
      if (visible(i0 + r, k0 + j)) { s = dot_qk(r, j) * P.scale; }
#endif
      Ss[e] = s;
    }
    workgroupBarrier();
    if (lid < BQ) {
#if FOX
#else
      // The penalty from the carry, key by key from the block's end; the block then joins the carry.
      var mc = Xq[lid];
      for (var jj = 0u; jj < BK; jj++) {
        let j = BK - 1u - jj;
        if (visible(i0 + lid, k0 + j)) {
          let gap = Xk[BK + j] - mc;
          if (gap > 0.0) { Ss[lid * BK + j] -= lam * gap; }
          mc = min(mc, Xk[j]);
        }
      }
      Xq[lid] = mc;
#endif
      var m = Ms[lid];
      for (var j = 0u; j < BK; j++) { if (visible(i0 + lid, k0 + j)) { m = max(m, Ss[lid * BK + j]); } }
      let alpha = exp(Ms[lid] - m);
      var sum = 0.0;
      for (var j = 0u; j < BK; j++) {
        let s = Ss[lid * BK + j];
        let p = select(0.0, exp(s - m), visible(i0 + lid, k0 + j));
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
      if (visible(i0 + r, k0 + j)) {
#if FOX
        let s = dot_qk(r, j) * P.scale + (Xq[r] - Xk[j]);
#else
        let s = dot_qk(r, j) * P.scale - lam * max(Gp[e], 0.0);
#endif
        let p = exp(s - Rl[r]);
        ds = p * (dot_gv(r, j) - Rd[r]);
      }
      Ds[e] = ds;
    }
    workgroupBarrier();
    if (lid < BQ) {
      let row = qrow0 + i0 + lid;
#if FOX
      var a = Cc[lid];
      for (var j = 0u; j < BK; j++) { if (pos(i0 + lid) != i32(k0 + j)) { a += Ds[lid * BK + j]; } }
      Cc[lid] = a;
#else
      // Sweep 2: the same walk, now moving the carry and its argmin and settling dφ cells.
      var m = Xq[lid];
      var am = Ca[lid];
      var carry = Cc[lid];
      var dl = Cl[lid];
      var nf = 0u;
      for (var jj = 0u; jj < BK; jj++) {
        let j = BK - 1u - jj;
        if (visible(i0 + lid, k0 + j)) {
          let gap = Gp[lid * BK + j];
          let ds = Ds[lid * BK + j];
          if (gap > 0.0) { carry += lam * ds; dl -= ds * gap; }
          let f = Xk[j];
          if (f < m) {
            if (am >= 0) { FT[lid * BK + nf] = am; FV[lid * BK + nf] = carry; nf++; }
            m = f;
            am = i32(k0 + j);
            carry = 0.0;
          }
        }
      }
      Xq[lid] = m;
      Ca[lid] = am;
      Cc[lid] = carry;
      Cl[lid] = dl;
      FN[lid] = nf;
#endif
    }
#if FOX
#else
    workgroupBarrier();
    apply_flushes(lid, cell0);
#endif
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
#if DQ
#if FOX
#else
  // The carry each row still owes its last argmin.
  workgroupBarrier();
  if (lid < BQ) {
    let am = Ca[lid];
    FN[lid] = select(0u, 1u, am >= 0);
    FT[lid * BK] = am;
    FV[lid * BK] = Cc[lid];
  }
  workgroupBarrier();
  apply_flushes(lid, cell0);
#endif
#endif
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
  if (lid < BQ && i0 + lid < P.tq) {
    let row = qrow0 + i0 + lid;
#if FWD
    let l = Ls[lid];
    lse[row] = select(f32_from_bits(0xff800000u), Ms[lid] + log(l), l > 0.0);
#else
#if FOX
    aux[row] = Cc[lid];
#else
    aux[row] = Cl[lid];
#endif
#endif
  }
}
#endif
#endif
#endif
#endif
