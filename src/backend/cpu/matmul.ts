/** CPU reference GEMM: plain loops in i-k-j order, f32 accumulation. */
import type { MatmulArgs } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

export function matmul(a: CpuRef, b: CpuRef, args: MatmulArgs): CpuHandle {
  const { batch, m, n, k, transA, transB, batchA, batchB } = args;
  const av = f32(a), bv = f32(b);
  const out = new Float32Array(batch * m * n);
  const row = new Float32Array(n);
  for (let p = 0; p < batch; p++) {
    const aOff = (batchA === 1 ? 0 : p) * m * k;
    const bOff = (batchB === 1 ? 0 : p) * k * n;
    const cOff = p * m * n;
    for (let i = 0; i < m; i++) {
      row.fill(0);
      for (let l = 0; l < k; l++) {
        const aik = transA ? av[aOff + l * m + i] : av[aOff + i * k + l];
        if (transB) for (let j = 0; j < n; j++) row[j] += aik * bv[bOff + j * k + l];
        else {
          const bRow = bOff + l * n;
          for (let j = 0; j < n; j++) row[j] += aik * bv[bRow + j];
        }
      }
      out.set(row, cOff + i * n);
    }
  }
  return store(out, args.outDType);
}
