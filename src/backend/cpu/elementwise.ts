/** CPU reference: unary and broadcasting binary ops, where, cast, fill. */
import type { BinaryOp, UnaryOp } from '../backend.ts';
import { allocHost, f32ToHost, floatToU8, hostToF32, isFloat, type DType } from '../../tensor/dtype.ts';
import { broadcastStrides, f32, forEachRow, forEachStrided, sizeOf, store, type CpuHandle, type CpuRef } from './host.ts';

const GELU_C = Math.sqrt(2 / Math.PI);

/** Scalar definitions shared with tests; the WGSL kernels implement the same formulas. */
export const unaryFns: Record<UnaryOp, (x: number) => number> = {
  neg: (x) => -x,
  abs: Math.abs,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  rsqrt: (x) => 1 / Math.sqrt(x),
  tanh: Math.tanh,
  sigmoid: (x) => 1 / (1 + Math.exp(-x)),
  silu: (x) => x / (1 + Math.exp(-x)),
  // GELU, tanh approximation (GPT-2's "gelu_new").
  gelu: (x) => 0.5 * x * (1 + Math.tanh(GELU_C * (x + 0.044715 * x * x * x))),
  relu: (x) => (x > 0 ? x : 0),
  softplus: (x) => (x > 20 ? x : Math.log1p(Math.exp(x))),
  square: (x) => x * x,
  reciprocal: (x) => 1 / x,
  sign: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0),
  sin: Math.sin,
  cos: Math.cos,
};

export const binaryFns: Record<BinaryOp, (a: number, b: number) => number> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
  pow: (a, b) => Math.pow(a, b),
  max: (a, b) => (a >= b || Number.isNaN(a) ? a : b),
  min: (a, b) => (a <= b || Number.isNaN(a) ? a : b),
  eq: (a, b) => (a === b ? 1 : 0),
  ne: (a, b) => (a !== b ? 1 : 0),
  lt: (a, b) => (a < b ? 1 : 0),
  le: (a, b) => (a <= b ? 1 : 0),
  gt: (a, b) => (a > b ? 1 : 0),
  ge: (a, b) => (a >= b ? 1 : 0),
};

/**
 * i32 ops whose f64 result would not wrap like 32-bit integer arithmetic (the GPU's): a product of
 * two i32 passes 2^53 and loses its low bits before the store wraps it.
 */
const i32Fns: Partial<Record<BinaryOp, (a: number, b: number) => number>> = {
  add: (a, b) => (a + b) | 0,
  sub: (a, b) => (a - b) | 0,
  mul: Math.imul,
};

export function unary(x: CpuRef, op: UnaryOp): CpuHandle {
  const v = f32(x);
  const out = new Float32Array(v.length);
  const fn = unaryFns[op];
  for (let i = 0; i < v.length; i++) out[i] = fn(v[i]);
  return store(out, x.dtype);
}

function integerResult(values: Float64Array | Float32Array, dtype: DType, op: BinaryOp): CpuHandle {
  const out = allocHost(dtype, values.length);
  for (let i = 0; i < values.length; i++) {
    const r = op === 'div' ? Math.trunc(values[i]) : values[i];
    out[i] = r;
  }
  return out;
}

export function binary(a: CpuRef, b: CpuRef, op: BinaryOp, outShape: readonly number[]): CpuHandle {
  const n = sizeOf(outShape);
  const av = isFloat(a.dtype) ? f32(a) : a.h;
  const bv = isFloat(b.dtype) ? f32(b) : b.h;
  const fn = (a.dtype === 'i32' ? i32Fns[op] : undefined) ?? binaryFns[op];
  const out = isFloat(a.dtype) ? new Float32Array(n) : new Float64Array(n);
  if (a.h.length === n && b.h.length === n) {
    for (let i = 0; i < n; i++) out[i] = fn(av[i], bv[i]);
  } else if (b.h.length === 1 && a.h.length === n) {
    const s = bv[0];
    for (let i = 0; i < n; i++) out[i] = fn(av[i], s);
  } else {
    const sa = broadcastStrides(a.shape, outShape);
    const sb = broadcastStrides(b.shape, outShape);
    const la = sa.length ? sa[sa.length - 1] : 0, lb = sb.length ? sb[sb.length - 1] : 0;
    forEachRow(outShape, [sa, sb], [0, 0], (i, o, len) => {
      const a0 = o[0], b0 = o[1];
      for (let j = 0; j < len; j++) out[i + j] = fn(av[a0 + j * la], bv[b0 + j * lb]);
    });
  }
  return isFloat(a.dtype) ? store(out as Float32Array, a.dtype) : integerResult(out, a.dtype, op);
}

export function where(cond: CpuRef, a: CpuRef, b: CpuRef, outShape: readonly number[]): CpuHandle {
  const n = sizeOf(outShape);
  const cv = cond.h, av = a.h, bv = b.h;
  const out = allocHost(a.dtype, n);
  const strides = [broadcastStrides(cond.shape, outShape), broadcastStrides(a.shape, outShape), broadcastStrides(b.shape, outShape)];
  forEachStrided(outShape, strides, [0, 0, 0], (i, o) => {
    out[i] = cv[o[0]] !== 0 ? av[o[1]] : bv[o[2]];
  });
  return out;
}

export function cast(x: CpuRef, to: DType): CpuHandle {
  if (to === x.dtype) return x.h.slice();
  if (!isFloat(x.dtype) && !isFloat(to)) {
    // int → int directly (through f32, i32 values above 2^24 would round); u8 wraps like a C cast.
    const out = allocHost(to, x.h.length);
    for (let i = 0; i < x.h.length; i++) out[i] = x.h[i];
    return out;
  }
  const v = hostToF32(x.h, x.dtype);
  if (to === 'u8') {
    const out = new Uint8Array(v.length);
    for (let i = 0; i < v.length; i++) out[i] = floatToU8(v[i]);
    return out;
  }
  return f32ToHost(v, to);
}

export function fill(size: number, value: number, dtype: DType): CpuHandle {
  const out = allocHost(dtype, size);
  if (!isFloat(dtype)) { out.fill(Math.trunc(value)); return out; }
  const one = f32ToHost(new Float32Array([value]), dtype);
  out.fill(one[0]);
  return out;
}
