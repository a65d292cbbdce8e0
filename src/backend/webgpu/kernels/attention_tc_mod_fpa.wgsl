// FPA, First Passage Attention (the [P] design of specs/fpa_depth.md §2.2, one penalty per kv
// head; causal), as a score modifier of the tensor-core forward and backward (hooks:
// attention_tc_mod_none.wgsl): every visible score loses λ·relu(ℓ_j − M_ij), M_ij = min φ over
// (j, e_i], e_i = min(p_i, kvlen − 1) (+∞ for j = e_i), in log2 units. The inputs: [φ | ℓ | λ], φ
// and ℓ per (batch, kv head, key), λ per kv head.
//
// Forward and DQ: the key blocks run from the last to the first (MOD_REVERSE), and each row carries
// R = min φ over the keys of the blocks already visited (those after the current one, up to e_i),
// §2.4's carry: then M_ij = min(R, min φ over the block's keys after j, up to e_i). A block wholly
// before e_i reads that inner minimum from Sf (the suffix minima of its φ, computed once per block);
// the block holding e_i (the row's first, at most one) takes it by a short scan.
//
// DQ's gradients (the CPU reference's, src/backend/cpu/fpa_attention.ts, ties to the latest index):
// dλ's row partials −Σ_j dS·relu(ℓ_j − M_ij) into aux's rows, and dφ: λ·dS·act (act = 1[ℓ_j > M_ij])
// owed to t*(i, j), the argmin of M_ij, into this query block's cells (aux, after the rows and dℓ:
// one row of tk words per (batch, head, query block), summed over the query blocks by
// fox_fpa_attention.wgsl's REDUCE). Without float atomics, each owed amount takes one of three ways:
//   carry  M_ij = R: the lane adds it to what its row owes R's argmin (mod_own); when the carry's
//          argmin moves to an earlier key (a strictly smaller φ), the row posts that sum (FlT, FlA)
//          and invocation t % BK of subgroup 0, which serves target t alone, adds the posts into the
//          cells in row order;
//   Sf     M_ij = Sf[c] < R (a block before e_i): the pair's tile entry keeps it; the column sums
//          (over the workgroup's rows) go to key SfA[c] of the block;
//   scan   the block holding e_i: the tile entry names the target key u of the block.
// Each block's sums per key are added into the cells by invocation u, deterministically (fixed
// order). The skeleton's S scratch holds the tile codes (f32: −2 nothing, −1 by way of Sf, u ≥ 0
// key u), its dP scratch the amounts.
//
// DKDV's dℓ: per key j, −λ·Σ_i dS·act over the group's heads, into aux after the rows. The query
// blocks run forward from the key's diagonal; the key carries Kc = min φ over (j, p0 − 1] (p0 the
// staged block's first position; at the first block, the positions before the queries when
// qoff > 0), and M_ij = min(Kc, prefix minimum of the staged φ up to e_i) for a key before the
// block, or a short scan of the staged φ for a key inside it.
const MOD_REVERSE = true;
const MOD_STAGES = true;
var<private> mod_base: u32;
var<private> mod_lam: f32;
var<private> mod_lamn: f32;

fn mod_inf() -> f32 { return f32_from_bits(0x7f800000u); }

// λ of kv head g: natural units (the gradients') and log2 units (the scores').
fn mod_lambda(g: u32) {
  mod_lamn = mod_in(2u * P.b * P.hkv * P.tk + g);
  mod_lam = mod_lamn * 1.4426950408889634;
}

#if DKDV
var<workgroup> PhiQ: array<f32, BQ>;
var<workgroup> PreQ: array<f32, BQ>;
var<workgroup> KcRed: array<f32, WG>;
var<private> mod_kc0: f32;
var<private> mod_key_pos: i32;
var<private> mod_lk: f32;
var<private> mod_p0: i32;
var<private> mod_kc: f32;
var<private> mod_m: f32;
var<private> mod_dl: f32;
var<private> mod_last: bool;

// The key carry at the first query block i0 (the same for every head of the group): min φ over
// the positions between the key and the block, which no query block covers when qoff > 0 — those
// after the workgroup's keys (from j0 + 16·NSG) reduced by the workgroup, the rest read by the lane.
fn mod_keys(b: u32, g: u32, key: u32, j0: u32, i0: u32, lid: u32) {
  let base = (b * P.hkv + g) * P.tk;
  let p0 = min(i32(i0) + P.qoff, i32(P.kvlen));
  let kw = i32(j0 + 16u * NSG);
  var m = mod_inf();
  for (var t = kw + i32(lid); t < p0; t += i32(WG)) { m = min(m, mod_in(base + u32(t))); }
  KcRed[lid] = m;
  workgroupBarrier();
  var c = mod_inf();
  for (var u = 0u; u < WG; u++) { c = min(c, KcRed[u]); }
  for (var t = i32(key) + 1; t < min(kw, p0); t++) { c = min(c, mod_in(base + u32(t))); }
  mod_kc0 = c;
}

