/**
 * CPU reference of Backend.pyramidGather and Backend.pyramidScatter: Lighthouse's pooled gather
 * (the listed rows of the pyramid, each pooled straight from its tokens, never the whole pyramid)
 * and its adjoint, the scatter of listed rows back onto the tokens they stand for
 * (specs/lighthouse_fon.md §1.3, §1.7). Plain loops, sums in f32 in the documented order; the WebGPU
 * kernel (backend/webgpu/kernels/pyramid_rows.wgsl) is checked against these.
 */
import { ArgumentError } from '../../errors.ts';
import { allocHost } from '../../tensor/dtype.ts';
import type { PyramidLevel, PyramidRowsArgs } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

/** The level holding pyramid row r (levels in order of offset), or −1. */
function levelOf(levels: readonly PyramidLevel[], r: number): number {
  for (let l = 0; l < levels.length; l++) if (r >= levels[l].offset && r < levels[l].offset + levels[l].count) return l;
  return -1;
}

export function pyramidGather(x: CpuRef, rows: CpuRef, a: PyramidRowsArgs): CpuHandle {
  const xv = f32(x), rv = rows.h;
  const { lists, n, d, m, levels } = a;
  const out = new Float32Array(lists * m * d);
  const acc = new Float32Array(d);
  for (let s = 0; s < lists; s++) for (let j = 0; j < m; j++) {
    const r = rv[s * m + j], l = levelOf(levels, r);
    if (l < 0) throw new ArgumentError(`pyramidGather: row ${r} of list ${s} lies in no level of the pyramid (0 … ${a.total - 1})`);
    const { offset, span, shift, scale } = levels[l];
    const lo = Math.max(0, (r - offset) * span + shift), hi = Math.min(n, (r - offset + 1) * span + shift);
    acc.fill(0);
    for (let t = lo; t < hi; t++) for (let c = 0; c < d; c++) acc[c] += xv[(s * n + t) * d + c];
    for (let c = 0; c < d; c++) out[(s * m + j) * d + c] = scale * acc[c];
  }
  return store(out, x.dtype);
}

export function pyramidScatter(y: CpuRef, inverse: CpuRef, a: PyramidRowsArgs): CpuHandle {
  const yv = f32(y), iv = inverse.h;
  const { lists, n, d, m, total, levels } = a;
  if (lists * n * d === 0) return allocHost(y.dtype, 0);
  const out = new Float32Array(lists * n * d);
  for (let s = 0; s < lists; s++) for (let t = 0; t < n; t++) {
    const at = (s * n + t) * d;
    for (const { offset, count, span, shift, scale } of levels) {
      if (t < shift) continue;
      const e = Math.floor((t - shift) / span);
      if (e >= count) continue;
      const i = iv[s * total + offset + e];
      if (!(i >= 0 && i <= m)) throw new ArgumentError(`pyramidScatter: inverse entry ${i} of list ${s}, row ${offset + e}; expected a place in [0, ${m}] (${m}: not listed)`);
      if (i === m) continue;
      for (let c = 0; c < d; c++) out[at + c] += scale * yv[(s * m + i) * d + c];
    }
  }
  return store(out, y.dtype);
}
