/** Dtype conversion. Float→int truncates toward zero; gradients flow between float dtypes only. */
import { record } from '../tensor/autograd.ts';
import { assertDType, isFloat, type DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { reshape } from './layout.ts';
import { ref, wrap } from './run.ts';

export function cast(x: Tensor, to: DType): Tensor {
  assertDType(to, 'cast');
  if (x.dtype === to) return reshape(x, x.shape);
  const b = x.backend;
  const out = wrap(b, b.cast(ref(x), to), x.shape, to);
  if (!isFloat(to) || !isFloat(x.dtype)) return out;
  const from = x.dtype;
  return record('cast', out, [x], (g) => [cast(g, from)]);
}

/** A copy with its own storage (a device-side buffer copy on the GPU). */
export function clone(x: Tensor): Tensor {
  const b = x.backend;
  const out = wrap(b, b.cast(ref(x), x.dtype), x.shape, x.dtype);
  return record('clone', out, [x], (g) => [g]);
}

