/**
 * Focus's group assignment (specs/focus_spot.md A2, A3): per layer a projection W_g (C → d_g) and
 * K centroids C (K × d_g) give every token the scores S = (x W_g) Cᵀ (T × K, x the block's normed
 * input, what the frozen q, k and v read).
 *
 * Training (soft): the paper's Sinkhorn, in the log domain and f32 (exp(S/τ) overflows f16):
 * L ← S/τ, then N times { L −= logsumexp over the tokens (per group: the column potential);
 * L −= logsumexp over the groups (per token) }; g = exp(L), each row summing to 1 and each group
 * holding about T/K of the mass. Differentiable (it is composed of ops).
 *
 * Inference (hard, causal): the column sums run over every token of the window, later ones
 * included, so a token's Sinkhorn groups would depend on the future (A3 ambiguity (c)). The
 * variant here is the spec's proposal: the column potentials U_k = Σ_n colLSE_n(k) that Sinkhorn
 * subtracts are kept as frozen per-group log-normalizers u (a running mean over training steps,
 * centred, as only their differences matter under a softmax over k), and a token's groups at
 * inference are the top-k of softmax_k(S/τ − u): they read only the token's own hidden state.
 * Membership is a bit word per token (bit c = group c), ties going to the lower group.
 */
import { tensor, zeros } from '../../ops/creation.ts';
import { add, div, exp, ge, mul, sub } from '../../ops/elementwise.ts';
import { narrow, reshape } from '../../ops/layout.ts';
import { matmul } from '../../ops/matmul.ts';
import { logsumexp, mean, sum } from '../../ops/reduce.ts';
import { topk } from '../../ops/scan_sort.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { toF32 } from '../common/gates.ts';

/** Scores S (B, T, K) f32: x (B, T, C) through the projection (d_g × C, PyTorch layout) and the centroids (K, d_g). */
export function groupScores(x: Tensor, proj: Tensor, centroids: Tensor): Tensor {
  const h = matmul(toF32(x), toF32(proj), { transB: true }); // (B, T, d_g)
  return matmul(h, toF32(centroids), { transB: true }); // (B, T, K)
}

/** Log-domain Sinkhorn of S/τ (B, T, K): the log-assignments (B, T, K), rows summing to 1 in exp, and the column potentials U (B, K). */
export function sinkhorn(scores: Tensor, tau: number, iters: number): { logG: Tensor; potentials: Tensor } {
  let l = div(scores, tau);
  let u: Tensor | undefined;
  for (let n = 0; n < iters; n++) {
    const col = logsumexp(l, 1, { keepDims: true }); // (B, 1, K): each group's mass over the tokens
    l = sub(l, col);
    u = u ? add(u, col) : col;
    l = sub(l, logsumexp(l, 2, { keepDims: true })); // (B, T, 1): each token's row to 1
  }
  if (!u) l = sub(l, logsumexp(l, 2, { keepDims: true })); // N = 0: a plain softmax
  const [b, , k] = scores.shape;
  return { logG: l, potentials: u ? reshape(u, [b, k]) : zeros([b, k], { backend: scores.backend }) };
}

/** Soft assignments g (B, T, K) for training: exp of Sinkhorn's log-assignments. */
export function softAssignments(scores: Tensor, tau: number, iters: number): { g: Tensor; potentials: Tensor } {
  const { logG, potentials } = sinkhorn(scores, tau, iters);
  return { g: exp(logG), potentials };
}

/** The centred column potentials (K) averaged over the batch: what the running log-normalizers follow. */
export function centredPotentials(potentials: Tensor): Tensor {
  const u = mean(potentials, 0); // (K)
  return sub(u, mean(u, 0, { keepDims: true }));
}

/** The causal assignment logits S/τ − u (B, T, K) at inference (the softmax over K is monotone, so its top-k is theirs). */
export function causalLogits(scores: Tensor, tau: number, lognorm: Tensor): Tensor {
  return sub(div(scores, tau), toF32(lognorm));
}

/**
 * Membership bit words from causal logits (B, T, K) read to the host: each token's `topK` largest
 * logits (ties to the lower group), bit c set for group c. Row-major (B·T) words.
 */
export function membershipBits(logits: Float32Array, rows: number, groups: number, topK: number): Uint32Array {
  const out = new Uint32Array(rows);
  for (let r = 0; r < rows; r++) {
    const at = r * groups;
    let word = 0;
    for (let n = 0; n < topK; n++) {
      let best = -1, bv = -Infinity;
      for (let c = 0; c < groups; c++) {
        if (word & (1 << c)) continue;
        const v = logits[at + c];
        // NaN logits fall back to the lowest free group, so every token has exactly topK groups.
        if (best < 0 || v > bv) { best = c; bv = v; }
      }
      word |= 1 << best;
    }
    out[r] = word >>> 0;
  }
  return out;
}

/**
 * Membership as a one-hot mask (B, T, K) f32 computed on the device (no read-back): 1 where the
 * group is among the token's top-k logits. A group's logit ≥ the k-th largest counts, ties to
 * the lower group broken as membershipBits breaks them only for exact float ties (then both are
 * kept: a superset, still exact for k = K and documented where used).
 */
export function membershipOneHot(logits: Tensor, topK: number): Tensor {
  if (topK >= logits.shape[2]) return add(mul(logits, 0), 1);
  const kth = narrow(topk(logits, topK, 2).values, 2, topK - 1, 1); // (B, T, 1): the k-th largest per row
  return ge(logits, kth); // 1 where the logit is among the top k, 0 elsewhere
}

/** Dominance: the largest group's share of the memberships (ideal 1/K), from bit words. */
export function dominance(bits: Uint32Array, groups: number): number {
  const count = new Array<number>(groups).fill(0);
  let total = 0;
  for (const w of bits) for (let c = 0; c < groups; c++) if (w & (1 << c)) { count[c]++; total++; }
  return total ? Math.max(...count) / total : 0;
}

/** Dominance of soft assignments' argmax (B, T, K) on the host: the largest group's share of tokens. */
export function argmaxDominance(g: Float32Array, rows: number, groups: number): number {
  const count = new Array<number>(groups).fill(0);
  for (let r = 0; r < rows; r++) {
    let best = 0;
    for (let c = 1; c < groups; c++) if (g[r * groups + c] > g[r * groups + best]) best = c;
    count[best]++;
  }
  return rows ? Math.max(...count) / rows : 0;
}

/** The groups 0 … K − 1 as an i32 (1, 1, K) tensor, to compare with group ids. */
export function groupIds(groups: number, backend: Tensor['backend']): Tensor {
  return tensor(Int32Array.from({ length: groups }, (_, c) => c), [1, 1, groups], { dtype: 'i32', backend });
}

/**
 * membershipBits's words on the device: i32 0/1 rows (…, K) → (…) i32, Σ_c x_c·2^c. The powers are
 * distinct, so the sum has no carries (group 31's bit is i32's sign): integer ops, no bitwise op.
 */
export function wordsOnDevice(x: Tensor): Tensor {
  const groups = x.shape[x.rank - 1];
  const pow2 = tensor(Int32Array.from({ length: groups }, (_, c) => (c === 31 ? -(2 ** 31) : 2 ** c)), [groups], { dtype: 'i32', backend: x.backend });
  return sum(mul(x, pow2), x.rank - 1);
}
