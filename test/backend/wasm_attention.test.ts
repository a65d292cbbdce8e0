/**
 * The wasm backend's attention kernels (src/backend/wasm/attention.ts) against the CPU reference
 * (src/backend/cpu/attention.ts) on random inputs: forward (out, logsumexp) and backward (dq, dk,
 * dv) for shapes that are not multiples of the 4-row query tile, the 8-key score tile or the
 * 8-wide D chunk, one-query decode (T = 1), causal and full attention, sliding windows, GQA,
 * kvLength < Tk, more queries than keys (rows that see no key), f16/bf16 storage; on one thread
 * and on the worker pool (every call on the pool). On an engine without relaxed SIMD (Node 20) the
 * suite re-runs in a child process with --experimental-wasm-relaxed-simd, so the fma kernels are
 * checked too.
 *
 * Tolerance, elementwise against the reference value r of a tensor whose largest finite |value| is M:
 *   out, dq, dk, dv: |wasm − cpu| ≤ 1e-5·(|r| + M) + 1e-6;   lse: ≤ 2e-6·(|r| + M) + 1e-6
 * The kernels sum the same f32 products in another order (tiles of 8 keys, 4 lanes) and take the
 * exponential from a polynomial a few ulp from Math.exp; the reference sums some terms in f64.
 * Each such difference is a few f32 ulp of the largest term of a sum (≤ M for the outputs, whose
 * sums have at most a few hundred terms here), so 1e-5 relative to M leaves a margin of ~10×
 * (measured: ≤ 6e-7 at M ≈ 1, dev/kernels/attention_wasm.ts). The logsumexp is one f32 sum
 * inside a log, hence the tighter bound.
 * Exact: lse = −∞ and out = 0 for a row that sees no key; dk = dv = 0 past kvLength.
 * f16/bf16: compared after rounding both results to the storage dtype, plus one rounding step
 * (2⁻¹⁰ resp. 2⁻⁷ of |r|).
 *
 *   node --import tsx --test test/backend/wasm_attention.test.ts
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { attention as cpuAttention, attentionBackward as cpuAttentionBackward } from '../../src/backend/cpu/attention.ts';
import type { CpuHandle, CpuRef } from '../../src/backend/cpu/host.ts';
import { WasmBackend } from '../../src/backend/wasm/backend.ts';
import { detectWasmFeatures } from '../../src/backend/wasm/wasm_features.ts';
import { nodeSpawner } from '../../src/platform/wasm_threads.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { f32ToHost, hostToF32, type FloatDType } from '../../src/tensor/dtype.ts';

interface Case {
  name: string;
  batch: number; heads: number; kvHeads: number; tq: number; tk: number; d: number;
  kvLength?: number; causal?: boolean; window?: number; scale?: number; dtype?: FloatDType;
}

/** Args as ops/attention.ts builds them: qOffset = kvLength − Tq. */
function argsOf(c: Case): AttentionArgs {
  const kvLength = c.kvLength ?? c.tk;
  return {
    batch: c.batch, heads: c.heads, kvHeads: c.kvHeads, tq: c.tq, tk: c.tk, d: c.d, kvLength, qOffset: kvLength - c.tq,
    causal: c.causal ?? true, window: c.window ?? 0, scale: c.scale ?? 1 / Math.sqrt(c.d),
  };
}

const CASES: Case[] = [
  { name: 'causal, odd sizes', batch: 2, heads: 3, kvHeads: 3, tq: 7, tk: 7, d: 5 },
  { name: 'causal, tiles plus remainders', batch: 1, heads: 2, kvHeads: 2, tq: 37, tk: 37, d: 19 },
  { name: 'full attention', batch: 2, heads: 2, kvHeads: 2, tq: 11, tk: 13, d: 12, causal: false },
  { name: 'one-query decode (T = 1) into a longer cache', batch: 2, heads: 2, kvHeads: 2, tq: 1, tk: 21, d: 8, kvLength: 17 },
  { name: 'T = 1 self-attention', batch: 3, heads: 1, kvHeads: 1, tq: 1, tk: 1, d: 3 },
  { name: 'sliding window', batch: 1, heads: 2, kvHeads: 2, tq: 30, tk: 30, d: 16, window: 5 },
  { name: 'window without causal', batch: 1, heads: 1, kvHeads: 1, tq: 9, tk: 9, d: 7, window: 3, causal: false },
  { name: 'GQA, 6 query heads over 2 kv heads', batch: 2, heads: 6, kvHeads: 2, tq: 10, tk: 10, d: 9 },
  { name: 'GQA, multi-query (1 kv head)', batch: 1, heads: 4, kvHeads: 1, tq: 13, tk: 13, d: 33 },
  { name: 'kvLength < Tk, chunk of queries at the end', batch: 2, heads: 2, kvHeads: 1, tq: 6, tk: 19, d: 10, kvLength: 14 },
  { name: 'more queries than keys: leading rows see nothing', batch: 1, heads: 2, kvHeads: 2, tq: 9, tk: 5, d: 4 },
  { name: 'kvLength 0: every row empty', batch: 1, heads: 1, kvHeads: 1, tq: 3, tk: 4, d: 4, kvLength: 0, causal: false },
  { name: 'large scale (sharp softmax), D 64', batch: 1, heads: 2, kvHeads: 2, tq: 21, tk: 21, d: 64, scale: 2 },
  { name: 'tiny shape of the training model', batch: 2, heads: 4, kvHeads: 4, tq: 64, tk: 64, d: 32 },
  { name: 'f16 storage', batch: 1, heads: 2, kvHeads: 1, tq: 10, tk: 10, d: 12, dtype: 'f16' },
  { name: 'bf16 storage', batch: 1, heads: 2, kvHeads: 2, tq: 6, tk: 9, d: 8, kvLength: 8, dtype: 'bf16' },
];

