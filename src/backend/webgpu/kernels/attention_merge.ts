/** WebGPU's logsumexp merge of two attention parts (Backend.mergeLse): one pass, rows read through the parts' lists. */
import type { MergeArgs, MergePart } from '../../backend.ts';
import type { GpuHandle, KernelTable, WebGpuBackend } from '../backend.ts';
import { grid } from '../runtime.ts';
import type { Binding } from '../wgsl.ts';
import { kernel, viaStorable } from './elementwise.ts';

export const MERGE_FILES = ['attention_merge'] as const;

const mergeKernel = kernel('attention_merge', 'attention_merge', (v) => {
  const b: Binding[] = [{ name: 'a', dtype: v.A as Binding['dtype'] }, { name: 'la', dtype: 'f32' }];
  if (v.RA) b.push({ name: 'ra', dtype: 'i32' });
  b.push({ name: 'b', dtype: v.B as Binding['dtype'] }, { name: 'lb', dtype: 'f32' });
  if (v.RB) b.push({ name: 'rb', dtype: 'i32' });
  b.push({ name: 'y', dtype: v.Y as Binding['dtype'], write: true }, { name: 'ly', dtype: 'f32', write: true });
  return b;
}, 'n: u32, m: u32, d: u32, share: u32, na: u32, nb: u32');

export function mergeLse(be: WebGpuBackend, a: MergePart<GpuHandle>, b: MergePart<GpuHandle>, args: MergeArgs): [GpuHandle, GpuHandle] {
  const n = args.o * args.m * args.d;
  const lse = be.alloc('f32', args.o * args.m, 'mergeLse (lse)');
  const out = viaStorable(be, args.dtype, n, 'mergeLse', (buf, y) => {
    const buffers = [a.out.h.buffer, a.lse.h.buffer, ...(a.rows ? [a.rows.h.buffer] : []), b.out.h.buffer, b.lse.h.buffer, ...(b.rows ? [b.rows.h.buffer] : []), buf, lse.buffer];
    be.rt.run({
      kernel: mergeKernel, variant: { A: a.out.dtype, B: b.out.dtype, Y: y, RA: !!a.rows, RB: !!b.rows },
      uniforms: [n, args.m, args.d, args.share, a.n, b.n], buffers, workgroups: grid(n, 256),
    });
  });
  return [out, lse];
}

export function mergeKernels(be: WebGpuBackend): Pick<KernelTable, 'mergeLse'> {
  return { mergeLse: (a, b, args) => mergeLse(be, a, b, args) };
}
