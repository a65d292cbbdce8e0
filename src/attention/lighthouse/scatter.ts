/**
 * Lighthouse's scatter-back (specs/lighthouse_fon.md §1.7): gathered entry m, of level l and local
 * index i, delivers its attention output to the base positions
 * R(m) = [c_l·(i+1) − 1, c_l·(i+2) − 2] ∩ [0, N) (a shift of c_l − 1: it starts at its window's
 * last token; a token writes to itself), y_t = Σ_{m : t ∈ R(m)} Õ_m, a plain sum, 0 where nothing
 * arrives.
 *
 * FON writes it as two gathers (the same sum, no atomics): the outputs go back to their pyramid
 * rows through the selection's inverse (scatterDistinctRows: a row not gathered gets zeros), and
 * each level is "unpooled" with the shift — position t reads row ⌊(t+1)/c_l⌋ − 1 of level l, the one
 * entry of that level whose range holds t (within a level the ranges are disjoint, so the fan-in
 * is ≤ L) — and the levels are summed. Gradients follow from the ops: the unpool's is the sum of
 * the upstream gradient over each window shifted by c_l − 1, i.e. over R(m) (§1.7's backward), and
 * scatterDistinctRows' is a gather by the rows. Cost Θ(L·N·D) reads and writes, an index of
 * B·H·(total + S) words.
 */
import { zeros } from '../../ops/creation.ts';
import { add } from '../../ops/elementwise.ts';
import { scatterDistinctRows } from '../../ops/indexing.ts';
import { broadcastTo, concat, narrow, reshape } from '../../ops/layout.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { LighthouseSelection } from './selection.ts';

/** Õ (B, H, S, D) → y (B, H, N, D), differentiable in Õ. */
export function lighthouseScatter(gathered: Tensor, sel: LighthouseSelection): Tensor {
  const [b, h, , d] = gathered.shape, g = sel.geometry;
  const pyramid = scatterDistinctRows(gathered, sel.rows, sel.inverse, 2); // (B, H, total, D): 0 where a row was not gathered
  let y: Tensor | null = null;
  const temps: Tensor[] = [pyramid];
  for (let l = 1; l <= g.levels; l++) {
    const c = g.span[l - 1], count = g.count[l - 1];
    const level = narrow(pyramid, 2, g.offset[l - 1], count); // (B, H, Np/c, D)
    let part: Tensor;
    if (c === 1) part = narrow(level, 2, 0, g.n); // a token delivers to itself
    else {
      const zero = zeros([b, h, 1, d], { dtype: gathered.dtype, backend: gathered.backend });
      const shifted = concat([zero, level], 2); // (B, H, Np/c + 1, D): row j + 1 is entry j
      const column = reshape(shifted, [b, h, count + 1, 1, d]);
      const wide = broadcastTo(column, [b, h, count + 1, c, d]); // (B, H, Np/c + 1, c, D)
      const up = reshape(wide, [b, h, (count + 1) * c, d]); // row u holds entry ⌊u/c⌋ − 1
      part = narrow(up, 2, 1, g.n); // position t = row t + 1: entry ⌊(t+1)/c⌋ − 1, whose range R holds t
      temps.push(zero, shifted, column, wide, up);
    }
    temps.push(level);
    if (y === null) y = part;
    else { const sum: Tensor = add(y, part); temps.push(y, part); y = sum; }
  }
  for (const t of temps) if (t !== y) t.dispose();
  return y!;
}
