/**
 * CPU reference for Depth-Attention mixing (Backend.depthMix / depthMixBackward; specs/fpa_depth.md
 * §3.1, the `depth_softmax` mode). Row by row over (batch, kv head g, token):
 *   q̄ = (Σ_{h ∈ g} q_h) / r,   e_i = scale·⟨q̄, k_i⟩,   α = softmax(e) (max subtracted, f32),
 *   out = Σ_i α_i·v_i.
 * The backward, from the saved α: with dα_i = ⟨dout, v_i⟩ and de_i = α_i·(dα_i − Σ_j α_j·dα_j),
 *   dv_i = α_i·dout,  dk_i = scale·de_i·q̄,  dq̄ = scale·Σ_i de_i·k_i,  dq_h = dq̄ / r for h ∈ g
 * (§4.5: the q̄ gradient splits 1/r to each query head of the group). Inputs of any float dtype are
 * read as f32 once; outputs are stored in each input's dtype.
 */
import type { DepthMixArgs } from '../backend.ts';
import { dot } from './attention.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

/** q̄ of (b, g, token) into `qbar`: the sum of the group's r query heads, divided by r. */
function groupMean(qv: Float32Array, a: DepthMixArgs, b: number, g: number, i: number, qbar: Float32Array): void {
  const { heads, kvHeads, t, d } = a;
  const r = heads / kvHeads;
  qbar.fill(0);
  for (let j = 0; j < r; j++) {
    const qo = ((b * heads + g * r + j) * t + i) * d;
    for (let c = 0; c < d; c++) qbar[c] += qv[qo + c];
  }
  for (let c = 0; c < d; c++) qbar[c] /= r;
}

export function depthMix(q: CpuRef, keys: readonly CpuRef[], values: readonly CpuRef[], a: DepthMixArgs): [CpuHandle, CpuHandle] {
  const qv = f32(q), kv = keys.map(f32), vv = values.map(f32);
  const { batch, kvHeads, t, d, m, scale } = a;
  const out = new Float32Array(batch * kvHeads * t * d);
  const alpha = new Float32Array(batch * kvHeads * t * m);
  const qbar = new Float32Array(d), e = new Float32Array(m);
  for (let b = 0; b < batch; b++) for (let g = 0; g < kvHeads; g++) for (let i = 0; i < t; i++) {
    const row = (b * kvHeads + g) * t + i, o = row * d;
    groupMean(qv, a, b, g, i, qbar);
    let mx = -Infinity;
    for (let c = 0; c < m; c++) { e[c] = dot(qbar, 0, kv[c], o, d) * scale; if (e[c] > mx) mx = e[c]; }
    let sum = 0;
    for (let c = 0; c < m; c++) { e[c] = Math.exp(e[c] - mx); sum += e[c]; }
    for (let c = 0; c < m; c++) {
      const p = e[c] / sum;
      alpha[row * m + c] = p;
      const vc = vv[c];
      for (let x = 0; x < d; x++) out[o + x] += p * vc[o + x];
    }
  }
  return [store(out, values[0].dtype), alpha];
}

export function depthMixBackward(q: CpuRef, keys: readonly CpuRef[], values: readonly CpuRef[], alpha: CpuRef, dout: CpuRef, a: DepthMixArgs): [CpuHandle, CpuHandle[], CpuHandle[]] {
  const qv = f32(q), kv = keys.map(f32), vv = values.map(f32), al = f32(alpha), gv = f32(dout);
  const { batch, heads, kvHeads, t, d, m, scale } = a;
  const r = heads / kvHeads;
  const dq = new Float32Array(qv.length);
  const dk = kv.map((x) => new Float32Array(x.length)), dv = vv.map((x) => new Float32Array(x.length));
  const qbar = new Float32Array(d), de = new Float32Array(m), dqbar = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let g = 0; g < kvHeads; g++) for (let i = 0; i < t; i++) {
    const row = (b * kvHeads + g) * t + i, o = row * d;
    groupMean(qv, a, b, g, i, qbar);
    let mean = 0;
    for (let c = 0; c < m; c++) {
      const p = al[row * m + c];
      de[c] = dot(gv, o, vv[c], o, d);
      mean += p * de[c];
      const dvc = dv[c];
      for (let x = 0; x < d; x++) dvc[o + x] = p * gv[o + x];
    }
    dqbar.fill(0);
    for (let c = 0; c < m; c++) {
      const s = al[row * m + c] * (de[c] - mean) * scale;
      const kc = kv[c], dkc = dk[c];
      for (let x = 0; x < d; x++) { dkc[o + x] = s * qbar[x]; dqbar[x] += s * kc[o + x]; }
    }
    for (let j = 0; j < r; j++) {
      const qo = ((b * heads + g * r + j) * t + i) * d;
      for (let x = 0; x < d; x++) dq[qo + x] = dqbar[x] / r;
    }
  }
  return [store(dq, q.dtype), dk.map((x, c) => store(x, keys[c].dtype)), dv.map((x, c) => store(x, values[c].dtype))];
}
