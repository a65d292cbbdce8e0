/**
 * WebGPU's Backend.pyramidGather and Backend.pyramidScatter (pyramid_rows.wgsl): Lighthouse's
 * pooled gather of listed pyramid rows straight from the tokens, and its adjoint, each one pass with
 * one invocation per output value (a 16-bit output the device cannot store directly goes through
 * f32 and a pack). Checked against backend/cpu/pyramid_rows.ts by the parity cases (test/parity/cases.ts,
 * run on WebGPU by test/backend/webgpu_parity.test.ts) and through the layer (test/attention/lighthouse_webgpu.test.ts).
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { PyramidRowsArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { f32bits, grid } from '../runtime.ts';
import { kernel, viaStorable } from './elementwise.ts';

export const PYRAMID_ROWS_FILES = ['pyramid_rows'] as const;

/** Levels the uniforms' table holds. */
const MAX_LEVELS = 16;

const pyramidKernel = kernel('pyramid_rows', 'pyramid_rows', (v) => [
  v.GATHER ? { name: 'x', dtype: v.X as DType } : { name: 'y', dtype: v.X as DType },
  v.GATHER ? { name: 'rows', dtype: 'i32' } : { name: 'inverse', dtype: 'i32' },
  { name: 'out', dtype: v.OUT as DType, write: true },
], `values: u32, d: u32, n: u32, m: u32, levels: u32, total: u32, pad0: u32, pad1: u32, lv: array<vec4<u32>, ${MAX_LEVELS}>, sc: array<vec4<f32>, ${MAX_LEVELS / 4}>`);

function run(be: WebGpuBackend, gather: boolean, x: GpuRef, index: GpuRef, a: PyramidRowsArgs): GpuHandle {
  if (a.levels.length > MAX_LEVELS) throw new UnsupportedError(`webgpu: pyramid${gather ? 'Gather' : 'Scatter'} takes at most ${MAX_LEVELS} levels; got ${a.levels.length}`);
  const values = a.lists * (gather ? a.m : a.n) * a.d;
  const lv = new Array<number>(4 * MAX_LEVELS).fill(0), sc = new Array<number>(MAX_LEVELS).fill(0);
  a.levels.forEach((l, i) => { lv.splice(4 * i, 4, l.offset, l.count, l.span, l.shift); sc[i] = f32bits(l.scale); });
  return viaStorable(be, x.dtype, values, gather ? 'pyramidGather' : 'pyramidScatter', (buf, out) => {
    if (values === 0) return;
    be.rt.run({
      kernel: pyramidKernel, variant: { GATHER: gather, X: x.dtype, OUT: out },
      uniforms: [values, a.d, a.n, a.m, a.levels.length, a.total, 0, 0, ...lv, ...sc], buffers: [x.h.buffer, index.h.buffer, buf], workgroups: grid(values, 256),
    });
  });
}

export function pyramidKernels(be: WebGpuBackend): Pick<KernelTable, 'pyramidGather' | 'pyramidScatter'> {
  return {
    pyramidGather: (x, rows, a) => run(be, true, x, rows, a),
    pyramidScatter: (y, inverse, a) => run(be, false, y, inverse, a),
  };
}
