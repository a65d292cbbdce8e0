// Flash attention backward on tensor cores (`chromium_experimental_subgroup_matrix`): f16 q, k, v
// and dO, f32 lse and delta (rowsum dO∘O, attention_plain.wgsl DELTA), f32 accumulation, f16 dq,
// dk, dv. Two programs, FlashAttention-2's split (no float atomics):
//
//   DQ    a workgroup of NSG subgroups takes 16·NSG query rows of one (batch, head); subgroup sg owns
//         16 of them, whose q and dO fragments (D/16 left matrices each) stay in registers. Per key
//         block of BK = SC keys (16 by default, or 32) inside the causal/window bound, staged in
//         workgroup memory (from the last block to the first where the modifier says MOD_REVERSE):
//         S = q·Kᵀ and dP = dO·Vᵀ (MMA) → workgroup memory, where each row's lane pair turns them
//         into dS = P∘(dP − delta) with P = exp2(S·scale·log2 e − lse·log2 e), stored as f16; then
//         dQ += dS·K (MMA). dq = scale·dQ.
//   DKDV  a workgroup of NSG subgroups takes 16·NSG keys of one (batch, kv head); subgroup sg owns 16,
//         whose k and v fragments stay in registers (KRELOAD: loaded again from global memory at
//         every use, fewer registers). For each query head of the GQA group, per query block of
//         BQ = 16 or 32 rows that can see the workgroup's keys, staged with its dO rows, lse and delta:
//         Sᵀ = k·Qᵀ and dPᵀ = v·dOᵀ → workgroup memory, each key's lane pair makes Pᵀ and dSᵀ (f16);
//         dV += Pᵀ·dO and dK += dSᵀ·Q (MMA). dk = scale·dK.
//
// Masks: the attention_common.wgsl rule (`visible`) on blocks the bound cuts, none on blocks every
// pair of which is visible; with MASK only the blocks the mask lists (attention_mask.wgsl). A
// cut-off last block's subgroup moves back to end at tq (tk) as in attention_tc.wgsl (hence tq ≥ 16
// and tk ≥ 16); the rows (keys) this moves in belong to the block before, which writes them
// (put_tile skips them here: under a mask the two blocks' lists differ).
//
// A score modifier (FoX, FPA; MOD names it) plugs in through the hooks of attention_tc_mod_none.wgsl,
// its file pasted at MODIFIER in each pass: DQ the forward's row hooks (key blocks from the last
// with MOD_REVERSE) plus mod_rows, mod_grad (each dS, in f32 before it is rounded to f16), mod_after
// and mod_row_end; DKDV their transposes (mod_keys, mod_key, mod_stage_rows, mod_bias_t,
// mod_grad_t, mod_fold_t, mod_key_end). With a modifier, lse and delta travel in one f32 buffer with
// the modifier's inputs behind them, ex = [lse | delta | inputs] (so that DKDV stays within 8
// storage buffers; mod_in reads the inputs), and its gradients' partials go to `aux`.
//
// Matrix offsets derive from subgroup_id: hence the diagnostic(off, ...) in the header.
{{HEADER}}
{{COMMON}}
{{MASKING}}

const NSG = {{NSG}}u;
const WG = NSG * 32u;
const D = {{D}}u;
const D8 = D / 8u;
const KD = D + {{KPAD}}u;
const LOG2E = 1.4426950408889634;
// Per subgroup: 16 rows × SC columns (DQ: the BK keys; DKDV: the BQ query rows) of S and dP (f32)
// and of the f16 products, column-major with 16 rows a column: the lane pair of row r (lanes 2r,
// 2r + 1, alternate columns) reads 32 banks.
const SC = {{SC}}u;
const SP = 16u * SC;
var<workgroup> Ss: array<f32, NSG * SP>;
var<workgroup> Ds: array<f32, NSG * SP>;

fn nrows() -> u32 { return P.b * P.h * P.tq; }
#if MOD
fn lse_at(i: u32) -> f32 { return ex[i]; }
fn delta_at(i: u32) -> f32 { return ex[nrows() + i]; }
// Word i of the modifier's inputs.
fn mod_in(i: u32) -> f32 { return ex[2u * nrows() + i]; }
#else
fn lse_at(i: u32) -> f32 { return lse[i]; }
fn delta_at(i: u32) -> f32 { return delta[i]; }
#endif

