/**
 * CPU reference for FoX attention (the FoX score modifier of Backend.attention, through attention_entry.ts; specs/fpa_depth.md
 * §1.1): causal softmax attention whose scores carry the forget-gate bias c[p] − c[j], c the
 * cumulative log forget gate of the query head at absolute positions (so the bias is the sum of
 * log f over (j, p], the gates after key j up to and including the query). Row by row over
 * (batch, head, query), as the plain attention reference (cpu/attention.ts): scores of the visible
 * keys into one scratch row, softmax in f32 with the row maximum subtracted, then the weighted sum
 * of values. The backward recomputes P from the saved logsumexp and, with dS_j = P_j·(dO·v_j − dO·O),
 *   dq += scale·Σ dS_j·k_j,  dk_j += scale·dS_j·q,  dv_j += P_j·dO,
 *   dc[p] += Σ_j dS_j (c as the query's row),  dc[j] −= dS_j (c as key j's column),
 * the diagonal j = p left out of dc (its bias c[p] − c[p] is 0 whatever c is). dk, dv sum the query
 * heads of a GQA group; dc stays per query head. Inputs of any float dtype are read as f32 once.
 */
import type { FoxAttentionArgs } from '../backend.ts';
import { dot, finishRow } from './attention.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

/** Keys [0, end) visible to the query at absolute position p (causal, inside kvLength); end 0 when none. */
export function causalEnd(p: number, kvLength: number): number {
  return Math.max(0, Math.min(kvLength, p + 1));
}

export function foxAttention(q: CpuRef, k: CpuRef, v: CpuRef, c: CpuRef, a: FoxAttentionArgs): [CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v), cv = f32(c);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const out = new Float32Array(batch * heads * tq * d);
  const lse = new Float32Array(batch * heads * tq);
  const s = new Float32Array(Math.max(1, a.kvLength));
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const kvBase = (b * kvHeads + Math.floor(h / group)) * tk * d;
    const cBase = (b * heads + h) * tk;
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const p = a.qOffset + i;
      const end = causalEnd(p, a.kvLength);
      if (end === 0) { lse[row] = -Infinity; continue; }
      const cq = cv[cBase + p];
      let m = -Infinity;
      for (let j = 0; j < end; j++) {
        const x = dot(qv, qo, kv, kvBase + j * d, d) * scale + (cq - cv[cBase + j]);
        s[j] = x;
        if (x > m) m = x;
      }
      lse[row] = finishRow(s, m, 0, end, vv, kvBase, d, acc, out, qo);
    }
  }
  return [store(out, q.dtype), lse];
}

export function foxAttentionBackward(q: CpuRef, k: CpuRef, v: CpuRef, c: CpuRef, o: CpuRef, lse: CpuRef, dout: CpuRef, a: FoxAttentionArgs): [CpuHandle, CpuHandle, CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v), cv = f32(c), ov = f32(o), lv = f32(lse), gv = f32(dout);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const dq = new Float32Array(qv.length), dk = new Float32Array(kv.length), dv = new Float32Array(vv.length);
  const dc = new Float32Array(cv.length);
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const kvBase = (b * kvHeads + Math.floor(h / group)) * tk * d;
    const cBase = (b * heads + h) * tk;
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const p = a.qOffset + i;
      const end = causalEnd(p, a.kvLength);
      if (end === 0) continue;
      const cq = cv[cBase + p];
      let delta = 0;
      for (let t = 0; t < d; t++) delta += gv[qo + t] * ov[qo + t];
      acc.fill(0);
      let rowSum = 0;
      for (let j = 0; j < end; j++) {
        const ko = kvBase + j * d;
        const prob = Math.exp(dot(qv, qo, kv, ko, d) * scale + (cq - cv[cBase + j]) - lv[row]);
        const ds = prob * (dot(gv, qo, vv, ko, d) - delta);
        const dss = ds * scale;
        for (let t = 0; t < d; t++) {
          dv[ko + t] += prob * gv[qo + t];
          dk[ko + t] += dss * qv[qo + t];
          acc[t] += dss * kv[ko + t];
        }
        if (j !== p) { rowSum += ds; dc[cBase + j] -= ds; }
      }
      dc[cBase + p] += rowSum;
      for (let t = 0; t < d; t++) dq[qo + t] = acc[t];
    }
  }
  return [store(dq, q.dtype), store(dk, k.dtype), store(dv, v.dtype), dc];
}
