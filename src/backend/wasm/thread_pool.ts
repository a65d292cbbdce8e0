/**
 * Fork-join over worker threads that share the wasm memory, synchronous from the caller's side:
 * `start` posts a kernel to workers 1…T−1, the caller computes its own share as thread 0, and
 * `wait` blocks (Atomics.wait) until the workers are done. No messages on the hot path: each
 * worker owns one cache line of an Int32Array control block and sleeps on its request word.
 *
 * Nothing here is Node-only; starting a worker is the `ThreadSpawner` an adapter provides
 * (platform/wasm_threads.ts). Browsers would need cross-origin isolation and a main thread that may not
 * block, so there the backend runs single-threaded.
 */
import { FonError, UnsupportedError } from '../../errors.ts';

/** What a worker gets at start: the compiled module, the shared memory and its control slot. */
export interface WorkerInit {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: SharedArrayBuffer;
  /** The worker's thread index (≥ 1) and control slot. */
  slot: number;
  /** Export names; a request carries the index of one. */
  kernels: readonly string[];
  /** Polls of the request word before sleeping, so back-to-back kernels skip the futex wake-up. */
  spin: number;
}

export interface WorkerHandle {
  /** Resolves once the worker has instantiated the module (rejects if it could not). */
  ready: Promise<void>;
  terminate(): void;
}

/** Starts one worker running `WORKER_LOOP_SOURCE` with `init`; the worker must not keep the process alive. */
export type ThreadSpawner = (init: WorkerInit) => WorkerHandle;

/** Int32 words of one control slot; a slot is 64 bytes so workers never share a cache line. */
const SLOT_WORDS = 16;
const REQUEST = 0, KERNEL = 1, JOB = 2, DONE = 3, FAILED = 4;
/** Polls before sleeping: about half a millisecond, longer than the host work between kernels. */
const SPIN = 20000;

/**
 * The worker's whole program, as source text so a worker needs no module loader (the host
 * wraps it with the platform's way to read `init`). Kernel −1 ends the loop.
 */
export const WORKER_LOOP_SOURCE = `function fonWasmWorkerLoop(init, ready) {
  const instance = new WebAssembly.Instance(init.module, { env: { memory: init.memory } });
  const run = init.kernels.map((name) => instance.exports[name]);
  const control = new Int32Array(init.control);
  const base = init.slot * ${SLOT_WORDS};
  let seen = Atomics.load(control, base + ${REQUEST});
  ready();
  for (;;) {
    let spins = 0;
    while (Atomics.load(control, base + ${REQUEST}) === seen) {
      if (++spins > init.spin) { Atomics.wait(control, base + ${REQUEST}, seen); spins = 0; }
    }
    seen = Atomics.load(control, base + ${REQUEST});
    const kernel = control[base + ${KERNEL}];
    if (kernel < 0) return;
    try {
      run[kernel](control[base + ${JOB}], init.slot);
      control[base + ${FAILED}] = 0;
    } catch {
      control[base + ${FAILED}] = 1;
    }
    Atomics.store(control, base + ${DONE}, seen);
    Atomics.notify(control, base + ${DONE});
  }
}`;

export class ThreadPool {
  private control: Int32Array;
  private sequence = 0;
  private workers: WorkerHandle[] = [];

  private constructor(control: SharedArrayBuffer, workers: WorkerHandle[]) {
    this.control = new Int32Array(control);
    this.workers = workers;
  }

  /** Starts `count` workers (thread indices 1…count) and waits until each has its instance. */
  static async create(spawn: ThreadSpawner, module: WebAssembly.Module, memory: WebAssembly.Memory, kernels: readonly string[], count: number): Promise<ThreadPool> {
    const control = new SharedArrayBuffer((count + 1) * SLOT_WORDS * 4);
    const workers: WorkerHandle[] = [];
    for (let slot = 1; slot <= count; slot++) workers.push(spawn({ module, memory, control, slot, kernels, spin: SPIN }));
    try {
      await Promise.all(workers.map((w) => w.ready));
    } catch (e) {
      for (const w of workers) w.terminate();
      throw e;
    }
    return new ThreadPool(control, workers);
  }

  /** Threads available besides the caller. */
  get size(): number { return this.workers.length; }

  /**
   * Wakes sleeping workers 1…threads−1 without giving them work, so they are spinning by the time
   * `start` comes: a futex wake-up costs 50–200 µs on a VM, a spinning worker reacts in ~1 µs.
   * (Notifying leaves the request word unchanged, so the worker just resumes polling.)
   */
  wake(threads: number): void {
    for (let slot = 1; slot < threads && slot <= this.workers.length; slot++) Atomics.notify(this.control, slot * SLOT_WORDS + REQUEST);
  }

  /** Posts kernel(job, tid) to workers 1…threads−1; the caller then runs tid 0 and calls `wait`. */
  start(kernel: number, job: number, threads: number): void {
    if (threads - 1 > this.workers.length) throw new UnsupportedError(`wasm thread pool: ${threads} threads requested, ${this.workers.length + 1} available`);
    this.sequence = (this.sequence + 1) | 0;
    for (let slot = 1; slot < threads; slot++) {
      const base = slot * SLOT_WORDS;
      this.control[base + KERNEL] = kernel;
      this.control[base + JOB] = job;
      Atomics.store(this.control, base + REQUEST, this.sequence);
      Atomics.notify(this.control, base + REQUEST);
    }
  }

  /** Blocks until workers 1…threads−1 finished the current request; throws if a kernel trapped. */
  wait(threads: number): void {
    let failed = false;
    for (let slot = 1; slot < threads; slot++) {
      const done = slot * SLOT_WORDS + DONE;
      let spins = 0;
      for (;;) {
        const seen = Atomics.load(this.control, done);
        if (seen === this.sequence) break;
        if (++spins > SPIN) Atomics.wait(this.control, done, seen);
      }
      if (this.control[slot * SLOT_WORDS + FAILED]) failed = true;
    }
    if (failed) throw new FonError('wasm thread pool: a kernel trapped in a worker thread');
  }

  destroy(): void {
    this.sequence = (this.sequence + 1) | 0;
    for (let slot = 1; slot <= this.workers.length; slot++) {
      const base = slot * SLOT_WORDS;
      this.control[base + KERNEL] = -1;
      Atomics.store(this.control, base + REQUEST, this.sequence);
      Atomics.notify(this.control, base + REQUEST);
    }
    for (const w of this.workers) w.terminate();
    this.workers = [];
  }
}
