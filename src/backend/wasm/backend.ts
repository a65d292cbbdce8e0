/**
 * The `wasm` backend: the fast CPU path for users without a GPU. Handles are host typed arrays,
 * as in `cpu`, so every kernel not overridden here is the CPU reference. With worker threads,
 * f32 handles of 1024 elements or more are views of the shared wasm memory itself (resident
 * handles, resident_heap.ts), so the wasm kernels read and write them in place without copies.
 * Overridden: matmul (the WebAssembly SIMD GEMM, gemm_driver.ts, across the runtime's threads),
 * the float unary and binary ops that have a SIMD kernel (elementwise_kernels.ts), softmax, and
 * attention with its backward (attention.ts), all in one module on one worker pool; strided
 * copies, RoPE, RMSNorm and cross-entropy's backward as f32 TypeScript loops into recycled or
 * resident outputs (host_kernels.ts). Each falls back to the CPU reference for the cases its
 * kernel does not take.
 *
 * `WasmBackend.create()` alone runs on one thread; give it `threads` and a `spawner` (the Node
 * adapter, platform/wasm_threads.ts) for the worker pool, as `initBackend('wasm')` does (index.ts).
 */
import type { Backend } from '../backend.ts';
import type { AnyHostArray, DType } from '../../tensor/dtype.ts';
import { CpuBackend } from '../cpu/backend.ts';
import type { CpuHandle } from '../cpu/host.ts';
import { binary as cpuBinary, unary as cpuUnary } from '../cpu/elementwise.ts';
import { matmul as cpuMatmul } from '../cpu/matmul.ts';
import { softmax as cpuSoftmax } from '../cpu/reduce.ts';
import { copyStrided as cpuCopyStrided } from '../cpu/layout.ts';
import { checkStridedView } from '../strided_view.ts';
import { crossEntropyBackward as cpuCrossEntropyBackward, rmsnorm as cpuRmsnorm, rmsnormBackward as cpuRmsnormBackward, rope as cpuRope } from '../cpu/fused.ts';
import { copyStridedF32, crossEntropyBackwardF32, rmsnormF32, ropeF32, type Allocate } from './host_kernels.ts';
import { attentionBackwardEntry, attentionEntry } from '../cpu/attention_entry.ts';
import { WasmAttention, type WasmAttentionOptions } from './attention.ts';
import { binaryWasm, softmaxWasm, unaryWasm, type ElementwiseOptions } from './elementwise.ts';
import { wasmMatmul } from './matmul.ts';
import { WasmRuntime, type WasmRuntimeOptions } from './runtime.ts';

export interface WasmBackendOptions extends Partial<WasmRuntimeOptions> {
  /** GEMMs below this many flops run on one thread; tests set 0 to exercise the pool. */
  minParallelFlops?: number;
  /**
   * Elementwise/softmax thresholds: below `minElements` the CPU loop runs (the copies would cost
   * more), from `minParallelElements` the threads share the work. Tests set both to 0.
   */
  elementwise?: ElementwiseOptions;
  /** Attention thresholds (tests set `minParallelWork` 0 to run every call on the pool). */
  attention?: WasmAttentionOptions;
}

export class WasmBackend extends CpuBackend {
  override readonly name: string = 'wasm';

  constructor(readonly runtime: WasmRuntime, private options: Pick<WasmBackendOptions, 'minParallelFlops' | 'elementwise'> = {}) {
    super();
  }

  /** Compiles the kernels, starts the worker pool (when given a spawner) and warms the kernels up. */
  static async create(options: WasmBackendOptions = {}): Promise<WasmBackend> {
    const runtime = await WasmRuntime.create({ threads: options.threads ?? 1, spawner: options.spawner, fma: options.fma });
    const backend = new WasmBackend(runtime, { minParallelFlops: options.minParallelFlops, elementwise: options.elementwise });
    backend.attentionKernels = new WasmAttention(runtime, options.attention);
    backend.warmUp();
    return backend;
  }

  /** Threads a kernel may use, the caller included. */
  get threads(): number { return this.runtime.threads; }

  /**
   * Handles this backend made and has not freed. Only those are recycled, and never one that a
   * kernel handed out twice, so a double free or an aliasing kernel cannot give live data away.
   */
  private owned = new Set<CpuHandle>();
  private aliased = new WeakSet<CpuHandle>();

  protected override track<T extends CpuHandle | null>(h: T): T {
    if (h !== null) {
      if (this.owned.has(h)) this.aliased.add(h);
      this.owned.add(h);
    }
    return super.track(h);
  }

  /** f32 data large enough goes straight into a resident handle (runtime.ts), which kernels read in place. */
  override upload(data: AnyHostArray, dtype: DType): CpuHandle {
    if (dtype !== 'f32' || !(data instanceof Float32Array)) return super.upload(data, dtype);
    const h = this.runtime.residentOutput(data.length, dtype);
    if (!h) return super.upload(data, dtype);
    h.set(data);
    return this.track(h);
  }

  /** Freed f32 handles go back to the runtime, which copies later outputs into them. */
  override free(h: CpuHandle): void {
    super.free(h);
    if (this.owned.delete(h) && !this.aliased.has(h)) this.runtime.recycle(h);
  }

  override memory() {
    return { ...super.memory(), pooledBytes: this.runtime.pooledBytes };
  }

  override matmul: Backend<CpuHandle>['matmul'] = (a, b, args) => {
    const out = wasmMatmul(this.runtime, a, b, args, { threads: this.runtime.threads, minParallelFlops: this.options.minParallelFlops });
    // Too large for the 32-bit wasm address space: the CPU reference still gives the answer.
    return this.track(out ?? cpuMatmul(a, b, args));
  };

