/**
 * The `dilated` scorer of Lighthouse (specs/lighthouse_fon.md §1.4), parameter-free: the sequence
 * is folded δ = 4 tokens into the heads, (B, H, N, d) → (B, δ·H, N/δ, d) with pseudo-head r·H + h
 * seeing tokens r, r + δ, r + 2δ, … of head h (the authors' reshape of (B, N, H, d) to
 * (B, N/δ, δ·H, d)); causal attention runs over it twice, as (q, k, v) and as (k, q, v), and token
 * t's scores are the L2 norms of its two outputs: s^QK_{1,t} from the first, s^KQ_{1,t} from the
 * second. Coarser levels take the max over each window (scores.ts levelScores), as for `norm`.
 * Cost Θ(H·N²·d/δ): the scorer is itself quadratic, divided by δ. No gradient (the scores only feed
 * the selection). A sequence that is not a multiple of δ is padded with zero rows at its end, which
 * causal attention keeps from every real token.
 */
import { attention } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { zeros } from '../../ops/creation.ts';
import { square, sqrt } from '../../ops/elementwise.ts';
import { concat, narrow, permute, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import { noGrad, tidy } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** The fold of the `dilated` scorer: tokens per pseudo-head stride (the authors' δ). */
export const DILATION = 4;

/** x (B, H, N, D) → (B, δ·H, ⌈N/δ⌉, D): pseudo-head r·H + h holds tokens r, r + δ, … of head h (zero rows pad N). */
function fold(x: Tensor, delta: number): Tensor {
  const [b, h, n, d] = x.shape, np = Math.ceil(n / delta) * delta;
  const padded = np === n ? x : concat([x, zeros([b, h, np - n, d], { dtype: x.dtype, backend: x.backend })], 2);
  return reshape(permute(reshape(padded, [b, h, np / delta, delta, d]), [0, 3, 1, 2, 4]), [b, delta * h, np / delta, d]);
}

/** The L2 norms of o (B, δ·H, N/δ, D) unfolded back to (B, H, N) f32 (the first n tokens). */
function unfoldNorms(o: Tensor, heads: number, n: number, delta: number): Tensor {
  const [b, , m] = o.shape;
  const o32 = o.dtype === 'f32' ? o : cast(o, 'f32');
  const norms = sqrt(sum(square(o32), -1)); // (B, δ·H, N/δ)
  const back = reshape(permute(reshape(norms, [b, delta, heads, m]), [0, 2, 3, 1]), [b, heads, m * delta]);
  return m * delta === n ? back : narrow(back, 2, 0, n);
}

/** Token scores (s^QK_1, s^KQ_1), each (B, H, N) f32, of q, k, v (B, H, N, D) (k and v already at H heads). */
export function dilatedTokenScores(q: Tensor, k: Tensor, v: Tensor, delta = DILATION): { qk: Tensor; kq: Tensor } {
  return noGrad(() => tidy(() => {
    const [, h, n, d] = q.shape;
    const [fq, fk, fv] = [q, k, v].map((x) => fold(x, delta));
    const scale = 1 / Math.sqrt(d);
    const qk = unfoldNorms(attention(fq, fk, fv, { causal: true, scale }), h, n, delta);
    const kq = unfoldNorms(attention(fk, fq, fv, { causal: true, scale }), h, n, delta);
    return { qk, kq };
  }));
}
