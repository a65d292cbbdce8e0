/**
 * Focus composed from primitive ops, O(T²): the soft-gated attention it trains with, and the dense
 * masked form of its hard inference rule, which is the reference the sparse path (sparse.ts) is
 * tested against and the path taken where membership cannot be read to the host inside a step
 * (webgpu: its reads are asynchronous).
 *
 * Soft (training, specs/focus_spot.md A3 Eq. 2), with a_ij = g_i·g_j and local(i, j) = [i − j ≤ w]:
 *   gate "literal":  s_ij = (q_i·k_j/√D) · (local + (1 − local)·σ(λ a_ij))      (Eq. 2 as written)
 *   gate "mask":     s_ij = q_i·k_j/√D + (1 − local)·log σ(λ (a_ij − β))        (the spec's proposal:
 *                    → 0 for a shared group, → −∞ for none, the hard mask's soft twin)
 * then the causal softmax and ·V. Hard (inference, A4): pair (i, j) is kept iff j ≤ i and
 * (i − j ≤ w or the two tokens share a group), every kept pair with its plain logit.
 * Shapes: q (B, H, Tq, D), k and v (B, Hkv, L, D), queries at positions L − Tq … L − 1.
 */
import { ArgumentError } from '../../errors.ts';
import { cast } from '../../ops/cast.ts';
import { tensor } from '../../ops/creation.ts';
import { add, gt, mul, sigmoid, sub, where } from '../../ops/elementwise.ts';
import { narrow, reshape } from '../../ops/layout.ts';
import { matmul } from '../../ops/matmul.ts';
import { softmax } from '../../ops/reduce.ts';
import { keep } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { logSigmoid, toF32 } from '../common/gates.ts';

/** Hidden pairs' additive score: −1e30 (a weight of exactly 0 after the softmax in f32). */
const HIDDEN = -1e30;

export type FocusGate = 'literal' | 'mask';

/** 1 where query i (position off + i) and key j are farther apart than the window (i − j > w), else 0: (Tq, L). */
function farMask(tq: number, l: number, window: number): Float32Array {
  const m = new Float32Array(tq * l), off = l - tq;
  for (let i = 0; i < tq; i++) for (let j = 0; j < l; j++) m[i * l + j] = off + i - j > window ? 1 : 0;
  return m;
}

/** 0 where key j is at or before query i's position, −1e30 after: (Tq, L). */
function causalMask(tq: number, l: number): Float32Array {
  const m = new Float32Array(tq * l), off = l - tq;
  for (let i = 0; i < tq; i++) for (let j = off + i + 1; j < l; j++) m[i * l + j] = HIDDEN;
  return m;
}

/**
 * The constant (Tq, L) masks on a backend: 'far' (farMask), 'local' (1 − far) and 'causal'
 * (causalMask, additive). Square ones (training, prefill, evaluation windows: few shapes, the same
 * every step) are made once and kept; the others (decoding steps: a new length each) are made per
 * call and belong to the caller's scope.
 */
const constants = new WeakMap<object, Map<string, Tensor>>();
export function constantMask(be: Tensor['backend'], kind: 'far' | 'local' | 'causal', tq: number, l: number, window: number): Tensor {
  if (tq !== l) {
    const host = kind === 'causal' ? causalMask(tq, l) : farMask(tq, l, window);
    if (kind === 'local') for (let i = 0; i < host.length; i++) host[i] = 1 - host[i];
    return tensor(host, [tq, l], { backend: be });
  }
  let byKey = constants.get(be);
  if (!byKey) constants.set(be, (byKey = new Map()));
  const key = `${kind}:${tq}:${l}:${kind === 'causal' ? 0 : window}`;
  let t = byKey.get(key);
  if (!t) {
    const host = kind === 'causal' ? causalMask(tq, l) : farMask(tq, l, window);
    if (kind === 'local') for (let i = 0; i < host.length; i++) host[i] = 1 - host[i];
    t = keep(tensor(host, [tq, l], { backend: be }));
    byKey.set(key, t);
  }
  return t;
}

/**
 * Attention of q over k, v with per-pair logits transformed by `score` (scores (B, Hkv, G, Tq, L)
 * f32 → same) before the softmax; f32 inside, the result in q's dtype.
 */
