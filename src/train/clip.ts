/**
 * Clipping by global norm without a read-back: the norm is computed on the device and every
 * gradient is multiplied by min(1, maxNorm / (norm + 1e-6)) in place of the old gradient.
 */
import { cast } from '../ops/cast.ts';
import { full } from '../ops/creation.ts';
import { add, div, minimum, mul, sqrt, square } from '../ops/elementwise.ts';
import { sum } from '../ops/reduce.ts';
import { keep, noGrad, tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** The global L2 norm of the gradients: a device scalar, f32 (non-finite where one gradient is). */
export function gradNorm(params: readonly Tensor[]): Tensor {
  const withGrad = params.filter((p) => p.grad);
  return noGrad(() => tidy(() => {
    let total: Tensor | null = null;
    for (const p of withGrad) {
      const s = sum(square(cast(p.grad!, 'f32')));
      total = total ? add(total, s) : s;
    }
    return total ? sqrt(total) : full([], 0);
  }));
}

/** Returns the global L2 norm of the gradients (a device scalar, f32) after clipping them in place. */
export function clipGradNorm(params: readonly Tensor[], maxNorm: number): Tensor {
  const withGrad = params.filter((p) => p.grad);
  return noGrad(() => {
    const norm = gradNorm(withGrad);
    tidy(() => {
      const scale = minimum(div(maxNorm, add(norm, 1e-6)), 1);
      for (const p of withGrad) {
        const g = p.grad!;
        p.grad = keep(mul(g, cast(scale, g.dtype)));
        g.dispose();
      }
    });
    return norm;
  });
}
