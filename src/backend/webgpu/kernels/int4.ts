/** WebGPU's INT4 microscale codes (Backend.quantizeInt4 / dequantizeInt4): int4.wgsl, checked against backend/cpu/int4.ts. */
import type { FloatDType } from '../../../tensor/dtype.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { grid } from '../runtime.ts';
import type { Binding } from '../wgsl.ts';
import { kernel, viaStorable } from './elementwise.ts';

export const INT4_FILES = ['int4'] as const;

const int4Kernel = kernel('int4', 'int4', (v): Binding[] => v.QUANT
  ? [{ name: 'x', dtype: v.X as Binding['dtype'] }, { name: 'codes', dtype: 'i32', write: true }, { name: 'scales', dtype: v.SC as Binding['dtype'], write: true }]
  : [{ name: 'codes', dtype: 'i32' }, { name: 'scales', dtype: v.S as Binding['dtype'] }, { name: 'y', dtype: v.Y as Binding['dtype'], write: true }],
'n: u32');

/**
 * Codes and f16 scales of rows × d values. The scales go out as f16 where the device stores f16
 * (one dispatch: a Spot step with INT4 keys quantizes its new key so), else as f32 cast after (the
 * scale is an f16 value already, so the cast is exact).
 */
export function quantizeInt4(be: WebGpuBackend, x: GpuRef, rows: number, d: number): [GpuHandle, GpuHandle] {
  const groups = (rows * d) / 32;
  const codes = be.alloc('i32', (rows * d) / 8, 'quantizeInt4 (codes)');
  const scales = viaStorable(be, 'f16', groups, 'quantizeInt4 (scales)', (buf, sc) => {
    if (groups > 0) be.rt.run({ kernel: int4Kernel, variant: { QUANT: true, X: x.dtype, SC: sc }, uniforms: [groups], buffers: [x.h.buffer, codes.buffer, buf], workgroups: grid(groups, 64) });
  });
  return [codes, scales];
}

export function dequantizeInt4(be: WebGpuBackend, codes: GpuRef, scales: GpuRef, rows: number, d: number, dtype: FloatDType): GpuHandle {
  const n = rows * d;
  return viaStorable(be, dtype, n, 'dequantizeInt4', (buf, y) => {
    if (n > 0) be.rt.run({ kernel: int4Kernel, variant: { S: scales.dtype, Y: y }, uniforms: [n], buffers: [codes.h.buffer, scales.h.buffer, buf], workgroups: grid(n, 64) });
  });
}

export function int4Kernels(be: WebGpuBackend): Pick<KernelTable, 'quantizeInt4' | 'dequantizeInt4'> {
  return { quantizeInt4: (x, r, d) => quantizeInt4(be, x, r, d), dequantizeInt4: (c, s, r, d, t) => dequantizeInt4(be, c, s, r, d, t) };
}
