/**
 * SIMD attention kernels, emitted as wasm: `attention_forward(job, tid)` and
 * `attention_backward(job, tid)` each do thread tid's share of a job record (AttentionJob) and
 * return, like the GEMM kernels. The host (attention.ts) lays the operands out in wasm memory
 * first, so the kernels never branch on the shape:
 *
 * - Q, dO, O/dQ: (B, H, TqP, Dp), TqP = Tq rounded up to 4 query rows (one tile), Dp = D rounded
 *   up to 8 (two f32x4), padding zero;
 * - K, V, dK, dV row-major (B, Hkv, Tk, Dp); each item first transposes its K (and V) into
 *   Kᵀ (Dp, TkP) in its thread's scratch, TkP ≥ Tk + 8, padding zero;
 * - per query tile the union [lo, lo + n) of its four rows' visible keys and, per row, the byte
 *   offsets of its own range inside that union (the host computes the causal, window, kvLength
 *   and qOffset rule once, visibleKeys in cpu/attention.ts). Scores are computed for n rounded
 *   up to 8 keys (Kᵀ's padding columns), the products with P and dS for the n keys themselves,
 *   so no value of a K or V row at or past kvLength reaches an output (a cache's unwritten
 *   rows may hold anything) and no dK or dV row there is written.
 *
 * Work per (batch, head) and query tile of 4 rows, with the tile's scores held whole in a
 * per-thread scratch row of TkP floats (a training context is short enough that two-pass softmax
 * over the full row beats the online rescaling of flash attention):
 *   forward:  S = scale·Q Kᵀ (4×8 register tiles, Q packed c-major so each step is 4 splats and
 *             2 loads of a Kᵀ row), keys outside a row's range set to −∞, P = exp(S − max) with
 *             the row max and sum written out (the host forms the logsumexp, which needs a log),
 *             O = P V / Σ (4 rows × 8 columns of O in registers, one V row of 8 per key);
 *   backward: per (batch, kv head), so dK and dV (summed over the heads of a GQA group) belong to
 *             one thread: P = exp(S − lse), dP = dO Vᵀ, dS = P ⊙ (dP − δ)·scale with δ = rowsum(dO ⊙ O)
 *             from the host, dQ = dS K, dV += Pᵀ dO, dK += dSᵀ Q.
 * The exponential is simd_math.ts's (a few ulp of Math.exp; exp(−∞) = 0 exactly).
 */
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';
import { SimdMath } from './simd_math.ts';

/** Word index of each field of an attention job record. Addresses, strides and ranges in bytes. */
export const AttentionJob = {
  threads: 0,
  /** Forward: B·H items (one per query head); backward: B·Hkv items (one per kv head). */
  items: 1, heads: 2, kvHeads: 3, group: 4,
  /** Query tiles of 4 rows per head (TqP / 4). */
  tiles: 5,
  /** Dp·4 (row of Q, K, V…), TkP·4 (row of Kᵀ, Vᵀ and of a scratch score row). */
  dpBytes: 6, tkpBytes: 7,
  /** Bytes of one head's Q (TqP·Dp·4) and of one kv head's K (Tk·Dp·4); Tk·4. */
  qSlice: 8, kvSlice: 9, keysBytes: 10,
  q: 11, k: 12, v: 13, dout: 14,
  /** Forward: O; backward: dQ. */
  out: 15, dk: 16, dv: 17,
  /** Forward outputs per row (B·H·TqP f32): the max of the scaled scores and Σ exp(s − max). */
  rowMax: 18, rowSum: 19,
  /** Backward inputs per row (B·H·TqP f32): logsumexp (+∞ where the row sees no key) and δ. */
  lse: 20, delta: 21,
  /** Per query row (TqP i32): [lo, hi) of its visible keys, bytes from its tile's lo. */
  rowLo: 22, rowHi: 23,
  /**
   * Per tile (i32): first key of the union of its rows' ranges, the union's length in bytes
   * rounded up to 8 keys (scores), and its length in bytes (products with P and dS).
   */
  tileLo: 24, tileBytes: 25, tileKeyBytes: 26,
  /** Per-thread scratch: base + tid·stride. */
  scratch: 27, scratchStride: 28,
  /** f32 bits. */
  scale: 29,
  /** Four f32 ones (the row scale of dQ = dS K), words 30–33. */
  ones: 30,
} as const;
export const ATTENTION_JOB_WORDS = 34;

