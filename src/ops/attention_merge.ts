/**
 * The exact merge of attention over disjoint key sets (the flash-decoding combine; Focus's set A and
 * set B, specs/focus_spot.md A4): each part gives out (B, H, N, D) and its per-row logsumexp
 * lse (B, H, N) over its own keys, and the attention over the union of the keys is
 *
 *   out = Σ_i e^{lse_i − M} out_i / Σ_i e^{lse_i − M},   M = max_i lse_i   (in f32),
 *
 * a part whose row saw no key (lse −∞, or below −1e30) weighing 0 there; a row that saw no key in
 * any part comes out NaN (0/0), as no softmax over nothing is defined. A part may carry a row list
 * rows (S, M) i32 (S dividing B·H, one list per group of B·H/S consecutive (b, h): a batch entry's
 * heads): output row i of (b, h) reads the part's row rows[⌊(b·H + h)/(B·H/S)⌋, i] of its N, so a
 * part laid out in another order (Focus's group-sorted rows) is read in place, not gathered first.
 *
 * Without gradients the parts meet in one fused pass per part after the first (Backend.mergeLse:
 * read each part once, write out once); with a part that needs a gradient, through the elementwise
 * ops (gatherRows for the lists), which record it.
 */
import { ShapeError } from '../errors.ts';
import { isGradEnabled } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cast } from './cast.ts';
import { add, div, exp, gt, maximum, mul, sub, where } from './elementwise.ts';
import { gatherRows } from './indexing.ts';
import { reshape } from './layout.ts';
import { backendOf, fmt, ref, requireDType, wrap, sameShape } from './run.ts';

/** A part: out (B, H, N, D), lse (B, H, N), and optionally its row list (S, M) i32. */
export type MergePartInput = readonly [Tensor, Tensor] | readonly [Tensor, Tensor, Tensor];

/** The combine of attention parts over disjoint keys → (B, H, M, D) in `dtype` (see the file's comment). */
export function mergeByLse(parts: readonly MergePartInput[], dtype: Tensor['dtype']): Tensor {
  if (parts.length === 0) throw new ShapeError('mergeByLse: no parts to merge');
  const [b, h, , d] = parts[0][0].shape;
  const rowsOf = (p: MergePartInput) => (p.length === 3 ? p[2].shape[1] : p[0].shape[2]);
  const m = rowsOf(parts[0]);
  parts.forEach((p, i) => {
    const [o, l, r] = p;
    const n = o.shape[2];
    if (o.rank !== 4 || o.shape[0] !== b || o.shape[1] !== h || o.shape[3] !== d) throw new ShapeError(`mergeByLse: part ${i}'s out ${fmt(o.shape)} must be (${b}, ${h}, N, ${d})`);
    if (!sameShape(l.shape, [b, h, n])) throw new ShapeError(`mergeByLse: part ${i}'s lse ${fmt(l.shape)} must be (${b}, ${h}, ${n})`);
    if (r) {
      requireDType('mergeByLse', 'rows', r, 'i32');
      if (r.rank !== 2 || (b * h) % r.shape[0] !== 0) throw new ShapeError(`mergeByLse: part ${i}'s rows ${fmt(r.shape)} must be (S, M) with S dividing ${b} × ${h}`);
    }
    if (rowsOf(p) !== m) throw new ShapeError(`mergeByLse: part ${i} gives ${rowsOf(p)} rows; part 0 gives ${m}`);
  });
  const needsGrad = isGradEnabled() && parts.some((p) => p[0].requiresGrad || p[1].requiresGrad);
  // One part is only its rows picked out (the recorded form: a row that saw no key comes out NaN there too).
  return needsGrad || parts.length === 1 ? mergeRecorded(parts, b, h, m, dtype) : mergeFused(parts, b, h, m, d, dtype);
}

/** A part with its rows picked out of its own layout (rows list, if any) into plain order (B, H, M, ·). */
function inPlainOrder(p: MergePartInput, b: number, h: number, m: number): MergePartInput {
  const [o, l, r] = p;
  return r ? [gatherRows(o, r, 2), reshape(gatherRows(reshape(l, [b, h, o.shape[2], 1]), r, 2), [b, h, m])] : [o, l];
}

/** Part by part through Backend.mergeLse: the running merge in f32, the last pass in `dtype`. */
function mergeFused(parts: readonly MergePartInput[], b: number, h: number, m: number, d: number, dtype: Tensor['dtype']): Tensor {
  const be = backendOf('mergeByLse', ...parts.flatMap((p) => [...p]));
  const part = (p: MergePartInput) => ({ out: ref(p[0]), lse: ref(p[1]), rows: p[2] ? ref(p[2]) : null, n: p[0].shape[2], share: p[2] ? (b * h) / p[2].shape[0] : 1 });
  let acc: MergePartInput = parts[0];
  for (let i = 1; i < parts.length; i++) {
    let a = part(acc);
    const c = part(parts[i]);
    // Two lists grouped differently, which one pass cannot read: the first part's rows picked out first.
    if (a.rows && c.rows && a.share !== c.share) a = part(acc = inPlainOrder(acc, b, h, m));
    const last = i === parts.length - 1;
    const [oh, lh] = be.mergeLse(a, c, { o: b * h, m, d, share: a.rows ? a.share : c.share, dtype: last ? dtype : 'f32' });
    acc = [wrap(be, oh, [b, h, m, d], last ? dtype : 'f32'), wrap(be, lh, [b, h, m], 'f32')];
  }
  return acc[0];
}

/** The same merge through recorded elementwise ops (gradients flow to every part's out and lse). */
function mergeRecorded(parts: readonly MergePartInput[], b: number, h: number, m: number, dtype: Tensor['dtype']): Tensor {
  const plain = parts.map((p) => inPlainOrder(p, b, h, m));
  const lses = plain.map(([, l]) => reshape(l, [b, h, m, 1]));
  const seen = lses.map((l) => gt(l, -1e30)); // a row that saw no key of a part: −∞ (or −BIG) there
  const safe = lses.map((l, i) => where(seen[i], l, -1e30));
  const top = safe.reduce((a, l) => maximum(a, l));
  let num: Tensor | undefined, den: Tensor | undefined;
  plain.forEach(([o], i) => {
    const wgt = where(seen[i], exp(sub(safe[i], top)), 0);
    const term = mul(where(seen[i], o.dtype === 'f32' ? o : cast(o, 'f32'), 0), wgt);
    num = num ? add(num, term) : term;
    den = den ? add(den, wgt) : wgt;
  });
  const out = div(num!, den!);
  return dtype === 'f32' ? out : cast(out, dtype);
}
