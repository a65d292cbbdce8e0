/** Reductions over axes (sum, mean, max, min) and the row-wise softmax family, with gradients. */
import type { ReduceOp } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { broadcastTo, moveAxisLast, permute, reshape } from './layout.ts';
import { div, eq, mul, sub, exp } from './elementwise.ts';
import { disposing, fmt, normAxis, ref, requireFloat, sizeOf, wrap } from './run.ts';
import { ArgumentError } from '../errors.ts';

export interface ReduceOptions { keepDims?: boolean }

function normAxes(op: string, x: Tensor, axes: number | readonly number[] | undefined): number[] {
  const list = axes === undefined ? x.shape.map((_, i) => i) : typeof axes === 'number' ? [axes] : [...axes];
  const out = [...new Set(list.map((a) => normAxis(op, a, x.rank)))].sort((a, b) => a - b);
  if (out.length !== list.length) throw new ArgumentError(`${op}: repeated axis in ${fmt(list)}`);
  return out;
}

/** Runs the last-axis reduce kernel after moving `axes` to the end; returns the keepDims shape too. */
function reduceRaw(op: ReduceOp, x: Tensor, axes: number[]): { out: Tensor; kept: number[] } {
  const rest = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
  const moved = axes.every((a, i) => a === x.rank - axes.length + i) ? x : permute(x, [...rest, ...axes]);
  const cols = axes.reduce((s, a) => s * x.shape[a], 1);
  const rows = rest.reduce((s, a) => s * x.shape[a], 1);
  const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const b = x.backend;
  if (cols === 0 && op !== 'sum') throw new ArgumentError(`${op}: cannot reduce over an empty axis of ${fmt(x.shape)}`);
  const h = cols === 0 ? b.fill(rows, 0, x.dtype) : b.reduce(ref(moved), op, rows, cols);
  if (moved !== x) moved.dispose();
  return { out: wrap(b, h, kept, x.dtype), kept };
}

function finishShape(t: Tensor, x: Tensor, axes: number[], keepDims: boolean): Tensor {
  if (keepDims) return t;
  const r = reshape(t, x.shape.filter((_, i) => !axes.includes(i)));
  t.dispose();
  return r;
}

export function sum(x: Tensor, axes?: number | readonly number[], opts: ReduceOptions = {}): Tensor {
  const as = normAxes('sum', x, axes);
  const { out } = reduceRaw('sum', x, as);
  const r = record('sum', out, [x], (g) => [broadcastTo(g, x.shape)]);
  return finishShape(r, x, as, !!opts.keepDims);
}

export function mean(x: Tensor, axes?: number | readonly number[], opts: ReduceOptions = {}): Tensor {
  requireFloat('mean', x);
  const as = normAxes('mean', x, axes);
  const n = as.reduce((s, a) => s * x.shape[a], 1);
  const s = sum(x, as, opts);
  const r = div(s, n);
  s.dispose();
  return r;
}

function extreme(op: 'max' | 'min', x: Tensor, axes: number | readonly number[] | undefined, opts: ReduceOptions): Tensor {
  const as = normAxes(op, x, axes);
  const { out } = reduceRaw(op, x, as);
  // Gradient split evenly among tied extremes (as PyTorch's amax/amin).
  const r = record(op, out, [x], (g, [xs, ys]) => {
    const mask = eq(xs, ys);
    const count = sum(mask, as, { keepDims: true });
    return [div(mul(mask, g), count)];
  }, [x, out]);
  return finishShape(r, x, as, !!opts.keepDims);
}

export const max = (x: Tensor, axes?: number | readonly number[], opts: ReduceOptions = {}) => extreme('max', x, axes, opts);
export const min = (x: Tensor, axes?: number | readonly number[], opts: ReduceOptions = {}) => extreme('min', x, axes, opts);

/** Runs a last-axis row kernel on x after moving `axis` last, and moves the axis back. */
function alongAxis(x: Tensor, axis: number, kernel: (moved: Tensor, rows: number, cols: number) => Tensor): Tensor {
  const [moved, inv] = moveAxisLast(x, axis);
  const cols = moved.shape[moved.rank - 1] ?? 1;
  const rows = cols === 0 ? 0 : moved.size / cols;
  const y = kernel(moved, rows, cols);
  if (!inv) return y;
  return disposing(permute(y, inv), y, moved);
}

/** softmax along `axis` (default last), computed in f32. */
export function softmax(x: Tensor, axis = -1): Tensor {
  requireFloat('softmax', x);
  return alongAxis(x, axis, (m, rows, cols) => {
    const b = m.backend;
    const y = wrap(b, b.softmax(ref(m), rows, cols), m.shape, m.dtype);
    return record('softmax', y, [m], (g, [ys]) => [wrap(b, b.softmaxBackward(ref(ys), ref(g), rows, cols), ys.shape, ys.dtype)], [y]);
  });
}

/** log Σ exp along `axis`, stable. */
export function logsumexp(x: Tensor, axis = -1, opts: ReduceOptions = {}): Tensor {
  requireFloat('logsumexp', x);
  const a = normAxis('logsumexp', axis, x.rank);
  const [moved] = moveAxisLast(x, a);
  const cols = x.shape[a];
  // Counted from the other axes, not size / cols: an empty axis still has rows (each gives −∞).
  const rows = sizeOf(moved.shape.slice(0, -1));
  const b = x.backend;
  const keptLast = [...moved.shape.slice(0, -1), 1];
  // An empty axis sums nothing: log 0 = −∞ on every backend, without running a kernel.
  const y = wrap(b, cols === 0 ? b.fill(rows, -Infinity, x.dtype) : b.logsumexp(ref(moved), rows, cols), keptLast, x.dtype);
  const r = record('logsumexp', y, [moved], (g, [ms, ys]) => [mul(exp(sub(ms, ys)), g)], [moved, y]);
  const kept = x.shape.map((d, i) => (i === a ? 1 : d));
  const shaped = reshape(r, opts.keepDims ? kept : x.shape.filter((_, i) => i !== a));
  return disposing(shaped, r, ...(moved !== x ? [moved] : []));
}

/** log softmax = x − logsumexp(x). */
export function logSoftmax(x: Tensor, axis = -1): Tensor {
  const lse = logsumexp(x, axis, { keepDims: true });
  return disposing(sub(x, lse), lse);
}
