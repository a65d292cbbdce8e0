// Flash attention forward on tensor cores (`chromium_experimental_subgroup_matrix`): f16 q, k, v,
// f32 accumulation, f16 out, f32 lse. A workgroup of NSG subgroups (32 lanes each) takes BQ =
// 16·NSG query rows of one (batch, head); subgroup sg owns rows 16·sg…16·sg+15, whose q fragments
// (D/16 left matrices, named q<i>) stay in registers for the whole kernel (QRELOAD: loaded again
// for every key block). Per key block of BK keys (only those inside the causal/window bound):
// S = q·Kᵀ (MMA) → workgroup memory, where each row's lane pair (lanes 2r, 2r+1, alternate keys)
// turns it into P = exp2(S·scale·log2 e − m) and adds P into its row sum l (f32); P goes back as
// f16 and O += P·V (MMA) into D/16 result matrices o<n>; out = O/l at the end.
//
// Subgroup matrices are opaque: a row of O cannot be rescaled in registers, so this kernel takes two
// passes (t3/t5/t9 in dev/kernels/attention.ts): pass 1 finds each row's maximum m over all its
// blocks (S only, no V), pass 2 is the loop above with m fixed: P ≤ 1, no rescale, 1.5× the MMAs.
// A one-pass form with a lazy rescale of O through workgroup memory was faster (57 against 78 ms at
// 16K) but gave NaNs on the H200 for a cause not found; it lives in dev/kernels/attention_tc_onepass.wgsl.
// K and V blocks are staged global → registers → workgroup memory as 8-half vec4<u32> loads (rows
// past kvLength as zeros), each row padded by KPAD halves; with PREFETCH a block's loads are issued
// right after the previous block is in workgroup memory, so they fly during its MMAs and softmax.
// q fragments load straight from global memory, the last block's subgroups moved back to end at
// row tq (so this kernel needs tq ≥ 16). Key blocks wholly inside every row's visible
// range skip the mask tests. The epilogue stores each 16×16 tile of O into the subgroup's scratch
// and its lanes write it as f16. Workgroups take query blocks from the last (longest under causal
// masking) to the first.
//
// A score modifier (FoX, FPA) plugs in through the hooks of attention_tc_mod_none.wgsl, its own
// file pasted at MODIFIER below: per-key inputs staged with each key block, a term on every visible
// score (at BIAS), a per-row carry and the key-block order (MOD_REVERSE) where it needs them.
//
// Matrix offsets derive from subgroup_id, subgroup-uniform but not workgroup-uniform: hence the
// diagnostic(off, ...) in the header, as in matmul_tc.wgsl.
{{HEADER}}
{{COMMON}}
{{MASKING}}

const NSG = {{NSG}}u;
const WG = NSG * 32u;
const BQ = NSG * 16u;
const BK = 32u;
const D = {{D}}u;
const D8 = D / 8u;
// Per subgroup: S (f32) and P (f16) of its 16 rows × BK keys, column-major with 16 rows a column,
// so the lane pair of row r (lanes 2r, 2r+1, taking alternate keys) reads 32 distinct banks.
const SP = 16u * BK;

// Row stride of the staged K and V tiles in halves: D + KPAD. Padded rows keep the 16 rows of a
// fragment load off the same banks (TC_KPAD in attention.ts; 2.6× at D = 128 on the H200).
const KD = D + {{KPAD}}u;
var<workgroup> KV: array<f16, 2u * BK * KD>;
var<workgroup> Ss: array<f32, NSG * SP>;
var<workgroup> Ps: array<f16, NSG * SP>;
var<workgroup> Linv: array<f32, NSG * 16u>;

{{MODIFIER}}

fn put8(at: u32, w: vec4<u32>) {
  let h0 = bitcast<vec2<f16>>(w.x); let h1 = bitcast<vec2<f16>>(w.y);
  let h2 = bitcast<vec2<f16>>(w.z); let h3 = bitcast<vec2<f16>>(w.w);
  KV[at] = h0.x; KV[at + 1u] = h0.y; KV[at + 2u] = h1.x; KV[at + 3u] = h1.y;
  KV[at + 4u] = h2.x; KV[at + 5u] = h2.y; KV[at + 6u] = h3.x; KV[at + 7u] = h3.y;
}