// Query head bh of batch entry b (hh-th of its kv head's group) against the lane's key.
fn mod_key(b: u32, bh: u32, key: u32) {
  let h = bh % P.h;
  let g = h / P.group;
  mod_base = (b * P.hkv + g) * P.tk;
  mod_lambda(g);
  mod_key_pos = i32(key);
  mod_lk = mod_in(P.b * P.hkv * P.tk + mod_base + key);
  mod_kc = mod_kc0;
  mod_m = mod_inf();
  if (h % P.group == 0u) { mod_dl = 0.0; }
  mod_last = h % P.group + 1u == P.group;
}

// φ at query row i's position (+∞ past tq and outside [0, kvlen): such a position never lowers a minimum).
fn mod_phi_row(i: u32) -> f32 {
  let p = i32(i) + P.qoff;
  if (i >= P.tq || p < 0 || p >= i32(P.kvlen)) { return mod_inf(); }
  return mod_in(mod_base + u32(p));
}

// φ at the staged block's positions and their prefix minima.
fn mod_stage_rows(lid: u32, i0: u32) {
  mod_p0 = i32(i0) + P.qoff;
  for (var c = lid; c < BQ; c += WG) {
    PhiQ[c] = mod_phi_row(i0 + c);
    var m = mod_inf();
    for (var u = 0u; u <= c; u++) { m = min(m, mod_phi_row(i0 + u)); }
    PreQ[c] = m;
  }
}

// M of the lane's key and staged row c: min φ over (key, e_c].
fn mod_span_t(c: u32) -> f32 {
  let j1 = mod_key_pos - mod_p0 + 1;
  if (j1 <= 0) { return min(mod_kc, PreQ[c]); }
  var m = mod_inf();
  for (var u = u32(j1); u <= c; u++) { m = min(m, PhiQ[u]); }
  return m;
}

fn mod_bias_t(c: u32, full: bool) -> f32 {
  mod_m = mod_span_t(c);
  return -mod_lam * max(mod_lk - mod_m, 0.0);
}

fn mod_grad_t(c: u32, ds: f32) {
  if (mod_lk > mod_m) { mod_dl -= mod_lamn * ds; }
  mod_m = mod_inf();
}

// After the block: the carry takes the block's positions after the key.
fn mod_fold_t() {
  let j1 = mod_key_pos - mod_p0 + 1;
  if (j1 <= 0) {
    mod_kc = min(mod_kc, PreQ[BQ - 1u]);
  } else {
    for (var u = u32(j1); u < BQ; u++) { mod_kc = min(mod_kc, PhiQ[u]); }
  }
}

// dℓ of the key, summed over the group's heads: written after the last.
fn mod_key_end(at: u32, write: bool) {
  let s = mod_dl + subgroupShuffleXor(mod_dl, 1u);
  if (write && mod_last) { aux[nrows() + mod_base + u32(mod_key_pos)] = s; }
}
#else
var<workgroup> Fk: array<f32, BK>;
var<workgroup> Lk: array<f32, BK>;
var<workgroup> Sf: array<f32, BK>;
var<private> mod_end: i32;
var<private> mod_k0: u32;
var<private> mod_hi: i32;
var<private> mod_carry: f32;
#if DQ
// SfA[t]: where Sf[t]'s minimum lies in the block (the latest on ties).
var<workgroup> SfA: array<u32, BK>;
// Per subgroup: the Sf way's column sums, the scan way's sums per target key.
var<workgroup> Cp: array<f32, NSG * BK>;
var<workgroup> Tp: array<f32, NSG * BK>;
// Per row of the workgroup: the argmin its carry left in this block (−1: none) and what it owed it.
var<workgroup> FlT: array<i32, BQ>;
var<workgroup> FlA: array<f32, BQ>;
// Whether any row of a subgroup posted in a block, by block parity (one is read while the next
// block's is cleared and written) and subgroup: plain words (a posting lane writes 1, the
// subgroup's lane 0 clears its word a block ahead), as a workgroup atomic in this kernel, even one
// never touched, made the H200's tensor-core dq wrong (BENCHMARKS.md, 2026-12-04).
var<workgroup> FlAny: array<u32, 2u * NSG>;
var<private> mod_arg: i32;
var<private> mod_own: f32;
var<private> mod_dlam: f32;
var<private> mod_m: f32;
var<private> mod_way: f32;
var<private> mod_live: bool;
var<private> mod_par: u32;
var<private> mod_sg: u32;
var<private> mod_lid: u32;
var<private> mod_slot: u32;
var<private> mod_tile: u32;
var<private> mod_cells: u32;
var<private> mod_emin: i32;
var<private> mod_it: u32;
#endif

