/**
 * The wasm backend's attention kernels (src/backend/wasm/attention.ts) against the CPU reference
 * (src/backend/cpu/attention.ts): each shape is checked (largest |wasm − cpu| of out, lse, dq,
 * dk, dv) and timed, forward and backward, median of the repetitions (the machine's cores may be
 * shared, so the median rather than the best).
 *
 *   node --import tsx dev/kernels/attention_wasm.ts [--reps 7] [--threads 2] [--shapes 8x4x256x32,4x8x512x64]
 *
 * A shape is BxHxTxD (causal self-attention, Hkv = H, Tq = Tk = T, scale 1/√D). Threads default
 * to FON_WASM_THREADS or os.availableParallelism(). Versions (only the last is kept in src):
 *   v1  per (batch, head) item, query tiles of 4 rows; scores 4×8 in registers from a c-major
 *       packed Q tile and Kᵀ; two-pass softmax over the tile's whole key range in scratch;
 *       O = P V with 4×8 of O in registers. Backward per (batch, kv head): P and
 *       dS = P ⊙ (dO Vᵀ − δ)·scale per tile, dQ = dS K, dV += Pᵀ dO, dK += dSᵀ Q. K and V
 *       transposed by the host in JS; P·V and the dK/dV products over the keys rounded up to 8.
 *   v2  (src) as v1, with the products over the tile's exact keys (K, V, dK, dV then need no
 *       padding rows, so dK and dV copy out in one piece) and Kᵀ, Vᵀ built by each item in
 *       wasm into its thread's scratch. Host time per call fell from ~1 / ~2.3 ms (forward /
 *       backward, tiny shape) to the plain copies; backward read-out from 2–5 ms to ~0.4 ms.
 *
 * Medians on this repository's 2-core VM (Node 20, no relaxed SIMD, so mul + add), 2026-11-30,
 * while other processes kept about one core busy (a 384³ GEMM was no faster on 2 threads than
 * on 1 in the same minutes, so the 2-thread figures show no thread speed-up):
 *
 *   threads  shape        cpu fwd  wasm fwd      cpu bwd  wasm bwd
 *   1        8x4x256x32    185.1     7.7 (24×)    356.1    13.4 (27×)
 *   1        4x8x512x64   1669.7    47.4 (35×)   3925.2    94.1 (42×)
 *   2        8x4x256x32    156.2     8.5 (18×)    288.2    14.0 (21×)
 *   2        4x8x512x64   1102.9    47.3 (23×)   2205.1    93.8 (24×)
 *
 * With --experimental-wasm-relaxed-simd (fma), 1 thread: 7.0 / 10.7 ms (tiny), 37.2 / 71.1 ms
 * (4x8x512x64). One thread runs the kernels at ~20 GFLOP/s (mul + add), near what that
 * instruction mix allows; the largest |wasm − cpu| is ≤ 6e-7 everywhere.
 */
import { parseArgs } from 'node:util';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { attention as cpuAttention, attentionBackward as cpuAttentionBackward } from '../../src/backend/cpu/attention.ts';
import type { CpuRef } from '../../src/backend/cpu/host.ts';
import { WasmBackend } from '../../src/backend/wasm/backend.ts';
import { nodeSpawner, nodeThreadCount } from '../../src/platform/wasm_threads.ts';
import { uniformStream } from '../../src/ops/random.ts';

const { values: flags } = parseArgs({
  options: {
    reps: { type: 'string', default: '7' },
    threads: { type: 'string' },
    shapes: { type: 'string', default: '8x4x256x32,4x8x512x64' },
    'cpu-reps': { type: 'string', default: '3' },
  },
});
const reps = Number(flags.reps), cpuReps = Number(flags['cpu-reps']);
const threads = flags.threads ? Number(flags.threads) : nodeThreadCount();
const backend = await WasmBackend.create({ threads, spawner: nodeSpawner });

function random(shape: number[], seed: number): CpuRef {
  const next = uniformStream(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  const h = new Float32Array(n);
  for (let i = 0; i < n; i++) h[i] = next() * 2 - 1;
  return { h, shape, dtype: 'f32' };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function time(fn: () => void, n: number): number {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

console.log(`threads ${backend.threads}, ${reps} reps (wasm), ${cpuReps} reps (cpu), medians in ms`);
console.log('shape (B,H,T,D)      | cpu fwd | wasm fwd | ×     | cpu bwd | wasm bwd | ×     | max |Δ| out, lse, dq, dk, dv');
for (const spec of flags.shapes.split(',')) {
  const [batch, heads, t, d] = spec.split('x').map(Number);
  const args: AttentionArgs = { batch, heads, kvHeads: heads, tq: t, tk: t, d, kvLength: t, qOffset: 0, causal: true, window: 0, scale: 1 / Math.sqrt(d) };
  const q = random([batch, heads, t, d], 1), k = random([batch, heads, t, d], 2), v = random([batch, heads, t, d], 3), g = random([batch, heads, t, d], 4);
  const [oRef, lseRef] = cpuAttention(q, k, v, args);
  const oR = { h: oRef, shape: q.shape, dtype: 'f32' as const }, lR = { h: lseRef, shape: [batch, heads, t], dtype: 'f32' as const };
  const [dqRef, dkRef, dvRef] = cpuAttentionBackward(q, k, v, oR, lR, g, args);
  const [o, lse] = backend.attention(q, k, v, args);
  const [dq, dk, dv] = backend.attentionBackward(q, k, v, oR, lR, g, args);
  const diffs = [maxDiff(o, oRef), maxDiff(lse, lseRef), maxDiff(dq, dqRef), maxDiff(dk, dkRef), maxDiff(dv, dvRef)];

  const cpuF = time(() => cpuAttention(q, k, v, args), cpuReps);
  const cpuB = time(() => cpuAttentionBackward(q, k, v, oR, lR, g, args), cpuReps);
  const wasmF = time(() => { for (const h of backend.attention(q, k, v, args)) backend.free(h); }, reps);
  const wasmB = time(() => { for (const h of backend.attentionBackward(q, k, v, oR, lR, g, args)) backend.free(h); }, reps);
  const f = (x: number) => x.toFixed(1).padStart(7);
  console.log(`${spec.padEnd(20)} | ${f(cpuF)} | ${f(wasmF)}  | ${(cpuF / wasmF).toFixed(1).padStart(5)} | ${f(cpuB)} | ${f(wasmB)}  | ${(cpuB / wasmB).toFixed(1).padStart(5)} | ${diffs.map((x) => x.toExponential(1)).join(', ')}`);
}
backend.destroy();