// Each invocation's share of staging a key block: NL 16-byte pieces of K (and of V).
const NL = (BK * D8 + WG - 1u) / WG;

// Rows [k0, k0 + BK) of k (and of v when with_v) into registers, rows past kvlen as zeros.
fn fetch_keys(kr: ptr<function, array<vec4<u32>, NL>>, vr: ptr<function, array<vec4<u32>, NL>>, kbase8: u32, k0: u32, lid: u32, with_v: bool) {
  for (var l = 0u; l < NL; l++) {
    let e = lid + l * WG;
    var kw = vec4<u32>(0u);
    var vw = vec4<u32>(0u);
    if (e < BK * D8 && k0 + e / D8 < P.kvlen) {
      let o = kbase8 + k0 * D8 + e;
      kw = k8[o];
      if (with_v) { vw = v8[o]; }
    }
    (*kr)[l] = kw;
    (*vr)[l] = vw;
  }
}

// The fetched rows into KV[0, BK·KD) (and v's into KV[BK·KD, 2·BK·KD)), row stride KD.
fn put_keys(kr: ptr<function, array<vec4<u32>, NL>>, vr: ptr<function, array<vec4<u32>, NL>>, lid: u32, with_v: bool) {
  for (var l = 0u; l < NL; l++) {
    let e = lid + l * WG;
    if (e < BK * D8) {
      put8((e / D8) * KD + (e % D8) * 8u, (*kr)[l]);
      if (with_v) { put8(BK * KD + (e / D8) * KD + (e % D8) * 8u, (*vr)[l]); }
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  let h = wid.y;
  let b = wid.z;
  let i0 = (nw.x - 1u - wid.x) * BQ;
  let qrow0 = (b * P.h + h) * P.tq;
  let kbase8 = (b * P.hkv + h / P.group) * P.tk * D8;
  // This subgroup's 16 rows, moved back to end at tq in a cut-off last block (tq ≥ 16, so nothing
  // is read past q); rows before i0 that this moves in belong to the block before, which writes
  // them (put_tile and the lse store skip them here).
  let rb = min(i0 + sg * 16u, P.tq - 16u);
{{QLOAD}}

  // Keys the block's rows can see (pmin, pmax), and the key blocks visited.
{{KEY_BLOCKS}}

  // This lane's share of the scalar work: row r of the subgroup's 16, keys par, par + 2, ….
  let r = lane / 2u;
  let par = lane % 2u;
  let row = rb + r;
  seg_start(b);
  let sbase = sg * SP;
  // Scores to log2 units.
  let sc = P.scale * 1.4426950408889634;
  var m = -BIG;
  var l = 0.0;

  // Pass 1: the maximum of each row.
  var kr: array<vec4<u32>, NL>;
  var vr: array<vec4<u32>, NL>;
  mod_row(b, h, row);
#if PREFETCH
  var k0n = 0u;
  if (nblocks > 0u) {
    k0n = visit(select(0u, nblocks - 1u, MOD_REVERSE), kfirst, BK, MASK_KB, mrow, lid);
    fetch_keys(&kr, &vr, kbase8, k0n, lid, false);
    mod_fetch(lid, k0n);
  }
#endif
  for (var it = 0u; it < nblocks; it++) {
    let ib = select(it, nblocks - 1u - it, MOD_REVERSE);
#if PREFETCH
    let k0 = k0n;
#else
    let k0 = visit(ib, kfirst, BK, MASK_KB, mrow, lid);
    fetch_keys(&kr, &vr, kbase8, k0, lid, false);
    mod_fetch(lid, k0);
#endif
    // The modifier's inputs of the previous block are read after the scores' barrier: wait before overwriting them.
    if (MOD_STAGES) { workgroupBarrier(); }
    put_keys(&kr, &vr, lid, false);
    mod_stage(lid, k0);
    workgroupBarrier();
#if PREFETCH
    // The next block's loads are in flight during this block's MMAs; pass 1's last block fetches
    // pass 2's first, with its V rows.
    let nx = select(it + 1u, 0u, it + 1u == nblocks);
    k0n = visit(select(nx, nblocks - 1u - nx, MOD_REVERSE), kfirst, BK, MASK_KB, mrow, lid);
    fetch_keys(&kr, &vr, kbase8, k0n, lid, it + 1u == nblocks);
    mod_fetch(lid, k0n);
#endif
    mod_prepare(lid);
{{SCORES}}
    workgroupBarrier();
    mod_block();
    let full = mask_whole(mrow, ib, MASK_KB, BK) && k0 + BK <= P.kvlen && (P.causal == 0u || i32(k0 + BK) - 1 <= pmin) && (P.window == 0u || i32(k0) > pmax - i32(P.window));
    if (full) {
      for (var c = par; c < BK; c += 2u) { m = max(m, Ss[sbase + c * 16u + r] * sc{{BIAS}}); }
    } else {
      for (var c = par; c < BK; c += 2u) {
        if (pair_visible(row, k0 + c)) { m = max(m, Ss[sbase + c * 16u + r] * sc{{BIAS}}); }
      }
    }
    mod_fold();
  }
  m = max(m, subgroupShuffleXor(m, 1u));

  // O = Σ P·V with P = exp2(S·sc − m), summed into l as it goes.
{{OINIT}}
  mod_row(b, h, row);
  for (var it = 0u; it < nblocks; it++) {
    let ib = select(it, nblocks - 1u - it, MOD_REVERSE);
#if PREFETCH
    let k0 = k0n;
#else
    let k0 = visit(ib, kfirst, BK, MASK_KB, mrow, lid);
    fetch_keys(&kr, &vr, kbase8, k0, lid, true);
    mod_fetch(lid, k0);
#endif
    workgroupBarrier();
    put_keys(&kr, &vr, lid, true);
    mod_stage(lid, k0);
    workgroupBarrier();
#if PREFETCH
    if (it + 1u < nblocks) {
      k0n = visit(select(it + 1u, nblocks - 2u - it, MOD_REVERSE), kfirst, BK, MASK_KB, mrow, lid);
      fetch_keys(&kr, &vr, kbase8, k0n, lid, true);
      mod_fetch(lid, k0n);
    }
#endif
    mod_prepare(lid);
{{SCORES}}
    workgroupBarrier();
    mod_block();
    let full = mask_whole(mrow, ib, MASK_KB, BK) && k0 + BK <= P.kvlen && (P.causal == 0u || i32(k0 + BK) - 1 <= pmin) && (P.window == 0u || i32(k0) > pmax - i32(P.window));
    if (full) {
      for (var c = par; c < BK; c += 2u) {
        let p = exp2(Ss[sbase + c * 16u + r] * sc{{BIAS}} - m);
        l += p;
        Ps[sbase + c * 16u + r] = f16(p);
      }
    } else {
      for (var c = par; c < BK; c += 2u) {
        var p = 0.0;
        if (pair_visible(row, k0 + c)) { p = exp2(Ss[sbase + c * 16u + r] * sc{{BIAS}} - m); }
        l += p;
        Ps[sbase + c * 16u + r] = f16(p);
      }
    }
    mod_fold();
    workgroupBarrier();
{{PV}}
  }
  l += subgroupShuffleXor(l, 1u);
  // Rows a cut-off last block moved back belong to the block before, which writes them.
  if (par == 0u && row >= i0) {
    lse[qrow0 + row] = select(f32_from_bits(0xff800000u), (m + log2(l)) * 0.6931471805599453, l > 0.0);
    Linv[sg * 16u + r] = select(0.0, 1.0 / l, l > 0.0);
  }
  workgroupBarrier();
{{STORE}}
}

// Writes the 16 × 16 tile the subgroup left row-major in its scratch (Ss[sg·SP], stride 16) to
// out rows rb…rb+15, columns col…col+15.
fn put_tile(sg: u32, lane: u32, qrow0: u32, rb: u32, col: u32, i0: u32) {
  for (var e = lane; e < 256u; e += 32u) {
    if (rb + e / 16u < i0) { continue; }
    out[(qrow0 + rb + e / 16u) * D + col + e % 16u] = f16(Ss[sg * SP + e] * Linv[sg * 16u + e / 16u]);
  }
}
