/**
 * One compiled kernel module, its memory and (optionally) the worker pool that shares them.
 *
 * Memory map: the job record at JOB_ADDRESS, per-thread edge tiles from SCRATCH_ADDRESS, and
 * from WORKSPACE_ADDRESS blocks taken in order: the workspace each kernel call lays out afresh
 * (calls are synchronous, so they never overlap) and, with a shared memory, the resident f32
 * handles (resident_heap.ts) that kernels read and write in place. The memory grows on demand
 * and never shrinks.
 */
import { DeviceError, UnsupportedError } from '../../errors.ts';
import { f32ToHost, type DType } from '../../tensor/dtype.ts';
import type { CpuHandle } from '../cpu/host.ts';
import { HostArrayPool } from './host_array_pool.ts';
import { ResidentHeap } from './resident_heap.ts';
import { buildKernelModule, THREAD_KERNELS, WASM_MAX_PAGES, WASM_PAGE_BYTES } from './kernel_module.ts';
import { ThreadPool, type ThreadSpawner } from './thread_pool.ts';
import { detectWasmFeatures, type WasmFeatures } from './wasm_features.ts';

export const JOB_ADDRESS = 0;
export const SCRATCH_ADDRESS = 1024;
/** Bytes per thread's edge tile: at least MR·NR·4 (128 for the 4×8 tile). */
export const SCRATCH_STRIDE = 256;
export const MAX_THREADS = 64;
export const WORKSPACE_ADDRESS = 65536;
/** The most bytes of freed f32 handles kept for reuse as outputs. */
export const OUTPUT_POOL_BYTES = 256 * 1024 * 1024;
/** Bytes a workspace may span (the 32-bit address space less the fixed region). */
export const MAX_WORKSPACE_BYTES = WASM_MAX_PAGES * WASM_PAGE_BYTES - WORKSPACE_ADDRESS;
/** The most bytes of resident handles; later handles are plain arrays, copied in and out. */
export const RESIDENT_CAPACITY_BYTES = 1024 * 1024 * 1024;

export interface WasmRuntimeOptions {
  /** Threads including the caller (capped at MAX_THREADS); more than 1 needs `spawner` and shared memory. */
  threads: number;
  /** Starts worker threads (platform/wasm_threads.ts in Node); without one the runtime is single-threaded. */
  spawner?: ThreadSpawner;
  /** Use relaxed-SIMD fma; defaults to whether the engine validates it. False forces mul+add. */
  fma?: boolean;
}

type KernelFn = (job: number, tid: number) => void;

export class WasmRuntime {
  private outputs = new HostArrayPool(OUTPUT_POOL_BYTES);
  /** End of the blocks taken so far. */
  private top = WORKSPACE_ADDRESS;
  /** The workspace block; grown in place while it is the last block, else taken anew (×1.5). */
  private workspaceAt = WORKSPACE_ADDRESS;
  private workspaceBytes = 0;
  /** Resident handles; null without a shared memory (growing would detach their views). */
  private resident: ResidentHeap | null;

  private constructor(
    readonly features: WasmFeatures,
    readonly fma: boolean,
    readonly memory: WebAssembly.Memory,
    private kernels: ReadonlyMap<string, KernelFn>,
    private pool: ThreadPool | null,
    /** Why the worker pool could not start, when it could not (the runtime then uses one thread). */
    readonly poolError: string | null,
  ) {
    const shared = typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer;
    this.resident = shared
      ? new ResidentHeap(RESIDENT_CAPACITY_BYTES, (bytes) => this.takeBlock(bytes), (address, length) => new Float32Array(this.memory.buffer, address, length))
      : null;
  }

  static async create(options: WasmRuntimeOptions): Promise<WasmRuntime> {
    const features = detectWasmFeatures();
    if (!features.simd) throw new UnsupportedError('wasm backend: this WebAssembly engine has no fixed-width SIMD');
    const fma = options.fma ?? features.relaxedSimd;
    if (fma && !features.relaxedSimd) throw new UnsupportedError('wasm backend: fma requested but relaxed SIMD does not validate here');
    const wantThreads = Math.max(1, Math.min(MAX_THREADS, Math.floor(options.threads)));
    const threaded = wantThreads > 1 && options.spawner !== undefined && features.sharedMemory;
    const memory = new WebAssembly.Memory({ initial: WORKSPACE_ADDRESS / WASM_PAGE_BYTES, maximum: WASM_MAX_PAGES, shared: threaded });
    const module = await WebAssembly.compile(buildKernelModule({ fma, sharedMemory: threaded }));
    const instance = await WebAssembly.instantiate(module, { env: { memory } });
    const kernels = new Map(THREAD_KERNELS.map((name) => [name, instance.exports[name] as KernelFn]));
    let pool: ThreadPool | null = null;
    let poolError: string | null = null;
    if (threaded && options.spawner) {
      try {
        pool = await ThreadPool.create(options.spawner, module, memory, THREAD_KERNELS, wantThreads - 1);
      } catch (e) {
        // Still a working backend, on one thread; say why once.
        poolError = e instanceof Error ? e.message : String(e);
        console.warn(`fon wasm backend: worker threads did not start (${poolError}); running on one thread`);
      }
    }
    return new WasmRuntime(features, fma, memory, kernels, pool, poolError);
  }

