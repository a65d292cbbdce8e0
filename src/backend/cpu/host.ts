/** Helpers the CPU kernels share: f32 views of inputs, typed outputs, broadcasting strides. */
import { allocHost, f32ToHost, hostToF32, isFloat, type AnyHostArray, type DType } from '../../tensor/dtype.ts';
import type { Ref } from '../backend.ts';
import { sizeOf } from '../../tensor/shape.ts';
export { sizeOf, broadcastStrides } from '../../tensor/shape.ts';

export type CpuHandle = AnyHostArray;
export type CpuRef = Ref<CpuHandle>;

/** Values of any input as f32 (no copy for f32). */
export function f32(x: CpuRef): Float32Array {
  return hostToF32(x.h, x.dtype);
}

/** Values of any input for kernels that also take integers: f32 for floats, exact f64 for i32/u8 (f32 rounds above 2^24). */
export function numbers(x: CpuRef): Float32Array | Float64Array {
  return isFloat(x.dtype) ? f32(x) : Float64Array.from(x.h);
}

/** Results stored as `dtype`: floats rounded once to f32 (then to f16/bf16), integers truncated exactly. */
export function storeNumbers(values: Float32Array | Float64Array, dtype: DType): CpuHandle {
  if (isFloat(dtype)) return f32ToHost(values instanceof Float32Array ? values : Float32Array.from(values), dtype);
  const out = allocHost(dtype, values.length);
  for (let i = 0; i < values.length; i++) out[i] = Math.trunc(values[i]);
  return out;
}

/** f32 results stored as `dtype`. */
export function store(values: Float32Array, dtype: DType): CpuHandle {
  return f32ToHost(values, dtype);
}

/** Calls f(outIndex, inOffsets…) for every element of outShape, walking each input's strides. */
/**
 * forEachStrided by rows: `f(i, offs, len)` handles the `len` = outShape[last] elements out[i …],
 * whose inputs start at offs[k] and step by the inputs' last strides; one call per row keeps the
 * inner loop free of index arithmetic (permutes and broadcasts are row copies).
 */
export function forEachRow(outShape: readonly number[], strides: readonly (readonly number[])[], bases: readonly number[], f: (i: number, offs: number[], len: number) => void): void {
  const rank = outShape.length;
  if (rank === 0) { f(0, bases.slice(), 1); return; }
  const len = outShape[rank - 1];
  if (len === 0) return;
  const outer = outShape.slice(0, -1);
  const outerStrides = strides.map((s) => s.slice(0, -1));
  let i = 0;
  forEachStrided(outer, outerStrides, bases, (_r, offs) => { f(i, offs, len); i += len; });
}

export function forEachStrided(outShape: readonly number[], strides: readonly (readonly number[])[], bases: readonly number[], f: (i: number, offs: number[]) => void): void {
  const n = sizeOf(outShape);
  const rank = outShape.length;
  const idx = new Array<number>(rank).fill(0);
  const offs = bases.slice();
  for (let i = 0; i < n; i++) {
    f(i, offs);
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]++;
      for (let k = 0; k < strides.length; k++) offs[k] += strides[k][d];
      if (idx[d] < outShape[d]) break;
      for (let k = 0; k < strides.length; k++) offs[k] -= strides[k][d] * outShape[d];
      idx[d] = 0;
    }
  }
}
