/** Bench helpers: timing loops, a printed table, JSON output, and running a Python reference. */
import { spawnSync } from 'node:child_process';
import { existsSync, renameSync, writeFileSync } from 'node:fs';

export interface Row {
  op: string;
  shape: string;
  dtype: string;
  /** FON's figure and unit (TFLOP/s, GFLOP/s, GB/s) and the reference's (PyTorch or numpy). */
  fon: number;
  ref?: number;
  refName?: string;
  unit: string;
  ms: number;
}

export function printTable(title: string, rows: readonly Row[]): void {
  const head = ['op', 'shape', 'dtype', 'ms', 'FON', 'reference', 'ratio'];
  const body = rows.map((r) => [
    r.op, r.shape, r.dtype, r.ms.toFixed(3), `${fmt(r.fon)} ${r.unit}`,
    r.ref === undefined ? '—' : `${fmt(r.ref)} ${r.unit} (${r.refName})`,
    r.ref === undefined ? '—' : `${(r.fon / r.ref).toFixed(2)}×`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const b of body) console.log(line(b));
}

function fmt(x: number): string {
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

/** Writes JSON atomically (temporary name, then rename). */
export function writeJson(path: string, value: unknown): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, JSON.stringify(value, null, 2));
  renameSync(tmp, path);
}

/** Median of `iters` timings of `fn` in ms after `warmup` calls; `fn` must include its own sync. */
export async function timeMs(fn: () => Promise<void> | void, iters: number, warmup = 1): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const ts: number[] = [];
  for (let i = 0; i < iters; i++) {
    const t0 = performance.now();
    await fn();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return ts[Math.floor(ts.length / 2)];
}

/**
 * ms per call of a GPU op: batches of back-to-back calls of `once`, one `sync` per batch (waiting
 * costs a few ms of polling latency in Dawn's Node binding), grown until a batch takes ≥ `minMs`;
 * one more untimed batch, then the median of 3. The first call compiles the op's pipelines and is
 * not timed: sizing the batches from it let a compile of over `minMs` leave them at one call, and
 * the case was timed as one call a sync (a 1K prefill measured 1.666 ms against 0.302). A call of
 * over a second is timed once, after that first call.
 */
export async function timeBatched(sync: () => Promise<void>, once: () => void, minMs = 250): Promise<number> {
  const batch = async (n: number) => { const t0 = performance.now(); for (let i = 0; i < n; i++) once(); await sync(); return performance.now() - t0; };
  await batch(1);
  let n = 1;
  let t = await batch(n);
  if (t > 1000) return t;
  while (t < minMs && n < 100_000) { n = Math.ceil(n * Math.min(10, (1.2 * minMs) / Math.max(t, 0.5))); t = await batch(n); }
  await batch(n);
  const ts = [await batch(n), await batch(n), await batch(n)].sort((x, y) => x - y);
  return ts[1] / n;
}

/**
 * Host ms per call of recording `once`: batches of n back-to-back calls timed without the sync that
 * follows each (the GPU's work is not waited for inside the span), after one untimed batch; the
 * median of 3. Beside timeBatched's figure for the same call it says who sets the pace: where the
 * two are close, the host's recording does, not the GPU.
 */
export async function timeHost(sync: () => Promise<void>, once: () => void, n = 100): Promise<number> {
  const batch = async () => { const t0 = performance.now(); for (let i = 0; i < n; i++) once(); const t = performance.now() - t0; await sync(); return t; };
  await batch();
  const ts = [await batch(), await batch(), await batch()].sort((x, y) => x - y);
  return ts[1] / n;
}

/**
 * GPU ms per call of `once` on a WebGPU runtime: n calls recorded into one submit (rt.flushEvery
 * raised for the batch), then the wall time from that submit to the GPU's finish, divided by n: the
 * GPU's own pace, the host's recording left out (it happened before the submit). The median of 3.
 * Null where the batch could not be held in one submit (the uniform ring filled).
 */
export async function timeGpu(rt: { flushEvery: number; submits: number; flush(): void }, sync: () => Promise<void>, once: () => void, n = 50): Promise<number | null> {
  const batch = async () => {
    await sync();
    const every = rt.flushEvery, before = rt.submits;
    rt.flushEvery = Number.MAX_SAFE_INTEGER;
    try { for (let i = 0; i < n; i++) once(); } finally { rt.flushEvery = every; }
    const held = rt.submits === before;
    const t0 = performance.now();
    rt.flush();
    await sync();
    return held ? performance.now() - t0 : null;
  };
  await batch();
  const ts = [await batch(), await batch(), await batch()];
  if (ts.some((t) => t === null)) return null;
  return (ts as number[]).sort((x, y) => x - y)[1] / n;
}

/** Runs a Python script with JSON on stdin and parses JSON from its stdout; null when it can't run. */
export function runPython(python: string, script: string, input: unknown, timeoutMs = 600_000): unknown | null {
  const r = spawnSync(python, [script], { input: JSON.stringify(input), encoding: 'utf8', timeout: timeoutMs, maxBuffer: 1 << 24 });
  if (r.status !== 0) {
    if (r.stderr) console.error(`(${python} ${script} failed: ${r.stderr.trim().split('\n').slice(-3).join(' | ')})`);
    return null;
  }
  try { return JSON.parse(r.stdout); } catch { return null; }
}

/** The first Python that can import `module` (Debian's /usr/bin/python3 preferred for numpy). */
export function findPython(module: string, candidates = ['/usr/bin/python3', 'python3']): string | null {
  for (const p of candidates) {
    if (p.startsWith('/') && !existsSync(p)) continue;
    const r = spawnSync(p, ['-c', `import ${module}`], { encoding: 'utf8' });
    if (r.status === 0) return p;
  }
  return null;
}