/** Query rows per tile, and the padding of D (two f32x4 vectors) and of the key axis. */
export const ATTENTION_ROWS = 4;
export const ATTENTION_D_MULTIPLE = 8;
export const ATTENTION_KEY_MULTIPLE = 8;

export const ATTENTION_KERNELS = ['attention_forward', 'attention_backward'] as const;

/**
 * Bytes of one thread's scratch: Q (or dO) tile packed c-major (Dp·16 each, two of them), the
 * 4 row scales (64 reserved), two score tiles (4·TkP·4 each), Kᵀ and Vᵀ (Dp·TkP·4 each), in this
 * order (`prologue` derives the same offsets in wasm).
 */
export function attentionScratchBytes(dpBytes: number, tkpBytes: number): number {
  const bytes = 2 * dpBytes * 4 + 64 + 2 * 4 * tkpBytes + 2 * (dpBytes / 4) * tkpBytes;
  return Math.ceil(bytes / 64) * 64;
}

const R = ATTENTION_ROWS;
const F32_MAX = 3.4028234663852886e38;

function madd(f: FunctionBuilder, fma: boolean, a: number, b: number, acc: number): void {
  if (fma) f.get(a).get(b).get(acc).f32x4RelaxedMadd().set(acc);
  else f.get(acc).get(a).get(b).f32x4Mul().f32x4Add().set(acc);
}

/** Sets dst[r] = base + r·stride for r < 4 (row pointers of a tile). */
function rowPointers(f: FunctionBuilder, base: () => void, stride: number): number[] {
  const rows = Array.from({ length: R }, () => f.local('i32'));
  base();
  f.set(rows[0]);
  for (let r = 1; r < R; r++) f.get(rows[r - 1]).get(stride).i32Add().set(rows[r]);
  return rows;
}

/** Pushes one scalar from the four lanes of a v128 local, combined by `reduce` (f32 max or add). */
function lanes(f: FunctionBuilder, v: number, reduce: () => void): void {
  f.get(v).f32x4ExtractLane(0);
  for (let lane = 1; lane < 4; lane++) { f.get(v).f32x4ExtractLane(lane); reduce(); }
}

/** attn_pack(src, dpBytes, dst): 4 rows of Dp (stride dpBytes) → Dp steps of 4 (dst[c][r]). */
function emitPack(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_pack', ['i32', 'i32', 'i32'], [], false);
  const [src, dp, dst] = f.params;
  const c = f.local('i32'), out = f.local('i32');
  const rows = rowPointers(f, () => f.get(src), dp);
  f.forUp(c, () => f.i32Const(0), dp, 4, () => {
    f.get(dst).get(c).i32Const(2).i32Shl().i32Add().set(out);
    for (let r = 0; r < R; r++) f.get(out).get(rows[r]).get(c).i32Add().f32Load().f32Store(r * 4);
  });
  return f;
}

/**
 * attn_scores(packed, kt, nBytes, ktStride, dpBytes, s, sStride, scale): S[r][j] =
 * scale·Σ_c packed[c][r]·kt[c][j] for j < n (n a multiple of 8), 4×8 accumulators in registers.
 */