function random(shape: number[], dtype: FloatDType, seed: number): CpuRef {
  const next = uniformStream(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) values[i] = 2 * (next() * 2 - 1);
  return { h: f32ToHost(values, dtype), shape, dtype };
}

const ROUNDING: Record<FloatDType, number> = { f32: 0, f16: 2 ** -10, bf16: 2 ** -7 };

/** The header's bound, naming the first element that breaks it. */
function assertClose(got: CpuHandle, want: CpuHandle, dtype: FloatDType, what: string, rel = 1e-5): void {
  const g = hostToF32(got, dtype), w = hostToF32(want, dtype);
  assert.equal(g.length, w.length, `${what}: length`);
  let m = 0;
  for (const x of w) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  for (let i = 0; i < w.length; i++) {
    if (w[i] === -Infinity) { assert.equal(g[i], -Infinity, `${what}[${i}]: want −∞, got ${g[i]}`); continue; }
    const bound = rel * (Math.abs(w[i]) + m) + 1e-6 + ROUNDING[dtype] * Math.abs(w[i]);
    assert.ok(Math.abs(g[i] - w[i]) <= bound, `${what}[${i}]: got ${g[i]}, want ${w[i]} (bound ${bound.toExponential(2)})`);
  }
}

function checkCase(backend: WasmBackend, c: Case, seed: number): void {
  const a = argsOf(c);
  const dtype = c.dtype ?? 'f32';
  const q = random([a.batch, a.heads, a.tq, a.d], dtype, seed);
  const k = random([a.batch, a.kvHeads, a.tk, a.d], dtype, seed + 1);
  const v = random([a.batch, a.kvHeads, a.tk, a.d], dtype, seed + 2);
  const g = random([a.batch, a.heads, a.tq, a.d], dtype, seed + 3);
  const [oRef, lseRef] = cpuAttention(q, k, v, a);
  const [o, lse] = backend.attention(q, k, v, a);
  assertClose(o, oRef, dtype, `${c.name}: out`);
  assertClose(lse, lseRef, 'f32', `${c.name}: lse`, 2e-6);

  // The backward from the reference's forward, so both backwards see the same o and lse.
  const oR = { h: oRef, shape: q.shape, dtype }, lR = { h: lseRef, shape: [a.batch, a.heads, a.tq], dtype: 'f32' as const };
  const [dqRef, dkRef, dvRef] = cpuAttentionBackward(q, k, v, oR, lR, g, a);
  const [dq, dk, dv] = backend.attentionBackward(q, k, v, oR, lR, g, a);
  assertClose(dq, dqRef, dtype, `${c.name}: dq`);
  assertClose(dk, dkRef, dtype, `${c.name}: dk`);
  assertClose(dv, dvRef, dtype, `${c.name}: dv`);

  // Exact: empty rows give lse −∞ and zero out; no gradient reaches keys at or past kvLength.
  const out = hostToF32(o, dtype), dkv = hostToF32(dk, dtype), dvv = hostToF32(dv, dtype);
  for (let row = 0; row < lse.length; row++) {
    if (lseRef[row] !== -Infinity) continue;
    for (let c2 = 0; c2 < a.d; c2++) assert.equal(out[row * a.d + c2], 0, `${c.name}: out of empty row ${row}`);
  }
  for (let bh = 0; bh < a.batch * a.kvHeads; bh++) for (let j = a.kvLength; j < a.tk; j++) for (let c2 = 0; c2 < a.d; c2++) {
    const at = (bh * a.tk + j) * a.d + c2;
    assert.equal(dkv[at], 0, `${c.name}: dk past kvLength at key ${j}`);
    assert.equal(dvv[at], 0, `${c.name}: dv past kvLength at key ${j}`);
  }
  for (const h of [o, lse, dq, dk, dv]) backend.free(h);
}

const features = detectWasmFeatures();

