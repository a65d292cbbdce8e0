/**
 * Dense masked attention composed from primitive ops (STYLE.md §8: the plain path beside the
 * fast one). Same contract as ops/attention.ts `attention`, used as its reference in tests and
 * readable as the definition:
 *
 *   out[b,h,i] = Σ_j softmax_j(scale · q[b,h,i]·k[b,h/G,j] + mask(i,j)) · v[b,h/G,j]
 *
 * with query i at absolute position p = kvLength − Tq + i, key j visible iff j ≤ p (causal) and
 * p − window < j (sliding window), G = H / Hkv query heads per key/value head (GQA).
 */
import { ShapeError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { add, mul } from '../ops/elementwise.ts';
import { narrow, reshape } from '../ops/layout.ts';
import { matmul } from '../ops/matmul.ts';
import { softmax } from '../ops/reduce.ts';
import { tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface DenseAttentionOptions { causal?: boolean; window?: number; scale?: number; kvLength?: number }

/** The additive mask (Tq, L): 0 where visible, −1e30 where not. */
export function attentionMask(tq: number, l: number, causal: boolean, window?: number): Float32Array {
  const m = new Float32Array(tq * l);
  const off = l - tq;
  for (let i = 0; i < tq; i++) {
    const p = off + i;
    for (let j = 0; j < l; j++) {
      const hidden = (causal && j > p) || (window !== undefined && j <= p - window);
      m[i * l + j] = hidden ? -1e30 : 0;
    }
  }
  return m;
}

/** q (B, H, Tq, D), k and v (B, Hkv, Tk, D) → (B, H, Tq, D). */
export function denseAttention(q: Tensor, k: Tensor, v: Tensor, opts: DenseAttentionOptions = {}): Tensor {
  const [b, h, tq, d] = q.shape;
  const [, hkv, tk] = k.shape;
  if (q.rank !== 4 || k.rank !== 4 || v.shape.join() !== k.shape.join() || k.shape[0] !== b || k.shape[3] !== d || h % hkv !== 0) {
    throw new ShapeError(`denseAttention: q [${q.shape}], k [${k.shape}], v [${v.shape}]: expected q (B, H, Tq, D) and k, v (B, Hkv, Tk, D) with Hkv dividing H`);
  }
  const l = opts.kvLength ?? tk;
  const g = h / hkv;
  const scale = opts.scale ?? 1 / Math.sqrt(d);
  return tidy(() => {
    const qg = reshape(q, [b, hkv, g * tq, d]); // (B, Hkv, G·Tq, D)
    const kl = narrow(k, 2, 0, l), vl = narrow(v, 2, 0, l); // (B, Hkv, L, D)
    const s = mul(matmul(qg, kl, { transB: true }), scale); // (B, Hkv, G·Tq, L)
    const mask = tensor(attentionMask(tq, l, opts.causal ?? true, opts.window), [tq, l], { backend: q.backend, dtype: s.dtype });
    const p = softmax(add(reshape(s, [b, hkv, g, tq, l]), mask), -1); // (B, Hkv, G, Tq, L)
    const o = matmul(reshape(p, [b, hkv, g * tq, l]), vl); // (B, Hkv, G·Tq, D)
    return reshape(o, [b, h, tq, d]);
  });
}