function emitScores(mb: WasmModuleBuilder, fma: boolean): FunctionBuilder {
  const f = mb.function('attn_scores', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'f32'], [], false);
  const [packed, kt, nBytes, ktStride, dp, s, sStride, scale] = f.params;
  const jb = f.local('i32'), pp = f.local('i32'), pk = f.local('i32'), ppEnd = f.local('i32'), row = f.local('i32');
  const acc = Array.from({ length: R }, () => [f.local('v128'), f.local('v128')]);
  const b0 = f.local('v128'), b1 = f.local('v128'), a = f.local('v128'), sc = f.local('v128');
  f.get(scale).f32x4Splat().set(sc);
  f.get(packed).get(dp).i32Const(2).i32Shl().i32Add().set(ppEnd);
  f.forUp(jb, () => f.i32Const(0), nBytes, 32, () => {
    for (const pair of acc) for (const x of pair) f.v128Zero().set(x);
    f.get(packed).set(pp);
    f.get(kt).get(jb).i32Add().set(pk);
    f.loop((next) => {
      f.get(pk).v128Load().set(b0);
      f.get(pk).v128Load(16).set(b1);
      for (let r = 0; r < R; r++) {
        f.get(pp).v128Load32Splat(r * 4).set(a);
        madd(f, fma, a, b0, acc[r][0]);
        madd(f, fma, a, b1, acc[r][1]);
      }
      f.get(pk).get(ktStride).i32Add().set(pk);
      f.get(pp).i32Const(16).i32Add().tee(pp).get(ppEnd).i32Ne().brIf(next);
    });
    f.get(s).get(jb).i32Add().set(row);
    for (let r = 0; r < R; r++) {
      f.get(row).get(acc[r][0]).get(sc).f32x4Mul().v128Store();
      f.get(row).get(acc[r][1]).get(sc).f32x4Mul().v128Store(16);
      if (r < R - 1) f.get(row).get(sStride).i32Add().set(row);
    }
  });
  return f;
}

/** attn_mask(s, sStride, rowLo, rowHi, nBytes): S[r][j] = −∞ outside [rowLo[r], rowHi[r]) (bytes). */
function emitMask(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_mask', ['i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [s, sStride, rowLo, rowHi, nBytes] = f.params;
  const j = f.local('i32'), end = f.local('i32'), row = f.local('i32');
  f.get(s).set(row);
  for (let r = 0; r < R; r++) {
    f.get(rowLo).i32Load(r * 4).set(end);
    f.forUp(j, () => f.i32Const(0), end, 4, () => { f.get(row).get(j).i32Add().f32Const(-Infinity).f32Store(); });
    f.forUp(j, () => f.get(rowHi).i32Load(r * 4), nBytes, 4, () => { f.get(row).get(j).i32Add().f32Const(-Infinity).f32Store(); });
    if (r < R - 1) f.get(row).get(sStride).i32Add().set(row);
  }
  return f;
}

/**
 * attn_softmax_row(row, nBytes, maxOut, sumOut, invOut): row = exp(row − m) in place with m the
 * row max (−∞ for an empty row, which then gives zeros); writes m, l = Σ and 1/max(l, 1) (l ≥ 1
 * whenever a key is visible, since the max contributes e⁰; an empty row's zero sum stays 0).
 */
function emitSoftmaxRow(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_softmax_row', ['i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [row, nBytes, maxOut, sumOut, invOut] = f.params;
  const j = f.local('i32'), m = f.local('f32'), l = f.local('f32');
  const acc = f.local('v128'), ms = f.local('v128'), x = f.local('v128'), e = f.local('v128');
  const math = new SimdMath(f);
  f.f32x4Const(-Infinity).set(acc);
  f.forUp(j, () => f.i32Const(0), nBytes, 16, () => { f.get(acc).get(row).get(j).i32Add().v128Load().f32x4Max().set(acc); });
  lanes(f, acc, () => f.f32Max());
  f.set(m);
  f.get(maxOut).get(m).f32Store();
  // An all-masked row has m = −∞; −∞ − (−F32_MAX) = −∞ keeps exp at 0 instead of NaN.
  f.get(m).f32Const(-F32_MAX).f32Max().f32x4Splat().set(ms);
  f.v128Zero().set(acc);
  f.forUp(j, () => f.i32Const(0), nBytes, 16, () => {
    f.get(row).get(j).i32Add().v128Load().get(ms).f32x4Sub().set(x);
    math.exp(x);
    f.set(e);
    f.get(row).get(j).i32Add().get(e).v128Store();
    f.get(acc).get(e).f32x4Add().set(acc);
  });
  lanes(f, acc, () => f.f32Add());
  f.set(l);
  f.get(sumOut).get(l).f32Store();
  f.get(invOut).f32Const(1).get(l).f32Const(1).f32Max().f32Div().f32Store();
  return f;
}

