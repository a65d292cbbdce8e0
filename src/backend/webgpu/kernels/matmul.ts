/** WebGPU GEMM: tiled f32 kernel, and f16 tensor-core kernel through subgroup matrices where they exist. */
import type { KernelTable, WebGpuBackend } from '../backend.ts';
import { todo } from './todo.ts';

export const MATMUL_FILES: string[] = [];

export function matmulKernels(_be: WebGpuBackend): Pick<KernelTable, 'matmul'> {
  return { matmul: todo('matmul') };
}