function denseScored(q: Tensor, k: Tensor, v: Tensor, score: (s: Tensor) => Tensor): Tensor {
  const [b, h, tq, d] = q.shape;
  const [, hkv, l] = k.shape;
  if (k.shape[0] !== b || h % hkv !== 0 || k.shape[3] !== d || v.shape.join() !== k.shape.join()) {
    throw new ArgumentError(`focus: q [${q.shape}], k [${k.shape}], v [${v.shape}]: expected q (B, H, Tq, D) and k, v (B, Hkv, L, D) with Hkv dividing H`);
  }
  const g = h / hkv;
  const qg = reshape(toF32(q), [b, hkv, g * tq, d]); // (B, Hkv, G·Tq, D)
  const s = reshape(mul(matmul(qg, toF32(k), { transB: true }), 1 / Math.sqrt(d)), [b, hkv, g, tq, l]); // (B, Hkv, G, Tq, L)
  const p = softmax(score(s), -1);
  const o = reshape(matmul(reshape(p, [b, hkv, g * tq, l]), toF32(v)), [b, h, tq, d]); // (B, Hkv, G·Tq, D) → (B, H, Tq, D)
  return o.dtype === q.dtype ? o : cast(o, q.dtype);
}

/**
 * The soft-gated attention of training: q, k, v over positions 0 … T − 1 and soft assignments
 * g (B, T, K) f32. Differentiable in every input (g carries the gradient to W_g and C).
 */
export function softFocusAttention(q: Tensor, k: Tensor, v: Tensor, g: Tensor, o: { window: number; gate: FocusGate; lambda: number; beta: number }): Tensor {
  const [b, , t] = q.shape;
  const be = q.backend;
  const a = reshape(matmul(g, g, { transB: true }), [b, 1, 1, t, t]); // (B, 1, 1, T, T): group affinity
  const far = constantMask(be, 'far', t, t, o.window);
  const causal = constantMask(be, 'causal', t, t, 0);
  return denseScored(q, k, v, (s) => {
    const gated = o.gate === 'literal'
      ? mul(s, add(mul(far, sub(sigmoid(mul(a, o.lambda)), 1)), 1)) // s · (local + (1 − local)·σ(λa))
      : add(s, mul(far, logSigmoid(mul(sub(a, o.beta), o.lambda)))); // s + (1 − local)·log σ(λ(a − β))
    return add(gated, causal);
  });
}

/**
 * The hard rule's additive mask (B, Tq, L) on the host from membership bit words (B·L, the keys'
 * positions; the queries are the last Tq): 0 where the pair is kept, −1e30 where not.
 */
export function hardMaskHost(bits: Uint32Array, batch: number, tq: number, l: number, window: number): Float32Array {
  const m = new Float32Array(batch * tq * l), off = l - tq;
  for (let b = 0; b < batch; b++) for (let i = 0; i < tq; i++) {
    const p = off + i, wq = bits[b * l + p], row = (b * tq + i) * l;
    for (let j = 0; j < l; j++) {
      const kept = j <= p && (p - j <= window || (wq & bits[b * l + j]) !== 0);
      if (!kept) m[row + j] = HIDDEN;
    }
  }
  return m;
}

/** The hard rule's dense masked attention from host bit words (B·L): the reference the sparse path equals. */
export function hardFocusDense(q: Tensor, k: Tensor, v: Tensor, bits: Uint32Array, window: number): Tensor {
  const [b, , tq] = q.shape, l = k.shape[2];
  if (bits.length !== b * l) throw new ArgumentError(`focus: ${bits.length} membership words for batch ${b} × ${l} keys`);
  const mask = tensor(hardMaskHost(bits, b, tq, l, window), [b, 1, 1, tq, l], { backend: q.backend });
  return denseScored(q, k, v, (s) => add(s, mask));
}

/**
 * The same rule with membership one-hot on the device (B, L, K) f32 (groups.ts membershipOneHot;
 * the queries' rows are its last Tq): nothing is read back, so it runs inside a step on every
 * backend. O(Tq·L).
 */
export function hardFocusDenseOnDevice(q: Tensor, k: Tensor, v: Tensor, member: Tensor, window: number): Tensor {
  const [b, , tq] = q.shape, l = k.shape[2];
  const be = q.backend;
  const mq = narrow(member, 1, l - tq, tq); // (B, Tq, K)
  const shared = gt(matmul(mq, member, { transB: true }), 0.5); // (B, Tq, L): some group in common
  const local = constantMask(be, 'local', tq, l, window);
  const causal = constantMask(be, 'causal', tq, l, 0);
  const keep = where(shared, 1, local); // (B, Tq, L): 1 where shared or local
  const mask = reshape(add(mul(sub(keep, 1), 1e30), causal), [b, 1, 1, tq, l]); // 0 kept, −1e30 not (causal on top)
  return denseScored(q, k, v, (s) => add(s, mask));
}
