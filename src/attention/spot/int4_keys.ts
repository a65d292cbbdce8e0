/**
 * SpotAttention's selector keys in INT4 microscale form (specs/focus_spot.md B5): each key of d
 * dimensions (128 in the paper) splits into groups of 32; a group keeps one f16 scale s = max|x| / 7
 * and 32 signed 4-bit codes c = round(x / s) in −7 … 7, eight to a u32 (code + 8 in each nibble,
 * dimension i of the group in bits 4·(i mod 8) of word ⌊i/8⌋). A key then takes d/2 + d/16 bytes
 * (72 for d = 128) instead of 2d in f16 (256): 3.56× smaller. Every dimension comes back within
 * s/2 of its value (s rounded to f16 first, so the bound holds for the scale that is stored).
 * The arithmetic is Backend.quantizeInt4 / dequantizeInt4's CPU reference (backend/cpu/int4.ts);
 * this host form checks its inputs, and the cache keeps the codes through those ops on every backend.
 */
import { ArgumentError } from '../../errors.ts';
import { dequantizeInt4Values, INT4_GROUP, quantizeInt4Values } from '../../backend/cpu/int4.ts';

export { INT4_GROUP };

/** Keys in INT4 microscale form: codes (n · d/8 words) and scales (n · d/32 f16 bit patterns). */
export interface Int4Keys { n: number; d: number; codes: Uint32Array; scales: Uint16Array }

/** Bytes one key of d dimensions takes in INT4 microscale form (codes and scales). */
export const int4KeyBytes = (d: number): number => d / 2 + (2 * d) / INT4_GROUP;

function checkDim(d: number): void {
  if (!Number.isInteger(d) || d <= 0 || d % INT4_GROUP !== 0) throw new ArgumentError(`spot: INT4 selector keys need a width that is a positive multiple of ${INT4_GROUP}; got ${d}`);
}

/** n keys of d dimensions (row-major, n·d values) → their INT4 microscale form (Backend.quantizeInt4's CPU reference). Non-finite values are refused. */
export function quantizeKeysInt4(x: ArrayLike<number>, d: number): Int4Keys {
  checkDim(d);
  if (x.length % d !== 0) throw new ArgumentError(`spot: ${x.length} values are not whole keys of ${d}`);
  for (let i = 0; i < x.length; i++) {
    if (!Number.isFinite(x[i])) throw new ArgumentError(`spot: selector key value ${x[i]} at ${i} (key ${Math.floor(i / d)}) is not finite`);
  }
  const n = x.length / d;
  return { n, d, ...quantizeInt4Values(x, n, d) };
}

/** The values an INT4 microscale form stands for (n·d, row-major). */
export function dequantizeKeysInt4(k: Int4Keys): Float32Array {
  return dequantizeInt4Values(k.codes, k.scales, k.n * k.d);
}
