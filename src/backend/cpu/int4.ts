/**
 * CPU reference of Backend.quantizeInt4 and Backend.dequantizeInt4: INT4 microscale codes (the
 * form of SpotAttention's selector keys, attention/spot/int4_keys.ts). Each row of d values splits
 * into groups of 32; a group keeps one scale s = max|x| / 7 rounded to f16 and 32 signed 4-bit codes
 * c = round(x / s) in −7 … 7 (halves away from zero… up: Math.round), eight to a 32-bit word (c + 8
 * in each nibble, value i of a group in bits 4·(i mod 8) of word ⌊i/8⌋). Every value comes back
 * within s/2. Non-finite values are the caller's to refuse (the host wrapper does).
 */
import { f16BitsToF32, f32ToF16Bits, type FloatDType } from '../../tensor/dtype.ts';
import type { CpuHandle, CpuRef } from './host.ts';
import { f32, store } from './host.ts';

/** Values that share one scale. */
export const INT4_GROUP = 32;

/** n·d values (rows of d, a multiple of 32) → codes (n·d/8 words) and scales (n·d/32 f16 bit patterns). */
export function quantizeInt4Values(x: ArrayLike<number>, n: number, d: number): { codes: Uint32Array; scales: Uint16Array } {
  const groups = (n * d) / INT4_GROUP;
  const codes = new Uint32Array((n * d) / 8), scales = new Uint16Array(groups);
  for (let g = 0; g < groups; g++) {
    const at = g * INT4_GROUP;
    let top = 0;
    for (let i = 0; i < INT4_GROUP; i++) top = Math.max(top, Math.abs(x[at + i]));
    scales[g] = f32ToF16Bits(Math.fround(top / 7));
    const s = f16BitsToF32(scales[g]);
    for (let i = 0; i < INT4_GROUP; i++) {
      // |x|/s ≤ 7·(1 + 2^−11) after the scale's rounding, so the code stays within −7 … 7.
      const c = s > 0 ? Math.max(-7, Math.min(7, Math.round(Math.fround(x[at + i] / s)))) : 0;
      codes[(at + i) >> 3] = (codes[(at + i) >> 3] | ((c + 8) << (4 * ((at + i) & 7)))) >>> 0;
    }
  }
  return { codes, scales };
}

/** The values codes and scales stand for (count = 8 · codes.length). */
export function dequantizeInt4Values(codes: ArrayLike<number>, scales: Uint16Array, count: number): Float32Array {
  const out = new Float32Array(count);
  for (let e = 0; e < count; e++) {
    const c = ((codes[e >> 3] >>> (4 * (e & 7))) & 15) - 8;
    out[e] = c * f16BitsToF32(scales[Math.floor(e / INT4_GROUP)]);
  }
  return out;
}

export function quantizeInt4(x: CpuRef, rows: number, d: number): [CpuHandle, CpuHandle] {
  const { codes, scales } = quantizeInt4Values(f32(x), rows, d);
  return [new Int32Array(codes.buffer), scales];
}

export function dequantizeInt4(codes: CpuRef, scales: CpuRef, rows: number, d: number, dtype: FloatDType): CpuHandle {
  return store(dequantizeInt4Values(new Uint32Array((codes.h as Int32Array).buffer, (codes.h as Int32Array).byteOffset, (rows * d) / 8), scales.h as Uint16Array, rows * d), dtype);
}
