/**
 * The seam between ops and backends: checks that inputs live on one backend, hands the kernel
 * its Refs, and wraps returned handles as tensors. Shape helpers every op shares live here too.
 */
import { debugLevel, debugLine } from '../platform/debug.ts';
import { ArgumentError, DTypeError, ShapeError } from '../errors.ts';
import type { Backend, Ref } from '../backend/backend.ts';
import { isFloat, type DType } from '../tensor/dtype.ts';
import { fromHandle, type Tensor } from '../tensor/tensor.ts';
export { sameShape, sizeOf } from '../tensor/shape.ts';

export function ref(t: Tensor): Ref<unknown> {
  const s = t.live();
  return { h: s.handle, shape: t.shape, dtype: s.dtype };
}

export function backendOf(op: string, ...ts: Tensor[]): Backend {
  const b = ts[0].backend;
  for (const t of ts) if (t.backend !== b) throw new ArgumentError(`${op}: tensors live on different backends ('${b.name}' and '${t.backend.name}'); move one with toBackend()`);
  if (debugLevel() >= 1) debugLine(`[fon] ${op} on ${b.name}: ${ts.map((t) => `${t.dtype}${fmt(t.shape)}`).join(' ')}`);
  return b;
}

export function wrap(b: Backend, h: unknown, shape: readonly number[], dtype: DType): Tensor {
  return fromHandle(b, h, shape, dtype);
}

export function fmt(shape: readonly number[]): string { return `[${shape.join(', ')}]`; }

/** NumPy broadcasting of several shapes, or ShapeError naming the op and the shapes. */
export function broadcastShapes(op: string, ...shapes: (readonly number[])[]): number[] {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const j = rank - s.length + i;
      const d = s[i];
      if (out[j] === 1) out[j] = d;
      else if (d !== 1 && d !== out[j]) throw new ShapeError(`${op}: shapes ${shapes.map(fmt).join(' and ')} cannot be broadcast together (axis ${j}: ${out[j]} vs ${d})`);
    }
  }
  return out;
}

/** An axis in [-rank, rank) → [0, rank), or ArgumentError. */
export function normAxis(op: string, axis: number, rank: number): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) throw new ArgumentError(`${op}: axis ${axis} out of range for a tensor of rank ${rank}`);
  return axis < 0 ? axis + rank : axis;
}

export function requireFloat(op: string, t: Tensor): void {
  if (!isFloat(t.dtype)) throw new DTypeError(`${op}: expected a float tensor (f32, f16, bf16), got ${t.dtype}`);
}

export function requireDType(op: string, what: string, t: Tensor, ...dtypes: DType[]): void {
  if (!dtypes.includes(t.dtype)) throw new DTypeError(`${op}: ${what} must be ${dtypes.join(' or ')}, got ${t.dtype}`);
}

export function requireSameDType(op: string, a: Tensor, b: Tensor): void {
  if (a.dtype !== b.dtype) throw new DTypeError(`${op}: dtypes differ (${a.dtype} and ${b.dtype}); cast one first`);
}

/** Row-major strides of a contiguous shape. */
export function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) { s[i] = acc; acc *= shape[i]; }
  return s;
}

/** Returns `result` after disposing the temporaries an op made on the way (graphs keep what they saved). */
export function disposing<T>(result: T, ...temps: Tensor[]): T {
  for (const t of temps) if ((t as unknown) !== result) t.dispose();
  return result;
}
