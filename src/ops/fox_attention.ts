/**
 * FoX attention, the Forgetting Transformer's forget-gate attention (specs/fpa_depth.md §1.1), as
 * one fused op with its own backward (flash style: the forward keeps only the row logsumexp, the
 * backward recomputes the probabilities). Shapes as in ops/attention.ts: q (B, H, Tq, D), k and v
 * (B, Hkv, Tk, D), H a multiple of Hkv (GQA: query head h reads kv head ⌊h / (H/Hkv)⌋); plus
 * c (B, H, Tk) f32, the cumulative log forget gate c_t = Σ_{s≤t} log f_s of each query head at the
 * absolute positions 0 … Tk−1. Query i sits at p_i = kvLength − Tq + i and scores key j ≤ p_i with
 *   s_ij = scale·q_i·k_j + c[p_i] − c[j]
 * (the log gates after key j up to and including the query: the spec's span (j, i]). Causal only,
 * no window; softmax statistics and c in f32 whatever q, k, v's dtype (§4.1). The gradient of c is
 * dc_t = Σ_j dS_tj (t as the query row) − Σ_i dS_it (t as a key column); the gradient of the gate
 * logits follows by a reverse cumsum outside this op.
 *
 * Variant: the paper's formulation as read in its code ([V] in the spec), with two FON choices:
 * GQA (untested upstream) reads k, v as ops/attention.ts does while c stays per query head, and a
 * KV cache longer than the valid keys is allowed through kvLength (queries at the end of the valid range).
 *
 * `foxAttentionArgs` also checks the q, k, v geometry for ops/fpa_attention.ts (FPA generalises FoX).
 */
import { ArgumentError, DTypeError, ShapeError } from '../errors.ts';
import type { FoxAttentionArgs } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import { autocastDType } from '../tensor/autocast.ts';
import { viaLowPrecision } from './low_precision.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireDType, requireFloat, wrap, sameShape } from './run.ts';

export interface FoxAttentionOptions {
  /** Multiplies q·k; default 1/√D. */
  scale?: number;
  /** Keys along k/v's T axis that are valid (a KV cache may be longer); default k.shape[2]. Query i sits at kvLength − Tq + i. */
  kvLength?: number;
}

function describe(q: Tensor, k: Tensor, v: Tensor): string {
  return `q ${fmt(q.shape)}, k ${fmt(k.shape)}, v ${fmt(v.shape)}`;
}

/** Checks q, k, v (dtypes, shapes, GQA) and the options of a causal FoX/FPA call; returns the kernel arguments. */
export function foxAttentionArgs(op: string, q: Tensor, k: Tensor, v: Tensor, opts: FoxAttentionOptions = {}): FoxAttentionArgs {
  requireFloat(op, q);
  if (k.dtype !== q.dtype || v.dtype !== q.dtype) throw new DTypeError(`${op}: q, k and v must share one dtype, got ${q.dtype}, ${k.dtype} and ${v.dtype}`);
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) throw new ShapeError(`${op}: q, k and v must have rank 4 (B, H, T, D), got ${describe(q, k, v)}`);
  const [batch, heads, tq, d] = q.shape;
  const [kb, kvHeads, tk, kd] = k.shape;
  if (!sameShape(v.shape, k.shape)) throw new ShapeError(`${op}: v must have k's shape, got ${describe(q, k, v)}`);
  if (kb !== batch || kd !== d) throw new ShapeError(`${op}: k and v must be (${batch}, Hkv, Tk, ${d}) for q (B, H, Tq, D), got ${describe(q, k, v)}`);
  if (kvHeads === 0 || heads % kvHeads !== 0) throw new ShapeError(`${op}: query heads ${heads} must be a multiple of kv heads ${kvHeads}, got ${describe(q, k, v)}`);
  const kvLength = opts.kvLength ?? tk;
  if (!Number.isInteger(kvLength) || kvLength < 0 || kvLength > tk) throw new ArgumentError(`${op}: kvLength ${kvLength} must be an integer in [0, ${tk}] (k's T axis)`);
  const scale = opts.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new ArgumentError(`${op}: scale ${scale} must be a finite number`);
  return { batch, heads, kvHeads, tq, tk, d, kvLength, qOffset: kvLength - tq, scale };
}

/** An f32 tensor of exactly `want`'s shape, or DTypeError / ShapeError naming it. */
export function requireF32Shape(op: string, what: string, t: Tensor, want: readonly number[], why: string): void {
  requireDType(op, what, t, 'f32');
  if (!sameShape(t.shape, want)) throw new ShapeError(`${op}: ${what} must have shape ${fmt(want)} ${why}, got ${fmt(t.shape)}`);
}

/**
 * q (B, H, Tq, D), k and v (B, Hkv, Tk, D), c (B, H, Tk) f32 → (B, H, Tq, D), causal softmax of
 * scale·q·kᵀ + c[p_i] − c[j]. Differentiable in q, k, v and c.
 */
export function foxAttention(q: Tensor, k: Tensor, v: Tensor, c: Tensor, opts: FoxAttentionOptions = {}): Tensor {
  const low = autocastDType();
  if (low && q.dtype === 'f32') return viaLowPrecision(low, [q, k, v], ([ql, kl, vl]) => foxAttention(ql, kl, vl, c, opts));
  const b = backendOf('foxAttention', q, k, v, c);
  const args = foxAttentionArgs('foxAttention', q, k, v, opts);
  requireF32Shape('foxAttention', 'c (cumulative log forget gate)', c, [args.batch, args.heads, args.tk], `(B, H, Tk) for ${describe(q, k, v)}`);
  // The one attention entry with FoX's score modifier (Backend.attention): causal, no window.
  const full = { ...args, causal: true, window: 0 };
  const [oh, lh] = b.attention(ref(q), ref(k), ref(v), full, { modifier: { kind: 'fox', c: ref(c) } });
  const out = wrap(b, oh, q.shape, q.dtype);
  const lse = wrap(b, lh, [args.batch, args.heads, args.tq], 'f32');
  record('foxAttention', out, [q, k, v, c], (g, [qs, ks, vs, cs, os, ls]) => {
    const [dq, dk, dv, dc] = b.attentionBackward(ref(qs), ref(ks), ref(vs), ref(os), ref(ls), ref(g), full, { modifier: { kind: 'fox', c: ref(cs) } });
    return [wrap(b, dq, qs.shape, qs.dtype), wrap(b, dk, ks.shape, ks.dtype), wrap(b, dv, vs.shape, vs.dtype), wrap(b, dc, cs.shape, 'f32')];
  }, [q, k, v, c, out, lse]);
  lse.dispose();
  return out;
}
