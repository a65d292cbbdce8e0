/** CPU reference for the fused kernels: RMSNorm, LayerNorm, RoPE, cross-entropy. */
import type { NormArgs } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';
import { rowLogsumexp } from './reduce.ts';

export function rmsnorm(x: CpuRef, w: CpuRef, { rows, cols, eps }: NormArgs): [CpuHandle, CpuHandle] {
  const xv = f32(x), wv = f32(w);
  const y = new Float32Array(xv.length), rstd = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let ss = 0;
    for (let c = 0; c < cols; c++) ss += xv[base + c] * xv[base + c];
    const s = 1 / Math.sqrt(ss / cols + eps);
    rstd[r] = s;
    for (let c = 0; c < cols; c++) y[base + c] = xv[base + c] * s * wv[c];
  }
  return [store(y, x.dtype), rstd];
}

/** `alloc` makes dx (the wasm backend passes its recycled, wasm-resident arrays). */
export function rmsnormBackward(x: CpuRef, w: CpuRef, rstd: CpuRef, dy: CpuRef, { rows, cols }: NormArgs, alloc: (n: number) => Float32Array<ArrayBufferLike> = (n) => new Float32Array(n)): [CpuHandle, CpuHandle] {
  const xv = f32(x), wv = f32(w), sv = f32(rstd), gv = f32(dy);
  const dx = alloc(xv.length), dw = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    const base = r * cols, s = sv[r];
    let dot = 0;
    for (let c = 0; c < cols; c++) dot += gv[base + c] * wv[c] * xv[base + c];
    const k = (dot * s * s * s) / cols;
    for (let c = 0; c < cols; c++) {
      dx[base + c] = gv[base + c] * wv[c] * s - xv[base + c] * k;
      dw[c] += gv[base + c] * xv[base + c] * s;
    }
  }
  return [store(dx, x.dtype), store(dw, w.dtype)];
}

export function layernorm(x: CpuRef, w: CpuRef, b: CpuRef, { rows, cols, eps }: NormArgs): [CpuHandle, CpuHandle, CpuHandle] {
  const xv = f32(x), wv = f32(w), bv = f32(b);
  const y = new Float32Array(xv.length), mean = new Float32Array(rows), rstd = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let mu = 0;
    for (let c = 0; c < cols; c++) mu += xv[base + c];
    mu /= cols;
    let vr = 0;
    for (let c = 0; c < cols; c++) { const d = xv[base + c] - mu; vr += d * d; }
    const s = 1 / Math.sqrt(vr / cols + eps);
    mean[r] = mu; rstd[r] = s;
    for (let c = 0; c < cols; c++) y[base + c] = (xv[base + c] - mu) * s * wv[c] + bv[c];
  }
  return [store(y, x.dtype), mean, rstd];
}

export function layernormBackward(x: CpuRef, w: CpuRef, mean: CpuRef, rstd: CpuRef, dy: CpuRef, { rows, cols }: NormArgs): [CpuHandle, CpuHandle, CpuHandle] {
  const xv = f32(x), wv = f32(w), mv = f32(mean), sv = f32(rstd), gv = f32(dy);
  const dx = new Float32Array(xv.length), dw = new Float32Array(cols), db = new Float32Array(cols);
  for (let r = 0; r < rows; r++) {
    const base = r * cols, mu = mv[r], s = sv[r];
    let sumG = 0, sumGX = 0;
    for (let c = 0; c < cols; c++) {
      const xh = (xv[base + c] - mu) * s;
      const g = gv[base + c] * wv[c];
      sumG += g; sumGX += g * xh;
      dw[c] += gv[base + c] * xh;
      db[c] += gv[base + c];
    }
    for (let c = 0; c < cols; c++) {
      const xh = (xv[base + c] - mu) * s;
      const g = gv[base + c] * wv[c];
      dx[base + c] = s * (g - sumG / cols - xh * sumGX / cols);
    }
  }
  return [store(dx, x.dtype), store(dw, w.dtype), store(db, w.dtype)];
}

export function rope(x: CpuRef, cos: CpuRef, sin: CpuRef, o: number, t: number, inner: number, d: number, interleaved: boolean, inverse: boolean): CpuHandle {
  const xv = f32(x), cv = f32(cos), sv = f32(sin);
  const out = new Float32Array(xv.length);
  const half = d / 2;
  for (let a = 0; a < o; a++) for (let p = 0; p < t; p++) for (let h = 0; h < inner; h++) {
    const base = ((a * t + p) * inner + h) * d;
    for (let j = 0; j < half; j++) {
      const c = cv[p * half + j], s = inverse ? -sv[p * half + j] : sv[p * half + j];
      const i0 = base + (interleaved ? 2 * j : j), i1 = base + (interleaved ? 2 * j + 1 : j + half);
      const x0 = xv[i0], x1 = xv[i1];
      out[i0] = x0 * c - x1 * s;
      out[i1] = x0 * s + x1 * c;
    }
  }
  return store(out, x.dtype);
}

export function crossEntropy(logits: CpuRef, targets: CpuRef, n: number, v: number, ignoreIndex: number): [CpuHandle, CpuHandle] {
  const lv = f32(logits), tv = targets.h;
  const loss = new Float32Array(n), lse = new Float32Array(n);
  for (let r = 0; r < n; r++) {
    const l = rowLogsumexp(lv, r * v, v);
    lse[r] = l;
    const t = tv[r];
    loss[r] = t === ignoreIndex || t < 0 || t >= v ? 0 : l - lv[r * v + t];
  }
  return [loss, lse];
}

export function crossEntropyBackward(logits: CpuRef, targets: CpuRef, lse: CpuRef, dloss: CpuRef, n: number, v: number, ignoreIndex: number): CpuHandle {
  const lv = f32(logits), tv = targets.h, sv = f32(lse), gv = f32(dloss);
  const out = new Float32Array(n * v);
  for (let r = 0; r < n; r++) {
    const t = tv[r];
    if (t === ignoreIndex || t < 0 || t >= v) continue;
    const g = gv[r], l = sv[r];
    for (let c = 0; c < v; c++) out[r * v + c] = g * (Math.exp(lv[r * v + c] - l) - (c === t ? 1 : 0));
  }
  return store(out, logits.dtype);
}
