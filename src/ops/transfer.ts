/** Moving a tensor between backends (through the host; not differentiable). */
import type { Backend } from '../backend/backend.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { wrap } from './run.ts';

export async function toBackend(x: Tensor, to: Backend): Promise<Tensor> {
  const host = await x.data();
  return wrap(to, to.upload(host, x.dtype), x.shape, x.dtype);
}
