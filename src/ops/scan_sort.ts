/** Scans (cumsum, cummax, cummin) and sorting (sort, argsort, topk) along an axis, with gradients. */
import { ArgumentError } from '../errors.ts';
import type { ScanOp } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { flip, moveAxisLast, narrow, permute } from './layout.ts';
import { scatterAdd } from './indexing.ts';
import { disposing, normAxis, ref, wrap } from './run.ts';
import { zerosLike } from './creation.ts';

/** Runs a two-output last-axis kernel on x with `axis` moved last, and moves both results back. */
function lastAxis(x: Tensor, axis: number, run: (m: Tensor, rows: number, cols: number) => [Tensor, Tensor | null]): [Tensor, Tensor | null] {
  const [moved, inv] = moveAxisLast(x, axis);
  const cols = moved.shape[moved.rank - 1];
  const rows = cols === 0 ? 0 : moved.size / cols;
  const [v, i] = run(moved, rows, cols);
  if (!inv) return [v, i];
  const res: [Tensor, Tensor | null] = [permute(v, inv), i && permute(i, inv)];
  return disposing(res, v, ...(i ? [i] : []), moved);
}

function scanRaw(x: Tensor, op: ScanOp, axis: number): [Tensor, Tensor | null] {
  const a = normAxis(op, axis, x.rank);
  return lastAxis(x, a, (m, rows, cols) => {
    const b = m.backend;
    const [vh, ih] = b.scan(ref(m), op, rows, cols);
    return [wrap(b, vh, m.shape, m.dtype), ih === null ? null : wrap(b, ih, m.shape, 'i32')];
  });
}

/** Inclusive running sum along `axis`. */
export function cumsum(x: Tensor, axis = -1): Tensor {
  const a = normAxis('cumsum', axis, x.rank);
  const [y] = scanRaw(x, 'sum', a);
  // d/dx of a prefix sum is a suffix sum of the gradient.
  return record('cumsum', y, [x], (g) => [flip(cumsum(flip(g, [a]), a), [a])]);
}

function cumExtreme(op: 'max' | 'min', x: Tensor, axis: number): { values: Tensor; indices: Tensor } {
  const a = normAxis(op === 'max' ? 'cummax' : 'cummin', axis, x.rank);
  const [values, indices] = scanRaw(x, op, a);
  record(op === 'max' ? 'cummax' : 'cummin', values, [x], (g, [xs, idx]) => [scatterAdd(zerosLike(xs), idx, g, a)], [x, indices!]);
  return { values, indices: indices! };
}

/** Running maximum along `axis`, with the (latest) index where each was taken, as PyTorch's cummax. */
export const cummax = (x: Tensor, axis = -1) => cumExtreme('max', x, axis);
export const cummin = (x: Tensor, axis = -1) => cumExtreme('min', x, axis);

export interface SortOptions { descending?: boolean }

/** Stable sort along `axis`; values and i32 indices into the input. */
export function sort(x: Tensor, axis = -1, opts: SortOptions = {}): { values: Tensor; indices: Tensor } {
  const a = normAxis('sort', axis, x.rank);
  const [values, indices] = lastAxis(x, a, (m, rows, cols) => {
    const b = m.backend;
    const [vh, ih] = b.sort(ref(m), rows, cols, !!opts.descending);
    return [wrap(b, vh, m.shape, m.dtype), wrap(b, ih, m.shape, 'i32')];
  });
  if (x.isFloat) record('sort', values, [x], (g, [xs, idx]) => [scatterAdd(zerosLike(xs), idx, g, a)], [x, indices!]);
  return { values, indices: indices! };
}

export function argsort(x: Tensor, axis = -1, opts: SortOptions = {}): Tensor {
  const { values, indices } = sort(x, axis, opts);
  values.dispose();
  return indices;
}

/** The k largest (or smallest) entries along `axis`, sorted, with their indices. */
export function topk(x: Tensor, k: number, axis = -1, opts: { largest?: boolean } = {}): { values: Tensor; indices: Tensor } {
  const a = normAxis('topk', axis, x.rank);
  if (!Number.isInteger(k) || k < 0 || k > x.shape[a]) throw new ArgumentError(`topk: k = ${k} out of range [0, ${x.shape[a]}] for axis ${axis}`);
  const s = sort(x, a, { descending: opts.largest ?? true });
  const res = { values: narrow(s.values, a, 0, k), indices: narrow(s.indices, a, 0, k) };
  return disposing(res, s.values, s.indices);
}
