/**
 * SpotAttention's selector (specs/focus_spot.md B2): a small indexer beside a frozen attention
 * layer that scores past tokens for the current one. From the layer's normed input x (B, T, C):
 *
 *   q_h = W_Q^h x_q (4 index heads of 128),  k = W_K x_t (one 128-wide key per token: the
 *   "selector keys" the cache keeps),  w_h = (W_w x_q)_h (per-query head weights),
 *   s[q, t] = Σ_h w_h(q) · ReLU(q_h(q) · k(t) / √128)   for t ≤ q,
 *
 * token scores that softmax into the selector's distribution over the causal tokens (what the KL
 * distillation trains) and max-pool over 16-token blocks into block scores (what selection ranks).
 * Variant choices where the paper is silent (B2 [I]): the index q and k carry no RoPE, and the dot
 * product is scaled by 1/√d_I (as DeepSeek's lightning indexer does) so that scores start O(1).
 * Parameters, under the attention block's name: `spot.q.weight` (H_I·d_I, C), `spot.k.weight`
 * (d_I, C), `spot.w.weight` (H_I, C): d·(4·128 + 128 + 4) in all.
 */
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import type { ParamFactory } from '../../nn/params.ts';
import { arange } from '../../ops/creation.ts';
import { le, mul, relu, where } from '../../ops/elementwise.ts';
import { linears, matmul } from '../../ops/matmul.ts';
import { indexBlockScores } from '../../ops/select.ts';
import { concat, narrow, permute, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import type { FloatDType } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { SPOT_BLOCK } from './selection.ts';

/** A score for pairs a query cannot see (t > q, or block padding): below every real score, finite so that 0·it stays 0. */
export const SPOT_MASKED = -1e30;

/** The selector's shape: index heads H_I and their width d_I (B2: 4 × 128). */
export interface SelectorShape { heads: number; dim: number }

export class SpotSelector extends Module {
  readonly q: Linear;
  readonly k: Linear;
  readonly w: Linear;

  constructor(f: ParamFactory, name: string, dModel: number, readonly shape: SelectorShape = { heads: 4, dim: 128 }) {
    super();
    const std = 1 / Math.sqrt(dModel);
    this.q = this.child(new Linear(f, `${name}.spot.q`, dModel, shape.heads * shape.dim, { std }));
    this.k = this.child(new Linear(f, `${name}.spot.k`, dModel, shape.dim, { std }));
    this.w = this.child(new Linear(f, `${name}.spot.w`, dModel, shape.heads, { std }));
  }

  /**
   * The selector keys of x (B, T, C) → (B, T, d_I): one per token, what the cache keeps; in `dtype`
   * where given (a decoding step asks for the cache's f16, which the GEMM writes: no cast pass on
   * devices with shader-f16; others write f32 and pack it).
   */
  keys(x: Tensor, dtype?: FloatDType): Tensor {
    return this.k.forward(x, dtype);
  }

  /**
   * A decoding step's projections of xq (B, n, C) in one pass (ops/matmul.ts linears: one dispatch
   * on webgpu): the index queries (B, n, H_I, d_I) and head weights (B, n, H_I) in f32 (the block
   * scores are computed in f32), and with `o.keys` the selector keys (B, n, d_I) too, in o.keyDType
   * (default xq's: as `keys`).
   */
  decodeProjections(xq: Tensor, o: { keys?: boolean; keyDType?: FloatDType } = {}): { q: Tensor; w: Tensor; keys?: Tensor } {
    const [b, n] = xq.shape;
    const { heads, dim } = this.shape;
    const weights = [this.q.weight, this.w.weight, ...(o.keys ? [this.k.weight] : [])];
    const [q, w, keys] = linears(xq, weights, ['f32', 'f32', o.keyDType]);
    return { q: reshape(q, [b, n, heads, dim]), w, ...(keys ? { keys } : {}) };
  }

  /**
   * Token scores of queries xq (B, n, C) at positions pos … pos + n − 1 against keys (B, L, d_I) →
   * (B, n, L), SPOT_MASKED where t > q: what training distils (a decoding step pools its block
   * scores straight from the cache instead: decodeBlockScores).
   */
  scores(xq: Tensor, keys: Tensor, pos = 0): Tensor {
    const [b, n] = xq.shape;
    const { heads, dim } = this.shape;
    const l = keys.shape[1];
    const q = permute(reshape(this.q.forward(xq), [b, n, heads, dim]), [0, 2, 1, 3]); // (B, H_I, n, d)
    const dots = matmul(q, reshape(keys, [b, 1, l, dim]), { transB: true }); // (B, H_I, n, L)
    const w = reshape(permute(this.w.forward(xq), [0, 2, 1]), [b, heads, n, 1]);
    const s = sum(mul(relu(mul(dots, 1 / Math.sqrt(dim))), w), 1); // (B, n, L)
    return causalMasked(s, pos);
  }
}

/**
 * The block scores and log-masses of a decoding selection straight from the cached selector keys
 * (ops/select.ts indexBlockScores: one pass, no token scores kept): queries xq (B, n, C) at positions
 * pos … pos + n − 1 over keys (B, Tmax, d_I) of which the first l are read (SpotKeyCache.scoring's
 * store; INT4: codes as `keys` and their scales, scored as stored) → (B, n, ⌈l/16⌉) each:
 * the max-pooled score and log Σ_{t∈block} e^{s_t} (the block's softmax mass up to one offset a row).
 * `o.proj`: xq's projections where the step made them already (SpotSelector.decodeProjections).
 */
export function decodeBlockScores(sel: SpotSelector, xq: Tensor, store: { keys: Tensor; scales?: Tensor }, o: { l: number; pos: number; proj?: { q: Tensor; w: Tensor } }): { max: Tensor; logMass: Tensor } {
  const { q, w } = o.proj ?? sel.decodeProjections(xq);
  return indexBlockScores(q, w, store.keys, { l: o.l, pos: o.pos, block: SPOT_BLOCK, scale: 1 / Math.sqrt(sel.shape.dim) }, store.scales);
}

/**
 * s (B, n, L) with SPOT_MASKED where key t lies after query pos + i. Keys before `pos` are seen by
 * every row, so only the last L − pos columns are compared (a decoding step, n = 1 and L = pos + 1,
 * needs no mask at all): no tensor of the cache's length is built on the host per step.
 */
export function causalMasked(s: Tensor, pos: number): Tensor {
  const [, n, l] = s.shape;
  if (l <= pos + 1) return s;
  const lo = Math.min(pos, l), tail = l - lo;
  const i = reshape(arange(pos, pos + n, 1, { dtype: 'f32', backend: s.backend }), [n, 1]);
  const t = reshape(arange(lo, l, 1, { dtype: 'f32', backend: s.backend }), [1, tail]);
  const masked = where(le(t, i), narrow(s, 2, lo, tail), SPOT_MASKED);
  return lo === 0 ? masked : concat([narrow(s, 2, 0, lo), masked], 2);
}

