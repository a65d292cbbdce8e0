/**
 * SpotAttention's selector keys in INT4 microscale form (specs/focus_spot.md B5): each key of d
 * dimensions (128 in the paper) splits into groups of 32; a group keeps one f16 scale s = max|x| / 7
 * and 32 signed 4-bit codes c = round(x / s) in −7 … 7, eight to a u32 (code + 8 in each nibble,
 * dimension i of the group in bits 4·(i mod 8) of word ⌊i/8⌋). A key then takes d/2 + d/16 bytes
 * (72 for d = 128) instead of 2d in f16 (256): 3.56× smaller. Every dimension comes back within
 * s/2 of its value (s rounded to f16 first, so the bound holds for the scale that is stored).
 * This is the host form (the cache's reference); the device form unpacks the same words.
 */
import { ArgumentError } from '../../errors.ts';
import { f16BitsToF32, f32ToF16Bits } from '../../tensor/dtype.ts';

/** Dimensions that share one scale. */
export const INT4_GROUP = 32;

/** Keys in INT4 microscale form: codes (n · d/8 words) and scales (n · d/32 f16 bit patterns). */
export interface Int4Keys { n: number; d: number; codes: Uint32Array; scales: Uint16Array }

/** Bytes one key of d dimensions takes in INT4 microscale form (codes and scales). */
export const int4KeyBytes = (d: number): number => d / 2 + (2 * d) / INT4_GROUP;

function checkDim(d: number): void {
  if (!Number.isInteger(d) || d <= 0 || d % INT4_GROUP !== 0) throw new ArgumentError(`spot: INT4 selector keys need a width that is a positive multiple of ${INT4_GROUP}; got ${d}`);
}

/** n keys of d dimensions (row-major, n·d values) → their INT4 microscale form. Non-finite values are refused. */
export function quantizeKeysInt4(x: ArrayLike<number>, d: number): Int4Keys {
  checkDim(d);
  if (x.length % d !== 0) throw new ArgumentError(`spot: ${x.length} values are not whole keys of ${d}`);
  const n = x.length / d, groups = n * (d / INT4_GROUP);
  const codes = new Uint32Array(n * (d / 8)), scales = new Uint16Array(groups);
  for (let g = 0; g < groups; g++) {
    const at = g * INT4_GROUP;
    let top = 0;
    for (let i = 0; i < INT4_GROUP; i++) {
      const v = x[at + i];
      if (!Number.isFinite(v)) throw new ArgumentError(`spot: selector key value ${v} at ${at + i} (key ${Math.floor((at + i) / d)}) is not finite`);
      top = Math.max(top, Math.abs(v));
    }
    scales[g] = f32ToF16Bits(top / 7);
    const s = f16BitsToF32(scales[g]);
    for (let i = 0; i < INT4_GROUP; i++) {
      // |x|/s ≤ 7·(1 + 2^−11) after the scale's rounding, so the code stays within −7 … 7.
      const c = s > 0 ? Math.max(-7, Math.min(7, Math.round(x[at + i] / s))) : 0;
      codes[(at + i) >> 3] |= (c + 8) << (4 * ((at + i) & 7));
    }
  }
  return { n, d, codes, scales };
}

/** The values an INT4 microscale form stands for (n·d, row-major). */
export function dequantizeKeysInt4(k: Int4Keys): Float32Array {
  const out = new Float32Array(k.n * k.d);
  for (let e = 0; e < out.length; e++) {
    const c = ((k.codes[e >> 3] >>> (4 * (e & 7))) & 15) - 8;
    out[e] = c * f16BitsToF32(k.scales[Math.floor(e / INT4_GROUP)]);
  }
  return out;
}
