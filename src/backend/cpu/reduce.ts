/** CPU reference: reductions, softmax, logsumexp, scans and sort, all over the last axis. */
import type { ReduceOp, ScanOp } from '../backend.ts';
import { f32, numbers, store, storeNumbers, type CpuHandle, type CpuRef } from './host.ts';

export function reduce(x: CpuRef, op: ReduceOp, rows: number, cols: number): CpuHandle {
  const v = numbers(x);
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    if (op === 'sum') {
      let s = 0;
      for (let c = 0; c < cols; c++) s += v[base + c];
      out[r] = s;
    } else {
      let m = op === 'max' ? -Infinity : Infinity;
      for (let c = 0; c < cols; c++) {
        const e = v[base + c];
        if (Number.isNaN(e)) { m = NaN; break; }
        m = op === 'max' ? (e > m ? e : m) : (e < m ? e : m);
      }
      out[r] = m;
    }
  }
  return storeNumbers(out, x.dtype);
}

export function softmax(x: CpuRef, rows: number, cols: number): CpuHandle {
  const v = f32(x);
  const out = new Float32Array(v.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, v[base + c]);
    let s = 0;
    for (let c = 0; c < cols; c++) { const e = Math.exp(v[base + c] - m); out[base + c] = e; s += e; }
    for (let c = 0; c < cols; c++) out[base + c] /= s;
  }
  return store(out, x.dtype);
}

export function softmaxBackward(y: CpuRef, dy: CpuRef, rows: number, cols: number): CpuHandle {
  const yv = f32(y), gv = f32(dy);
  const out = new Float32Array(yv.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += yv[base + c] * gv[base + c];
    for (let c = 0; c < cols; c++) out[base + c] = yv[base + c] * (gv[base + c] - dot);
  }
  return store(out, y.dtype);
}

export function logsumexp(x: CpuRef, rows: number, cols: number): CpuHandle {
  const v = f32(x);
  const out = new Float32Array(rows);
  for (let r = 0; r < rows; r++) out[r] = rowLogsumexp(v, r * cols, cols);
  return store(out, x.dtype);
}

export function rowLogsumexp(v: Float32Array, base: number, cols: number): number {
  let m = -Infinity;
  for (let c = 0; c < cols; c++) m = Math.max(m, v[base + c]);
  // ±Infinity max: the exp-sum below would compute inf - inf = NaN; the answer is the max itself
  // (as on the GPU). A NaN anywhere makes m NaN and the result NaN.
  if (m === -Infinity || m === Infinity) return m;
  let s = 0;
  for (let c = 0; c < cols; c++) s += Math.exp(v[base + c] - m);
  return m + Math.log(s);
}

/** Inclusive scan; for max/min the index is the latest position holding the running extreme. */
export function scan(x: CpuRef, op: ScanOp, rows: number, cols: number): [CpuHandle, CpuHandle | null] {
  const v = numbers(x);
  const out = new Float64Array(v.length);
  const idx = op === 'sum' ? null : new Int32Array(v.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let acc = 0, at = 0;
    for (let c = 0; c < cols; c++) {
      const e = v[base + c];
      if (op === 'sum') acc += e;
      else if (c === 0 || (op === 'max' ? e >= acc : e <= acc)) { acc = e; at = c; }
      out[base + c] = acc;
      if (idx) idx[base + c] = at;
    }
  }
  return [storeNumbers(out, x.dtype), idx];
}

/**
 * Ascending total order of the sort kernels (rows_sort.wgsl's key_of): NaN after +Infinity,
 * −0 equal to +0. `v[i] - v[j]` is no comparator once NaN (or inf − inf) appears.
 */
function compareAsc(a: number, b: number): number {
  const an = a !== a, bn = b !== b;
  if (an || bn) return an === bn ? 0 : an ? 1 : -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Stable sort of each row; ties keep their original order. NaN goes last ascending, first descending. */
export function sort(x: CpuRef, rows: number, cols: number, descending: boolean): [CpuHandle, CpuHandle] {
  const v = numbers(x);
  const out = new Float64Array(v.length);
  const idx = new Int32Array(v.length);
  const order = new Array<number>(cols);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    for (let c = 0; c < cols; c++) order[c] = c;
    order.sort(descending ? (i, j) => compareAsc(v[base + j], v[base + i]) : (i, j) => compareAsc(v[base + i], v[base + j]));
    for (let c = 0; c < cols; c++) { out[base + c] = v[base + order[c]]; idx[base + c] = order[c]; }
  }
  return [storeNumbers(out, x.dtype), idx];
}