describe(`wasm attention kernels against the CPU reference${features.relaxedSimd ? ' (relaxed-SIMD fma)' : ''}`, () => {
  let single: WasmBackend, threaded: WasmBackend;
  before(async () => {
    single = await WasmBackend.create({ threads: 1 });
    threaded = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, attention: { minParallelWork: 0 } });
  });
  after(() => { single.destroy(); threaded.destroy(); });

  CASES.forEach((c, i) => {
    test(`${c.name}: one thread`, () => checkCase(single, c, 100 * i + 1));
    test(`${c.name}: worker pool`, () => checkCase(threaded, c, 100 * i + 51));
  });

  test('Tq = 0 falls back to the reference and gives empty results', () => {
    const a = argsOf({ name: '', batch: 1, heads: 2, kvHeads: 2, tq: 0, tk: 4, d: 4 });
    const q = random([1, 2, 0, 4], 'f32', 7), k = random([1, 2, 4, 4], 'f32', 8);
    const [o, lse] = threaded.attention(q, k, k, a);
    assert.equal(o.length, 0);
    assert.equal(lse.length, 0);
  });

  test('outputs are tracked handles that free back to the baseline', () => {
    const before = threaded.memory().liveHandles;
    const a = argsOf({ name: '', batch: 1, heads: 2, kvHeads: 2, tq: 5, tk: 5, d: 8 });
    const q = random([1, 2, 5, 8], 'f32', 9);
    const outs = threaded.attention(q, q, q, a);
    assert.equal(threaded.memory().liveHandles, before + 2);
    const grads = threaded.attentionBackward(q, q, q, { ...q, h: outs[0] }, { h: outs[1], shape: [1, 2, 5], dtype: 'f32' }, q, a);
    assert.equal(threaded.memory().liveHandles, before + 5);
    for (const h of [...outs, ...grads]) threaded.free(h);
    assert.equal(threaded.memory().liveHandles, before);
  });

  test('keys and values past kvLength (an unwritten cache) never reach the outputs', () => {
    const a = argsOf({ name: '', batch: 2, heads: 2, kvHeads: 1, tq: 5, tk: 16, d: 8, kvLength: 9 });
    const q = random([2, 2, 5, 8], 'f32', 21), g = random([2, 2, 5, 8], 'f32', 22);
    const k = random([2, 1, 16, 8], 'f32', 23), v = random([2, 1, 16, 8], 'f32', 24);
    for (const x of [k, v]) for (let bh = 0; bh < 2; bh++) (x.h as Float32Array).fill(NaN, (bh * 16 + 9) * 8, (bh + 1) * 16 * 8);
    for (const backend of [single, threaded]) {
      const [o, lse] = backend.attention(q, k, v, a);
      const [dq, dk, dv] = backend.attentionBackward(q, k, v, { ...q, h: o }, { h: lse, shape: [2, 2, 5], dtype: 'f32' }, g, a);
      for (const [name, x] of [['out', o], ['lse', lse], ['dq', dq], ['dk', dk], ['dv', dv]] as const) {
        assert.ok((x as Float32Array).every(Number.isFinite), `${name} has a non-finite value`);
      }
    }
  });

  test('results do not depend on the thread count', () => {
    const a = argsOf({ name: '', batch: 3, heads: 4, kvHeads: 2, tq: 23, tk: 23, d: 16, window: 9 });
    const q = random([3, 4, 23, 16], 'f32', 11), k = random([3, 2, 23, 16], 'f32', 12), v = random([3, 2, 23, 16], 'f32', 13);
    const [o1, l1] = single.attention(q, k, v, a);
    const [o2, l2] = threaded.attention(q, k, v, a);
    assert.deepEqual(o2, o1);
    assert.deepEqual(l2, l1);
    const g = random([3, 4, 23, 16], 'f32', 14);
    const oR = { h: o1, shape: q.shape, dtype: 'f32' as const }, lR = { h: l1, shape: [3, 4, 23], dtype: 'f32' as const };
    assert.deepEqual(threaded.attentionBackward(q, k, v, oR, lR, g, a), single.attentionBackward(q, k, v, oR, lR, g, a));
  });

  test('the relaxed-SIMD fma kernels pass this suite', { skip: features.relaxedSimd ? 'this engine has relaxed SIMD: the suite above ran the fma kernels' : false }, () => {
    const probe = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '-e', ''], { encoding: 'utf8' });
    if (probe.status !== 0) return; // this Node does not know the flag
    // NODE_TEST_CONTEXT would make the child report in the runner's binary protocol.
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const child = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--import', 'tsx', '--test', '--test-reporter=spec', fileURLToPath(import.meta.url)], {
      encoding: 'utf8', timeout: 120_000, env,
    });
    assert.equal(child.status, 0, `fma suite failed:\n${child.stdout}\n${child.stderr}`);
    assert.match(child.stdout, /relaxed-SIMD fma/);
  });
});
