/**
 * Which WebGPU attention kernel runs for a call: a pure function of the device's capabilities, the
 * call's geometry and its dtypes, so that the choice is tested without a GPU
 * (test/backend/attention_plan.test.ts) and the kernels' hosts only follow it.
 *
 * Forward: flash-decoding where the query rows of a GQA group are few (decodeRows), tensor cores for
 * f16 with 16×16×16 subgroup matrices and at least 16 query rows, the register-blocked ALU kernel
 * where its tiles fit, else the plain tiled one. Backward: tensor cores for both passes (dq, dk/dv)
 * where f16 q/k/v and dO and the tiles allow, else each pass on its own: register-blocked where its
 * tiles fit, else plain. Every kernel reads block masks; decode only a mask whose list its
 * workgroup's rows share (decodeRows), else a masked call of few rows takes the next kernel in that order.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import { MASK_K_BLOCK, type AttentionArgs, type FoxAttentionArgs } from '../../backend.ts';
import type { GpuCaps } from '../device.ts';
import { pow2AtLeast } from './attention_common.ts';
import { decodeRows } from './attention_decode.ts';
import { foxFpaDecodeRows } from './fox_fpa_decode.ts';
import { tcBackwardEligible, tcEligible } from './attention_tc.ts';

export type AttentionForwardKernel = 'decode' | 'tensor-cores' | 'blocked' | 'plain';
export type AttentionBackwardKernel = 'tensor-cores' | 'blocked' | 'plain';

/** The forward kernel for q, k, v of dtype x. */
export function attentionForwardPlan(caps: GpuCaps, a: AttentionArgs, x: DType): AttentionForwardKernel {
  // decodeRows refuses a mask that differs between the heads of a GQA group (one list a workgroup).
  if (decodeRows(caps, a) > 0) return 'decode';
  if (a.mask && a.mask.kBlock !== MASK_K_BLOCK) throw new UnsupportedError(`webgpu: a fine block mask (${a.mask.kBlock}-key blocks) is read by the decode kernel only: ${(a.heads / a.kvHeads) * a.tq} query rows a KV head are past it`);
  if (a.tq >= 16 && tcEligible(caps, x, a.d)) return 'tensor-cores';
  if (blockedRows(caps, a.d, 'fwd', x) > 0) return 'blocked';
  return 'plain';
}

/** The kernels of the backward's dq and dk/dv passes for q, k, v of dtype x and dO of dtype g. */
export function attentionBackwardPlan(caps: GpuCaps, a: AttentionArgs, x: DType, g: DType): { dq: AttentionBackwardKernel; dkdv: AttentionBackwardKernel } {
  if (a.mask && a.mask.kBlock !== MASK_K_BLOCK) throw new UnsupportedError(`webgpu: a fine block mask (${a.mask.kBlock}-key blocks) has no backward (decode only)`);
  if (tcBackwardEligible(caps, x, g, a)) return { dq: 'tensor-cores', dkdv: 'tensor-cores' };
  // A masked ALU dk/dv pass binds 9 storage buffers (q, k, v, dO, lse, delta, dk, dv, the mask).
  if (a.mask && caps.maxStorageBuffers < 9) {
    throw new UnsupportedError(`webgpu: a masked attention backward off the tensor cores binds 9 storage buffers in its dk/dv pass; ${caps.adapterName} allows ${caps.maxStorageBuffers}`);
  }
  return aluBackwardPlan(caps, a, x, g);
}

/** The backward's passes in f32 arithmetic: register-blocked where that pass's tiles fit, else plain. */
export function aluBackwardPlan(caps: GpuCaps, a: AttentionArgs, x: DType, g: DType): { dq: AttentionBackwardKernel; dkdv: AttentionBackwardKernel } {
  return {
    dq: blockedRows(caps, a.d, 'dq', x, g) > 0 ? 'blocked' : 'plain',
    dkdv: blockedRows(caps, a.d, 'dkdv', x, g) > 0 ? 'blocked' : 'plain',
  };
}

// ------------------------------------------------------------------ register-blocked tiles

/** A pass of the register-blocked kernels (attention_blocked.wgsl). */
export type BlockedPass = 'fwd' | 'dq' | 'dkdv';

/** Row pitch of the blocked kernels' tiles: the head dim rounded up to a power of two ≥ 32. */
export const blockedPitch = (d: number) => pow2AtLeast(d, 32);

/**
 * How a blocked pass runs for head dim d: row-threads TR (4·TR query rows per workgroup of 8·TR
 * invocations; dq and dk/dv take TR = 8), the largest whose tiles fit this device's workgroup memory
 * less `reserve` bytes, and whether the q/k/v tiles (px) and dO's (pg) are kept as packed 16-bit
 * values (only when the inputs are 16-bit and f32 tiles do not fit); tr 0 where nothing fits (then
 * the attention_plain.wgsl kernels run). `x` and `g` are the dtypes of q/k/v and of dO.
 */
