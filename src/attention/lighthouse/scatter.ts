/**
 * Lighthouse's scatter-back (specs/lighthouse_fon.md §1.7): gathered entry m, of level l and local
 * index i, delivers its attention output to the base positions
 * R(m) = [c_l·(i+1) − 1, c_l·(i+2) − 2] ∩ [0, N) (a shift of c_l − 1: it starts at its window's
 * last token; a token writes to itself), y_t = Σ_{m : t ∈ R(m)} Õ_m, a plain sum, 0 where nothing
 * arrives.
 *
 * One pass (ops/pyramid_rows.ts pyramidScatter with the `deliver` levels): token t reads, at each
 * level, the one entry whose range holds it, ⌊(t+1)/c_l⌋ − 1, through the selection's inverse (within
 * a level the ranges are disjoint, so the fan-in is ≤ L), and sums what is listed. Its gradient is
 * the adjoint, one pass too: entry m's gradient is the sum of the upstream gradient over R(m)
 * (pyramidGather with the same levels). Cost Θ(L·N·D) reads and N·D writes. (The composition of
 * gathers, broadcasts and adds it replaced is dev/kernels/lighthouse_gather.ts's `ops` form.)
 */
import { pyramidScatter } from '../../ops/pyramid_rows.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { pyramidLevels } from './geometry.ts';
import type { LighthouseSelection } from './selection.ts';

/** Õ (B, H, S, D) → y (B, H, N, D), differentiable in Õ. */
export function lighthouseScatter(gathered: Tensor, sel: LighthouseSelection): Tensor {
  const g = sel.geometry;
  return pyramidScatter(gathered, sel.rows, sel.inverse, pyramidLevels(g, 'deliver'), g.n);
}