fn put8(at: u32, w: vec4<u32>) {
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y);
  let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  T[at] = h0.x; T[at + 1u] = h0.y; T[at + 2u] = h1.x; T[at + 3u] = h1.y;
  T[at + 4u] = h2.x; T[at + 5u] = h2.y; T[at + 6u] = h3.x; T[at + 7u] = h3.y;
}

// Each pass stages NR rows of the two tensors bound at x8a and x8b (DQ: a key block of k and v;
// DKDV: a query block of q and dO) at T[0, NR·KD) and T[NR·KD, 2·NR·KD), through registers:
// NL 16-byte pieces of each an invocation. With PREFETCH the next block's pieces are fetched
// right after the current block is in workgroup memory, so their loads fly during its MMAs.
const NL = (NR * D8 + WG - 1u) / WG;

// Rows [r0, r0 + NR) from row `base` of x8a and x8b into registers, rows from `limit` on as zeros.
fn fetch_rows(xa: ptr<function, array<vec4<u32>, NL>>, xb: ptr<function, array<vec4<u32>, NL>>, base: u32, r0: u32, limit: u32, lid: u32) {
  for (var l = 0u; l < NL; l++) {
    let e = lid + l * WG;
    var aw = vec4<u32>(0u);
    var bw = vec4<u32>(0u);
    if (e < NR * D8 && r0 + e / D8 < limit) {
      let o = (base + r0) * D8 + e;
      aw = x8a[o];
      bw = x8b[o];
    }
    (*xa)[l] = aw;
    (*xb)[l] = bw;
  }
}

fn put_rows(xa: ptr<function, array<vec4<u32>, NL>>, xb: ptr<function, array<vec4<u32>, NL>>, lid: u32) {
  for (var l = 0u; l < NL; l++) {
    let e = lid + l * WG;
    if (e < NR * D8) {
      put8((e / D8) * KD + (e % D8) * 8u, (*xa)[l]);
      put8(NR * KD + (e / D8) * KD + (e % D8) * 8u, (*xb)[l]);
    }
  }
}

#if DQ
// Key block of BK = SC keys (16 or 32): K rows at T[0, BK·KD), V rows at T[BK·KD, 2·BK·KD), rows
// past kvlen as zeros.
const BQ = NSG * 16u;
const BK = SC;
const NR = BK;
var<workgroup> T: array<f16, 2u * BK * KD>;
var<workgroup> Ps: array<f16, NSG * SP>;