export function blockedPlan(caps: GpuCaps, d: number, pass: BlockedPass, x: DType = 'f32', g: DType = x, reserve = 0): { tr: number; px: boolean; pg: boolean } {
  if (d === 0 || d > 128) return { tr: 0, px: false, pg: false };
  const dp = blockedPitch(d) / 4 + 1, bk = 32;
  const fits = (tr: number, px: boolean, pg: boolean) => {
    const bq = 4 * tr, tx = px ? 8 : 16, tg = pg ? 8 : 16;
    const bytes = pass === 'fwd' ? (bq * dp + 2 * bk * dp) * tx + (bq * (bk / 4 + 1) + bq * 2) * 16
      : pass === 'dq' ? (bq * dp + 2 * bk * dp) * tx + bq * dp * tg + bq * (bk / 4 + 1) * 16
        : (bq * dp + 2 * bk * dp) * tx + bq * dp * tg + 2 * bk * (bq / 4 + 1) * 16;
    return bytes + reserve <= caps.maxWorkgroupStorage && 8 * tr <= caps.maxInvocations;
  };
  const canX = x !== 'f32', canG = pass !== 'fwd' && g !== 'f32';
  for (const [px, pg] of [[false, false], [canX, false], [canX, canG]]) {
    for (const tr of pass === 'fwd' ? [16, 8] : [8]) if (fits(tr, px, pg)) return { tr, px, pg };
  }
  return { tr: 0, px: false, pg: false };
}

/** Row-threads of a blocked pass (blockedPlan's tr): 0 where its tiles do not fit. */
export function blockedRows(caps: GpuCaps, d: number, pass: BlockedPass, x: DType = 'f32', g: DType = x): number {
  return blockedPlan(caps, d, pass, x, g).tr;
}


// ------------------------------------------------------------------ score modifiers (FoX, FPA)

/**
 * The FPA variant's workgroup memory beyond the softmax pass's: φ and ℓ of one 32-key block (Fk, Lk)
 * in every pass; DQ adds each of its 32 rows' settled argmin and amount (FT, FV), DKDV φ at its
 * 32 rows' positions (Fq).
 */
const FPA_EXTRA_BYTES: Record<BlockedPass, number> = { fwd: 2 * 32 * 4, dq: 4 * 32 * 4, dkdv: 3 * 32 * 4 };

/** A blocked pass of FoX (blockedPlan) or FPA (with room for the FPA state) for head dim d and dtypes x (q/k/v) and g (dO). */
export function modePlan(caps: GpuCaps, mode: 'fox' | 'fpa', d: number, pass: BlockedPass, x: DType, g: DType = x): { tr: number; px: boolean; pg: boolean } {
  return blockedPlan(caps, d, pass, x, g, mode === 'fpa' ? FPA_EXTRA_BYTES[pass] : 0);
}

/** Row-threads of a blocked FPA pass for head dim d and dtypes x, g (blockedPlan's choice with room for the FPA state), 0 where it does not fit. */
export function fpaBlockedRows(caps: GpuCaps, d: number, pass: BlockedPass = 'fwd', x: DType = 'f32', g: DType = x): number {
  return modePlan(caps, 'fpa', d, pass, x, g).tr;
}

/** The forward kernel of a score modifier's attention: FoX or FPA (fox_fpa_attention.ts, fox_fpa_decode.ts). */
export type ModifierForwardKernel = 'decode' | 'tensor-cores' | 'blocked' | 'tiled';

/**
 * The forward of FoX or FPA for q, k, v of dtype x: a forced tile (tests) runs the tiled kernel;
 * else few query rows a GQA group the split decode kernel; f16 inputs the tensor-core forward
 * (attention_tc.wgsl with the modifier's hooks) unless `tensorCores` is off; the register-blocked
 * kernel where its tiles (with FPA's state) fit; the tiled kernel else.
 */
export function modifierForwardPlan(caps: GpuCaps, kind: 'fox' | 'fpa', a: FoxAttentionArgs, x: DType, opts: { tile?: boolean; tensorCores?: boolean } = {}): ModifierForwardKernel {
  if (opts.tile || a.batch * a.heads * a.tq === 0) return 'tiled';
  if (foxFpaDecodeRows(caps, a) > 0) return 'decode';
  if ((opts.tensorCores ?? true) && a.tq >= 16 && tcEligible(caps, x, a.d)) return 'tensor-cores';
  return modePlan(caps, kind, a.d, 'fwd', x).tr > 0 ? 'blocked' : 'tiled';
}

/** The kernels of a score modifier's backward passes. */
export type ModifierBackwardKernel = 'tensor-cores' | 'blocked' | 'tiled';

/**
 * The backward passes of FoX or FPA for q, k, v of dtype x and dO of dtype g: with no tile forced,
 * each takes the tensor-core passes (attention_tc_backward.wgsl with attention_tc_mod_fox.wgsl or
 * attention_tc_mod_fpa.wgsl) where they take f16 inputs and dO and `tensorCores` is on; else each
 * pass register-blocked where its tiles (with FPA's state) fit, else tiled.
 */
export function modifierBackwardPlan(caps: GpuCaps, kind: 'fox' | 'fpa', a: FoxAttentionArgs, x: DType, g: DType, opts: { tile?: boolean; tensorCores?: boolean } = {}): { dq: ModifierBackwardKernel; dkdv: ModifierBackwardKernel } {
  if (!opts.tile && (opts.tensorCores ?? true) && tcBackwardEligible(caps, x, g, { ...a, causal: true, window: 0 }, kind)) return { dq: 'tensor-cores', dkdv: 'tensor-cores' };
  const pass = (p: BlockedPass) => (!opts.tile && modePlan(caps, kind, a.d, p, x, g).tr > 0 ? 'blocked' : 'tiled');
  return { dq: pass('dq'), dkdv: pass('dkdv') };
}
