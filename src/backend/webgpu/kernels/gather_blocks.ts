/** WebGPU's Backend.gatherListed: gather_blocks.wgsl, checked against backend/cpu/select.ts. */
import { UnsupportedError } from '../../../errors.ts';
import type { GatherListArgs } from '../../backend.ts';
import { bytesPerElement } from '../../../tensor/dtype.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import type { Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { preprocess } from '../wgsl.ts';

export const GATHER_BLOCKS_FILES = ['gather_blocks'] as const;

const gatherKernel: Kernel = { name: 'gather_blocks', source: (v) => preprocess(wgslSource('gather_blocks'), v) };

/** List entries a gatherListed workgroup copies: 8 blocks, at 16 keys of 128 f16 and 8 kv heads 64 KiB of K and V. */
const LIST_CHUNK = 8;

/**
 * Backend.gatherListed on the device (gather_blocks.wgsl): rows copied 16 bytes at a time where
 * a row is whole 16-byte groups, else a 32-bit word at a time (the host checks that a row is whole
 * words), one workgroup per 8 list entries and kv head.
 */
export function gatherListed(be: WebGpuBackend, table: GpuRef, k: GpuRef, v: GpuRef, a: GatherListArgs): [GpuHandle, GpuHandle] {
  const bytes = a.d * bytesPerElement(k.dtype);
  if (!['f32', 'f16', 'bf16'].includes(k.dtype) || bytes % 4 !== 0) {
    throw new UnsupportedError(`webgpu: gatherListed copies rows as 32-bit words: it takes f32, f16 or bf16 K/V of a row that is whole words; got ${k.dtype} rows of ${a.d} (${bytes} bytes)`);
  }
  const unit = bytes % 16 === 0 ? 16 : 4;
  const n = a.batch * a.hkv * a.count * a.fine * a.d;
  const ko = be.alloc(k.dtype, n, 'gatherListed'), vo = be.alloc(v.dtype, n, 'gatherListed');
  if (n > 0) {
    be.rt.run({
      kernel: gatherKernel, variant: { C: LIST_CHUNK, UNIT: unit === 16 ? 'vec4<u32>' : 'u32' },
      uniforms: [a.batch, a.count, a.fine, a.hkv, a.tmax, bytes / unit],
      buffers: [table.h.buffer, k.h.buffer, v.h.buffer, ko.buffer, vo.buffer],
      workgroups: [Math.ceil(a.count / LIST_CHUNK), a.hkv, a.batch],
    });
  }
  return [ko, vo];
}

export function gatherBlockKernels(be: WebGpuBackend): Pick<KernelTable, 'gatherListed'> {
  return { gatherListed: (t, k, v, a) => gatherListed(be, t, k, v, a) };
}
