/**
 * The Lighthouse pyramid (specs/lighthouse_fon.md §1.3): q, k and v of every head mean-pooled with
 * the same non-overlapping windows of c_l = p^(l−1) tokens, "symmetric" because the queries are
 * pooled too, and the levels concatenated as [level 1 (Np) | level 2 (Np/p) | … | level L]. Built
 * from reshape and mean, so gradients reach q, k and v. The input is the padded sequence
 * (geometry.ts): its length is a multiple of p^(L−1).
 */
import { concat, reshape } from '../../ops/layout.ts';
import { mean } from '../../ops/reduce.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { LighthouseGeometry } from './geometry.ts';

/** x (B, H, Np, D) → the concatenated pyramid (B, H, total, D); level l+1 is level l pooled by p (a mean of equal means is the window's mean). */
export function lighthousePyramid(x: Tensor, g: LighthouseGeometry): Tensor {
  const [b, h, , d] = x.shape;
  const levels: Tensor[] = [x];
  for (let l = 2; l <= g.levels; l++) {
    const finer = levels[levels.length - 1];
    const grouped = reshape(finer, [b, h, g.count[l - 1], g.pool, d]); // (B, H, Np/c_l, p, D)
    levels.push(mean(grouped, 3)); // (B, H, Np/c_l, D)
    grouped.dispose();
  }
  if (levels.length === 1) return x;
  const out = concat(levels, 2); // (B, H, total, D)
  for (const t of levels.slice(1)) t.dispose();
  return out;
}