/** attn_exp_row(row, nBytes, lse): row = exp(row − lse) in place (lse = +∞ gives zeros). */
function emitExpRow(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_exp_row', ['i32', 'i32', 'f32'], [], false);
  const [row, nBytes, lse] = f.params;
  const j = f.local('i32'), ls = f.local('v128'), x = f.local('v128');
  const math = new SimdMath(f);
  f.get(lse).f32x4Splat().set(ls);
  f.forUp(j, () => f.i32Const(0), nBytes, 16, () => {
    f.get(row).get(j).i32Add().v128Load().get(ls).f32x4Sub().set(x);
    f.get(row).get(j).i32Add();
    math.exp(x);
    f.v128Store();
  });
  return f;
}

/** attn_ds_row(dp, p, nBytes, delta, scale): dp = p ⊙ (dp − δ)·scale in place. */
function emitDsRow(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_ds_row', ['i32', 'i32', 'i32', 'f32', 'f32'], [], false);
  const [dp, p, nBytes, delta, scale] = f.params;
  const j = f.local('i32'), ds = f.local('v128'), sc = f.local('v128');
  f.get(delta).f32x4Splat().set(ds);
  f.get(scale).f32x4Splat().set(sc);
  f.forUp(j, () => f.i32Const(0), nBytes, 16, () => {
    f.get(dp).get(j).i32Add();
    f.get(dp).get(j).i32Add().v128Load().get(ds).f32x4Sub();
    f.get(p).get(j).i32Add().v128Load().f32x4Mul().get(sc).f32x4Mul();
    f.v128Store();
  });
  return f;
}

/**
 * attn_pv(s, sStride, rows, nBytes, dpBytes, out, rowScale): out[r] = rowScale[r]·Σ_j S[r][j]·rows[j]
 * for the 4 rows of a tile; 4 rows × 8 columns of out in registers, one 8-wide row chunk per key.
 */
