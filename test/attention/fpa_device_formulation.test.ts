/**
 * FPA's decode state (attention/fpa/fpa_decode.ts FpaDecodeState: one formulation in ops, for
 * every backend) against the host references it replaced (test/attention/fpa_reference.ts:
 * HostFpaDecodeState's running minima, FpaStack's explicit stack), driven by the same φ, ℓ, W: a
 * layer decoded a token at a time after a prefill, settling after each step, keeps after every
 * settle exactly the keys the reference keeps (per head, in order) and reports the reference's
 * kept fractions — with eviction (compaction every settle, or every 5) and in the shared-walk
 * stack mode, which the state expresses as death threshold 0 (a key dies once its penalty is
 * positive; the prompt one token at a time). A truncation of speculative positions in the stack
 * mode continues bit for bit as if they had never been seen (cpu and webgpu), and webgpu's stack
 * decoding gives the CPU's outputs, kept fractions and rows.
 *
 *   node --import tsx --test test/attention/fpa_device_formulation.test.ts
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/fpa_device_formulation.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import type { ModelConfig } from '../../src/model/config.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import type { FpaAttention, FpaSpec } from '../../src/attention/fpa/fpa.ts';
import { FpaDecodeState, peekFpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';
import { FpaStack, HostFpaDecodeState } from './fpa_reference.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { FPA_C as C, FPA_D as D, FPA_H as H, fpaCall, fpaLayer, keptRows, layerInputs, range, setRecentre, type LayerInputs } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

function cacheFor(cfg: ModelConfig, _spec: FpaSpec, backend: Backend, T: number, _device = true): KvCache {
  const cache = new KvCache(cfg, 1, T, backend);
  setRecentre(cache, 0);
  return cache;
}

function worst(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i] - b[i]));
  return w;
}

/** Prefill P, then one token a step, settling after each: outputs and, after each settle, the live positions and kept(). */
async function decode(mech: FpaAttention, cache: KvCache, inp: LayerInputs, T: number, P: number, compareRows: boolean) {
  const outs: Float32Array[] = [], reports: unknown[] = [], alive: number[][][] = [], kept: number[][] = [];
  outs.push(await fpaCall(mech, cache, inp, 0, P));
  await cache.settle();
  for (let p = P; p < T; p++) {
    outs.push(await fpaCall(mech, cache, inp, p, 1));
    await cache.settle();
    const st = peekFpaDecodeState(cache.layers[0])!;
    alive.push(await st.alivePositions());
    kept.push(cache.kept()[0]);
    reports.push({ kept: cache.kept(), ...(compareRows ? { rows: keptRows(cache), length: st.length } : {}) });
  }
  return { outs, reports, alive, kept, compactions: peekFpaDecodeState(cache.layers[0])!.compactions };
}

/** The references' alive positions per head after each position P … T−1, from φ, ℓ, W of the whole sequence. */
function reference(mech: FpaAttention, spec: FpaSpec, x: fon.Tensor, T: number, P: number): number[][][] {
  const [phiT, levelT] = fon.noGrad(() => mech.fieldLevel(x));
  const walkT = fon.noGrad(() => fon.cumsum(mech.increments(x), -1));
  const [phi, level, walk] = [phiT, levelT, walkT].map((t) => t.dataSync() as Float32Array);
  const lambda = mech.lambda().dataSync() as Float32Array;
  const col = (a: Float32Array, t: number) => range(0, H).map((h) => a[h * T + t]);
  const out: number[][][] = [];
  if (spec.stack) {
    const stack = new FpaStack(H, T);
    for (let t = 0; t < T; t++) {
      stack.step(col(walk, t), col(walk, t));
      if (t >= P) out.push(range(0, H).map((h) => stack.alive(h)));
    }
    return out;
  }
  const st = new HostFpaDecodeState(1, H, T, { recentreEvery: 0 });
  st.rebuild(phi, level, walk, T, P);
  st.markDead(lambda, spec.evict!.tau);
  for (let t = P; t < T; t++) {
    st.observe(col(phi, t));
    st.markDead(lambda, spec.evict!.tau);
    st.append(col(level, t));
    out.push(range(0, H).map((h) => range(0, st.length).map((r) => st.position[h * T + r]).filter((p) => p >= 0)));
  }
  return out;
}

