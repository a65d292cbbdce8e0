/**
 * CPU reference for FPA, First Passage Attention (the FPA score modifier of Backend.attention, through attention_entry.ts).
 * The variant is the [P] design of specs/fpa_depth.md §2.2: one penalty per *kv* head, shared by
 * its GQA query group (so a key's eviction is shared too), with
 *   M_ij   = min φ_t over t ∈ (j, p_i]   (+∞ on the diagonal j = p_i)
 *   pen_ij = λ_g · relu(ℓ_j − M_ij),     s_ij = scale·q_i·k_j − pen_ij   (j ≤ p_i, causal only)
 * φ (phi) and ℓ (level) are (batch, kvHeads, tk) f32 over absolute positions, λ (kvHeads) f32.
 *
 * Forward (§2.4 reference): per query row, sweep j = p … 0 keeping m = M_ij: the penalty of key j
 * uses the m of the keys after it, then m ← min(m, φ_j). O(T²·D) time, O(1) extra per row.
 * Backward (§2.4): the same sweep also keeps the argmin t* of m. Ties go to the LATEST index (the
 * sweep runs backwards and only a strictly smaller φ moves t*), the rule every FPA kernel follows in
 * forward and backward. With g = dS_ij = P_ij·(dO·v_j − dO·O) and act = 1[ℓ_j > M_ij] (a relu at
 * exactly 0 passes no gradient):
 *   dℓ_j −= λ·g·act,   dφ_{t*(i,j)} += λ·g·act,   dλ −= g·relu(ℓ_j − M_ij),
 * plus dq, dk, dv as in plain attention (dk, dv summed over the GQA group). dφ is not scattered once
 * per (i, j): the row carries λ·Σ g·act for its current argmin and flushes it into dφ[t*] only when
 * t* moves (and at the end of the row), the carry scheme a GPU kernel without float atomics needs.
 *
 * λ must be finite and > 0: checked here (ArgumentError naming the kv head) since it is a value,
 * not a shape; a GPU kernel cannot throw and will not check it.
 */
import { ArgumentError } from '../../errors.ts';
import type { FpaAttentionArgs } from '../backend.ts';
import { dot, finishRow } from './attention.ts';
import { causalEnd } from './fox_attention.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

function checkLambda(op: string, lam: Float32Array): void {
  for (let g = 0; g < lam.length; g++) {
    if (!(Number.isFinite(lam[g]) && lam[g] > 0)) throw new ArgumentError(`${op}: lambda[${g}] = ${lam[g]} must be a finite number > 0 (the penalty scale of kv head ${g})`);
  }
}

export function fpaAttention(q: CpuRef, k: CpuRef, v: CpuRef, phi: CpuRef, level: CpuRef, lambda: CpuRef, a: FpaAttentionArgs): [CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v), fv = f32(phi), lvl = f32(level), lam = f32(lambda);
  checkLambda('fpaAttention', lam);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const out = new Float32Array(batch * heads * tq * d);
  const lse = new Float32Array(batch * heads * tq);
  const s = new Float32Array(Math.max(1, a.kvLength));
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const g = Math.floor(h / group);
    const kvBase = (b * kvHeads + g) * tk * d;
    const wBase = (b * kvHeads + g) * tk; // φ and ℓ of this kv head
    const lg = lam[g];
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const end = causalEnd(a.qOffset + i, a.kvLength);
      if (end === 0) { lse[row] = -Infinity; continue; }
      let mx = -Infinity;
      let m = Infinity; // M_ij for the key about to be scored: min φ over (j, p]
      for (let j = end - 1; j >= 0; j--) {
        const gap = lvl[wBase + j] - m;
        const x = dot(qv, qo, kv, kvBase + j * d, d) * scale - (gap > 0 ? lg * gap : 0);
        s[j] = x;
        if (x > mx) mx = x;
        const f = fv[wBase + j];
        if (f < m) m = f;
      }
      lse[row] = finishRow(s, mx, 0, end, vv, kvBase, d, acc, out, qo);
    }
  }
  return [store(out, q.dtype), lse];
}

export function fpaAttentionBackward(
  q: CpuRef, k: CpuRef, v: CpuRef, phi: CpuRef, level: CpuRef, lambda: CpuRef, o: CpuRef, lse: CpuRef, dout: CpuRef, a: FpaAttentionArgs,
): [CpuHandle, CpuHandle, CpuHandle, CpuHandle, CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v), fv = f32(phi), lvl = f32(level), lam = f32(lambda);
  const ov = f32(o), lsev = f32(lse), gv = f32(dout);
  checkLambda('fpaAttention', lam);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const dq = new Float32Array(qv.length), dk = new Float32Array(kv.length), dv = new Float32Array(vv.length);
  const dphi = new Float32Array(fv.length), dlevel = new Float32Array(lvl.length);
  const dlam = new Float64Array(kvHeads);
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const g = Math.floor(h / group);
    const kvBase = (b * kvHeads + g) * tk * d;
    const wBase = (b * kvHeads + g) * tk;
    const lg = lam[g];
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const end = causalEnd(a.qOffset + i, a.kvLength);
      if (end === 0) continue;
      let delta = 0;
      for (let t = 0; t < d; t++) delta += gv[qo + t] * ov[qo + t];
      acc.fill(0);
      let m = Infinity, argmin = -1; // M_ij and t*(i, j); −1 while j = p (no t in the empty span)
      let carry = 0; // λ·Σ g·act of the keys whose argmin is the current t*, not yet in dφ
      let dl = 0;
      for (let j = end - 1; j >= 0; j--) {
        const ko = kvBase + j * d;
        const gap = lvl[wBase + j] - m;
        const active = gap > 0;
        const prob = Math.exp(dot(qv, qo, kv, ko, d) * scale - (active ? lg * gap : 0) - lsev[row]);
        const ds = prob * (dot(gv, qo, vv, ko, d) - delta);
        const dss = ds * scale;
        for (let t = 0; t < d; t++) {
          dv[ko + t] += prob * gv[qo + t];
          dk[ko + t] += dss * qv[qo + t];
          acc[t] += dss * kv[ko + t];
        }
        if (active) {
          dlevel[wBase + j] -= lg * ds;
          carry += lg * ds;
          dl -= ds * gap;
        }
        const f = fv[wBase + j];
        if (f < m) {
          if (argmin >= 0) dphi[wBase + argmin] += carry;
          m = f; argmin = j; carry = 0;
        }
      }
      if (argmin >= 0) dphi[wBase + argmin] += carry;
      dlam[g] += dl;
      for (let t = 0; t < d; t++) dq[qo + t] = acc[t];
    }
  }
  return [store(dq, q.dtype), store(dk, k.dtype), store(dv, v.dtype), dphi, dlevel, Float32Array.from(dlam)];
}
