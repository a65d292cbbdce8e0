/**
 * Selection without sorting (Backend.selectOpen, compactFlags): which entries of each row a top-K
 * or top-p rule keeps, reserved ranges kept whatever their scores (SpotAttention's block selection,
 * specs/focus_spot.md B4), and the kept entries' indices packed to the front of each row. No
 * gradients: the results are integer flags and indices.
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import type { SelectArgs } from '../backend/backend.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireDType, wrap } from './run.ts';

/** Which entries each row of scores and masses (…, N) f32 keeps under `rule` (SelectArgs without rows and n): i32 flags (…, N). */
export function selectOpen(scores: Tensor, mass: Tensor, rule: Omit<SelectArgs, 'rows' | 'n'>): Tensor {
  const b = backendOf('selectOpen', scores, mass);
  requireDType('selectOpen', 'scores', scores, 'f32');
  requireDType('selectOpen', 'mass', mass, 'f32');
  if (fmt(scores.shape) !== fmt(mass.shape) || scores.rank < 1) throw new ShapeError(`selectOpen: scores ${fmt(scores.shape)} and mass ${fmt(mass.shape)} must have one shape (…, N)`);
  const n = scores.shape[scores.rank - 1], rows = scores.shape.slice(0, -1).reduce((a, x) => a * x, 1);
  const { valid, low, high, count, p } = rule;
  const ints = { valid, low, high, count };
  for (const [k, v] of Object.entries(ints)) if (!Number.isInteger(v) || v < 0) throw new ArgumentError(`selectOpen: ${k} ${v} must be an integer ≥ 0`);
  if (!(low <= high && high <= valid && valid <= n)) throw new ArgumentError(`selectOpen: need low ≤ high ≤ valid ≤ N; got low ${low}, high ${high}, valid ${valid}, N ${n}`);
  if (!(p >= 0 && p <= 1)) throw new ArgumentError(`selectOpen: p ${p} must lie in [0, 1] (0: keep the leading count)`);
  return wrap(b, b.selectOpen(ref(scores), ref(mass), { rows, n, ...rule }), scores.shape, 'i32');
}

/** Each row's nonzero entries of i32 flags (…, N) → i32 (…, N + 1): their count, their indices ascending, then zeros. */
export function compactFlags(flags: Tensor): Tensor {
  const b = backendOf('compactFlags', flags);
  requireDType('compactFlags', 'flags', flags, 'i32');
  if (flags.rank < 1) throw new ShapeError(`compactFlags: flags ${fmt(flags.shape)} need an axis of entries`);
  const n = flags.shape[flags.rank - 1], rows = flags.shape.slice(0, -1).reduce((a, x) => a * x, 1);
  return wrap(b, b.compactFlags(ref(flags), rows, n), [...flags.shape.slice(0, -1), n + 1], 'i32');
}
