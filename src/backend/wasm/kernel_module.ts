/**
 * The wasm backend's one module: every kernel, emitted for this engine's features. The main
 * thread and each worker instantiate the same compiled module over the same memory.
 */
import { ATTENTION_KERNELS, emitAttention } from './attention_kernels.ts';
import { ELEMENTWISE_KERNELS, emitElementwise } from './elementwise_kernels.ts';
import { emitGemm, GEMM_KERNELS } from './gemm_driver.ts';
import { emitGemv } from './gemv_kernel.ts';
import { GEMM_TILE } from './gemm_micro_kernel.ts';
import { WasmModuleBuilder } from './module_builder.ts';

/** Exported kernels a thread can be asked to run, each `(jobAddress, threadIndex)`; a pool names them by index. */
export const THREAD_KERNELS: readonly string[] = [...GEMM_KERNELS, 'gemv', ...ELEMENTWISE_KERNELS, ...ATTENTION_KERNELS];

/** 64 KiB wasm pages; 65536 pages is the whole 32-bit address space. */
export const WASM_PAGE_BYTES = 65536;
export const WASM_MAX_PAGES = 65536;

export interface KernelModuleOptions {
  /** Use relaxed SIMD's fused multiply-add (only where `WebAssembly.validate` accepts it). */
  fma: boolean;
  /** Import a shared memory (worker threads) or a plain one (single thread, no SharedArrayBuffer). */
  sharedMemory: boolean;
}

export function buildKernelModule(options: KernelModuleOptions): Uint8Array<ArrayBuffer> {
  const mb = new WasmModuleBuilder({
    module: 'env', name: 'memory', initialPages: 1, maximumPages: WASM_MAX_PAGES, shared: options.sharedMemory,
  });
  emitGemm(mb, GEMM_TILE, options.fma);
  emitGemv(mb, options.fma);
  emitElementwise(mb);
  emitAttention(mb, options.fma);
  return mb.build();
}
