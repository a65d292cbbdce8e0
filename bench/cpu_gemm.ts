/**
 * CPU GEMM: the wasm backend's f32 matmul (C = A·B, square) on one thread and on all threads,
 * beside numpy+OpenBLAS measured in the same run with the same thread counts, as GFLOP/s and
 * ratio. Timings are medians (at least 5 calls and 0.5 s per size) and include the backend's
 * copies into and out of wasm memory, as a model would see them.
 *
 *   node --import tsx bench/cpu_gemm.ts [--sizes 256,512,1024,2048] [--json FILE]
 *
 * Both sides share the machine: another busy process halves the 2-thread figures of both, which
 * is why the ratio is the number to read; the 1-minute load average is printed and kept in the JSON.
 *
 * FON_WASM_THREADS sets "all threads" (default os.availableParallelism()). numpy is skipped
 * when no python3 can import it; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are removed from its
 * environment so OpenBLAS picks its own kernel for this CPU.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { MatmulArgs } from '../src/backend/backend.ts';
import { WasmBackend } from '../src/backend/wasm/index.ts';
import { nodeSpawner, nodeThreadCount } from '../src/platform/wasm_threads.ts';
import { findPython, printTable, writeJson, type Row } from './lib/report.ts';

const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '256,512,1024,2048' },
    json: { type: 'string' },
  },
});
const sizes = flags.sizes.split(',').map(Number);
const MIN_CALLS = 5;
const MIN_SECONDS = 0.5;

/** Median seconds per call of `fn` (one warm-up call first). */
function medianSeconds(fn: () => void): number {
  fn();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < MIN_CALLS || performance.now() - start < MIN_SECONDS * 1e3) {
    const t0 = performance.now();
    fn();
    times.push((performance.now() - t0) / 1e3);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

const NUMPY_SCRIPT = `
import json, sys, time
import numpy as np
out = {}
for n in json.loads(sys.argv[1]):
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
    a @ b
    times = []; start = time.perf_counter()
    while len(times) < ${MIN_CALLS} or time.perf_counter() - start < ${MIN_SECONDS}:
        t0 = time.perf_counter(); a @ b; times.append(time.perf_counter() - t0)
    times.sort(); out[str(n)] = times[len(times) // 2]
print(json.dumps(out))
`;

/** numpy's median seconds per size on `threads` OpenBLAS threads, or null without numpy. */
function numpySeconds(python: string | null, threads: number): Record<string, number> | null {
  if (!python) return null;
  const env: NodeJS.ProcessEnv = { ...process.env, OPENBLAS_NUM_THREADS: String(threads) };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  const r = spawnSync(python, ['-c', NUMPY_SCRIPT, JSON.stringify(sizes)], { encoding: 'utf8', env, timeout: 600_000 });
  if (r.status !== 0) { console.error(`(numpy run failed: ${r.stderr.trim().split('\n').slice(-1)[0]})`); return null; }
  return JSON.parse(r.stdout) as Record<string, number>;
}

const allThreads = nodeThreadCount();
const backends = [
  { threads: 1, backend: await WasmBackend.create({ threads: 1 }) },
  { threads: allThreads, backend: await WasmBackend.create({ threads: allThreads, spawner: nodeSpawner }) },
];
const python = findPython('numpy');
const rows: Row[] = [];
for (const { threads, backend } of backends) {
  const numpy = numpySeconds(python, threads);
  for (const n of sizes) {
    const values = new Float32Array(n * n).map(() => Math.random() * 2 - 1);
    const a = { h: values, shape: [n, n], dtype: 'f32' as const };
    const args: MatmulArgs = { batch: 1, m: n, n, k: n, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' };
    const seconds = medianSeconds(() => backend.free(backend.matmul(a, a, args)));
    const flops = 2 * n ** 3;
    const ref = numpy?.[String(n)];
    rows.push({
      op: `gemm wasm ${backend.threads} thread${backend.threads > 1 ? 's' : ''}${backend.runtime.fma ? ' fma' : ''}`,
      shape: `${n}³`, dtype: 'f32', fon: flops / seconds / 1e9, unit: 'GFLOP/s', ms: seconds * 1e3,
      ...(ref !== undefined ? { ref: flops / ref / 1e9, refName: `numpy ${threads}T` } : {}),
    });
  }
}
for (const { backend } of backends) backend.destroy();

const load = loadavg()[0];
printTable(`wasm GEMM vs numpy+OpenBLAS (${cpus()[0]?.model ?? 'cpu'}, ${allThreads} threads, Node ${process.versions.node}, load ${load.toFixed(2)})`, rows);
if (flags.json) {
  writeJson(flags.json, {
    bench: 'cpu_gemm', date: new Date().toISOString(), node: process.versions.node,
    cpu: cpus()[0]?.model, threads: allThreads, fma: backends[0].backend.runtime.fma, python, loadAverage: load, rows,
  });
}
