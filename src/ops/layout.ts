/** Layout ops: reshape (shares storage), permute, slice, concat, flip, broadcast — and their gradients. */
import { ArgumentError, ShapeError } from '../errors.ts';
import { record } from '../tensor/autograd.ts';
import { shareStorage, type Tensor } from '../tensor/tensor.ts';
import { backendOf, broadcastShapes, disposing, fmt, normAxis, ref, requireSameDType, sameShape, sizeOf, stridesOf, wrap } from './run.ts';
import { sum } from './reduce.ts';
import { zeros } from './creation.ts';

/** Same data, new shape; one dimension may be -1. Free: shares storage. */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const s = [...shape];
  const free = s.indexOf(-1);
  if (free >= 0) {
    const known = s.reduce((a, d, i) => (i === free ? a : a * d), 1);
    if (known === 0 || x.size % known !== 0) throw new ShapeError(`reshape: cannot reshape ${fmt(x.shape)} into ${fmt(shape)}`);
    s[free] = x.size / known;
  }
  if (s.some((d) => !Number.isInteger(d) || d < 0) || sizeOf(s) !== x.size) throw new ShapeError(`reshape: cannot reshape ${fmt(x.shape)} (${x.size} elements) into ${fmt(shape)}`);
  const out = shareStorage(x, s);
  return record('reshape', out, [x], (g) => [reshape(g, x.shape)]);
}

export function flatten(x: Tensor): Tensor { return reshape(x, [x.size]); }

export function unsqueeze(x: Tensor, axis: number): Tensor {
  const a = normAxis('unsqueeze', axis, x.rank + 1);
  const s = [...x.shape]; s.splice(a, 0, 1);
  return reshape(x, s);
}

export function squeeze(x: Tensor, axis?: number): Tensor {
  if (axis === undefined) return reshape(x, x.shape.filter((d) => d !== 1));
  const a = normAxis('squeeze', axis, x.rank);
  if (x.shape[a] !== 1) throw new ShapeError(`squeeze: axis ${axis} of ${fmt(x.shape)} has size ${x.shape[a]}, expected 1`);
  const s = [...x.shape]; s.splice(a, 1);
  return reshape(x, s);
}

/** Reorders axes: out.shape[i] = x.shape[perm[i]]. Copies. */
export function permute(x: Tensor, perm: readonly number[]): Tensor {
  if (perm.length !== x.rank || [...perm].map((p) => normAxis('permute', p, x.rank)).sort((a, b) => a - b).some((p, i) => p !== i)) {
    throw new ArgumentError(`permute: ${fmt(perm)} is not a permutation of the axes of a rank-${x.rank} tensor`);
  }
  const p = perm.map((a) => normAxis('permute', a, x.rank));
  if (p.every((a, i) => a === i)) return reshape(x, x.shape);
  const st = stridesOf(x.shape);
  const outShape = p.map((a) => x.shape[a]);
  const b = x.backend;
  const out = wrap(b, b.copyStrided(ref(x), { outShape, strides: p.map((a) => st[a]), offset: 0 }), outShape, x.dtype);
  const inv = new Array<number>(p.length);
  p.forEach((a, i) => { inv[a] = i; });
  return record('permute', out, [x], (g) => [permute(g, inv)]);
}

/** Swaps two axes (default: the last two). */
export function transpose(x: Tensor, a = -2, b = -1): Tensor {
  const p = x.shape.map((_, i) => i);
  const i = normAxis('transpose', a, x.rank), j = normAxis('transpose', b, x.rank);
  [p[i], p[j]] = [p[j], p[i]];
  return permute(x, p);
}

/** Moves `axis` last (a no-op view when it already is); returns the inverse permutation too. */
export function moveAxisLast(x: Tensor, axis: number): [Tensor, number[] | null] {
  const a = normAxis('moveAxisLast', axis, x.rank);
  if (a === x.rank - 1) return [x, null];
  const p = x.shape.map((_, i) => i).filter((i) => i !== a).concat([a]);
  const inv = new Array<number>(p.length);
  p.forEach((v, i) => { inv[v] = i; });
  return [permute(x, p), inv];
}

/**
 * x[starts[i] : starts[i]+sizes[i]] along each axis (axes not given are taken whole).
 * A size of -1 means "to the end". Copies.
 */
export function slice(x: Tensor, starts: readonly number[], sizes?: readonly number[]): Tensor {
  requireIntegers('slice', 'start', starts);
  if (sizes) requireIntegers('slice', 'size', sizes);
  const st = x.shape.map((d, i) => {
    const s = starts[i] ?? 0;
    return s < 0 ? s + d : s;
  });
  const sz = x.shape.map((d, i) => (sizes?.[i] === undefined || sizes[i] === -1 ? d - st[i] : sizes[i]));
  x.shape.forEach((d, i) => {
    if (st[i] < 0 || sz[i] < 0 || st[i] + sz[i] > d) throw new ShapeError(`slice: start ${fmt(starts)} size ${fmt(sizes ?? [])} out of bounds for shape ${fmt(x.shape)}`);
  });
  if (sameShape(sz, x.shape)) return reshape(x, x.shape);
  const strides = stridesOf(x.shape);
  const offset = st.reduce((o, s, i) => o + s * strides[i], 0);
  const b = x.backend;
  const args = { outShape: sz, strides, offset };
  const out = wrap(b, b.copyStrided(ref(x), args), sz, x.dtype);
  return record('slice', out, [x], (g) => {
    const base = zeros(x.shape, { dtype: g.dtype, backend: g.backend });
    return [wrap(b, b.assignStrided(ref(base), ref(g), args), x.shape, g.dtype)];
  });
}

