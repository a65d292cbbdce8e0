/**
 * Reading WebGPU results back and comparing them with the CPU reference: one copy for the WebGPU
 * kernel tests (attention, FoX, FPA). The error measure is |gpu − cpu| / (1 + |cpu|), with −∞
 * equal to −∞ (the lse of a row that sees no key).
 */
import assert from 'node:assert/strict';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import type { DispatchRecord } from '../../src/backend/webgpu/runtime.ts';
import { hostToF32, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';

/** A host array as the CPU kernels take it (shape only where the kernel reads it). */
export const cref = (h: AnyHostArray, dtype: FloatDType | 'f32', shape: number[] = []) => ({ h, shape, dtype });

/** readF32(h, dtype, n): the first n elements of a device buffer as f32, on the backend `gpu()` returns. */
export function readWith(gpu: () => WebGpuBackend) {
  return async (h: GpuHandle, dtype: FloatDType | 'f32', n: number): Promise<Float32Array> => hostToF32(await gpu().read(h, dtype, n), dtype);
}

/** compare(got, dtype, want, tol, what): asserts the worst error of a device buffer against `want` is at most tol. */
export function compareWith(gpu: () => WebGpuBackend) {
  const read = readWith(gpu);
  return async (got: GpuHandle, dtype: FloatDType | 'f32', want: AnyHostArray, tol: number, what: string): Promise<void> => {
    const g = await read(got, dtype, want.length);
    const w = hostToF32(want, dtype);
    let worst = 0, at = -1;
    for (let i = 0; i < w.length; i++) {
      const err = w[i] === -Infinity && g[i] === -Infinity ? 0 : Math.abs(g[i] - w[i]) / (1 + Math.abs(w[i]));
      if (!(err <= worst)) { worst = err; at = i; }
    }
    assert.ok(worst <= tol, `${what}: worst error ${worst} at ${at} (gpu ${g[at]}, cpu ${w[at]}) above ${tol}`);
  };
}

/** How many dispatches of `kernel` a dispatch log holds, by pass (the variant's FWD, DQ or DKDV flag). */
export function passesOf(dispatches: readonly DispatchRecord[], kernel: string): { fwd: number; dq: number; dkdv: number } {
  const mine = dispatches.filter((d) => d.kernel === kernel);
  return { fwd: mine.filter((d) => d.variant.FWD).length, dq: mine.filter((d) => d.variant.DQ).length, dkdv: mine.filter((d) => d.variant.DKDV).length };
}
