/**
 * INT4 microscale codes (Backend.quantizeInt4 / dequantizeInt4; the arithmetic is
 * backend/cpu/int4.ts): groups of 32 values along the last axis share one f16 scale, each value a
 * 4-bit code, eight to a 32-bit word: 4.5 bits a value. SpotAttention's selector keys are kept so
 * (attention/spot/key_cache.ts). No gradients.
 */
import { ArgumentError } from '../errors.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireDType, wrap, sameShape } from './run.ts';

const GROUP = 32;

/** x (…, d) of a float dtype, d a multiple of 32 → codes i32 (…, d/8) and scales f16 (…, d/32). */
export function quantizeInt4(x: Tensor): { codes: Tensor; scales: Tensor } {
  const b = backendOf('quantizeInt4', x);
  requireDType('quantizeInt4', 'x', x, 'f32', 'f16', 'bf16');
  const d = x.shape[x.rank - 1];
  if (x.rank < 1 || d % GROUP !== 0) throw new ArgumentError(`quantizeInt4: x ${fmt(x.shape)} needs a last axis that is a multiple of ${GROUP}`);
  const rows = x.size / d, lead = x.shape.slice(0, -1);
  const [c, s] = b.quantizeInt4(ref(x), rows, d);
  return { codes: wrap(b, c, [...lead, d / 8], 'i32'), scales: wrap(b, s, [...lead, d / GROUP], 'f16') };
}

/** codes i32 (…, d/8) and scales f16 (…, d/32) → the values (…, d) in `dtype`. */
export function dequantizeInt4(codes: Tensor, scales: Tensor, dtype: FloatDType = 'f32'): Tensor {
  const b = backendOf('dequantizeInt4', codes, scales);
  requireDType('dequantizeInt4', 'codes', codes, 'i32');
  requireDType('dequantizeInt4', 'scales', scales, 'f16');
  const words = codes.shape[codes.rank - 1], d = 8 * words;
  const lead = codes.shape.slice(0, -1);
  if (codes.rank < 1 || d % GROUP !== 0 || !sameShape(scales.shape, [...lead, d / GROUP])) {
    throw new ArgumentError(`dequantizeInt4: codes ${fmt(codes.shape)} and scales ${fmt(scales.shape)}: expected (…, d/8) and (…, d/32) with d a multiple of ${GROUP}`);
  }
  return wrap(b, b.dequantizeInt4(ref(codes), ref(scales), codes.size / words, d, dtype), [...lead, d], dtype);
}
