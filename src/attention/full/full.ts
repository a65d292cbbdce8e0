/**
 * Full causal softmax attention: the baseline every mechanism is measured against and the
 * teacher for distillation. The forward and the cached step run the flash-attention kernels
 * (ops/attention.ts); attention/dense.ts holds the composed reference they are tested against. No
 * parameters of its own and no cache state besides k and v, which may be paged (the layout says
 * so; ops/paged_attention.ts reads through the page table).
 */
import { attention, kvWrite } from '../../ops/attention.ts';
import { attentionPaged, kvWritePaged } from '../../ops/paged_attention.ts';
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
    const window = narrowest(this.window, input?.budget?.window);
    const pages = cache.pages;
    if (pages) {
      pages.reserve(pos + n);
      kvWritePaged(pages.k, pages.pageRows, k, pos);
      kvWritePaged(pages.v, pages.pageRows, v, pos);
      return attentionPaged(q, pages, { window, kvLength: pos + n });
    }
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return attention(q, cache.k, cache.v, { causal: true, window, kvLength: pos + n });
  }
}

/** The smaller of two optional windows (undefined = unlimited). */
function narrowest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