/** ArgumentError naming the op and the first entry of `values` that is not an integer. */
function requireIntegers(op: string, what: string, values: readonly number[]): void {
  values.forEach((v, i) => {
    if (!Number.isInteger(v)) throw new ArgumentError(`${op}: ${what} ${v} (at position ${i} of ${fmt(values)}) must be an integer`);
  });
}

/** Slice along one axis: x[..., start:end, ...]. */
export function narrow(x: Tensor, axis: number, start: number, length: number): Tensor {
  if (!Number.isInteger(start)) throw new ArgumentError(`narrow: start ${start} must be an integer`);
  if (!Number.isInteger(length)) throw new ArgumentError(`narrow: length ${length} must be an integer`);
  const a = normAxis('narrow', axis, x.rank);
  const starts = x.shape.map((_, i) => (i === a ? start : 0));
  const sizes = x.shape.map((d, i) => (i === a ? length : d));
  return slice(x, starts, sizes);
}

/** Joins tensors along an axis; all other dimensions must agree. */
export function concat(xs: readonly Tensor[], axis = 0): Tensor {
  if (xs.length === 0) throw new ArgumentError('concat: needs at least one tensor');
  const b = backendOf('concat', ...xs);
  const a = normAxis('concat', axis, xs[0].rank);
  for (const t of xs) {
    requireSameDType('concat', xs[0], t);
    if (t.rank !== xs[0].rank || t.shape.some((d, i) => i !== a && d !== xs[0].shape[i])) {
      throw new ShapeError(`concat: shapes ${xs.map((t) => fmt(t.shape)).join(', ')} differ outside axis ${axis}`);
    }
  }
  const outer = sizeOf(xs[0].shape.slice(0, a));
  const inners = xs.map((t) => sizeOf(t.shape.slice(a)));
  const outShape = [...xs[0].shape];
  outShape[a] = xs.reduce((s, t) => s + t.shape[a], 0);
  const out = wrap(b, b.concat(xs.map(ref), outer, inners), outShape, xs[0].dtype);
  return record('concat', out, xs, (g) => {
    let at = 0;
    return xs.map((t) => { const piece = narrow(g, a, at, t.shape[a]); at += t.shape[a]; return piece; });
  });
}

export function stack(xs: readonly Tensor[], axis = 0): Tensor {
  const us = xs.map((t) => unsqueeze(t, axis));
  return disposing(concat(us, axis), ...us);
}

/** Splits along an axis into pieces of the given sizes. */
export function split(x: Tensor, sizes: readonly number[], axis = 0): Tensor[] {
  const a = normAxis('split', axis, x.rank);
  for (const n of sizes) if (!Number.isInteger(n) || n < 0) throw new ArgumentError(`split: size ${n} in ${fmt(sizes)} must be a non-negative integer`);
  if (sizes.reduce((s, v) => s + v, 0) !== x.shape[a]) throw new ShapeError(`split: sizes ${fmt(sizes)} do not add up to ${x.shape[a]} (axis ${axis} of ${fmt(x.shape)})`);
  let at = 0;
  return sizes.map((n) => { const p = narrow(x, a, at, n); at += n; return p; });
}

/** Reverses the order along the given axes. */
export function flip(x: Tensor, axes: readonly number[]): Tensor {
  const as = axes.map((a) => normAxis('flip', a, x.rank));
  const st = stridesOf(x.shape);
  let offset = 0;
  const strides = st.map((s, i) => {
    if (!as.includes(i)) return s;
    offset += (x.shape[i] - 1) * s;
    return -s;
  });
  const b = x.backend;
  const out = wrap(b, b.copyStrided(ref(x), { outShape: x.shape, strides, offset: x.size === 0 ? 0 : offset }), x.shape, x.dtype);
  return record('flip', out, [x], (g) => [flip(g, as)]);
}

/** Materialises x broadcast to `shape`. */
export function broadcastTo(x: Tensor, shape: readonly number[]): Tensor {
  const target = broadcastShapes('broadcastTo', x.shape, shape);
  if (!sameShape(target, shape)) throw new ShapeError(`broadcastTo: ${fmt(x.shape)} cannot be broadcast to ${fmt(shape)}`);
  if (sameShape(x.shape, shape)) return reshape(x, shape);
  const st = stridesOf(x.shape);
  const strides = shape.map((_, j) => {
    const i = j - (shape.length - x.rank);
    return i < 0 || x.shape[i] === 1 ? 0 : st[i];
  });
  const b = x.backend;
  const out = wrap(b, b.copyStrided(ref(x), { outShape: shape, strides, offset: 0 }), shape, x.dtype);
  return record('broadcastTo', out, [x], (g) => [sumTo(g, x.shape)]);
}

/** Sums a broadcast result back down to `shape` (the gradient of broadcasting). */
export function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(g.shape, shape)) return g;
  const lead = g.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < g.rank; i++) if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) axes.push(i);
  const s = sum(g, axes);
  return disposing(reshape(s, shape), s);
}