{{MODIFIER}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  let h = wid.y;
  let b = wid.z;
  // Longest rows (under causal masking) first.
  let i0 = (nw.x - 1u - wid.x) * BQ;
  let qrow0 = (b * P.h + h) * P.tq;
  let kbase = (b * P.hkv + h / P.group) * P.tk;
  let rb = min(i0 + sg * 16u, P.tq - 16u);
{{FRAGS}}

{{KEY_BLOCKS}}

  let r = lane / 2u;
  let par = lane % 2u;
  let row = rb + r;
  seg_start(b);
  let sbase = sg * SP;
  let sc = P.scale * LOG2E;
  let lse2 = lse_at(qrow0 + row) * LOG2E;
  let dl = delta_at(qrow0 + row);
  mod_row(b, h, row);
  mod_rows(b, h, i0, lid, sg, lane);

{{ACCINIT}}
  var xa: array<vec4<u32>, NL>;
  var xb: array<vec4<u32>, NL>;
#if PREFETCH
  var k0n = 0u;
  if (nblocks > 0u) {
    k0n = visit(select(0u, nblocks - 1u, MOD_REVERSE), kfirst, BK, MASK_KB, mrow, lid);
    fetch_rows(&xa, &xb, kbase, k0n, P.kvlen, lid);
    mod_fetch(lid, k0n);
  }
#endif
  for (var it = 0u; it < nblocks; it++) {
    let ib = select(it, nblocks - 1u - it, MOD_REVERSE);
#if PREFETCH
    let k0 = k0n;
#else
    let k0 = visit(ib, kfirst, BK, MASK_KB, mrow, lid);
    fetch_rows(&xa, &xb, kbase, k0, P.kvlen, lid);
    mod_fetch(lid, k0);
#endif
    workgroupBarrier();
    put_rows(&xa, &xb, lid);
    mod_stage(lid, k0);
    workgroupBarrier();
#if PREFETCH
    if (it + 1u < nblocks) {
      k0n = visit(select(it + 1u, nblocks - 2u - it, MOD_REVERSE), kfirst, BK, MASK_KB, mrow, lid);
      fetch_rows(&xa, &xb, kbase, k0n, P.kvlen, lid);
      mod_fetch(lid, k0n);
    }
#endif
    mod_prepare(lid);
{{PRODUCTS}}
    workgroupBarrier();
    mod_block();
    let full = mask_whole(mrow, ib, MASK_KB, BK) && k0 + BK <= P.kvlen && (P.causal == 0u || i32(k0 + BK) - 1 <= pmin) && (P.window == 0u || i32(k0) > pmax - i32(P.window));
    for (var c = par; c < BK; c += 2u) {
      let at = sbase + c * 16u + r;
      var p = 0.0;
      if (full || pair_visible(row, k0 + c)) { p = exp2(Ss[at] * sc{{BIAS}} - lse2); }
      let ds = p * (Ds[at] - dl);
      mod_grad(c, ds);
      Ps[at] = f16(ds);
    }
    mod_fold();
    workgroupBarrier();
    mod_after(lid, sg, lane);
{{UPDATE}}
  }
  // Rows a cut-off last block moved back belong to the block before, which writes them.
  mod_row_end(qrow0 + row, par == 0u && row >= i0);
{{STORE}}
}

// Writes the 16 × 16 tile the subgroup left row-major in Ss[sg·SP…] to dq rows rb…rb+15, columns
// col…col+15, times the softmax scale.
fn put_tile(sg: u32, lane: u32, qrow0: u32, rb: u32, col: u32, i0: u32) {
  for (var e = lane; e < 256u; e += 32u) {
    // Rows a cut-off last block moved back belong to the block before, which writes them.
    if (rb + e / 16u < i0) { continue; }
    y16a[(qrow0 + rb + e / 16u) * D + col + e % 16u] = f16(Ss[sg * SP + e] * P.scale);
  }
}
#endif

#if DKDV
// Query block: q rows at T[0, BQ·KD), dO rows at T[BQ·KD, 2·BQ·KD), rows past tq as zeros; their
// lse (log2 units) and delta.
const BKV = NSG * 16u;
const BQ = SC;
const NR = BQ;
var<workgroup> T: array<f16, 2u * BQ * KD>;
var<workgroup> Pt: array<f16, NSG * SP>;
var<workgroup> Dt: array<f16, NSG * SP>;
var<workgroup> RowL: array<f32, BQ>;
var<workgroup> RowD: array<f32, BQ>;

{{MODIFIER}}

// Row i0 + lid's lse (log2 units) and delta, for lid < BQ (zeros past tq).
fn fetch_stats(qrow0: u32, i0: u32, lid: u32) -> vec2<f32> {
  if (lid >= BQ || i0 + lid >= P.tq) { return vec2<f32>(0.0); }
  return vec2<f32>(lse_at(qrow0 + i0 + lid) * LOG2E, delta_at(qrow0 + i0 + lid));
}

