/** Creating tensors: from host data, constants, ranges and seeded random values. */
import { ArgumentError, ShapeError } from '../errors.ts';
import type { Backend } from '../backend/backend.ts';
import { getBackend } from '../backend/registry.ts';
import { allocHost, assertDType, f32ToHost, isFloat, type AnyHostArray, type DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { normalArray, nextSeed, uniformArray } from './random.ts';
import { fmt, sizeOf, wrap } from './run.ts';

export interface CreateOptions {
  dtype?: DType;
  backend?: Backend;
  requiresGrad?: boolean;
}

export interface RandomOptions extends CreateOptions {
  /** Same seed → same values on every backend. Without one, the global stream (manualSeed) is used. */
  seed?: number;
}

function checkShape(op: string, shape: readonly number[]): void {
  for (const d of shape) if (!Number.isInteger(d) || d < 0) throw new ShapeError(`${op}: bad shape ${fmt(shape)}: dimensions must be non-negative integers`);
}

function finish(t: Tensor, opts: CreateOptions): Tensor {
  if (opts.requiresGrad) {
    if (!t.isFloat) throw new ArgumentError(`requiresGrad needs a float dtype, got ${t.dtype}`);
    t.requiresGrad = true;
  }
  return t;
}

type Nested = number | readonly Nested[];

/** Values → host array of `dtype`; integers go straight in (through f32 they would lose bits above 2^24). */
function toHost(values: ArrayLike<number>, dtype: DType): AnyHostArray {
  if (isFloat(dtype)) return f32ToHost(Float32Array.from(values), dtype);
  const out = allocHost(dtype, values.length);
  for (let i = 0; i < values.length; i++) out[i] = Math.trunc(values[i]);
  return out;
}

function flatten(data: Nested, shape: number[], out: number[], depth = 0): void {
  if (typeof data === 'number') { out.push(data); return; }
  if (shape.length <= depth) shape.push(data.length);
  else if (shape[depth] !== data.length) throw new ShapeError(`tensor: ragged nested array: length ${data.length} at depth ${depth}, expected ${shape[depth]}`);
  for (const d of data) flatten(d, shape, out, depth + 1);
}

/**
 * A tensor from numbers, nested arrays or a typed array. A Uint16Array is taken as raw f16/bf16
 * bits when dtype says so; other arrays are values converted to the dtype (default f32).
 */
export function tensor(data: Nested | AnyHostArray | readonly number[], shape?: readonly number[], opts: CreateOptions = {}): Tensor {
  const dtype = opts.dtype !== undefined ? assertDType(opts.dtype, 'tensor') : data instanceof Int32Array ? 'i32' : data instanceof Uint8Array ? 'u8' : 'f32';
  let host: AnyHostArray;
  let inferred: number[] = [];
  if (ArrayBuffer.isView(data)) {
    inferred = [data.length];
    host = data instanceof Uint16Array && (dtype === 'f16' || dtype === 'bf16') ? data : toHost(data as ArrayLike<number>, dtype);
  } else {
    const flat: number[] = [];
    flatten(data as Nested, inferred, flat);
    host = toHost(flat, dtype);
  }
  const finalShape = shape ? [...shape] : inferred;
  checkShape('tensor', finalShape);
  if (sizeOf(finalShape) !== host.length) throw new ShapeError(`tensor: ${host.length} values do not fill shape ${fmt(finalShape)} (${sizeOf(finalShape)} elements)`);
  const b = opts.backend ?? getBackend();
  return finish(wrap(b, b.upload(host, dtype), finalShape, dtype), opts);
}

export function scalar(value: number, opts: CreateOptions = {}): Tensor {
  return tensor([value], [], opts);
}

export function full(shape: readonly number[], value: number, opts: CreateOptions = {}): Tensor {
  checkShape('full', shape);
  const dtype = assertDType(opts.dtype ?? 'f32', 'full');
  const b = opts.backend ?? getBackend();
  return finish(wrap(b, b.fill(sizeOf(shape), value, dtype), shape, dtype), opts);
}

export const zeros = (shape: readonly number[], opts: CreateOptions = {}) => full(shape, 0, opts);
export const ones = (shape: readonly number[], opts: CreateOptions = {}) => full(shape, 1, opts);
// dtype and backend are read from `t` only when opts do not give them, so a disposed `t` still
// serves as a shape when both are given (gradient rules do this with their inputs' shapes).
export const zerosLike = (t: Tensor, opts: CreateOptions = {}) => full(t.shape, 0, { ...opts, dtype: opts.dtype ?? t.dtype, backend: opts.backend ?? t.backend });
export const onesLike = (t: Tensor, opts: CreateOptions = {}) => full(t.shape, 1, { ...opts, dtype: opts.dtype ?? t.dtype, backend: opts.backend ?? t.backend });

/** [start, start+step, …) below stop, like numpy.arange; i32 unless dtype says otherwise. */
export function arange(start: number, stop?: number, step = 1, opts: CreateOptions = {}): Tensor {
  if (stop === undefined) { stop = start; start = 0; }
  for (const [name, v] of [['start', start], ['stop', stop], ['step', step]] as const) {
    if (!Number.isFinite(v)) throw new ArgumentError(`arange: ${name} must be a finite number, got ${v}`);
  }
  if (step === 0) throw new ArgumentError('arange: step must not be 0');
  const n = Math.max(0, Math.ceil((stop - start) / step));
  const v = Array.from({ length: n }, (_, i) => start + i * step);
  return tensor(v, [n], { dtype: 'i32', ...opts });
}

function randomTensor(op: string, shape: readonly number[], values: (seed: number, n: number) => Float32Array, opts: RandomOptions): Tensor {
  checkShape(op, shape);
  const dtype = assertDType(opts.dtype ?? 'f32', op);
  if (!isFloat(dtype)) throw new ArgumentError(`${op}: dtype must be a float type, got ${dtype}`);
  return tensor(values(opts.seed ?? nextSeed(), sizeOf(shape)), shape, { ...opts, dtype });
}

/** Uniform in [low, high). */
export function rand(shape: readonly number[], opts: RandomOptions & { low?: number; high?: number } = {}): Tensor {
  return randomTensor('rand', shape, (s, n) => uniformArray(s, n, opts.low ?? 0, opts.high ?? 1), opts);
}

/** Normal with the given mean and std (default standard normal). */
export function randn(shape: readonly number[], opts: RandomOptions & { mean?: number; std?: number } = {}): Tensor {
  return randomTensor('randn', shape, (s, n) => normalArray(s, n, opts.mean ?? 0, opts.std ?? 1), opts);
}

/** Random integers in [low, high), as i32. */
export function randint(shape: readonly number[], low: number, high: number, opts: RandomOptions = {}): Tensor {
  checkShape('randint', shape);
  if (!Number.isInteger(low) || !Number.isInteger(high)) throw new ArgumentError(`randint: low ${low} and high ${high} must be integers`);
  if (high <= low) throw new ArgumentError(`randint: high ${high} must be greater than low ${low} (values are drawn from [low, high))`);
  const u = uniformArray(opts.seed ?? nextSeed(), sizeOf(shape));
  const v = new Int32Array(u.length);
  for (let i = 0; i < u.length; i++) v[i] = low + Math.floor(u[i] * (high - low));
  return tensor(v, shape, { ...opts, dtype: 'i32' });
}
