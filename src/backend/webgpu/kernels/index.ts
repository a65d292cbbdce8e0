/**
 * The WebGPU half of the op table: every kernel of the Backend contract mapped to its WGSL
 * implementation, one module per family. `KernelTable` makes a missing kernel a compile error.
 */
import type { KernelTable, WebGpuBackend } from '../backend.ts';
import { ELEMENTWISE_FILES, elementwiseKernels } from './elementwise.ts';
import { LAYOUT_FILES, layoutKernels } from './layout.ts';
import { ROW_FILES, rowKernels } from './rows.ts';
import { MATMUL_FILES, matmulKernels } from './matmul.ts';
import { ATTENTION_FILES, attentionKernels } from './attention.ts';
import { FOX_FPA_FILES } from './fox_fpa_attention.ts';
import { attentionEntry } from './attention_entry.ts';
import { DEPTH_MIX_FILES, depthMixKernels } from './depth_mix.ts';
import { MERGE_FILES, mergeKernels } from './attention_merge.ts';
import { INT4_FILES, int4Kernels } from './int4.ts';
import { INDEX_SCORE_FILES, indexScoreKernels } from './index_scores.ts';
import { LIGHTHOUSE_FILES, lighthouseKernels } from './lighthouse.ts';
import { PYRAMID_ROWS_FILES, pyramidKernels } from './pyramid_rows.ts';
import { GATHER_BLOCKS_FILES, gatherBlockKernels } from './gather_blocks.ts';

/** Every .wgsl file under kernels/ (loaded when the backend starts). */
export const KERNEL_FILES: readonly string[] = [...ELEMENTWISE_FILES, ...LAYOUT_FILES, ...ROW_FILES, ...MATMUL_FILES, ...ATTENTION_FILES, ...FOX_FPA_FILES, ...DEPTH_MIX_FILES, ...MERGE_FILES, ...INT4_FILES, ...INDEX_SCORE_FILES, ...LIGHTHOUSE_FILES, ...PYRAMID_ROWS_FILES, ...GATHER_BLOCKS_FILES];

export function gpuKernels(be: WebGpuBackend): KernelTable {
  return { ...elementwiseKernels(be), ...layoutKernels(be), ...rowKernels(be), ...matmulKernels(be), ...attentionKernels(be), ...attentionEntry(be), ...depthMixKernels(be), ...mergeKernels(be), ...int4Kernels(be), ...indexScoreKernels(be), ...lighthouseKernels(be), ...pyramidKernels(be), ...gatherBlockKernels(be) };
}
