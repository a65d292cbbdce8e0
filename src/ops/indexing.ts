/**
 * Index ops: gather and scatter-add along an axis, embedding lookup, and row gathers through
 * distinct rows whose transpose is a gather too (gatherDistinctRows / scatterDistinctRows, with
 * invertRows) — with gradients.
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import { record } from '../tensor/autograd.ts';
import { noGrad } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { zeros, zerosLike } from './creation.ts';
import { broadcastTo, concat, reshape } from './layout.ts';
import { backendOf, fmt, normAxis, ref, requireDType, requireSameDType, sizeOf, wrap, sameShape } from './run.ts';

function axisView(x: Tensor, a: number): [number, number, number] {
  return [sizeOf(x.shape.slice(0, a)), x.shape[a], sizeOf(x.shape.slice(a + 1))];
}

function checkIndexShape(op: string, x: Tensor, index: Tensor, a: number): void {
  if (index.rank !== x.rank || index.shape.some((d, i) => i !== a && d !== x.shape[i])) {
    throw new ShapeError(`${op}: index shape ${fmt(index.shape)} must equal input shape ${fmt(x.shape)} except along axis ${a}`);
  }
}

/** out[…, j, …] = x[…, index[…, j, …], …] along `axis` (PyTorch's gather with equal outer shapes). */
export function gather(x: Tensor, index: Tensor, axis: number): Tensor {
  const b = backendOf('gather', x, index);
  requireDType('gather', 'index', index, 'i32');
  const a = normAxis('gather', axis, x.rank);
  checkIndexShape('gather', x, index, a);
  const [o, n, inner] = axisView(x, a);
  const m = index.shape[a];
  const out = wrap(b, b.gather(ref(x), ref(index), o, n, m, inner), index.shape, x.dtype);
  return record('gather', out, [x], (g, [idx]) => [scatterAddRaw(zerosLike(x, { dtype: g.dtype, backend: g.backend }), idx, g, a)], [index]);
}

/**
 * Rows of x along `axis`, one list per group of leading entries: rows i32 (S, M), where S divides
 * the product O of x's dimensions before `axis`, and the o-th leading entry reads list ⌊o/(O/S)⌋
 * (x (B, H, T, D), axis 2, rows (B, M): each batch entry's heads take its list) → x's shape with
 * M along `axis`. One pass, an index of S·M words (gather's is the output's size). Its gradient is
 * gather's (the rows scatter-added back).
 */
export function gatherRows(x: Tensor, rows: Tensor, axis: number): Tensor {
  const b = backendOf('gatherRows', x, rows);
  requireDType('gatherRows', 'rows', rows, 'i32');
  const a = normAxis('gatherRows', axis, x.rank);
  const [o, n, inner] = axisView(x, a);
  if (rows.rank !== 2 || rows.shape[0] < 1 || o % rows.shape[0] !== 0) {
    throw new ShapeError(`gatherRows: rows ${fmt(rows.shape)} must be (S, M) with S dividing the ${o} entries before axis ${a} of ${fmt(x.shape)}`);
  }
  const [s, m] = rows.shape;
  const shape = x.shape.map((d, i) => (i === a ? m : d));
  const out = wrap(b, b.gatherRows(ref(x), ref(rows), o, n, m, inner, o / s), shape, x.dtype);
  return record('gatherRows', out, [x], (g, [r]) => {
    // The full index gather's transpose takes: each list broadcast over its group and the inner dims.
    const idx = reshape(broadcastTo(reshape(r, [s, 1, m, 1]), [s, o / s, m, inner]), shape);
    return [scatterAddRaw(zerosLike(x, { dtype: g.dtype, backend: g.backend }), idx, g, a)];
  }, [rows]);
}

/**
 * The inverse of row lists: rows i32 (S, M), distinct within each list and in [0, n) → i32 (S, n)
 * holding for each row r the place j where rows[s, j] = r, or M where r is not listed. No gradient.
 * The CPU refuses a repeated or out-of-range row (ArgumentError); the GPU does not check.
 */
export function invertRows(rows: Tensor, n: number): Tensor {
  const b = backendOf('invertRows', rows);
  requireDType('invertRows', 'rows', rows, 'i32');
  if (rows.rank !== 2) throw new ShapeError(`invertRows: rows ${fmt(rows.shape)} must be (S, M)`);
  const [lists, m] = rows.shape;
  if (!Number.isInteger(n) || n < m) throw new ArgumentError(`invertRows: n ${n} must be an integer ≥ M = ${m} (the rows of a list are distinct, in [0, n))`);
  return wrap(b, b.invertRows(ref(rows), { lists, m, n }), [lists, n], 'i32');
}

/** rows (S, M) and inverse (S, N) for axis `a` of `shape`, whose length is N: the checks both distinct-row gathers share. */
function checkDistinct(op: string, shape: readonly number[], rows: Tensor, inverse: Tensor, a: number, n: number): void {
  requireDType(op, 'rows', rows, 'i32');
  requireDType(op, 'inverse', inverse, 'i32');
  const o = sizeOf(shape.slice(0, a));
  if (rows.rank !== 2 || inverse.rank !== 2 || rows.shape[0] !== inverse.shape[0] || inverse.shape[1] !== n || rows.shape[0] < 1 || o % rows.shape[0] !== 0) {
    throw new ShapeError(`${op}: rows ${fmt(rows.shape)} and inverse ${fmt(inverse.shape)} must be (S, M) and (S, ${n}) with S dividing the ${o} entries before axis ${a} of ${fmt(shape)}`);
  }
}