function emitPv(mb: WasmModuleBuilder, fma: boolean): FunctionBuilder {
  const f = mb.function('attn_pv', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [s, sStride, rows, nBytes, dp, out, rowScale] = f.params;
  const c0 = f.local('i32'), j = f.local('i32'), pv = f.local('i32'), o = f.local('i32');
  const acc = Array.from({ length: R }, () => [f.local('v128'), f.local('v128')]);
  const b0 = f.local('v128'), b1 = f.local('v128'), a = f.local('v128'), sc = f.local('v128');
  const sRows = rowPointers(f, () => f.get(s), sStride);
  f.forUp(c0, () => f.i32Const(0), dp, 32, () => {
    for (const pair of acc) for (const x of pair) f.v128Zero().set(x);
    f.get(rows).get(c0).i32Add().set(pv);
    f.forUp(j, () => f.i32Const(0), nBytes, 4, () => {
      f.get(pv).v128Load().set(b0);
      f.get(pv).v128Load(16).set(b1);
      for (let r = 0; r < R; r++) {
        f.get(sRows[r]).get(j).i32Add().v128Load32Splat().set(a);
        madd(f, fma, a, b0, acc[r][0]);
        madd(f, fma, a, b1, acc[r][1]);
      }
      f.get(pv).get(dp).i32Add().set(pv);
    });
    f.get(out).get(c0).i32Add().set(o);
    for (let r = 0; r < R; r++) {
      f.get(rowScale).v128Load32Splat(r * 4).set(sc);
      f.get(o).get(acc[r][0]).get(sc).f32x4Mul().v128Store();
      f.get(o).get(acc[r][1]).get(sc).f32x4Mul().v128Store(16);
      if (r < R - 1) f.get(o).get(dp).i32Add().set(o);
    }
  });
  return f;
}

/**
 * attn_outer(s, sStride, x, y, nBytes, dpBytes): y[j] += Σ_r S[r][j]·x[r] for j < n, the 4 rows
 * x[r] (stride dpBytes) held in registers 8 columns at a time (dV += Pᵀ dO, dK += dSᵀ Q).
 */
function emitOuter(mb: WasmModuleBuilder, fma: boolean): FunctionBuilder {
  const f = mb.function('attn_outer', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [s, sStride, x, y, nBytes, dp] = f.params;
  const c0 = f.local('i32'), j = f.local('i32'), py = f.local('i32');
  const xs = Array.from({ length: R }, () => [f.local('v128'), f.local('v128')]);
  const y0 = f.local('v128'), y1 = f.local('v128'), a = f.local('v128');
  const sRows = rowPointers(f, () => f.get(s), sStride);
  const xRows = rowPointers(f, () => f.get(x), dp);
  f.forUp(c0, () => f.i32Const(0), dp, 32, () => {
    for (let r = 0; r < R; r++) {
      f.get(xRows[r]).get(c0).i32Add().v128Load().set(xs[r][0]);
      f.get(xRows[r]).get(c0).i32Add().v128Load(16).set(xs[r][1]);
    }
    f.get(y).get(c0).i32Add().set(py);
    f.forUp(j, () => f.i32Const(0), nBytes, 4, () => {
      f.get(py).v128Load().set(y0);
      f.get(py).v128Load(16).set(y1);
      for (let r = 0; r < R; r++) {
        f.get(sRows[r]).get(j).i32Add().v128Load32Splat().set(a);
        madd(f, fma, a, xs[r][0], y0);
        madd(f, fma, a, xs[r][1], y1);
      }
      f.get(py).get(y0).v128Store();
      f.get(py).get(y1).v128Store(16);
      f.get(py).get(dp).i32Add().set(py);
    });
  });
  return f;
}

/**
 * attn_transpose(src, keysBytes, dpBytes, dst, tkpBytes): src (Tk rows of Dp) → dst (Dp rows of
 * TkP), columns Tk…TkP zero (the score tiles read up to 7 keys past a tile's last).
 */
function emitTranspose(mb: WasmModuleBuilder): FunctionBuilder {
  const f = mb.function('attn_transpose', ['i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [src, keysBytes, dp, dst, tkp] = f.params;
  const jb = f.local('i32'), c = f.local('i32'), ps = f.local('i32'), pd = f.local('i32'), pad = f.local('i32');
  f.get(src).set(ps);
  f.forUp(jb, () => f.i32Const(0), keysBytes, 4, () => {
    f.get(dst).get(jb).i32Add().set(pd);
    f.forUp(c, () => f.i32Const(0), dp, 4, () => {
      f.get(pd).get(ps).get(c).i32Add().f32Load().f32Store();
      f.get(pd).get(tkp).i32Add().set(pd);
    });
    f.get(ps).get(dp).i32Add().set(ps);
  });
  f.get(dst).get(keysBytes).i32Add().set(pd);
  f.get(tkp).get(keysBytes).i32Sub().set(pad);
  f.forUp(c, () => f.i32Const(0), dp, 4, () => {
    f.get(pd).i32Const(0).get(pad).memoryFill();
    f.get(pd).get(tkp).i32Add().set(pd);
  });
  return f;
}

interface Helpers {
  transpose: FunctionBuilder; pack: FunctionBuilder; scores: FunctionBuilder; mask: FunctionBuilder; softmaxRow: FunctionBuilder;
  expRow: FunctionBuilder; dsRow: FunctionBuilder; pv: FunctionBuilder; outer: FunctionBuilder;
}

/** Loads job field `index` into a new i32 local. */
function field(f: FunctionBuilder, job: number, index: number): number {
  const local = f.local('i32');
  f.get(job).i32Load(index * 4).set(local);
  return local;
}

/** Common prologue: the thread's item range and scratch pointers, the per-tile locals. */
function prologue(f: FunctionBuilder, job: number, tid: number) {
  const J = AttentionJob;
  const threads = field(f, job, J.threads), items = field(f, job, J.items);
  const lo = f.local('i32'), hi = f.local('i32');
  f.get(tid).get(items).i32Mul().get(threads).i32DivU().set(lo);
  f.get(tid).i32Const(1).i32Add().get(items).i32Mul().get(threads).i32DivU().set(hi);
  const dp = field(f, job, J.dpBytes), tkp = field(f, job, J.tkpBytes);
  const scratch = f.local('i32');
  f.get(job).i32Load(J.scratch * 4).get(tid).get(job).i32Load(J.scratchStride * 4).i32Mul().i32Add().set(scratch);
  const at = (offset: () => void) => { const l = f.local('i32'); f.get(scratch); offset(); f.i32Add().set(l); return l; };
  const packedA = at(() => f.i32Const(0));
  const packedB = at(() => f.get(dp).i32Const(2).i32Shl());
  const rowScale = at(() => f.get(dp).i32Const(3).i32Shl());
  const s = f.local('i32'), s2 = f.local('i32'), kt = f.local('i32'), vt = f.local('i32');
  f.get(rowScale).i32Const(64).i32Add().set(s);
  f.get(s).get(tkp).i32Const(2).i32Shl().i32Add().set(s2);
  f.get(s2).get(tkp).i32Const(2).i32Shl().i32Add().set(kt);
  f.get(kt).get(dp).i32Const(2).i32ShrU().get(tkp).i32Mul().i32Add().set(vt);
  const scale = f.local('f32');
  f.get(job).f32Load(J.scale * 4).set(scale);
  return { lo, hi, dp, tkp, packedA, packedB, rowScale, s, s2, kt, vt, scale };
}

/** attention_forward(job, tid): items are (batch, head) pairs. */
function emitForward(mb: WasmModuleBuilder, h: Helpers): void {
  const J = AttentionJob;
  const f = mb.function('attention_forward', ['i32', 'i32']);
  const [job, tid] = f.params;
  const { lo, hi, dp, tkp, packedA, rowScale, s, kt, scale } = prologue(f, job, tid);
  const heads = field(f, job, J.heads), kvHeads = field(f, job, J.kvHeads), group = field(f, job, J.group);
  const tiles = field(f, job, J.tiles), qSlice = field(f, job, J.qSlice), kvSlice = field(f, job, J.kvSlice), keysBytes = field(f, job, J.keysBytes);
  const item = f.local('i32'), t = f.local('i32'), kvItem = f.local('i32'), keyBytes = f.local('i32'), kvLoaded = f.local('i32');
  const qTile = f.local('i32'), oTile = f.local('i32'), v = f.local('i32');
  const stat = f.local('i32'), tileLo = f.local('i32'), nBytes = f.local('i32'), first = f.local('i32');
  const rowStats = f.local('i32'), rowLo = f.local('i32'), rowHi = f.local('i32'), tileRows = f.local('i32');
  f.forUp(item, () => f.get(lo), hi, 1, () => {
    // kv item = batch·Hkv + head / group
    f.get(item).get(heads).i32DivU().get(kvHeads).i32Mul().get(item).get(heads).i32RemU().get(group).i32DivU().i32Add().set(kvItem);
    // Kᵀ of this kv head into scratch, unless the previous item (a head of the same group) left it there.
    f.get(kvItem).i32Const(1).i32Add().get(kvLoaded).i32Ne().if(() => {
      f.get(job).i32Load(J.k * 4).get(kvItem).get(kvSlice).i32Mul().i32Add().get(keysBytes).get(dp).get(kt).get(tkp).call(h.transpose);
      f.get(kvItem).i32Const(1).i32Add().set(kvLoaded);
    });
    f.get(job).i32Load(J.v * 4).get(kvItem).get(kvSlice).i32Mul().i32Add().set(v);
    f.get(job).i32Load(J.q * 4).get(item).get(qSlice).i32Mul().i32Add().set(qTile);
    f.get(job).i32Load(J.out * 4).get(item).get(qSlice).i32Mul().i32Add().set(oTile);
    // Row statistics of this item: item·TqP·4 bytes = item·tiles·16.
    f.get(item).get(tiles).i32Mul().i32Const(4 * R).i32Mul().set(stat);
    f.get(dp).i32Const(2).i32Shl().set(tileRows);
    f.forUp(t, () => f.i32Const(0), tiles, 1, () => {
      f.get(job).i32Load(J.tileLo * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(tileLo);
      f.get(job).i32Load(J.tileBytes * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(nBytes);
      f.get(job).i32Load(J.tileKeyBytes * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(keyBytes);
      f.get(job).i32Load(J.rowLo * 4).get(t).i32Const(4 * R).i32Mul().i32Add().set(rowLo);
      f.get(job).i32Load(J.rowHi * 4).get(t).i32Const(4 * R).i32Mul().i32Add().set(rowHi);
      f.get(qTile).get(dp).get(packedA).call(h.pack);
      f.get(packedA).get(kt).get(tileLo).i32Const(2).i32Shl().i32Add().get(nBytes).get(tkp).get(dp).get(s).get(tkp).get(scale).call(h.scores);
      f.get(s).get(tkp).get(rowLo).get(rowHi).get(nBytes).call(h.mask);
      for (let row = 0; row < R; row++) {
        f.get(stat).i32Const(row * 4).i32Add().set(rowStats);
        f.get(s).get(tkp).i32Const(row).i32Mul().i32Add().get(nBytes);
        f.get(job).i32Load(J.rowMax * 4).get(rowStats).i32Add();
        f.get(job).i32Load(J.rowSum * 4).get(rowStats).i32Add();
        f.get(rowScale).i32Const(row * 4).i32Add();
        f.call(h.softmaxRow);
      }
      f.get(v).get(tileLo).get(dp).i32Mul().i32Add().set(first);
      f.get(s).get(tkp).get(first).get(keyBytes).get(dp).get(oTile).get(rowScale).call(h.pv);
      f.get(qTile).get(tileRows).i32Add().set(qTile);
      f.get(oTile).get(tileRows).i32Add().set(oTile);
      f.get(stat).i32Const(4 * R).i32Add().set(stat);
    });
  });
}

/** attention_backward(job, tid): items are (batch, kv head) pairs, each owning its dK and dV. */
function emitBackward(mb: WasmModuleBuilder, h: Helpers): void {
  const J = AttentionJob;
  const f = mb.function('attention_backward', ['i32', 'i32']);
  const [job, tid] = f.params;
  const { lo, hi, dp, tkp, packedA, packedB, s, s2, kt, vt, scale } = prologue(f, job, tid);
  const group = field(f, job, J.group);
  const tiles = field(f, job, J.tiles), qSlice = field(f, job, J.qSlice), kvSlice = field(f, job, J.kvSlice), keysBytes = field(f, job, J.keysBytes);
  const item = f.local('i32'), g = f.local('i32'), t = f.local('i32'), qItem = f.local('i32'), keyBytes = f.local('i32');
  const k = f.local('i32'), v = f.local('i32'), dk = f.local('i32'), dv = f.local('i32');
  const qTile = f.local('i32'), gTile = f.local('i32'), dqTile = f.local('i32'), stat = f.local('i32');
  const tileLo = f.local('i32'), nBytes = f.local('i32'), firstBytes = f.local('i32'), rowOffset = f.local('i32');
  const rowLo = f.local('i32'), rowHi = f.local('i32'), tileRows = f.local('i32'), ones = f.local('i32');
  f.get(dp).i32Const(2).i32Shl().set(tileRows);
  f.get(job).i32Const(J.ones * 4).i32Add().set(ones);
  f.forUp(item, () => f.get(lo), hi, 1, () => {
    const slice = (index: number, local: number) => f.get(job).i32Load(index * 4).get(item).get(kvSlice).i32Mul().i32Add().set(local);
    slice(J.k, k); slice(J.v, v); slice(J.dk, dk); slice(J.dv, dv);
    f.get(k).get(keysBytes).get(dp).get(kt).get(tkp).call(h.transpose);
    f.get(v).get(keysBytes).get(dp).get(vt).get(tkp).call(h.transpose);
    f.get(dk).i32Const(0).get(kvSlice).memoryFill();
    f.get(dv).i32Const(0).get(kvSlice).memoryFill();
    f.forUp(g, () => f.i32Const(0), group, 1, () => {
      f.get(item).get(group).i32Mul().get(g).i32Add().set(qItem);
      f.get(job).i32Load(J.q * 4).get(qItem).get(qSlice).i32Mul().i32Add().set(qTile);
      f.get(job).i32Load(J.dout * 4).get(qItem).get(qSlice).i32Mul().i32Add().set(gTile);
      f.get(job).i32Load(J.out * 4).get(qItem).get(qSlice).i32Mul().i32Add().set(dqTile);
      f.get(qItem).get(tiles).i32Mul().i32Const(4 * R).i32Mul().set(stat);
      f.forUp(t, () => f.i32Const(0), tiles, 1, () => {
        f.get(job).i32Load(J.tileLo * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(tileLo);
        f.get(job).i32Load(J.tileBytes * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(nBytes);
      f.get(job).i32Load(J.tileKeyBytes * 4).get(t).i32Const(2).i32Shl().i32Add().i32Load().set(keyBytes);
        f.get(job).i32Load(J.rowLo * 4).get(t).i32Const(4 * R).i32Mul().i32Add().set(rowLo);
        f.get(job).i32Load(J.rowHi * 4).get(t).i32Const(4 * R).i32Mul().i32Add().set(rowHi);
        f.get(tileLo).i32Const(2).i32Shl().set(firstBytes);
        // P = exp(scale·Q Kᵀ − lse), masked.
        f.get(qTile).get(dp).get(packedA).call(h.pack);
        f.get(packedA).get(kt).get(firstBytes).i32Add().get(nBytes).get(tkp).get(dp).get(s).get(tkp).get(scale).call(h.scores);
        f.get(s).get(tkp).get(rowLo).get(rowHi).get(nBytes).call(h.mask);
        for (let row = 0; row < R; row++) {
          f.get(s).get(tkp).i32Const(row).i32Mul().i32Add().get(nBytes);
          f.get(job).i32Load(J.lse * 4).get(stat).i32Add().f32Load(row * 4);
          f.call(h.expRow);
        }
        // dS = P ⊙ (dO Vᵀ − δ)·scale.
        f.get(gTile).get(dp).get(packedB).call(h.pack);
        f.get(packedB).get(vt).get(firstBytes).i32Add().get(nBytes).get(tkp).get(dp).get(s2).get(tkp).f32Const(1).call(h.scores);
        for (let row = 0; row < R; row++) {
          f.get(tkp).i32Const(row).i32Mul().set(rowOffset);
          f.get(s2).get(rowOffset).i32Add().get(s).get(rowOffset).i32Add().get(nBytes);
          f.get(job).i32Load(J.delta * 4).get(stat).i32Add().f32Load(row * 4);
          f.get(scale);
          f.call(h.dsRow);
        }
        // dQ = dS K, dV += Pᵀ dO, dK += dSᵀ Q.
        f.get(tileLo).get(dp).i32Mul().set(firstBytes);
        f.get(s2).get(tkp).get(k).get(firstBytes).i32Add().get(keyBytes).get(dp).get(dqTile).get(ones).call(h.pv);
        f.get(s).get(tkp).get(gTile).get(dv).get(firstBytes).i32Add().get(keyBytes).get(dp).call(h.outer);
        f.get(s2).get(tkp).get(qTile).get(dk).get(firstBytes).i32Add().get(keyBytes).get(dp).call(h.outer);
        f.get(qTile).get(tileRows).i32Add().set(qTile);
        f.get(gTile).get(tileRows).i32Add().set(gTile);
        f.get(dqTile).get(tileRows).i32Add().set(dqTile);
        f.get(stat).i32Const(4 * R).i32Add().set(stat);
      });
    });
  });
}

/** Emits both attention kernels (and their helpers) into the module. */
export function emitAttention(mb: WasmModuleBuilder, fma: boolean): void {
  const helpers: Helpers = {
    transpose: emitTranspose(mb), pack: emitPack(mb), scores: emitScores(mb, fma), mask: emitMask(mb), softmaxRow: emitSoftmaxRow(mb),
    expRow: emitExpRow(mb), dsRow: emitDsRow(mb), pv: emitPv(mb, fma), outer: emitOuter(mb, fma),
  };
  emitForward(mb, helpers);
  emitBackward(mb, helpers);
}
