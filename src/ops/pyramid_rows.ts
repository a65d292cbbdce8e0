/**
 * Lighthouse's pooled gather and scatter-back as ops with gradients (Backend.pyramidGather,
 * pyramidScatter; specs/lighthouse_fon.md §1.3, §1.7): the listed rows of a pyramid over the tokens,
 * each pooled straight from its tokens, and the adjoint that delivers listed rows back to the tokens
 * they stand for. Each is the other's gradient (the same levels), so a layer's gather and scatter
 * are one pass each way, forward and backward, and the pyramid is never built whole.
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import type { PyramidLevel, PyramidRowsArgs } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireDType, requireFloat, wrap } from './run.ts';

export type { PyramidLevel } from '../backend/backend.ts';

/** Rows of the concatenated pyramid the levels make (they must tile [0, total) in order). */
function checkLevels(op: string, levels: readonly PyramidLevel[]): number {
  if (levels.length < 1) throw new ArgumentError(`${op}: no levels`);
  let at = 0;
  levels.forEach((l, i) => {
    const ints = { offset: l.offset, count: l.count, span: l.span, shift: l.shift };
    for (const [k, v] of Object.entries(ints)) if (!Number.isInteger(v) || v < 0) throw new ArgumentError(`${op}: level ${i + 1}'s ${k} ${v} must be an integer ≥ 0`);
    if (l.span < 1 || l.shift >= l.span) throw new ArgumentError(`${op}: level ${i + 1} has span ${l.span} and shift ${l.shift}; expected span ≥ 1 and 0 ≤ shift < span`);
    if (!Number.isFinite(l.scale)) throw new ArgumentError(`${op}: level ${i + 1}'s scale ${l.scale} must be finite`);
    if (l.offset !== at) throw new ArgumentError(`${op}: level ${i + 1} starts at row ${l.offset}; the levels before it end at ${at}`);
    at += l.count;
  });
  return at;
}

function args(op: string, shape: readonly number[], rows: Tensor, inverse: Tensor, levels: readonly PyramidLevel[], m: number): PyramidRowsArgs {
  requireDType(op, 'rows', rows, 'i32');
  requireDType(op, 'inverse', inverse, 'i32');
  const total = checkLevels(op, levels);
  const [b, h, n, d] = shape;
  if (shape.length !== 4 || rows.shape.length !== 2 || inverse.shape.length !== 2 || rows.shape[0] !== b * h || inverse.shape[0] !== b * h || rows.shape[1] !== m || inverse.shape[1] !== total) {
    throw new ShapeError(`${op}: tokens ${fmt(shape)}, rows ${fmt(rows.shape)} and inverse ${fmt(inverse.shape)} must be (B, H, N, D), (B·H, M) and (B·H, ${total})`);
  }
  return { lists: b * h, n, d, m, total, levels };
}

/**
 * x (B, H, N, D) → (B, H, M, D): row j of list (b, h) = scale_l · Σ x over the tokens of pyramid row
 * rows[b·H + h, j]. rows (B·H, M) i32, distinct within a list; inverse (B·H, total) their invertRows.
 */
export function pyramidGather(x: Tensor, rows: Tensor, inverse: Tensor, levels: readonly PyramidLevel[]): Tensor {
  const b = backendOf('pyramidGather', x, rows, inverse);
  requireFloat('pyramidGather', x);
  const m = rows.shape[1];
  const a = args('pyramidGather', x.shape, rows, inverse, levels, m);
  const out = wrap(b, b.pyramidGather(ref(x), ref(rows), a), [x.shape[0], x.shape[1], m, x.shape[3]], x.dtype);
  return record('pyramidGather', out, [x], (g, [r, inv]) => [pyramidScatter(g, r, inv, levels, x.shape[2])], [rows, inverse]);
}

/** The adjoint of pyramidGather: y (B, H, M, D) → (B, H, n, D), token t = Σ_l scale_l · y[listed row of level l holding t]. */
export function pyramidScatter(y: Tensor, rows: Tensor, inverse: Tensor, levels: readonly PyramidLevel[], n: number): Tensor {
  const b = backendOf('pyramidScatter', y, rows, inverse);
  requireFloat('pyramidScatter', y);
  if (!Number.isInteger(n) || n < 0) throw new ArgumentError(`pyramidScatter: n ${n} must be an integer ≥ 0`);
  if (y.rank !== 4) throw new ShapeError(`pyramidScatter: y ${fmt(y.shape)} must be (B, H, M, D)`);
  const m = y.shape[2];
  const shape = [y.shape[0], y.shape[1], n, y.shape[3]];
  const a = args('pyramidScatter', shape, rows, inverse, levels, m);
  const out = wrap(b, b.pyramidScatter(ref(y), ref(inverse), a), shape, y.dtype);
  return record('pyramidScatter', out, [y], (g, [r, inv]) => [pyramidGather(g, r, inv, levels)], [rows, inverse]);
}
