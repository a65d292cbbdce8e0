/**
 * Host-side (TypeScript) kernels of the wasm backend for ops whose work is too small or too
 * irregular to pay for copies into wasm memory: strided copies (head splits and merges), RoPE,
 * RMSNorm and its backward, cross-entropy's backward. Each is the CPU reference's arithmetic in
 * the same order (so results are bit-identical to cpu/), specialised to f32 so V8 sees one
 * array type, and writes into an output the caller allocates (the wasm backend hands out recycled
 * arrays: a fresh multi-megabyte array costs more in page faults than the loop itself).
 * Each returns null for the cases it does not take (other dtypes); the backend then calls the reference.
 */
import type { NormArgs, StridedArgs } from '../backend.ts';
import type { CpuRef } from '../cpu/host.ts';

/** An f32 output of `length` elements whose contents are undefined (every kernel writes all of it). */
export type Allocate = (length: number) => Float32Array;

const isF32 = (x: CpuRef): x is CpuRef & { h: Float32Array } => x.dtype === 'f32' && x.h instanceof Float32Array;

/** out[idx] = x[offset + Σ idx[d]·strides[d]] for f32, walking the index like an odometer. */
export function copyStridedF32(x: CpuRef, { outShape, strides, offset }: StridedArgs, alloc: Allocate): Float32Array | null {
  if (!isF32(x)) return null;
  const rank = outShape.length;
  let n = 1;
  for (const s of outShape) n *= s;
  const out = alloc(n);
  if (n === 0) return out;
  if (rank === 0) { out[0] = x.h[offset]; return out; }
  const src = x.h;
  const len = outShape[rank - 1], step = strides[rank - 1];
  const idx = new Int32Array(rank);
  let o = offset;
  for (let i = 0; i < n; i += len) {
    if (step === 1) for (let j = 0; j < len; j++) out[i + j] = src[o + j];
    else for (let j = 0, s = o; j < len; j++, s += step) out[i + j] = src[s];
    // Next row: increment the odometer over dims rank−2 … 0.
    for (let d = rank - 2; d >= 0; d--) {
      o += strides[d];
      if (++idx[d] < outShape[d]) break;
      o -= strides[d] * outShape[d];
      idx[d] = 0;
    }
  }
  return out;
}

/** cpu/fused.ts rope for f32. */
export function ropeF32(x: CpuRef, cos: CpuRef, sin: CpuRef, o: number, t: number, inner: number, d: number, interleaved: boolean, inverse: boolean, alloc: Allocate): Float32Array | null {
  if (!isF32(x) || !isF32(cos) || !isF32(sin)) return null;
  const xv = x.h, cv = cos.h, sv = sin.h;
  const out = alloc(xv.length);
  const half = d / 2;
  // Pair (i0, i1) of element j: (2j, 2j + 1) interleaved, (j, j + half) otherwise.
  const stride0 = interleaved ? 2 : 1, second = interleaved ? 1 : half;
  const sign = inverse ? -1 : 1;
  for (let a = 0; a < o; a++) for (let p = 0; p < t; p++) {
    const table = p * half;
    for (let h = 0; h < inner; h++) {
      const base = ((a * t + p) * inner + h) * d;
      for (let j = 0; j < half; j++) {
        const c = cv[table + j], s = sign * sv[table + j];
        const i0 = base + j * stride0, i1 = i0 + second;
        const x0 = xv[i0], x1 = xv[i1];
        out[i0] = x0 * c - x1 * s;
        out[i1] = x0 * s + x1 * c;
      }
    }
  }
  return out;
}

/** cpu/fused.ts rmsnorm for f32: y and the per-row 1/rms. */
export function rmsnormF32(x: CpuRef, w: CpuRef, { rows, cols, eps }: NormArgs, alloc: Allocate): [Float32Array, Float32Array] | null {
  if (!isF32(x) || !isF32(w)) return null;
  const xv = x.h, wv = w.h;
  const y = alloc(xv.length), rstd = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    let ss = 0;
    for (let c = 0; c < cols; c++) { const e = xv[base + c]; ss += e * e; }
    const s = 1 / Math.sqrt(ss / cols + eps);
    rstd[r] = s;
    for (let c = 0; c < cols; c++) y[base + c] = xv[base + c] * s * wv[c];
  }
  return [y, rstd];
}

/** cpu/fused.ts crossEntropyBackward for f32 logits: zero rows for ignored targets. */
export function crossEntropyBackwardF32(logits: CpuRef, targets: CpuRef, lse: CpuRef, dloss: CpuRef, n: number, v: number, ignoreIndex: number, alloc: Allocate): Float32Array | null {
  if (!isF32(logits) || !isF32(lse) || !isF32(dloss) || targets.dtype !== 'i32') return null;
  const lv = logits.h, tv = targets.h, sv = lse.h, gv = dloss.h;
  const out = alloc(n * v);
  for (let r = 0; r < n; r++) {
    const t = tv[r], base = r * v;
    if (t === ignoreIndex || t < 0 || t >= v) { out.fill(0, base, base + v); continue; }
    const g = gv[r], l = sv[r];
    for (let c = 0; c < v; c++) out[base + c] = g * Math.exp(lv[base + c] - l);
    out[base + t] = g * (Math.exp(lv[base + t] - l) - 1);
  }
  return out;
}