  override unary: Backend<CpuHandle>['unary'] = (x, op) =>
    this.track(unaryWasm(this.runtime, x, op, this.options.elementwise) ?? cpuUnary(x, op));
  override binary: Backend<CpuHandle>['binary'] = (a, b, op, shape) =>
    this.track(binaryWasm(this.runtime, a, b, op, shape, this.options.elementwise) ?? cpuBinary(a, b, op, shape));
  override softmax: Backend<CpuHandle>['softmax'] = (x, rows, cols) =>
    this.track(softmaxWasm(this.runtime, x, rows, cols, this.options.elementwise) ?? cpuSoftmax(x, rows, cols));

  /** Outputs of the host kernels come from the runtime's recycled arrays, as the wasm kernels' do. */
  private readonly alloc: Allocate = (length) => this.runtime.output(length);

  override copyStrided: Backend<CpuHandle>['copyStrided'] = (x, args) => {
    checkStridedView('copyStrided', x.h.length, args);
    return this.track(copyStridedF32(x, args, this.alloc) ?? cpuCopyStrided(x, args));
  };
  override rope: Backend<CpuHandle>['rope'] = (x, c, s, o, t, i, d, il, inv) =>
    this.track(ropeF32(x, c, s, o, t, i, d, il, inv, this.alloc) ?? cpuRope(x, c, s, o, t, i, d, il, inv));
  override rmsnorm: Backend<CpuHandle>['rmsnorm'] = (x, w, a) =>
    this.trackEach(rmsnormF32(x, w, a, this.alloc) ?? cpuRmsnorm(x, w, a));
  override rmsnormBackward: Backend<CpuHandle>['rmsnormBackward'] = (x, w, s, g, a) =>
    this.trackEach(cpuRmsnormBackward(x, w, s, g, a, x.dtype === 'f32' ? this.alloc : undefined));
  override crossEntropyBackward: Backend<CpuHandle>['crossEntropyBackward'] = (l, t, s, g, n, v, ig) =>
    this.track(crossEntropyBackwardF32(l, t, s, g, n, v, ig, this.alloc) ?? cpuCrossEntropyBackward(l, t, s, g, n, v, ig));

  /** The SIMD attention kernels (attention.ts); null for a backend built without `create`, which then uses the CPU reference. */
  private attentionKernels: WasmAttention | null = null;

  private trackEach<T extends CpuHandle[]>(hs: T): T {
    for (const h of hs) this.track(h);
    return hs;
  }

  // Score modifiers and block masks run the CPU references (the SIMD kernels take plain softmax attention).
  override attention: Backend<CpuHandle>['attention'] = (q, k, v, args, x) =>
    this.trackEach((x ? null : this.attentionKernels?.forward(q, k, v, args)) ?? attentionEntry(q, k, v, args, x));
  override attentionBackward: Backend<CpuHandle>['attentionBackward'] = (q, k, v, o, lse, g, args, x) =>
    this.trackEach((x ? null : this.attentionKernels?.backward(q, k, v, o, lse, g, args)) ?? attentionBackwardEntry(q, k, v, o, lse, g, args, x));

  override destroy(): void {
    super.destroy();
    this.attentionKernels = null;
    this.owned.clear();
    this.runtime.destroy();
  }

  /**
   * V8 first runs wasm through its baseline compiler and swaps in optimized code for later calls
   * once a function is hot; a few small calls here make the first real ones run optimized code.
   */
  private warmUp(): void {
    const size = 64;
    const x = { h: new Float32Array(size * size).fill(1), shape: [size, size], dtype: 'f32' as const };
    const row = { h: new Float32Array(size).fill(1), shape: [1, size], dtype: 'f32' as const };
    const gemm = { batch: 1, m: size, n: size, k: size, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' as const };
    const all = { threads: this.runtime.threads, minParallelFlops: 0 };
    const everyCase = { minElements: 0, minParallelElements: 0 };
    // Every output goes back to the runtime: resident ones would otherwise hold wasm memory for good.
    const done = (h: CpuHandle | null | undefined) => { if (h) this.runtime.recycle(h); };
    for (let i = 0; i < 30; i++) {
      done(wasmMatmul(this.runtime, x, x, gemm, all));
      done(wasmMatmul(this.runtime, row, x, { ...gemm, m: 1, transB: i % 2 === 0 }, all));
      done(unaryWasm(this.runtime, x, 'exp', everyCase));
      done(binaryWasm(this.runtime, x, x, 'add', x.shape, everyCase));
      done(softmaxWasm(this.runtime, x, size, size, everyCase));
    }
    if (this.attentionKernels) {
      const qkv = { h: new Float32Array(4 * 32 * 32).fill(0.5), shape: [1, 4, 32, 32], dtype: 'f32' as const };
      const args = { batch: 1, heads: 4, kvHeads: 4, tq: 32, tk: 32, d: 32, kvLength: 32, qOffset: 0, causal: true, window: 0, scale: 0.2 };
      for (let i = 0; i < 10; i++) {
        const [o, lse] = this.attentionKernels.forward(qkv, qkv, qkv, args) ?? [];
        if (o && lse) this.attentionKernels.backward(qkv, qkv, qkv, { ...qkv, h: o }, { h: lse, shape: [1, 4, 32], dtype: 'f32' }, qkv, args)?.forEach(done);
        done(o);
        done(lse);
      }
    }
  }
}
