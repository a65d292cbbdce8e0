/**
 * Full causal softmax attention: the baseline every mechanism is measured against and the
 * teacher for distillation. The forward and the cached step run the flash-attention kernels
 * (ops/attention.ts); dense.ts holds the composed reference they are tested against.
 */
import { attention, kvWrite } from '../ops/attention.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { AttentionMechanism, LayerKv } from './mechanism.ts';

export class FullAttention implements AttentionMechanism {
  readonly name: string = 'full';
  /** Sliding window (keys visible per query, itself included); undefined = every earlier key. */
  readonly window?: number;

  forward(q: Tensor, k: Tensor, v: Tensor): Tensor {
    return attention(q, k, v, { causal: true, window: this.window });
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return attention(q, cache.k, cache.v, { causal: true, window: this.window, kvLength: pos + n });
  }

  cacheBytesPerToken(nKvHeads: number, headDim: number, bytesPerElement: number): number {
    return 2 * nKvHeads * headDim * bytesPerElement;
  }
}
