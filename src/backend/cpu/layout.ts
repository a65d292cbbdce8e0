/** CPU reference: data movement (strided copies, concat, gather/scatter, embedding). Dtype-agnostic. */
import { ArgumentError } from '../../errors.ts';
import { allocHost } from '../../tensor/dtype.ts';
import type { StridedArgs } from '../backend.ts';
import { checkStridedView } from '../strided_view.ts';
import { f32, forEachRow, sizeOf, store, type CpuHandle, type CpuRef } from './host.ts';

export function copyStrided(x: CpuRef, args: StridedArgs): CpuHandle {
  checkStridedView('copyStrided', x.h.length, args);
  const out = allocHost(x.dtype, sizeOf(args.outShape));
  const src = x.h;
  const step = args.strides.length ? args.strides[args.strides.length - 1] : 0;
  forEachRow(args.outShape, [args.strides], [args.offset], (i, o, len) => {
    const s0 = o[0];
    if (step === 1) out.set(src.subarray(s0, s0 + len) as never, i);
    else for (let j = 0; j < len; j++) out[i + j] = src[s0 + j * step];
  });
  return out;
}

export function assignStrided(base: CpuRef, src: CpuRef, args: StridedArgs): CpuHandle {
  checkStridedView('assignStrided', base.h.length, args, src.h.length);
  const out = base.h.slice();
  const sv = src.h;
  const step = args.strides.length ? args.strides[args.strides.length - 1] : 0;
  forEachRow(args.outShape, [args.strides], [args.offset], (i, o, len) => {
    const d0 = o[0];
    for (let j = 0; j < len; j++) out[d0 + j * step] = sv[i + j];
  });
  return out;
}

export function concat(xs: readonly CpuRef[], outer: number, inners: readonly number[]): CpuHandle {
  const total = inners.reduce((s, v) => s + v, 0);
  const out = allocHost(xs[0].dtype, outer * total);
  let col = 0;
  xs.forEach((x, k) => {
    const w = inners[k];
    for (let o = 0; o < outer; o++) out.set(x.h.subarray(o * w, o * w + w), o * total + col);
    col += w;
  });
  return out;
}

function checkIndex(i: number, n: number, op: string): void {
  if (!(i >= 0 && i < n)) throw new ArgumentError(`${op}: index ${i} out of range [0, ${n})`);
}

export function gather(x: CpuRef, idx: CpuRef, o: number, n: number, m: number, inner: number): CpuHandle {
  const out = allocHost(x.dtype, o * m * inner);
  const iv = idx.h, xv = x.h;
  for (let a = 0; a < o; a++) for (let j = 0; j < m; j++) for (let c = 0; c < inner; c++) {
    const p = (a * m + j) * inner + c;
    const r = iv[p];
    checkIndex(r, n, 'gather');
    out[p] = xv[(a * n + r) * inner + c];
  }
  return out;
}

export function gatherRows(x: CpuRef, rows: CpuRef, o: number, n: number, m: number, inner: number, share: number): CpuHandle {
  const out = allocHost(x.dtype, o * m * inner);
  const rv = rows.h, xv = x.h;
  for (let a = 0; a < o; a++) for (let j = 0; j < m; j++) {
    const r = rv[Math.floor(a / share) * m + j];
    checkIndex(r, n, 'gatherRows');
    out.set(xv.subarray((a * n + r) * inner, (a * n + r + 1) * inner) as never, (a * m + j) * inner);
  }
  return out;
}

export function scatterAdd(base: CpuRef, idx: CpuRef, src: CpuRef, o: number, n: number, m: number, inner: number): CpuHandle {
  const acc = Float32Array.from(f32(base));
  const sv = f32(src), iv = idx.h;
  for (let a = 0; a < o; a++) for (let j = 0; j < m; j++) for (let c = 0; c < inner; c++) {
    const p = (a * m + j) * inner + c;
    const r = iv[p];
    checkIndex(r, n, 'scatterAdd');
    acc[(a * n + r) * inner + c] += sv[p];
  }
  return store(acc, base.dtype);
}

export function embedding(table: CpuRef, ids: CpuRef, v: number, c: number): CpuHandle {
  const t = ids.h.length;
  const out = allocHost(table.dtype, t * c);
  for (let i = 0; i < t; i++) {
    const id = ids.h[i];
    checkIndex(id, v, 'embedding');
    out.set(table.h.subarray(id * c, id * c + c), i * c);
  }
  return out;
}

export function embeddingBackward(dy: CpuRef, ids: CpuRef, v: number, c: number): CpuHandle {
  const g = f32(dy);
  const out = new Float32Array(v * c);
  for (let i = 0; i < ids.h.length; i++) {
    const id = ids.h[i];
    checkIndex(id, v, 'embeddingBackward');
    for (let j = 0; j < c; j++) out[id * c + j] += g[i * c + j];
  }
  return store(out, dy.dtype);
}
