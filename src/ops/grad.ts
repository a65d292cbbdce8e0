/** The user-facing autograd calls: backward, detach, zeroing gradients. */
import { backward as runBackward, type BackwardOptions } from '../tensor/autograd.ts';
import { shareStorage, Tensor } from '../tensor/tensor.ts';
import { onesLike } from './creation.ts';
import { add } from './elementwise.ts';

/** Accumulates gradients of `root` into the `.grad` of every leaf it depends on. */
export function backward(root: Tensor, grad?: Tensor, opts: BackwardOptions = {}): void {
  runBackward(root, grad ?? null, opts, (t) => onesLike(t), add);
}

/** Same values, cut from the graph (shares storage). */
export function detach(x: Tensor): Tensor {
  return shareStorage(x, x.shape);
}

/** Disposes and clears the gradients of the given tensors. */
export function zeroGrad(params: Iterable<Tensor>): void {
  for (const p of params) if (p.grad) { p.grad.dispose(); p.grad = null; }
}

declare module '../tensor/tensor.ts' {
  interface Tensor {
    backward(grad?: Tensor, opts?: BackwardOptions): void;
    detach(): Tensor;
  }
}
Tensor.prototype.backward = function (this: Tensor, grad?: Tensor, opts?: BackwardOptions) { backward(this, grad, opts); };
Tensor.prototype.detach = function (this: Tensor) { return detach(this); };