fn mod_row(b: u32, h: u32, row: u32) {
  let g = h / P.group;
  mod_base = (b * P.hkv + g) * P.tk;
  mod_lambda(g);
  mod_end = min(i32(row) + P.qoff, i32(P.kvlen) - 1);
  mod_carry = mod_inf();
#if DQ
  mod_arg = -1;
  mod_own = 0.0;
  mod_dlam = 0.0;
  mod_m = mod_inf();
  mod_way = -2.0;
  mod_it = 0u;
#endif
}

// Invocation lid < BK fetches key k0 + lid's φ (+∞ past kvlen, so that it never lowers a minimum)
// and ℓ into registers (workgroups have at least BK invocations), where the skeleton fetches K and V.
var<private> mod_next: vec2<f32>;
fn mod_fetch(lid: u32, k0: u32) {
  mod_next = vec2<f32>(mod_inf(), 0.0);
  if (lid < BK && k0 + lid < P.kvlen) { mod_next = vec2<f32>(mod_in(mod_base + k0 + lid), mod_in(P.b * P.hkv * P.tk + mod_base + k0 + lid)); }
}

fn mod_stage(lid: u32, k0: u32) {
  mod_k0 = k0;
  if (lid < BK) {
    Fk[lid] = mod_next.x;
    Lk[lid] = mod_next.y;
  }
}

// Sf[t] = min φ over the block's keys after t (+∞ for the last), and (DQ) where it lies. The loops
// run over the whole block (a constant trip count, so the loads issue together).
fn mod_prepare(lid: u32) {
  if (lid < BK) {
    let t = lid;
    var s = mod_inf();
#if DQ
    var a = t;
    for (var u = 1u; u < BK; u++) { if (u > t && Fk[u] <= s) { s = Fk[u]; a = u; } }
    SfA[t] = a;
#else
    for (var u = 1u; u < BK; u++) { if (u > t) { s = min(s, Fk[u]); } }
#endif
    Sf[t] = s;
  }
}

// The row's last key inside the block, relative to its start (−1: none, BK − 1: all).
fn mod_block() { mod_hi = min(i32(BK) - 1, mod_end - i32(mod_k0)); }

fn mod_bias(c: u32, full: bool) -> f32 {
  var m = mod_carry;
#if DQ
  var way = -3.0;
  if (full || mod_hi == i32(BK) - 1) {
    if (Sf[c] < m) { m = Sf[c]; way = -1.0; }
  } else {
    var s = mod_inf();
    var a = 0u;
    for (var u = c + 1u; i32(u) <= mod_hi; u++) { if (Fk[u] <= s) { s = Fk[u]; a = u; } }
    if (s < m) { m = s; way = f32(a); }
  }
  mod_m = m;
  mod_way = way;
#else
  if (full || mod_hi == i32(BK) - 1) {
    m = min(m, Sf[c]);
  } else {
    for (var u = c + 1u; i32(u) <= mod_hi; u++) { m = min(m, Fk[u]); }
  }
#endif
  return -mod_lam * max(Lk[c] - m, 0.0);
}

fn mod_fold() {
#if DQ
  // The block's minimum over the row's keys and where it lies (the latest on ties).
  var bm = mod_inf();
  var ba = 0u;
  if (mod_hi == i32(BK) - 1) {
    bm = min(Fk[0], Sf[0]);
    ba = select(SfA[0], 0u, Fk[0] < Sf[0]);
  } else {
    for (var u = 0; u <= mod_hi; u++) { if (Fk[u] <= bm) { bm = Fk[u]; ba = u32(u); } }
  }
  let owed = mod_own + subgroupShuffleXor(mod_own, 1u);
  var post = -1;
  if (bm < mod_carry) {
    if (mod_arg >= 0 && owed != 0.0) { post = mod_arg; }
    mod_arg = i32(mod_k0 + ba);
    mod_own = 0.0;
  }
  mod_carry = min(mod_carry, bm);
  if (mod_par == 0u) {
    FlT[mod_slot] = post;
    FlA[mod_slot] = owed;
    if (post >= 0) { FlAny[(mod_it % 2u) * NSG + mod_sg] = 1u; }
  }
  mod_it++;
#else
  if (mod_hi == i32(BK) - 1) {
    mod_carry = min(mod_carry, min(Fk[0], Sf[0]));
  } else {
    for (var u = 0; u <= mod_hi; u++) { mod_carry = min(mod_carry, Fk[u]); }
  }
#endif
}

