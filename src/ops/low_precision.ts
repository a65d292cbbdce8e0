/**
 * How the attention ops compute in 16 bits inside a mixed-precision scope (tensor/autocast.ts):
 * op runs on copies of xs in `low`, and its result comes back in f32. Gradients flow through both
 * casts, so f32 inputs receive f32 gradients.
 */
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cast } from './cast.ts';

export function viaLowPrecision(low: DType, xs: readonly Tensor[], op: (lows: Tensor[]) => Tensor): Tensor {
  const lows = xs.map((x) => cast(x, low));
  try {
    const y = op(lows);
    const out = cast(y, 'f32');
    y.dispose();
    return out;
  } finally {
    for (const t of lows) t.dispose();
  }
}
