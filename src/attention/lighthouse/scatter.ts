/**
 * Lighthouse's scatter-back (specs/lighthouse_fon.md §1.7): gathered entry m, of level l and local
 * index i, delivers its attention output to the base positions
 * R(m) = [c_l·(i+1) − 1, c_l·(i+2) − 2] ∩ [0, N) (a shift of c_l − 1: it starts at its window's
 * last token; a token writes to itself), y_t = Σ_{m : t ∈ R(m)} Õ_m, a plain sum, 0 where nothing
 * arrives.
 *
 * Within one level the ranges are disjoint, so each position receives at most one entry per level
 * (fan-in ≤ L). FON writes the scatter as its transpose, a gather by fan-in: for each level and
 * position, the gathered index covering it (or a zero row appended to Õ), L gathered copies summed.
 * Same sum, no atomics, and differentiable through gatherRows, whose backward is the scatter-add
 * that §1.7's backward describes (the gradient of entry m is the sum of the upstream gradients over
 * R(m)). Cost: an index of B·H·L·N words and Θ(L·N·D) reads, as the authors' fan-out kernel.
 */
import { zeros, tensor } from '../../ops/creation.ts';
import { gatherRows } from '../../ops/indexing.ts';
import { concat, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { levelOf } from './geometry.ts';
import type { LighthouseSelection } from './selection.ts';

/** (B·H, L·N) row-major: for list s, level l and position t < N, the gathered position whose range covers t, or S where none does. */
export function fanInRows(sel: LighthouseSelection): Int32Array {
  const g = sel.geometry, n = g.n, S = g.gathered, width = g.levels * n;
  const out = new Int32Array(sel.lists * width).fill(S);
  for (let s = 0; s < sel.lists; s++) {
    for (let m = 0; m < S; m++) {
      const row = sel.rows[s * S + m], l = levelOf(g, row), c = g.span[l - 1], i = row - g.offset[l - 1];
      const from = c * (i + 1) - 1, to = Math.min(c * (i + 2) - 2, n - 1);
      for (let t = from; t <= to; t++) out[s * width + (l - 1) * n + t] = m;
    }
  }
  return out;
}

/** Õ (B, H, S, D) → y (B, H, N, D), differentiable in Õ. */
export function lighthouseScatter(gathered: Tensor, sel: LighthouseSelection): Tensor {
  const [b, h, S, d] = gathered.shape, g = sel.geometry;
  const zero = zeros([b, h, 1, d], { dtype: gathered.dtype, backend: gathered.backend });
  const withZero = concat([gathered, zero], 2); // (B, H, S + 1, D): row S is the zero row
  const rows = tensor(fanInRows(sel), [sel.lists, g.levels * g.n], { dtype: 'i32', backend: gathered.backend });
  const fanned = gatherRows(withZero, rows, 2); // (B, H, L·N, D)
  const perLevel = reshape(fanned, [b, h, g.levels, g.n, d]); // (B, H, L, N, D)
  const y = g.levels === 1 ? reshape(perLevel, [b, h, g.n, d]) : sum(perLevel, 2); // (B, H, N, D)
  for (const t of [zero, withZero, rows, fanned, perLevel]) t.dispose();
  return y;
}
