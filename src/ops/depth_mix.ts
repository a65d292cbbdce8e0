/**
 * Depth-Attention mixing (specs/fpa_depth.md §3.1, the paper's `depth_softmax` mode) as one fused
 * op with its own backward: a layer's query attends over the keys of earlier layers at the SAME
 * token and mixes their values. Shapes: q (B, H, T, D), the layer's query as the block hands it to
 * its mechanism (after QK-norm and RoPE); keys[i] and values[i] (B, Hkv, T, D), the candidate
 * layers' k̂ and mixed ṽ in layer order with the current layer's own k and v last. Per (b, kv head
 * g, token t), r = H / Hkv:
 *   q̄ = (1/r)·Σ_{h ∈ g} q_h        (GQA: one mean query per KV head, so one α per KV head)
 *   e_i = scale·⟨q̄, keys[i]⟩        (scale default 1/√D)
 *   α = softmax_i(e) in f32,   ṽ = Σ_i α_i·values[i]   → (B, Hkv, T, D)
 * With one candidate (the layer itself) α = 1 and ṽ equals v exactly; its gradient is dout for v
 * and exactly 0 for q and k. Gradients flow into every key and value (earlier layers' k̂ and ṽ
 * included, §4.5) and into q.
 *
 * The candidates are arrays of tensors, handed to the backend as arrays of refs (Backend.depthMix):
 * no copy stacks them, and the number of candidates is free.
 */
import { ArgumentError, DTypeError, ShapeError } from '../errors.ts';
import type { DepthMixArgs } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireFloat, wrap, sameShape } from './run.ts';

export interface DepthMixOptions {
  /** Multiplies ⟨q̄, k⟩; default 1/√D. */
  scale?: number;
}

function describe(q: Tensor, keys: readonly Tensor[], values: readonly Tensor[]): string {
  return `q ${fmt(q.shape)}, keys [${keys.map((k) => fmt(k.shape)).join(', ')}], values [${values.map((v) => fmt(v.shape)).join(', ')}]`;
}

/** Checks shapes, dtypes and options and returns the kernel arguments. */
function depthMixArgs(q: Tensor, keys: readonly Tensor[], values: readonly Tensor[], opts: DepthMixOptions): DepthMixArgs {
  if (keys.length !== values.length) throw new ArgumentError(`depthMix: ${keys.length} keys but ${values.length} values; expected one key and one value per candidate layer`);
  if (keys.length === 0) throw new ArgumentError('depthMix: no candidates; expected at least the current layer\'s own key and value');
  requireFloat('depthMix', q);
  for (const t of [...keys, ...values]) {
    if (t.dtype !== q.dtype) throw new DTypeError(`depthMix: q, keys and values must share one dtype, got q ${q.dtype}, keys ${keys.map((k) => k.dtype).join(', ')}, values ${values.map((v) => v.dtype).join(', ')}`);
  }
  if (q.rank !== 4) throw new ShapeError(`depthMix: q must have rank 4 (B, H, T, D), got ${describe(q, keys, values)}`);
  const [batch, heads, t, d] = q.shape;
  const want = keys[0].shape;
  if (want.length !== 4 || want[0] !== batch || want[2] !== t || want[3] !== d) {
    throw new ShapeError(`depthMix: keys and values must be (${batch}, Hkv, ${t}, ${d}) for q (B, H, T, D), got ${describe(q, keys, values)}`);
  }
  for (const x of [...keys, ...values]) {
    if (!sameShape(x.shape, want)) throw new ShapeError(`depthMix: every key and value must have the first key's shape ${fmt(want)}, got ${describe(q, keys, values)}`);
  }
  const kvHeads = want[1];
  if (kvHeads === 0 || heads % kvHeads !== 0) throw new ShapeError(`depthMix: query heads ${heads} must be a multiple of kv heads ${kvHeads}, got ${describe(q, keys, values)}`);
  const scale = opts.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new ArgumentError(`depthMix: scale ${scale} must be a finite number`);
  return { batch, heads, kvHeads, t, d, m: keys.length, scale };
}

/**
 * q (B, H, T, D), keys and values: m tensors (B, Hkv, T, D) each (the current layer's own last)
 * → ṽ (B, Hkv, T, D). Differentiable in q and every key and value.
 */
export function depthMix(q: Tensor, keys: readonly Tensor[], values: readonly Tensor[], opts: DepthMixOptions = {}): Tensor {
  const args = depthMixArgs(q, keys, values, opts);
  const b = backendOf('depthMix', q, ...keys, ...values);
  const [oh, ah] = b.depthMix(ref(q), keys.map(ref), values.map(ref), args);
  const out = wrap(b, oh, keys[0].shape, values[0].dtype);
  const alpha = wrap(b, ah, [args.batch, args.kvHeads, args.t, args.m], 'f32');
  const m = args.m;
  record('depthMix', out, [q, ...keys, ...values], (g, saved) => {
    const qs = saved[0], ks = saved.slice(1, 1 + m), vs = saved.slice(1 + m, 1 + 2 * m), as = saved[1 + 2 * m];
    const [dq, dks, dvs] = b.depthMixBackward(ref(qs), ks.map(ref), vs.map(ref), ref(as), ref(g), args);
    return [
      wrap(b, dq, qs.shape, qs.dtype),
      ...dks.map((h, i) => wrap(b, h, ks[i].shape, ks[i].dtype)),
      ...dvs.map((h, i) => wrap(b, h, vs[i].shape, vs[i].dtype)),
    ];
  }, [q, ...keys, ...values, alpha]);
  alpha.dispose();
  return out;
}