  /** Threads a kernel may use, the caller included. */
  get threads(): number { return 1 + (this.pool?.size ?? 0); }

  /** Grows the memory to at least `end` bytes; false when it cannot. */
  private ensure(end: number): boolean {
    const have = this.memory.buffer.byteLength;
    if (end <= have) return true;
    if (end > WASM_MAX_PAGES * WASM_PAGE_BYTES) return false;
    try {
      this.memory.grow(Math.ceil((end - have) / WASM_PAGE_BYTES));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * A new block of `bytes` (a multiple of 64) at the top, or null when the memory cannot hold it.
   * The memory keeps a vector's slack past the top, so a kernel's last full-vector read of a
   * resident operand never leaves the memory.
   */
  private takeBlock(bytes: number): number | null {
    if (!this.ensure(this.top + bytes + 64)) return null;
    const at = this.top;
    this.top += bytes;
    return at;
  }

  /** Grows memory so that a workspace of `bytes` fits; returns its address (valid until the next call). */
  workspace(bytes: number): number {
    if (bytes > MAX_WORKSPACE_BYTES) throw new UnsupportedError(`wasm backend: ${bytes} bytes of workspace exceed the ${MAX_WORKSPACE_BYTES}-byte wasm address space`);
    const at = this.tryWorkspace(bytes);
    if (at === null) throw new DeviceError(`wasm backend: could not grow memory from ${this.memory.buffer.byteLength} bytes for a ${bytes}-byte workspace`);
    return at;
  }

  /**
   * workspace(), or null when the memory cannot hold it (resident arrays may sit below the top, so
   * the room left is less than the address space): kernels then fall back to the CPU reference.
   */
  tryWorkspace(bytes: number): number | null {
    if (bytes > MAX_WORKSPACE_BYTES) return null;
    if (bytes <= this.workspaceBytes) return this.workspaceAt;
    const atTop = this.workspaceAt + this.workspaceBytes === this.top;
    const at = atTop ? this.workspaceAt : this.top;
    const want = Math.ceil((atTop ? bytes : Math.max(bytes, 1.5 * this.workspaceBytes)) / 64) * 64;
    if (!this.ensure(at + want)) return null;
    this.workspaceAt = at;
    this.workspaceBytes = want;
    this.top = at + want;
    return at;
  }

  /**
   * An f32 array of `count` elements for a kernel's output (contents undefined): resident in the
   * wasm memory when it can be (kernels then write it in place, `addressOf`), else a recycled host array.
   */
  output(count: number): Float32Array { return this.resident?.take(count) ?? this.outputs.take(count); }

  /** A resident f32 output of `count` elements a kernel can write in place, or null (write the workspace, then `readOut`). */
  residentOutput(count: number, dtype: DType): Float32Array | null {
    return dtype === 'f32' ? this.resident?.take(count) ?? null : null;
  }

  /** The wasm address of `x`'s values when it is a resident f32 handle, else null (copy it in). */
  addressOf(x: { h: unknown; dtype: DType }): number | null {
    return x.dtype === 'f32' && this.resident?.owns(x.h) ? (x.h as Float32Array).byteOffset : null;
  }

  /** The memory's current buffer (re-read after `workspace`, which may grow it). */
  get buffer(): ArrayBufferLike { return this.memory.buffer; }

  /** Copies `count` f32 at `address` out as a handle of `dtype` (f32 into `output`). */
  readOut(address: number, count: number, dtype: DType): CpuHandle {
    const view = new Float32Array(this.memory.buffer, address, count);
    if (dtype !== 'f32') return f32ToHost(view, dtype);
    const out = this.output(count);
    out.set(view);
    return out;
  }

  /** Takes back a freed handle for `output` to reuse (the caller guarantees nothing else holds it). */
  recycle(h: CpuHandle): void {
    if (!this.resident?.give(h)) this.outputs.give(h);
  }

  /** Bytes of freed handles held for reuse. */
  get pooledBytes(): number { return this.outputs.pooledBytes + (this.resident?.pooledBytes ?? 0); }

  /** Gets workers 1…threads−1 out of their sleep ahead of a `run` (see ThreadPool.wake). */
  wake(threads: number): void {
    if (threads > 1) this.pool?.wake(threads);
  }

  /**
   * Runs kernel(job, tid) for tid 0…threads−1 and returns when every share is done. `threads`
   * must match the count the job record was planned for and be at most `this.threads`.
   */
  run(kernel: string, job: number, threads: number): void {
    const fn = this.kernels.get(kernel);
    if (!fn) throw new UnsupportedError(`wasm backend: no kernel '${kernel}' in the module`);
    if (threads <= 1 || !this.pool) { fn(job, 0); return; }
    this.pool.start(THREAD_KERNELS.indexOf(kernel), job, threads);
    try {
      fn(job, 0);
    } finally {
      this.pool.wait(threads);
    }
  }

  destroy(): void {
    this.pool?.destroy();
    this.pool = null;
    this.outputs.clear();
    this.resident?.clear();
  }
}
