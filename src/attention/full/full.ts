/**
 * Full causal softmax attention: the baseline every mechanism is measured against and the
 * teacher for distillation. The forward and the cached step run the flash-attention kernels
 * (ops/attention.ts); attention/dense.ts holds the composed reference they are tested against. No
 * parameters of its own and no cache state besides k and v.
 */
import { attention, kvWrite } from '../../ops/attention.ts';
import { Module } from '../../nn/module.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { AttentionMechanism, LayerKv, MechanismInput } from '../mechanism.ts';

export class FullAttention extends Module implements AttentionMechanism {
  readonly name: string = 'full';
  /** Sliding window (keys visible per query, itself included); undefined = every earlier key. */
  readonly window?: number;

  forward(q: Tensor, k: Tensor, v: Tensor, _input?: MechanismInput): Tensor {
    return attention(q, k, v, { causal: true, window: this.window });
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput | undefined, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return attention(q, cache.k, cache.v, { causal: true, window: narrowest(this.window, input?.budget?.window), kvLength: pos + n });
  }
}

/** The smaller of two optional windows (undefined = unlimited). */
function narrowest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
