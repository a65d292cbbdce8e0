/**
 * The FoX "Pro" data-dependent token shift on keys and values (specs/fpa_depth.md §1.2 [V]),
 * applied to the raw k and v projections, before the block's QK-norm and RoPE:
 *
 *   k̃_t = α_t k_{t−1} + (1 − α_t) k_t,      α_t = σ(W_α x_t)      (one α per KV head)
 *
 * and the same for v with its own W_α. The spec has one α per head (Linear(D, H), no bias); k and
 * v have Hkv heads here, so this is its GQA variant: one α per KV head, W_α (Hkv × C), no bias, the
 * same as the spec's when nKvHeads = nHeads. Parameters under the block's name:
 * `shift_k.weight`, `shift_v.weight`, initialised normal(0, 0.02) like every other projection (the
 * FoX code's init), so α ≈ 0.5 at step 0 with a small dependence on the input.
 *
 * The first position shifts with zeros (k_{−1} = 0, as the spec's repo does), so position 0 of a
 * sequence gives (1 − α_0) k_0. Shapes: k, v (B, T, Hkv, D), x (B, T, C), α (B, T, Hkv, 1).
 *
 * Cache: the last pre-shift k and v rows of each sequence, states "shift_k" and "shift_v", f32
 * (B, Hkv, 1, D), allocated once per sequence (one row, not one per position): a step at position
 * pos > 0 shifts its first row with the row stored by the step that ended at pos − 1, then stores
 * its own last row. Only the last row is kept, so a cached step must continue where the previous
 * one ended (or restart at position 0); a rewind to an earlier position is an ArgumentError.
 */
import { ArgumentError } from '../errors.ts';
import { kvWrite } from '../ops/attention.ts';
import { cast } from '../ops/cast.ts';
import { zeros } from '../ops/creation.ts';
import { add, mul, sigmoid, sub } from '../ops/elementwise.ts';
import { concat, narrow, reshape } from '../ops/layout.ts';
import { Linear } from '../nn/linear.ts';
import { Module } from '../nn/module.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { ModelConfig } from '../model/config.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cacheState, toF32 } from './gates.ts';
import type { CacheRowLayout, LayerKv } from './mechanism.ts';

/** For each cache slot's "shift_k" state: the position its stored row precedes (the next position a step may start at). */
const nextPosition = new WeakMap<Tensor, number>();

export class TokenShift extends Module {
  readonly shiftK: Linear;
  readonly shiftV: Linear;

  /** `name` is the attention block's prefix (e.g. "layers.3.attn"); `mechanism` names the layer in errors. */
  constructor(f: ParamFactory, name: string, cfg: ModelConfig, private readonly mechanism: string) {
    super();
    this.shiftK = this.child(new Linear(f, `${name}.shift_k`, cfg.dModel, cfg.nKvHeads));
    this.shiftV = this.child(new Linear(f, `${name}.shift_v`, cfg.dModel, cfg.nKvHeads));
  }

  /** Cache rows: the last pre-shift k and v per KV head, D wide. */
  static cacheRows(c: ModelConfig): CacheRowLayout {
    return { shift_k: [c.nKvHeads, c.headDim], shift_v: [c.nKvHeads, c.headDim] };
  }

  /** k, v (B, T, Hkv, D) at positions 0 … T−1 of their sequences, x (B, T, C) → shifted k, v. Differentiable. */
  forward(k: Tensor, v: Tensor, x: Tensor): [Tensor, Tensor] {
    return [shift(k, this.alpha(this.shiftK, x), zeroRow(k)), shift(v, this.alpha(this.shiftV, x), zeroRow(v))];
  }

  /**
   * k, v (B, n, Hkv, D) at positions pos … pos+n−1: shifted with the rows the cache holds from
   * position pos − 1 (zeros at pos = 0); their last pre-shift rows replace the stored ones.
   */
  forwardCached(k: Tensor, v: Tensor, x: Tensor, cache: LayerKv, pos: number): [Tensor, Tensor] {
    const kState = cacheState(cache.state, 'shift_k', this.mechanism);
    const vState = cacheState(cache.state, 'shift_v', this.mechanism);
    if (pos > 0 && nextPosition.get(kState) !== pos) {
      const at = nextPosition.get(kState);
      throw new ArgumentError(`${this.mechanism}: token shift at position ${pos} needs the pre-shift k and v of position ${pos - 1}, but the cache ${at === undefined ? 'holds none' : `holds those of position ${at - 1}`}; a cached step must continue where the last one ended, or restart at position 0`);
    }
    const kPrev = pos === 0 ? zeroRow(k) : storedRow(kState, k);
    const vPrev = pos === 0 ? zeroRow(v) : storedRow(vState, v);
    const out: [Tensor, Tensor] = [shift(k, this.alpha(this.shiftK, x), kPrev), shift(v, this.alpha(this.shiftV, x), vPrev)];
    // Computed before the stored rows are overwritten: kPrev may be a view of them.
    const n = k.shape[1];
    kvWrite(kState, lastRow(k, n), 0);
    kvWrite(vState, lastRow(v, n), 0);
    nextPosition.set(kState, pos + n);
    return out;
  }

  /** α (B, T, Hkv, 1) from x (B, T, C). */
  private alpha(lin: Linear, x: Tensor): Tensor {
    const [b, t] = x.shape;
    return reshape(sigmoid(lin.forward(x)), [b, t, lin.outFeatures, 1]);
  }
}

/**
 * y (B, T, Hkv, D) shifted by α (B, T, Hkv, 1): α_t y_{t−1} + (1 − α_t) y_t, where y_{−1} is
 * `first` (B, 1, Hkv, D), the row before this call's first position.
 */
export function shift(y: Tensor, alpha: Tensor, first: Tensor): Tensor {
  const t = y.shape[1];
  const prev = t === 1 ? first : concat([first, narrow(y, 1, 0, t - 1)], 1); // (B, T, Hkv, D): rows −1 … T−2
  return add(mul(alpha, prev), mul(sub(1, alpha), y));
}

/** A zero row (B, 1, Hkv, D) like y's. */
const zeroRow = (y: Tensor): Tensor => zeros([y.shape[0], 1, y.shape[2], y.shape[3]], { backend: y.backend, dtype: y.dtype });

/** The stored row (B, Hkv, 1, D) f32 as (B, 1, Hkv, D) in y's dtype (the same layout: the unit axis moves). */
function storedRow(state: Tensor, y: Tensor): Tensor {
  const [b, h, , d] = state.shape;
  const row = reshape(state, [b, 1, h, d]);
  return y.dtype === 'f32' ? row : cast(row, y.dtype);
}

/** The last row of y (B, n, Hkv, D) as a state row (B, Hkv, 1, D) f32. */
function lastRow(y: Tensor, n: number): Tensor {
  const [b, , h, d] = y.shape;
  return toF32(reshape(narrow(y, 1, n - 1, 1), [b, h, 1, d]));
}
