/** WebGPU row kernels (one row of the last axis per workgroup): reductions, softmax, norms, RoPE, cross-entropy, scans, sort. */
import type { KernelTable, WebGpuBackend } from '../backend.ts';
import { todo } from './todo.ts';

export const ROW_FILES: string[] = [];

export function rowKernels(_be: WebGpuBackend): Pick<KernelTable, 'reduce' | 'softmax' | 'softmaxBackward' | 'logsumexp' | 'rmsnorm' | 'rmsnormBackward' | 'layernorm' | 'layernormBackward' | 'rope' | 'crossEntropy' | 'crossEntropyBackward' | 'scan' | 'sort'> {
  return {
    reduce: todo('reduce'),
    softmax: todo('softmax'),
    softmaxBackward: todo('softmaxBackward'),
    logsumexp: todo('logsumexp'),
    rmsnorm: todo('rmsnorm'),
    rmsnormBackward: todo('rmsnormBackward'),
    layernorm: todo('layernorm'),
    layernormBackward: todo('layernormBackward'),
    rope: todo('rope'),
    crossEntropy: todo('crossEntropy'),
    crossEntropyBackward: todo('crossEntropyBackward'),
    scan: todo('scan'),
    sort: todo('sort'),
  };
}
