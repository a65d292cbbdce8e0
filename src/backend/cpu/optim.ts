/** CPU reference optimizer updates, in place, following PyTorch's AdamW and SGD exactly. */
import type { AdamWArgs, SGDArgs } from '../backend.ts';
import { f32ToHost } from '../../tensor/dtype.ts';
import { f32, type CpuRef } from './host.ts';

function writeBack(ref: CpuRef, values: Float32Array): void {
  if (ref.h !== values) ref.h.set(f32ToHost(values, ref.dtype));
}

export function adamw(param: CpuRef, grad: CpuRef, m: CpuRef, v: CpuRef, a: AdamWArgs): void {
  const p = f32(param), g = f32(grad), mv = f32(m), vv = f32(v);
  const decay = 1 - a.lr * a.weightDecay;
  const sqrtBias2 = Math.sqrt(a.bias2);
  // Loop-invariant terms in locals (the same values the expressions below had inline).
  const scale = a.gradScale, beta1 = a.beta1, beta2 = a.beta2, eps = a.eps;
  const rest1 = 1 - beta1, rest2 = 1 - beta2, step = a.lr / a.bias1;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i] * scale;
    mv[i] = beta1 * mv[i] + rest1 * gi;
    vv[i] = beta2 * vv[i] + rest2 * gi * gi;
    const denom = Math.sqrt(vv[i]) / sqrtBias2 + eps;
    p[i] = p[i] * decay - step * (mv[i] / denom);
  }
  writeBack(param, p); writeBack(m, mv); writeBack(v, vv);
}

export function sgd(param: CpuRef, grad: CpuRef, buf: CpuRef, a: SGDArgs): void {
  const p = f32(param), g = f32(grad), b = f32(buf);
  for (let i = 0; i < p.length; i++) {
    let gi = g[i] * a.gradScale + a.weightDecay * p[i];
    if (a.momentum !== 0) {
      b[i] = a.momentum * b[i] + gi;
      gi = a.nesterov ? gi + a.momentum * b[i] : b[i];
    }
    p[i] -= a.lr * gi;
  }
  writeBack(param, p); writeBack(buf, b);
}
