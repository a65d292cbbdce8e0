/**
 * The exact merge of attention over disjoint key sets (the flash-decoding combine; Focus's set A and
 * set B, specs/focus_spot.md A4): each part gives out (B, H, m, D) and its per-row logsumexp
 * lse (B, H, m) over its own keys, and the attention over the union of the keys is
 *
 *   out = Σ_i e^{lse_i − M} out_i / Σ_i e^{lse_i − M},   M = max_i lse_i   (in f32),
 *
 * a part whose row saw no key (lse −∞, or below −1e30) weighing 0 there; a row that saw no key in
 * any part comes out NaN (0/0), as no softmax over nothing is defined. No autograd.
 */
import type { Tensor } from '../tensor/tensor.ts';
import { cast } from './cast.ts';
import { add, div, exp, gt, maximum, mul, sub, where } from './elementwise.ts';
import { reshape } from './layout.ts';

/** The combine: partial (out (B, H, m, D), lse (B, H, m)) pairs → the attention over all their keys, a part with lse −∞ (no key seen) weighing 0. */
export function mergeByLse(parts: readonly [Tensor, Tensor][], dtype: Tensor['dtype']): Tensor {
  const [b, h, m] = parts[0][1].shape;
  const lses = parts.map(([, l]) => reshape(l, [b, h, m, 1]));
  const seen = lses.map((l) => gt(l, -1e30)); // a row that saw no key of a part: −∞ (or −BIG) there
  const safe = lses.map((l, i) => where(seen[i], l, -1e30));
  const top = safe.reduce((a, l) => maximum(a, l));
  let num: Tensor | undefined, den: Tensor | undefined;
  parts.forEach(([o], i) => {
    const wgt = where(seen[i], exp(sub(safe[i], top)), 0);
    const term = mul(where(seen[i], o.dtype === 'f32' ? o : cast(o, 'f32'), 0), wgt);
    num = num ? add(num, term) : term;
    den = den ? add(den, wgt) : wgt;
  });
  const out = div(num!, den!);
  return dtype === 'f32' ? out : cast(out, dtype);
}