const CASES: [string, Record<string, unknown>][] = [
  ['evict τ = 2.5, every 1', { type: 'fpa', walk: 'linear', evict: { tau: 2.5, every: 1 } }],
  ['evict τ = 4, every 5', { type: 'fpa', walk: 'linear', evict: { tau: 4, every: 5 } }],
  ['evict τ = 3, walk tanh', { type: 'fpa', walk: 'tanh', evict: { tau: 3, every: 2 } }],
  ['stack mode (shared walk, threshold 0), every 1', { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } }],
  ['stack mode, walk tanh, the default rule', { type: 'fpa', walk: 'tanh', shared: true, stack: true }],
];

for (const [name, attention] of CASES) test(`cpu: the decode state keeps the reference's keys and reports its kept fractions: ${name}`, async () => {
  const { cfg, spec, mech } = fpaLayer(cpu, attention, 11);
  const T = 26, P = 6;
  const inp = layerInputs(cpu, T, 60, H, D, C);
  const cache = cacheFor(cfg, spec, cpu, T);
  const got = await decode(mech, cache, inp, T, P, false);
  const want = reference(mech, spec, inp.x, T, P);
  assert.deepEqual(got.alive, want, 'live positions per head after every settle');
  for (const [i, k] of got.kept.entries()) for (let h = 0; h < H; h++) assert.ok(Math.abs(k[h] - want[i][h].length / (P + i + 1)) < 1e-12, `step ${i}, head ${h}: kept ${k[h]}`);
  assert.ok(got.compactions > 0, `compactions ${got.compactions}`);
  assert.ok(got.kept.at(-1)!.some((f) => f < 1), 'keys died');
  cache.dispose();
});

/** Stack mode through the device formulation: A speculates 3 positions and truncates back 2, B never sees them. */
async function stackTruncation(backend: Backend, device: boolean) {
  const { cfg, spec, mech } = fpaLayer(backend, { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } }, 11);
  const T = 22, S = 11, L = S + 1;
  const main = layerInputs(backend, T, 60, H, D, C), other = layerInputs(backend, T, 160, H, D, C);
  const run = async (speculate: boolean) => {
    const cache = cacheFor(cfg, spec, backend, T, device);
    await fpaCall(mech, cache, main, 0, 4);
    await cache.settle();
    for (let p = 4; p < S; p++) { await fpaCall(mech, cache, main, p, 1); await cache.settle(); }
    const compactionsBefore = peekFpaDecodeState(cache.layers[0])!.compactions;
    if (speculate) {
      await fpaCall(mech, cache, main, S, 1);
      await fpaCall(mech, cache, other, S + 1, 1);
      await fpaCall(mech, cache, other, S + 2, 1);
      cache.truncate(L);
    } else await fpaCall(mech, cache, main, S, 1);
    const outs: Float32Array[] = [], reports: unknown[] = [];
    for (let p = L; p < T; p++) { outs.push(await fpaCall(mech, cache, main, p, 1)); await cache.settle(); reports.push({ kept: cache.kept(), rows: keptRows(cache) }); }
    cache.dispose();
    return { outs, reports, compactionsBefore };
  };
  return { a: await run(true), b: await run(false) };
}

for (const [bname, get, skipIt] of [['cpu', () => cpu, false], ['webgpu', () => gpu, skip]] as const) {
  test(`${bname}: stack mode, truncating speculative positions is bit-identical to never seeing them`, { skip: skipIt }, async () => {
    const { a, b } = await stackTruncation(get()!, true);
    assert.ok(a.compactionsBefore > 0);
    for (const [i, o] of a.outs.entries()) assert.equal(worst(o, b.outs[i]), 0, `step ${i}`);
    assert.deepEqual(a.reports, b.reports);
  });
}

test('webgpu: stack decoding gives the CPU\'s outputs, kept fractions and rows', { skip }, async () => {
  const attention = { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } };
  const c = fpaLayer(cpu, attention, 11), g = fpaLayer(gpu!, attention, 11);
  const T = 20, P = 5;
  const ci = layerInputs(cpu, T, 60, H, D, C), gi = layerInputs(gpu!, T, 60, H, D, C);
  const cc = cacheFor(c.cfg, c.spec, cpu, T, false), gc = cacheFor(g.cfg, g.spec, gpu!, T, false);
  assert.ok(gc.layers[0].side!.fpa instanceof FpaDecodeState);
  const a = await decode(c.mech, cc, ci, T, P, true), b = await decode(g.mech, gc, gi, T, P, true);
  let w = 0;
  for (const [i, o] of a.outs.entries()) w = Math.max(w, worst(o, b.outs[i]));
  assert.ok(w < 1e-4, `max |Δ| ${w}`);
  assert.deepEqual(b.reports, a.reports);
  assert.ok(b.compactions > 0);
  cc.dispose();
  gc.dispose();
});
