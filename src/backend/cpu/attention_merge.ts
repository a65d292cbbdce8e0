/** CPU reference: the logsumexp merge of two attention parts (Backend.mergeLse). */
import type { MergeArgs, MergePart } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

export function mergeLse(a: MergePart<CpuHandle>, b: MergePart<CpuHandle>, args: MergeArgs): [CpuHandle, CpuHandle] {
  const { o, m, d, share } = args;
  const parts = [a, b].map((p) => ({ x: f32(p.out as CpuRef), l: f32(p.lse as CpuRef), rows: p.rows ? (p.rows as CpuRef).h : null, n: p.n }));
  const out = new Float32Array(o * m * d), lse = new Float32Array(o * m);
  const at = new Int32Array(2), w = new Float32Array(2);
  for (let oo = 0; oo < o; oo++) for (let i = 0; i < m; i++) {
    const row = oo * m + i;
    let top = -Infinity, seen = false;
    for (let p = 0; p < 2; p++) {
      const q = parts[p];
      at[p] = q.rows ? oo * q.n + q.rows[Math.floor(oo / share) * m + i] : row;
      if (q.l[at[p]] > -1e30) { seen = true; top = Math.max(top, q.l[at[p]]); }
    }
    for (let p = 0; p < 2; p++) w[p] = parts[p].l[at[p]] > -1e30 ? Math.exp(parts[p].l[at[p]] - top) : 0;
    const den = w[0] + w[1];
    for (let c = 0; c < d; c++) {
      let num = 0;
      for (let p = 0; p < 2; p++) if (w[p] > 0) num += w[p] * parts[p].x[at[p] * d + c];
      out[row * d + c] = seen ? num / den : NaN;
    }
    lse[row] = seen ? top + Math.log(den) : -Infinity;
  }
  return [store(out, args.dtype), lse];
}
