/**
 * Index plans for broadcast and strided kernels: output dimensions merged where every input
 * walks them contiguously (fewer divisions per element, and rank ≤ 8 for the uniform arrays).
 */
import { UnsupportedError } from '../../errors.ts';
export { broadcastStrides } from '../../tensor/shape.ts';

export const MAX_RANK = 8;

/** Merges adjacent output axes where each stride list stays linear; drops size-1 axes. */
export function coalesce(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = outShape.length - 1;
    if (last >= 0 && strides.every((s, k) => outStrides[k][last] === s[d] * shape[d])) {
      outShape[last] *= shape[d];
      strides.forEach((s, k) => { outStrides[k][last] = s[d]; });
    } else {
      outShape.push(shape[d]);
      strides.forEach((s, k) => outStrides[k].push(s[d]));
    }
  }
  if (outShape.length > MAX_RANK) throw new UnsupportedError(`webgpu: a strided or broadcast op over ${outShape.length} non-mergeable axes (at most ${MAX_RANK})`);
  return { shape: outShape, strides: outStrides };
}

/** Uniform words for `array<vec4<u32>, 2>` holding up to 8 values (unused slots 1 for shapes). */
export function vec8(values: readonly number[], pad: number): number[] {
  const out = new Array<number>(MAX_RANK).fill(pad);
  values.forEach((v, i) => { out[i] = v >>> 0; });
  return out;
}
