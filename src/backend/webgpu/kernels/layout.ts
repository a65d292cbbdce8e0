/** WebGPU data-movement kernels: strided copy/assign, concat, gather/scatter-add, embedding; optimizers. */
import type { KernelTable, WebGpuBackend } from '../backend.ts';
import { todo } from './todo.ts';

export const LAYOUT_FILES: string[] = [];

export function layoutKernels(_be: WebGpuBackend): Pick<KernelTable, 'copyStrided' | 'assignStrided' | 'concat' | 'gather' | 'scatterAdd' | 'embedding' | 'embeddingBackward' | 'adamw' | 'sgd'> {
  return {
    copyStrided: todo('copyStrided'),
    assignStrided: todo('assignStrided'),
    concat: todo('concat'),
    gather: todo('gather'),
    scatterAdd: todo('scatterAdd'),
    embedding: todo('embedding'),
    embeddingBackward: todo('embeddingBackward'),
    adamw: todo('adamw'),
    sgd: todo('sgd'),
  };
}