fn put_stats(st: vec2<f32>, lid: u32) {
  if (lid < BQ) { RowL[lid] = st.x; RowD[lid] = st.y; }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let g = wid.y;
  let b = wid.z;
  // Keys first in the grid: under causal masking they have the most query rows.
  let j0 = wid.x * BKV;
  let kvrow0 = (b * P.hkv + g) * P.tk;
  let kb = min(j0 + sg * 16u, P.tk - 16u);
{{FRAGS}}

  // Query rows that can see some key of the workgroup's [klo, khi), from a multiple of BQ.
  let klo = min(j0, P.tk - 16u);
  let khi = min(j0 + BKV, P.tk);
  let rows = query_rows(klo, khi - klo);
  let ifirst = u32(max(rows.x, 0)) / BQ * BQ;
  let iend = select(ifirst, u32(rows.y), rows.y > rows.x);

  let r = lane / 2u;
  let par = lane % 2u;
  let key = kb + r;
  seg_start(b);
  mod_keys(b, g, key, j0, ifirst, lid);
  let sbase = sg * SP;
  let sc = P.scale * LOG2E;

{{ACCINIT}}
  var xa: array<vec4<u32>, NL>;
  var xb: array<vec4<u32>, NL>;
  var st = vec2<f32>(0.0);
  for (var hh = 0u; hh < P.group; hh++) {
    let bh = b * P.h + g * P.group + hh;
    let qrow0 = bh * P.tq;
    mod_key(b, bh, key);
#if MASK
    let mrow = mask_key_row(b, g * P.group + hh, j0);
    let nblocks = mask_count(mrow, MASK_QB, BQ, lid);
#else
    let mrow = 0u;
    let nblocks = (iend - ifirst + BQ - 1u) / BQ;
#endif
#if PREFETCH
    var i0n = 0u;
    if (nblocks > 0u) {
      i0n = visit(0u, ifirst, BQ, MASK_QB, mrow, lid);
      fetch_rows(&xa, &xb, qrow0, i0n, P.tq, lid);
      st = fetch_stats(qrow0, i0n, lid);
    }
#endif
    for (var it = 0u; it < nblocks; it++) {
#if PREFETCH
      let i0 = i0n;
#else
      let i0 = visit(it, ifirst, BQ, MASK_QB, mrow, lid);
      fetch_rows(&xa, &xb, qrow0, i0, P.tq, lid);
      st = fetch_stats(qrow0, i0, lid);
#endif
      workgroupBarrier();
      put_rows(&xa, &xb, lid);
      put_stats(st, lid);
      mod_stage_rows(lid, i0);
      workgroupBarrier();
#if PREFETCH
      if (it + 1u < nblocks) {
        i0n = visit(it + 1u, ifirst, BQ, MASK_QB, mrow, lid);
        fetch_rows(&xa, &xb, qrow0, i0n, P.tq, lid);
        st = fetch_stats(qrow0, i0n, lid);
      }
#endif
{{PRODUCTS}}
      workgroupBarrier();
      let p0 = i32(i0) + P.qoff;
      let full = mask_whole(mrow, it, MASK_QB, BQ) && i0 + BQ <= P.tq && khi <= P.kvlen && (P.causal == 0u || i32(khi) - 1 <= p0) && (P.window == 0u || i32(klo) > p0 + i32(BQ) - 1 - i32(P.window));
      for (var c = par; c < BQ; c += 2u) {
        let at = sbase + c * 16u + r;
        var p = 0.0;
        if (full || pair_visible(i0 + c, key)) { p = exp2(Ss[at] * sc{{BIAS_T}} - RowL[c]); }
        let ds = p * (Ds[at] - RowD[c]);
        mod_grad_t(c, ds);
        Dt[at] = f16(ds);
        Pt[at] = f16(p);
      }
      mod_fold_t();
      workgroupBarrier();
{{UPDATE}}
    }
    // Keys a cut-off last block moved back belong to the block before, which writes them.
    mod_key_end(bh * P.tk + key, par == 0u && key >= j0);
  }
{{STORE}}
}

// Writes the 16 × 16 tile the subgroup left row-major in Ss[sg·SP…] to rows kb…kb+15, columns
// col…col+15 of dk (which = 0, times the softmax scale) or dv (which = 1).
fn put_tile(sg: u32, lane: u32, kvrow0: u32, kb: u32, col: u32, which: u32, j0: u32) {
  for (var e = lane; e < 256u; e += 32u) {
    // Keys a cut-off last block moved back belong to the block before, which writes them.
    if (kb + e / 16u < j0) { continue; }
    let at = (kvrow0 + kb + e / 16u) * D + col + e % 16u;
    let x = Ss[sg * SP + e];
    if (which == 0u) { y16a[at] = f16(x * P.scale); } else { y16b[at] = f16(x); }
  }
}
#endif
