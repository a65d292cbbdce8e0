/**
 * SpotAttention's distillation (specs/focus_spot.md B3): the frozen layer's head-averaged causal
 * attention is the teacher, the selector's token softmax the student, trained by forward
 * KL(teacher ‖ student).
 *
 * - The teacher p^t_q(t) = (1/H) Σ_h softmax_t(scale · q_h·k_t) is rebuilt from a flash pass's
 *   per-row logsumexp: for a chunk of query rows at a time, the logits of every head are
 *   exponentiated against the stored lse and averaged over the heads, so no (T, T, H) tensor is
 *   ever made (at most chunk × T × H); the result is (B, T, T) with zeros past the diagonal.
 * - SparseKL (the default, B3): the KL over the student's own top-K_train tokens I_q of each query
 *   (K_train = L/2 in the paper; all causal tokens of a row with fewer), both distributions
 *   renormalized on I_q; I_q is chosen without gradient. Our variant: I_q = the causal tokens whose
 *   score is at least the row's K-th largest, so tokens tied at the boundary are all kept.
 * - DenseKL: the KL over every causal token.
 * Both are averaged over (batch, query). No other loss terms.
 */
import { ArgumentError } from '../../errors.ts';
import { attentionWithLse } from '../../ops/attention.ts';
import { div, exp, ge, gt, log, maximum, mul, sub, where } from '../../ops/elementwise.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { matmul } from '../../ops/matmul.ts';
import { logsumexp, mean, sum } from '../../ops/reduce.ts';
import { topk } from '../../ops/scan_sort.ts';
import { noGrad } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { causalMasked, SPOT_MASKED } from './selector.ts';

/**
 * The teacher: q (B, H, T, D), k and v (B, Hkv, T, D) (v only for the flash pass) → (B, T, T), row q
 * the head-average of the layer's causal softmax (rows sum to 1). `chunk` query rows at a time.
 */
export function teacherDistribution(q: Tensor, k: Tensor, v: Tensor, opts: { scale?: number; chunk?: number } = {}): Tensor {
  return noGrad(() => {
    const [b, h, t, d] = q.shape, hkv = k.shape[1], g = h / hkv;
    const scale = opts.scale ?? 1 / Math.sqrt(d);
    const chunk = Math.max(1, Math.min(t, opts.chunk ?? 256));
    const [, lse] = attentionWithLse(q, k, v, { scale }); // (B, H, T)
    const rows: Tensor[] = [];
    for (let i0 = 0; i0 < t; i0 += chunk) {
      const c = Math.min(chunk, t - i0);
      // (B, Hkv, G·c, D) against each key head: the query heads of a group in order h = kvh·G + j.
      const qc = reshape(narrow(q, 2, i0, c), [b, hkv, g * c, d]);
      const logits = reshape(mul(matmul(qc, k, { transB: true }), scale), [b, h, c, t]);
      const p = exp(sub(causalRows(logits, i0), reshape(narrow(lse, 2, i0, c), [b, h, c, 1])));
      rows.push(mul(sum(p, 1), 1 / h)); // (B, c, T)
    }
    return rows.length === 1 ? rows[0] : concat(rows, 1);
  });
}

/** Logits (B, H, c, T) of query rows i0 … i0 + c − 1 with SPOT_MASKED past each row's position. */
function causalRows(logits: Tensor, i0: number): Tensor {
  const [b, h, c, t] = logits.shape;
  return reshape(causalMasked(reshape(logits, [b * h, c, t]), i0), [b, h, c, t]);
}

/** Which tokens SparseKL compares: (B, T, T) 1 where t ≤ q and s[q, t] is among the row's top kTrain (ties at the boundary kept), else 0. No gradient. */
export function sparseSet(scores: Tensor, kTrain: number): Tensor {
  const l = scores.shape[2];
  if (!Number.isInteger(kTrain) || kTrain < 1) throw new ArgumentError(`spot: K_train ${kTrain} must be an integer ≥ 1`);
  return noGrad(() => {
    const kk = Math.min(kTrain, l);
    const kth = narrow(topk(scores, kk, -1).values, 2, kk - 1, 1); // (B, T, 1): the row's kk-th largest (SPOT_MASKED where the row has fewer causal tokens)
    return mul(ge(scores, kth), gt(scores, SPOT_MASKED / 2));
  });
}

/**
 * KL(teacher ‖ student) over the tokens `set` marks (1/0, (B, T, T)), both renormalized there,
 * averaged over (batch, query): student scores (B, T, T) causal-masked (SPOT_MASKED past the
 * diagonal), teacher (B, T, T) rows of probabilities. A row whose set holds no teacher mass adds 0.
 */
export function klOnSet(scores: Tensor, teacher: Tensor, set: Tensor): Tensor {
  const masked = where(gt(set, 0.5), scores, SPOT_MASKED);
  const logStudent = sub(masked, logsumexp(masked, -1, { keepDims: true }));
  const pt = mul(teacher, set);
  const norm = sum(pt, -1, { keepDims: true });
  const ptn = div(pt, maximum(norm, 1e-30)); // a row with no teacher mass on its set: all 0
  // Σ p̃ (log p̃ − log q̃), with 0·log 0 = 0 (the teacher's zeros, the tokens outside the set).
  const logT = log(maximum(ptn, 1e-30));
  return mean(sum(mul(ptn, sub(logT, logStudent)), -1));
}

/** SparseKL (B3, the default): the KL on the student's own top-kTrain tokens of each query. */
export function sparseKL(scores: Tensor, teacher: Tensor, kTrain: number): Tensor {
  return klOnSet(scores, teacher, sparseSet(scores, kTrain));
}

/** DenseKL: the KL over every causal token. */
export function denseKL(scores: Tensor, teacher: Tensor): Tensor {
  const set = noGrad(() => gt(scores, SPOT_MASKED / 2));
  return klOnSet(scores, teacher, set);
}
