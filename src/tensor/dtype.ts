/**
 * Storage dtypes and the host-side conversions between them. Compute always accumulates in f32
 * (DESIGN.md, "Numerics and dtypes"); f16 and bf16 are storage formats converted on load/store.
 */
import { DeviceError, DTypeError } from '../errors.ts';

export type DType = 'f32' | 'f16' | 'bf16' | 'i32' | 'u8';
export type FloatDType = 'f32' | 'f16' | 'bf16';
export const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'u8'];

/** Host typed array that holds each dtype: 16-bit floats are raw bit patterns in a Uint16Array. */
export type HostArray<D extends DType = DType> =
  D extends 'f32' ? Float32Array : D extends 'i32' ? Int32Array : D extends 'u8' ? Uint8Array : Uint16Array;
export type AnyHostArray = Float32Array | Int32Array | Uint8Array | Uint16Array;

export function bytesPerElement(dtype: DType): number {
  switch (dtype) {
    case 'f32': case 'i32': return 4;
    case 'f16': case 'bf16': return 2;
    case 'u8': return 1;
  }
}

export function isFloat(dtype: DType): dtype is FloatDType {
  return dtype === 'f32' || dtype === 'f16' || dtype === 'bf16';
}

export function assertDType(value: string, where: string): DType {
  if ((DTYPES as readonly string[]).includes(value)) return value as DType;
  throw new DTypeError(`${where}: unknown dtype '${value}', expected one of ${DTYPES.join(', ')}`);
}

export function allocHost(dtype: DType, size: number): AnyHostArray {
  try {
    switch (dtype) {
      case 'f32': return new Float32Array(size);
      case 'i32': return new Int32Array(size);
      case 'u8': return new Uint8Array(size);
      case 'f16': case 'bf16': return new Uint16Array(size);
    }
  } catch (e) {
    // The engine's RangeError ("Array buffer allocation failed", "Invalid typed array length") as FON's out-of-memory error.
    if (e instanceof RangeError) throw new DeviceError(`host memory: cannot allocate ${size} ${dtype} values (${((size * bytesPerElement(dtype)) / 2 ** 30).toFixed(2)} GiB): ${e.message}`);
    throw e;
  }
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** f32 → bf16 bits, round to nearest even (NaN stays NaN). */
export function f32ToBf16Bits(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0];
  if ((u & 0x7f800000) === 0x7f800000 && (u & 0x7fffff) !== 0) return 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16BitsToF32(h: number): number {
  u32Scratch[0] = h << 16;
  return f32Scratch[0];
}

/** f32 → IEEE half bits, round to nearest even, with subnormals, overflow to ±inf. */
export function f32ToF16Bits(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  let mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && (m & 1))) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (m & 1))) {
    m++;
    if (m === 0x400) { m = 0; e++; if (e >= 0x1f) return sign | 0x7c00; }
  }
  return sign | (e << 10) | m;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** Any host array of `dtype` → Float32Array (shared, not copied, when already f32). */
export function hostToF32(data: AnyHostArray, dtype: DType): Float32Array {
  if (dtype === 'f32') return data as Float32Array;
  const out = new Float32Array(data.length);
  if (dtype === 'f16') for (let i = 0; i < data.length; i++) out[i] = f16BitsToF32(data[i]);
  else if (dtype === 'bf16') for (let i = 0; i < data.length; i++) out[i] = bf16BitsToF32(data[i]);
  else for (let i = 0; i < data.length; i++) out[i] = data[i];
  return out;
}

/**
 * Float → i32, the one rule of every backend (PyTorch-like): truncate toward zero, saturate to
 * [−2^31, 2^31 − 1], NaN → 0.
 */
export function floatToI32(x: number): number {
  if (x !== x) return 0;
  if (x >= 2147483647) return 2147483647;
  if (x <= -2147483648) return -2147483648;
  return Math.trunc(x) | 0;
}

/** Float → u8: the saturated i32 of floatToI32, wrapped mod 256 (−1 → 255, 300 → 44, 1e10 → 255). */
export function floatToU8(x: number): number {
  return floatToI32(x) & 0xff;
}

/** f32 values → host array of `dtype` (ints: floatToI32; u8: floatToU8, the i32 wrapped mod 256). */
export function f32ToHost(data: Float32Array, dtype: DType): AnyHostArray {
  if (dtype === 'f32') return data;
  const out = allocHost(dtype, data.length);
  if (dtype === 'f16') for (let i = 0; i < data.length; i++) out[i] = f32ToF16Bits(data[i]);
  else if (dtype === 'bf16') for (let i = 0; i < data.length; i++) out[i] = f32ToBf16Bits(data[i]);
  else if (dtype === 'i32') for (let i = 0; i < data.length; i++) out[i] = floatToI32(data[i]);
  else for (let i = 0; i < data.length; i++) out[i] = floatToU8(data[i]);
  return out;
}

/** Round-trips f32 values through a storage dtype: what the value becomes once stored. */
export function roundTo(dtype: DType, x: number): number {
  switch (dtype) {
    case 'f32': return Math.fround(x);
    case 'f16': return f16BitsToF32(f32ToF16Bits(x));
    case 'bf16': return bf16BitsToF32(f32ToBf16Bits(x));
    case 'i32': return floatToI32(x);
    case 'u8': return floatToU8(x);
  }
}
