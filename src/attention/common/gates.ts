/**
 * Per-head scalar gates of the gated mechanisms (FoX's forget gate, FPA's walk): logits from the
 * block's normed input, the log-sigmoid, and the fp32 running sums they feed, in the training
 * forward (a cumsum over the sequence) and in the cached step (the cumsum continued from the
 * last cached row). Shapes: x (B, T, C), gates (B, heads, T) f32, cache state (B, heads, Tmax, 1).
 */
import { ArgumentError } from '../../errors.ts';
import { kvWrite } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { add, neg, softplus } from '../../ops/elementwise.ts';
import { narrow, permute, reshape } from '../../ops/layout.ts';
import { cumsum } from '../../ops/scan_sort.ts';
import type { Linear } from '../../nn/linear.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** t in f32 (a no-op when it already is): gates, walks and their sums stay in f32 (specs/fpa_depth.md §4.1). */
export const toF32 = (t: Tensor): Tensor => (t.dtype === 'f32' ? t : cast(t, 'f32'));

/** x (B, T, C) through `lin` (C → heads) → (B, heads, T) f32. */
export function headGates(lin: Linear, x: Tensor): Tensor {
  return toF32(permute(lin.forward(x), [0, 2, 1])); // (B, T, heads) → (B, heads, T)
}

/** log σ(a) = −softplus(−a), stable for large |a|. */
export const logSigmoid = (a: Tensor): Tensor => neg(softplus(neg(a)));

/**
 * Running sum along T of increments (B, heads, n) at positions pos … pos+n−1, continuing the
 * sums already cached in `state` (B, heads, Tmax, 1) at rows < pos; writes the n new sums into
 * `state` and returns them (B, heads, n). With pos = 0 it is the plain cumsum.
 */
export function continueCumsum(inc: Tensor, state: Tensor, pos: number): Tensor {
  const [b, h, n] = inc.shape;
  let s = cumsum(inc, -1); // (B, heads, n)
  if (pos > 0) s = add(s, reshape(narrow(state, 2, pos - 1, 1), [b, h, 1]));
  writeState(state, s, pos);
  return s;
}

/** Writes rows (B, heads, n) into state (B, heads, Tmax, 1) at pos … pos+n−1. */
export function writeState(state: Tensor, rows: Tensor, pos: number): void {
  const [b, h, n] = rows.shape;
  kvWrite(state, reshape(rows, [b, h, n, 1]), pos);
}

/** Cache entry `key` (B, heads, Tmax, 1), or ArgumentError naming the mechanism. */
export function cacheState(state: Record<string, Tensor> | undefined, key: string, mechanism: string): Tensor {
  const t = state?.[key];
  if (!t) throw new ArgumentError(`${mechanism}: the KV cache slot has no '${key}' state; make the cache with KvCache from this model's config`);
  return t;
}

/** A state entry (B, heads, Tmax, 1) as the ops take it, (B, heads, Tmax): a view of the same storage. */
export const stateRows = (t: Tensor): Tensor => reshape(t, t.shape.slice(0, 3));