#if DQ
// The invocation's place: its row's slot in the workgroup (rows a cut-off last block moved back
// belong to the block before, or to a subgroup before: they owe nothing here), its tile entries, and
// the aux index of position 0 in this query block's dφ cells.
fn mod_rows(b: u32, h: u32, i0: u32, lid: u32, sg: u32, lane: u32) {
  let r = lane / 2u;
  mod_par = lane % 2u;
  mod_sg = sg;
  mod_lid = lid;
  mod_live = min(i0 + sg * 16u, P.tq - 16u) + r >= i0 + sg * 16u;
  mod_slot = sg * 16u + r;
  mod_tile = sg * SP + r;
  let nqb = (P.tq + BQ - 1u) / BQ;
  mod_cells = nrows() + P.b * P.hkv * P.tk + ((b * P.h + h) * nqb + i0 / BQ) * P.tk;
  mod_emin = min(i32(min(i0, P.tq - 16u)) + P.qoff, i32(P.kvlen) - 1);
}

fn mod_grad(c: u32, ds: f32) {
  let at = mod_tile + c * 16u;
  let gap = Lk[c] - mod_m;
  var owed = 0.0;
  var code = -2.0;
  if (gap > 0.0) {
    mod_dlam -= ds * gap;
    if (mod_live) {
      owed = mod_lamn * ds;
      if (mod_way == -3.0) { mod_own += owed; } else { code = mod_way; }
    }
  }
  Ss[at] = code;
  Ds[at] = select(0.0, owed, code != -2.0);
  mod_m = mod_inf();
  mod_way = -2.0;
}

// Adds `x` to the cell of position t (invocation t % BK of subgroup 0 alone does, in a fixed order).
fn mod_cell_add(t: u32, x: f32) {
  if (x != 0.0 && t < P.tk) { aux[mod_cells + t] += x; }
}

// A post's sums into the cells: invocation u < BK of subgroup 0 takes targets ≡ u (mod BK).
fn mod_posts(u: u32) {
  for (var rr = 0u; rr < BQ; rr++) {
    let t = FlT[rr];
    if (t >= 0 && u32(t) % BK == u) { mod_cell_add(u32(t), FlA[rr]); }
  }
}

// After the block's barrier: the tile's Sf-way column sums and scan-way target sums per subgroup,
// then subgroup 0 adds each key's total, and the posts of the rows' carries, into the cells.
fn mod_after(lid: u32, sg: u32, lane: u32) {
  const RS = 16u * BK / 32u;
  let c = lane % BK;
  let r0 = (lane / BK) * RS;
  var cs = 0.0;
  var ts = 0.0;
  for (var rr = r0; rr < r0 + RS; rr++) {
    let at = sg * SP + c * 16u + rr;
    if (Ss[at] == -1.0) { cs += Ds[at]; }
  }
  // Rows the block holds the end of: their pairs owing key c lie in the columns before it.
  if (i32(mod_k0 + BK) - 1 > mod_emin) {
    for (var cc = 0u; cc < c; cc++) {
      for (var rr = r0; rr < r0 + RS; rr++) {
        let at = sg * SP + cc * 16u + rr;
        if (Ss[at] == f32(c)) { ts += Ds[at]; }
      }
    }
  }
  if (BK == 16u) {
    cs += subgroupShuffleXor(cs, 16u);
    ts += subgroupShuffleXor(ts, 16u);
  }
  if (lane < BK) {
    Cp[sg * BK + lane] = cs;
    Tp[sg * BK + lane] = ts;
  }
  // The next block's flags start clear (mod_it counts this block already: its parity is the next's).
  if (lane == 0u) { FlAny[(mod_it % 2u) * NSG + sg] = 0u; }
  workgroupBarrier();
  if (lid < BK) {
    var sum = 0.0;
    for (var s = 0u; s < NSG; s++) { sum += Tp[s * BK + lid]; }
    for (var cc = 0u; cc + 1u < BK; cc++) {
      if (cc < lid && SfA[cc] == lid) { for (var s = 0u; s < NSG; s++) { sum += Cp[s * BK + cc]; } }
    }
    mod_cell_add(mod_k0 + lid, sum);
    let cur = (mod_it + 1u) % 2u;
    var posted = 0u;
    for (var s = 0u; s < NSG; s++) { posted |= FlAny[cur * NSG + s]; }
    if (posted != 0u) { mod_posts(lid); }
  }
}

// The row's last carry sum posted and added, dλ's row partial written.
fn mod_row_end(at: u32, write: bool) {
  workgroupBarrier();
  let owed = mod_own + subgroupShuffleXor(mod_own, 1u);
  let s = mod_dlam + subgroupShuffleXor(mod_dlam, 1u);
  if (mod_par == 0u) {
    FlT[mod_slot] = select(-1, mod_arg, mod_arg >= 0 && owed != 0.0);
    FlA[mod_slot] = owed;
  }
  if (write) { aux[at] = s; }
  workgroupBarrier();
  if (mod_lid < BK) { mod_posts(mod_lid); }
}
#endif
#endif
