/**
 * The `norm` scorer (specs/lighthouse_fon.md §1.4), parameter-free: per head, s^QK_{1,t} = ‖q_t‖₂
 * and s^KQ_{1,t} = ‖k_t‖₂; a level-l entry scores the max of its window's token norms (max-pooled,
 * not the norm of the pooled vector). The token norms are computed with ops under noGrad and read
 * to the host (synchronous reads: cpu and wasm); the max-pooling runs on the host. No gradient:
 * the scores only feed the selection.
 */
import { UnsupportedError } from '../../errors.ts';
import { cast } from '../../ops/cast.ts';
import { square, sqrt } from '../../ops/elementwise.ts';
import { sum } from '../../ops/reduce.ts';
import { noGrad } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { LighthouseGeometry } from './geometry.ts';

/** ‖x_t‖₂ of x (B, H, N, D) → host (B·H·N) f32, row-major. */
export function tokenNorms(x: Tensor): Float32Array {
  if (!x.backend.readSync) {
    throw new UnsupportedError(`lighthouse: the selection reads its scores on the host, and backend '${x.backend.name}' reads asynchronously; Lighthouse runs on cpu and wasm for now (the WebGPU selection is issue 23's next step)`);
  }
  return noGrad(() => {
    const x32 = x.dtype === 'f32' ? x : cast(x, 'f32');
    const sq = square(x32);
    const s = sum(sq, -1);
    const norms = sqrt(s);
    const out = Float32Array.from(norms.dataSync() as Float32Array);
    for (const t of [sq, s, norms]) t.dispose();
    if (x32 !== x) x32.dispose();
    return out;
  });
}

/**
 * One (batch, head)'s per-level scores from its N token norms (`norms` at `at` … at + N − 1):
 * level 1 is the norms padded with zeros to Np, level l + 1 the max of p consecutive level-l
 * scores (the max of maxes is the window's max). Index l − 1 holds level l.
 */
export function levelScores(norms: Float32Array, at: number, g: LighthouseGeometry): Float32Array[] {
  const first = new Float32Array(g.padded);
  first.set(norms.subarray(at, at + g.n));
  const out = [first];
  for (let l = 2; l <= g.levels; l++) {
    const finer = out[l - 2], coarse = new Float32Array(g.count[l - 1]);
    for (let i = 0; i < coarse.length; i++) {
      let m = finer[i * g.pool];
      for (let j = 1; j < g.pool; j++) m = Math.max(m, finer[i * g.pool + j]);
      coarse[i] = m;
    }
    out.push(coarse);
  }
  return out;
}
