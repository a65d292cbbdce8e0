/**
 * Log-probabilities of sampled tokens under the model's distribution (the softmax of the raw
 * logits: before temperature, top-k/top-p and repetition penalties, as OpenAI reports them), with
 * the `top` most likely tokens of each step, best first (ties by the lower id).
 */
export interface TokenLogprob {
  token: number;
  logprob: number;
  top: { token: number; logprob: number }[];
}

/** The logprob of `chosen` in `row` (−∞ entries are tokens that cannot occur) and the row's `top` best. */
export function tokenLogprob(row: Float32Array, chosen: number, top: number): TokenLogprob {
  let m = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > m) m = row[i];
  let z = 0;
  for (let i = 0; i < row.length; i++) if (row[i] > -Infinity) z += Math.exp(row[i] - m);
  const lse = m + Math.log(z);
  const best: { token: number; logprob: number }[] = [];
  if (top > 0) {
    // Insertion into a list of `top`: O(V·top), top ≤ 20.
    for (let i = 0; i < row.length; i++) {
      const x = row[i];
      if (!(x > -Infinity)) continue;
      if (best.length === top && x <= best[top - 1].logprob) continue;
      let at = best.length;
      while (at > 0 && best[at - 1].logprob < x) at--;
      best.splice(at, 0, { token: i, logprob: x });
      if (best.length > top) best.pop();
    }
    for (const b of best) b.logprob -= lse;
  }
  return { token: chosen, logprob: row[chosen] - lse, top: best };
}
