/**
 * FPA, First Passage Attention (specs/fpa_depth.md §2), as one fused op with its own backward
 * (flash style, as ops/attention.ts and ops/fox_attention.ts). A key's logit is lowered by the
 * deepest dip of a learned scalar field φ below the key's level ℓ over the span between key and query:
 *   M_ij   = min φ_t over t ∈ (j, p_i]        (+∞ when j = p_i: no penalty on the diagonal)
 *   pen_ij = λ · relu(ℓ_j − M_ij)
 *   s_ij   = scale·q_i·k_j − pen_ij           (j ≤ p_i; causal only), softmax over j in f32
 * with p_i = kvLength − Tq + i the query's absolute position, φ and ℓ indexed by absolute position.
 *
 * Variant ([P] choices of the spec, the proposal implemented as written):
 * - one penalty per KV head (§2.2): phi and level are (B, Hkv, Tk), lambda is (Hkv); the query heads
 *   of a GQA group share their kv head's penalty, so a dead key is dead for the whole group (§2.6).
 * - ties in the min go to the LATEST index t, in forward and backward alike: dφ of a tied minimum
 *   reaches only the latest position holding it.
 * - a relu at exactly 0 (ℓ_j = M_ij) passes zero gradient to ℓ, φ and λ.
 * - λ must be finite and > 0; the CPU reference kernels check it (ArgumentError naming the kv head).
 * The walk, field and level parametrisation (§2.5: φ = W + u, ℓ = W + w, λ = softplus(ρ)) lives
 * outside this op: it takes φ, ℓ and λ as tensors, all f32 (§4.1), and returns their gradients.
 * Special cases (tested): φ = ℓ = W non-increasing with λ = 1 is FoX with c = W; φ = ℓ = W
 * non-decreasing is plain causal (NoPE) attention.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { record } from '../tensor/autograd.ts';
import { autocastDType } from '../tensor/autocast.ts';
import { viaLowPrecision } from './low_precision.ts';
import { foxAttentionArgs, requireF32Shape, type FoxAttentionOptions } from './fox_attention.ts';
import { backendOf, fmt, ref, wrap } from './run.ts';

/** Same options as foxAttention: scale (default 1/√D) and kvLength (default k.shape[2]). */
export type FpaAttentionOptions = FoxAttentionOptions;

/**
 * q (B, H, Tq, D), k and v (B, Hkv, Tk, D), phi and level (B, Hkv, Tk) f32, lambda (Hkv) f32 > 0
 * → (B, H, Tq, D). Differentiable in all six inputs.
 */
export function fpaAttention(q: Tensor, k: Tensor, v: Tensor, phi: Tensor, level: Tensor, lambda: Tensor, opts: FpaAttentionOptions = {}): Tensor {
  const low = autocastDType();
  if (low && q.dtype === 'f32') return viaLowPrecision(low, [q, k, v], ([ql, kl, vl]) => fpaAttention(ql, kl, vl, phi, level, lambda, opts));
  const b = backendOf('fpaAttention', q, k, v, phi, level, lambda);
  const args = foxAttentionArgs('fpaAttention', q, k, v, opts);
  const why = `(B, Hkv, Tk) for q ${fmt(q.shape)} and k ${fmt(k.shape)}`;
  requireF32Shape('fpaAttention', 'phi (field)', phi, [args.batch, args.kvHeads, args.tk], why);
  requireF32Shape('fpaAttention', 'level', level, [args.batch, args.kvHeads, args.tk], why);
  requireF32Shape('fpaAttention', 'lambda', lambda, [args.kvHeads], `(Hkv) for k ${fmt(k.shape)}`);
  // The one attention entry with FPA's score modifier (Backend.attention): causal, no window.
  const full = { ...args, causal: true, window: 0 };
  const [oh, lh] = b.attention(ref(q), ref(k), ref(v), full, { modifier: { kind: 'fpa', phi: ref(phi), level: ref(level), lambda: ref(lambda) } });
  const out = wrap(b, oh, q.shape, q.dtype);
  const lse = wrap(b, lh, [args.batch, args.heads, args.tq], 'f32');
  record('fpaAttention', out, [q, k, v, phi, level, lambda], (g, [qs, ks, vs, fs, ls, lams, os, lses]) => {
    const [dq, dk, dv, dphi, dlevel, dlam] = b.attentionBackward(ref(qs), ref(ks), ref(vs), ref(os), ref(lses), ref(g), full, { modifier: { kind: 'fpa', phi: ref(fs), level: ref(ls), lambda: ref(lams) } });
    return [
      wrap(b, dq, qs.shape, qs.dtype), wrap(b, dk, ks.shape, ks.dtype), wrap(b, dv, vs.shape, vs.dtype),
      wrap(b, dphi, fs.shape, 'f32'), wrap(b, dlevel, ls.shape, 'f32'), wrap(b, dlam, lams.shape, 'f32'),
    ];
  }, [q, k, v, phi, level, lambda, out, lse]);
  lse.dispose();
  return out;
}
