/**
 * Lighthouse Attention (specs/lighthouse_fon.md Part 1), training only: per head, q, k and v are
 * mean-pooled into an L-level pyramid (§1.3), a parameter-free `norm` score (scores.ts,
 * §1.4) drives a tile-stratified coarse-to-fine top-k cascade with no gradient (selection.ts, §1.5),
 * the selected pyramid rows are gathered in causal order, ordinary causal attention runs over the
 * gathered sequence (ops/attention.ts, §1.6), and the outputs are scattered back with the c_l − 1
 * shift (scatter.ts, §1.7). Gradients flow through scatter → attention → gather → pooling to q, k
 * and v; the selection has none (no straight-through estimator, no auxiliary loss).
 *
 * Grouped-query attention: the authors run with Hkv = H only (§1.8); FON repeats k and v to H heads
 * first (a broadcast, whose gradient sums back over each group), so selection is per query head.
 * Sequences that are not a multiple of the tile structure are padded with zero rows (geometry.ts).
 *
 * Decoding: the selection ranks blocks up to a tile ahead (§1.6's residual non-causality), so the
 * layer cannot run incrementally; `forwardCached` throws an UnsupportedError that says to switch the
 * layer to its recovery target, full attention (§1.13), for inference. A silent fall-back to full
 * attention was rejected: it would decode a different function from the one `forward` trains.
 *
 * Every step runs on the tensors' backend (cpu, wasm, webgpu), with no read to the host: the
 * selection is the lighthouseSelect op (selection.ts); each gather pools the selected rows straight
 * from the tokens in one pass (pyramidGather: the pyramid is never built whole) and the scatter-back
 * is its adjoint (scatter.ts), each the other's gradient. Index memory: B·H·(S + total) words.
 */
import { ArgumentError, UnsupportedError } from '../../errors.ts';
import { attention } from '../../ops/attention.ts';
import { pyramidGather } from '../../ops/pyramid_rows.ts';
import { broadcastTo, reshape } from '../../ops/layout.ts';
import { Module } from '../../nn/module.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { AttentionMechanism, LayerKv, MechanismInput } from '../mechanism.ts';
import { lighthouseGeometry, pyramidLevels, type LighthouseOptions } from './geometry.ts';
import { lighthouseScatter } from './scatter.ts';
import { makeSelection, type LighthouseSelection } from './selection.ts';

/** x (B, Hkv, T, D) → (B, H, T, D): kv head j serves query heads j·g … j·g + g − 1. */
function repeatHeads(x: Tensor, heads: number): Tensor {
  const [b, hkv, t, d] = x.shape;
  if (hkv === heads) return x;
  const wide = broadcastTo(reshape(x, [b, hkv, 1, t, d]), [b, hkv, heads / hkv, t, d]); // (B, Hkv, g, T, D)
  const out = reshape(wide, [b, heads, t, d]);
  wide.dispose();
  return out;
}

/**
 * The selection Lighthouse makes for q (B, H, N, D) and k (B, Hkv, N, D): no gradient; tests freeze
 * it and pass it back to lighthouseAttention. The caller disposes it.
 */
export function lighthouseSelection(q: Tensor, k: Tensor, o: LighthouseOptions, v?: Tensor): LighthouseSelection {
  if (o.scorer !== 'dilated') return makeSelection(q, k, lighthouseGeometry(q.shape[2], o));
  if (!v) throw new ArgumentError('lighthouse: the dilated scorer reads v; pass it to lighthouseSelection');
  const h = q.shape[1], kh = repeatHeads(k, h), vh = repeatHeads(v, h);
  const sel = makeSelection(q, kh, lighthouseGeometry(q.shape[2], o), 'dilated', vh, o.dilation);
  if (kh !== k) kh.dispose();
  if (vh !== v) vh.dispose();
  return sel;
}

/**
 * x (B, H, N, D) → the rows `sel` gathers, (B, H, S, D) in causal order: each the mean of its window
 * of tokens (§1.3; tokens past N count as the zero padding), pooled straight from x in one pass
 * (ops/pyramid_rows.ts pyramidGather with the `pool` levels; the pyramid is never built whole),
 * differentiable in x (the gradient is the adjoint pass, through the selection's inverse).
 */
export function lighthouseGather(x: Tensor, sel: LighthouseSelection): Tensor {
  return pyramidGather(x, sel.rows, sel.inverse, pyramidLevels(sel.geometry, 'pool'));
}

/**
 * Lighthouse attention of q (B, H, N, D), k and v (B, Hkv, N, D) → (B, H, N, D), differentiable
 * in q, k and v. `selection` (from lighthouseSelection over the same shapes) freezes the cascade's
 * choice; absent, it is made from q and k.
 */
export function lighthouseAttention(q: Tensor, k: Tensor, v: Tensor, o: LighthouseOptions, selection?: LighthouseSelection): Tensor {
  const [b, h, n, d] = q.shape;
  const g = selection?.geometry ?? lighthouseGeometry(n, o);
  if (selection && (g.n !== n || selection.lists !== b * h)) throw new ArgumentError(`lighthouse: the frozen selection was made for ${selection.lists} lists of ${g.n} tokens, not ${b}·${h} of ${n}`);
  const kh = repeatHeads(k, h), vh = repeatHeads(v, h);
  const sel = selection ?? (o.scorer === 'dilated' ? makeSelection(q, kh, g, 'dilated', vh, o.dilation) : makeSelection(q, k, g));
  const qs = lighthouseGather(q, sel), ks = lighthouseGather(kh, sel), vs = lighthouseGather(vh, sel); // (B, H, S, D) each, causal order
  const os = attention(qs, ks, vs, { causal: true, scale: 1 / Math.sqrt(d) }); // (B, H, S, D)
  const y = lighthouseScatter(os, sel); // (B, H, N, D)
  for (const t of [qs, ks, vs, os]) t.dispose();
  if (kh !== k) kh.dispose();
  if (vh !== v) vh.dispose();
  if (sel !== selection) sel.dispose();
  return y;
}

export class LighthouseAttention extends Module implements AttentionMechanism {
  readonly name: string;

  constructor(readonly options: LighthouseOptions) {
    super();
    const o = options;
    this.name = `lighthouse(L=${o.levels}, p=${o.pool}, k=${o.topk}${o.scorer === 'norm' ? '' : `, ${o.scorer}`})`;
  }

  forward(q: Tensor, k: Tensor, v: Tensor, _input?: MechanismInput): Tensor {
    return lighthouseAttention(q, k, v, this.options);
  }

  forwardCached(_q: Tensor, _k: Tensor, _v: Tensor, _input: MechanismInput | undefined, _cache: LayerKv, _pos: number): Tensor {
    throw new UnsupportedError(`${this.name}: Lighthouse attention is training-only and cannot decode from a KV cache (its selection looks ahead within a tile); switch this layer to its recovery target {"type": "full"} for inference (specs/lighthouse_fon.md §1.13)`);
  }
}
