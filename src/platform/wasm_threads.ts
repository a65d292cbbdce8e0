/**
 * The Node adapter for the wasm backend's threads (DESIGN.md: Node-only code sits behind small
 * adapters): worker_threads workers that run the pool's loop, and the default thread count,
 * `os.availableParallelism()` or the environment variable FON_WASM_THREADS.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { ArgumentError } from '../errors.ts';
import { WORKER_LOOP_SOURCE, type ThreadSpawner } from '../backend/wasm/thread_pool.ts';

/** Threads the wasm backend uses by default, the calling thread included. */
export function nodeThreadCount(): number {
  const fromEnv = process.env.FON_WASM_THREADS;
  if (fromEnv === undefined || fromEnv === '') return availableParallelism();
  const n = Number(fromEnv);
  if (!Number.isInteger(n) || n < 1) throw new ArgumentError(`FON_WASM_THREADS='${fromEnv}': expected a positive integer`);
  return n;
}

const WORKER_SOURCE = `const { parentPort, workerData } = require('node:worker_threads');
(${WORKER_LOOP_SOURCE})(workerData, () => parentPort.postMessage('ready'));`;

/**
 * Starts a worker from source text (no loader or file needed). It is unref'd once ready, so a
 * worker asleep in Atomics.wait never keeps the process from exiting. `execArgv: []` keeps the
 * parent's Node options (`--input-type=module`, `--test`, loaders) from changing how the
 * CommonJS source runs; V8 flags are process-wide and still apply.
 */
export const nodeSpawner: ThreadSpawner = (init) => {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: init, execArgv: [] });
  const ready = new Promise<void>((resolve, reject) => {
    worker.once('message', () => { worker.unref(); resolve(); });
    // Before ready: the pool's creation fails. After: kernels catch their own traps, so this is a
    // crash of the worker itself; report it rather than let it kill the process silently.
    worker.on('error', (e) => {
      reject(e);
      process.emitWarning(`fon wasm worker ${init.slot} died: ${e instanceof Error ? e.message : String(e)}`);
    });
  });
  return { ready, terminate: () => void worker.terminate() };
};
