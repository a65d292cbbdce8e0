/** WebGPU elementwise kernels: unary, broadcasting binary, where, cast (pack), fill. */
import { UnsupportedError } from '../../../errors.ts';
import { bytesPerElement, f32ToBf16Bits, f32ToF16Bits, type DType } from '../../../tensor/dtype.ts';
import type { BinaryOp, UnaryOp } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { grid, f32bits, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { broadcastStrides, coalesce, vec8 } from '../strides.ts';
import { header, preprocess, storesDirectly, type Binding, type Variant } from '../wgsl.ts';

/** A kernel whose bindings (and so its header) depend on the dtypes in its variant. */
export function kernel(name: string, file: string, bindings: (v: Variant) => Binding[], params?: string): Kernel {
  return {
    name,
    source: (v, caps) => preprocess(wgslSource(file), { ...v, HEADER: header(bindings(v), caps.f16, params), PACKING: wgslSource('packing') }),
  };
}

const dt = (v: Variant, k: string) => v[k] as DType;

export const UNARY_EXPR: Record<UnaryOp, string> = {
  neg: '-x', abs: 'abs(x)', exp: 'exp(x)', log: 'log(x)', sqrt: 'sqrt(x)', rsqrt: 'inverseSqrt(x)',
  tanh: 'tanh_safe(x)', sigmoid: '1.0 / (1.0 + exp(-x))', silu: 'x / (1.0 + exp(-x))',
  gelu: '0.5 * x * (1.0 + tanh_safe(0.7978845608028654 * (x + 0.044715 * x * x * x)))',
  relu: 'max(x, 0.0)', softplus: 'select(log(1.0 + exp(x)), x, x > 20.0)', square: 'x * x',
  reciprocal: '1.0 / x', sign: 'sign(x)', sin: 'sin(x)', cos: 'cos(x)',
};

// pow keeps the sign of a negative base for integer exponents, as Math.pow does.
const BINARY_EXPR: Record<BinaryOp, string> = {
  add: 'a + b', sub: 'a - b', mul: 'a * b', div: 'a / b',
  pow: 'select(pow(abs(a), b) * select(1.0, -1.0, a < 0.0 && fract(b * 0.5) != 0.0), pow(a, b), a >= 0.0 || fract(b) != 0.0)',
  max: 'select(b, a, a >= b || a != a)', min: 'select(b, a, a <= b || a != a)',
  eq: 'select(0.0, 1.0, a == b)', ne: 'select(0.0, 1.0, a != b)', lt: 'select(0.0, 1.0, a < b)',
  le: 'select(0.0, 1.0, a <= b)', gt: 'select(0.0, 1.0, a > b)', ge: 'select(0.0, 1.0, a >= b)',
};

const INT_EXPR: Partial<Record<BinaryOp, string>> = {
  add: 'a + b', sub: 'a - b', mul: 'a * b', div: 'select(0, a / b, b != 0)', max: 'max(a, b)', min: 'min(a, b)',
  eq: 'select(0, 1, a == b)', ne: 'select(0, 1, a != b)', lt: 'select(0, 1, a < b)',
  le: 'select(0, 1, a <= b)', gt: 'select(0, 1, a > b)', ge: 'select(0, 1, a >= b)',
};

const unaryKernel = kernel('unary', 'unary', (v) => [{ name: 'x', dtype: dt(v, 'X') }, { name: 'y', dtype: dt(v, 'Y'), write: true }], 'n: u32');
const binaryKernel = kernel('binary', 'binary', (v) => [
  { name: 'a', dtype: dt(v, 'A') }, { name: 'b', dtype: dt(v, 'B') }, { name: 'y', dtype: dt(v, 'Y'), write: true },
], 'n: u32, rank: u32, shape: array<vec4<u32>, 2>, sa: array<vec4<u32>, 2>, sb: array<vec4<u32>, 2>');
const whereKernel = kernel('where', 'where', (v) => [
  { name: 'c', dtype: dt(v, 'C') }, { name: 'a', dtype: dt(v, 'A') }, { name: 'b', dtype: dt(v, 'B') }, { name: 'y', dtype: dt(v, 'Y'), write: true },
], 'n: u32, rank: u32, shape: array<vec4<u32>, 2>, sc: array<vec4<u32>, 2>, sa: array<vec4<u32>, 2>, sb: array<vec4<u32>, 2>');
const packKernel = kernel('pack', 'pack', (v) => [{ name: 'x', dtype: dt(v, 'X') }, { name: 'y', dtype: dt(v, 'Y'), write: true }], 'n: u32');
const fillKernel: Kernel = { name: 'fill', source: () => wgslSource('fill') };
const copyKernel: Kernel = { name: 'copy_vec4', source: () => wgslSource('copy_vec4') };
const binaryVec4Kernel: Kernel = { name: 'binary_vec4', source: (v) => preprocess(wgslSource('binary_vec4'), v) };

/** Copies the first `bytes` bytes of src into dst on the device (16-byte words). */
export function copyBytes(be: WebGpuBackend, src: GPUBuffer, dst: GPUBuffer, bytes: number): void {
  const words = Math.ceil(bytes / 16);
  be.rt.run({ kernel: copyKernel, variant: {}, uniforms: [words], buffers: [src, dst], workgroups: grid(words, 256) });
}

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** Words a fill of `value` as `dtype` writes, and how many elements each word holds. */
function fillWord(value: number, dtype: DType): number {
  switch (dtype) {
    case 'f32': return f32bits(value);
    case 'i32': return Math.trunc(value) >>> 0;
    case 'f16': { const h = f32ToF16Bits(value); return (h | (h << 16)) >>> 0; }
    case 'bf16': { const h = f32ToBf16Bits(value); return (h | (h << 16)) >>> 0; }
    case 'u8': { const b = Math.trunc(value) & 0xff; return (b * 0x01010101) >>> 0; }
  }
}

export function fill(be: WebGpuBackend, n: number, value: number, dtype: DType): GpuHandle {
  const out = be.alloc(dtype, n, 'fill');
  const words = Math.ceil((n * bytesPerElement(dtype)) / 4);
  be.rt.run({ kernel: fillKernel, variant: {}, uniforms: [words, fillWord(value, dtype)], buffers: [out.buffer], workgroups: grid(words, 256) });
  return out;
}

/**
 * Runs `write` into a buffer it can store elements of `dtype` into directly; for packed dtypes
 * (bf16, u8, f16 without shader-f16) it writes f32 into a temporary and packs that.
 */
export function viaStorable(be: WebGpuBackend, dtype: DType, n: number, what: string, write: (buf: GPUBuffer, storeDType: DType) => void): GpuHandle {
  if (storesDirectly(dtype, be.caps.f16)) {
    const out = be.alloc(dtype, n, what);
    write(out.buffer, dtype);
    return out;
  }
  const tmp = be.alloc('f32', n, what);
  write(tmp.buffer, 'f32');
  const out = castInto(be, tmp.buffer, 'f32', n, dtype, what);
  be.free(tmp);
  return out;
}

/** The n values of `src` (dtype `from`) cast into a new buffer of `to`. */
export function castInto(be: WebGpuBackend, src: GPUBuffer, from: DType, n: number, to: DType, what: string): GpuHandle {
  const out = be.alloc(to, n, what);
  if (storesDirectly(to, be.caps.f16)) {
    be.rt.run({ kernel: unaryKernel, variant: { X: from, Y: to, EXPR: 'x' }, uniforms: [n], buffers: [src, out.buffer], workgroups: grid(n, 256) });
    return out;
  }
  const per = to === 'u8' ? 4 : 2;
  const words = Math.ceil(n / per);
  const convert = to === 'u8' ? 'to_u8' : to === 'bf16' ? 'to_bf16' : 'to_f16';
  be.rt.run({ kernel: packKernel, variant: { X: from, Y: to, PER_WORD: per, CONVERT: convert, INT_IN: from === 'i32', INT_TO_U8: from === 'i32' && to === 'u8' }, uniforms: [n], buffers: [src, out.buffer], workgroups: grid(words, 256) });
  return out;
}

export function cast(be: WebGpuBackend, x: GpuRef, to: DType): GpuHandle {
  const n = size(x.shape);
  if (x.dtype === to) return be.copy(x.h, n, to);
  return castInto(be, x.h.buffer, x.dtype, n, to, 'cast');
}

export function unary(be: WebGpuBackend, x: GpuRef, op: UnaryOp): GpuHandle {
  const n = size(x.shape);
  return viaStorable(be, x.dtype, n, op, (buf, y) => {
    be.rt.run({ kernel: unaryKernel, variant: { X: x.dtype, Y: y, EXPR: UNARY_EXPR[op] }, uniforms: [n], buffers: [x.h.buffer, buf], workgroups: grid(n, 256) });
  });
}

function binaryUniforms(n: number, shape: readonly number[], sa: readonly number[], sb: readonly number[]): number[] {
  return [n, shape.length, 0, 0, ...vec8(shape, 1), ...vec8(sa, 0), ...vec8(sb, 0)];
}

export function binary(be: WebGpuBackend, a: GpuRef, b: GpuRef, op: BinaryOp, outShape: readonly number[]): GpuHandle {
  const n = size(outShape);
  const plan = coalesce(outShape, [broadcastStrides(a.shape, outShape), broadcastStrides(b.shape, outShape)]);
  const flat = size(a.shape) === n && size(b.shape) === n;
  const bscalar = !flat && size(a.shape) === n && size(b.shape) === 1;
  const isInt = a.dtype === 'i32';
  if (isInt && !INT_EXPR[op]) throw new UnsupportedError(`webgpu: binary op '${op}' on i32 tensors is not supported (cast to f32 first)`);
  if (flat && a.dtype === 'f32' && b.dtype === 'f32' && n % 4 === 0) {
    const out = be.alloc('f32', n, op);
    be.rt.run({ kernel: binaryVec4Kernel, variant: { EXPR: BINARY_EXPR[op] }, uniforms: [n / 4], buffers: [a.h.buffer, b.h.buffer, out.buffer], workgroups: grid(n / 4, 256) });
    return out;
  }
  return viaStorable(be, a.dtype, n, op, (buf, y) => {
    be.rt.run({
      kernel: binaryKernel,
      variant: { A: a.dtype, B: b.dtype, Y: y, EXPR: BINARY_EXPR[op], INT: isInt, IEXPR: INT_EXPR[op] ?? '', FLAT: flat, BSCALAR: bscalar },
      uniforms: binaryUniforms(n, plan.shape, plan.strides[0], plan.strides[1]),
      buffers: [a.h.buffer, b.h.buffer, buf], workgroups: grid(n, 256),
    });
  });
}

export function where(be: WebGpuBackend, c: GpuRef, a: GpuRef, b: GpuRef, outShape: readonly number[]): GpuHandle {
  const n = size(outShape);
  const plan = coalesce(outShape, [c, a, b].map((t) => broadcastStrides(t.shape, outShape)));
  const isInt = a.dtype === 'i32';
  return viaStorable(be, a.dtype, n, 'where', (buf, y) => {
    be.rt.run({
      kernel: whereKernel, variant: { C: c.dtype, A: a.dtype, B: b.dtype, Y: y, INT: isInt },
      uniforms: [n, plan.shape.length, 0, 0, ...vec8(plan.shape, 1), ...plan.strides.flatMap((s) => vec8(s, 0))],
      buffers: [c.h.buffer, a.h.buffer, b.h.buffer, buf], workgroups: grid(n, 256),
    });
  });
}

export const ELEMENTWISE_FILES = ['unary', 'binary', 'binary_vec4', 'copy_vec4', 'where', 'pack', 'packing', 'fill'];

export function elementwiseKernels(be: WebGpuBackend): Pick<KernelTable, 'unary' | 'binary' | 'where' | 'cast' | 'fill'> {
  return {
    unary: (x, op) => unary(be, x, op),
    binary: (a, b, op, s) => binary(be, a, b, op, s),
    where: (c, a, b, s) => where(be, c, a, b, s),
    cast: (x, to) => cast(be, x, to),
    fill: (n, v, d) => fill(be, n, v, d),
  };
}
