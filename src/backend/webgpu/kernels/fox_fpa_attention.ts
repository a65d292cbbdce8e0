/**
 * WebGPU half of FoX and FPA attention (Backend.foxAttention / fpaAttention and their backwards):
 * no WGSL kernels yet. Issue 5's first milestone ships the ops with their CPU reference
 * (src/backend/cpu/fox_attention.ts, fpa_attention.ts); the tiled kernels of specs/fpa_depth.md
 * §2.4 and §4.2 come in a later milestone. Until then each method throws UnsupportedError naming
 * the op, which the parity runner reports as `unsupported`.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { KernelTable } from '../backend.ts';

function missing(op: string): never {
  throw new UnsupportedError(`webgpu: ${op} has no WGSL kernel yet; run it on the cpu or wasm backend`);
}

export function foxFpaKernels(): Pick<KernelTable, 'foxAttention' | 'foxAttentionBackward' | 'fpaAttention' | 'fpaAttentionBackward'> {
  return {
    foxAttention: () => missing('foxAttention'),
    foxAttentionBackward: () => missing('foxAttentionBackward'),
    fpaAttention: () => missing('fpaAttention'),
    fpaAttentionBackward: () => missing('fpaAttentionBackward'),
  };
}