/**
 * gatherRows for rows that are distinct within each list, given their inverse (invertRows): the
 * same forward, and a gradient that is a gather too (scatterDistinctRows), where gatherRows'
 * gradient scatter-adds, whose WebGPU kernel walks every candidate for every output element
 * (O(N·M) a column). x (…, N, …) along `axis`, rows (S, M), inverse (S, N).
 */
export function gatherDistinctRows(x: Tensor, rows: Tensor, inverse: Tensor, axis: number): Tensor {
  const b = backendOf('gatherDistinctRows', x, rows, inverse);
  const a = normAxis('gatherDistinctRows', axis, x.rank);
  checkDistinct('gatherDistinctRows', x.shape, rows, inverse, a, x.shape[a]);
  const [o, n, inner] = axisView(x, a);
  const [s, m] = rows.shape;
  const shape = x.shape.map((d, i) => (i === a ? m : d));
  const out = wrap(b, b.gatherRows(ref(x), ref(rows), o, n, m, inner, o / s), shape, x.dtype);
  return record('gatherDistinctRows', out, [x], (g, [r, inv]) => [scatterDistinctRows(g, r, inv, a)], [rows, inverse]);
}

/**
 * The transpose of gatherDistinctRows: y (…, M, …) along `axis` → (…, N, …) with row r = y's row
 * inverse[s, r], or zeros where r is not listed (N = inverse.shape[1]). A gather (of y with a zero
 * row appended), and its gradient is gatherDistinctRows.
 */
export function scatterDistinctRows(y: Tensor, rows: Tensor, inverse: Tensor, axis: number): Tensor {
  const b = backendOf('scatterDistinctRows', y, rows, inverse);
  const a = normAxis('scatterDistinctRows', axis, y.rank);
  if (rows.rank !== 2 || inverse.rank !== 2) throw new ShapeError(`scatterDistinctRows: rows ${fmt(rows.shape)} and inverse ${fmt(inverse.shape)} must be (S, M) and (S, N)`);
  const n = inverse.shape[1];
  if (y.shape[a] !== rows.shape[1]) throw new ShapeError(`scatterDistinctRows: y ${fmt(y.shape)} has ${y.shape[a]} rows along axis ${a}, but rows ${fmt(rows.shape)} lists ${rows.shape[1]}`);
  const shape = y.shape.map((d, i) => (i === a ? n : d));
  checkDistinct('scatterDistinctRows', shape, rows, inverse, a, n);
  const m = y.shape[a];
  const out = noGrad(() => {
    const zero = zeros(y.shape.map((d, i) => (i === a ? 1 : d)), { dtype: y.dtype, backend: b });
    const withZero = concat([y, zero], a); // row M is the zero row
    const [o, , inner] = axisView(withZero, a);
    const h = b.gatherRows(ref(withZero), ref(inverse), o, m + 1, n, inner, o / rows.shape[0]);
    zero.dispose();
    withZero.dispose();
    return wrap(b, h, shape, y.dtype);
  });
  return record('scatterDistinctRows', out, [y], (g, [r, inv]) => [gatherDistinctRows(g, r, inv, a)], [rows, inverse]);
}

function scatterAddRaw(base: Tensor, index: Tensor, src: Tensor, a: number): Tensor {
  const b = base.backend;
  const [o, n, inner] = axisView(base, a);
  return wrap(b, b.scatterAdd(ref(base), ref(index), ref(src), o, n, index.shape[a], inner), base.shape, base.dtype);
}

/** base + src added at rows index along `axis` (the transpose of gather). */
export function scatterAdd(base: Tensor, index: Tensor, src: Tensor, axis: number): Tensor {
  backendOf('scatterAdd', base, index, src);
  requireDType('scatterAdd', 'index', index, 'i32');
  requireSameDType('scatterAdd', base, src);
  const a = normAxis('scatterAdd', axis, base.rank);
  checkIndexShape('scatterAdd', base, index, a);
  if (!sameShape(src.shape, index.shape)) throw new ShapeError(`scatterAdd: src shape ${fmt(src.shape)} must equal index shape ${fmt(index.shape)}`);
  const out = scatterAddRaw(base, index, src, a);
  return record('scatterAdd', out, [base, src], (g, [idx]) => [g, gather(g, idx, a)], [index]);
}

/** Rows of `table` (V, C) picked by i32 `ids` of any shape → (…ids.shape, C). */
export function embedding(table: Tensor, ids: Tensor): Tensor {
  const b = backendOf('embedding', table, ids);
  requireDType('embedding', 'ids', ids, 'i32');
  if (table.rank !== 2) throw new ShapeError(`embedding: table must be (vocab, dim), got ${fmt(table.shape)}`);
  const [v, c] = table.shape;
  const out = wrap(b, b.embedding(ref(table), ref(ids), v, c), [...ids.shape, c], table.dtype);
  return record('embedding', out, [table], (g, [idx]) => [wrap(b, b.embeddingBackward(ref(g), ref(idx), v, c), table.shape, g.dtype)], [ids]);
}
