/**
 * The FPA decode states as the cache protocol's side states (attention/fpa/fpa_decode.ts,
 * attention/mechanism.ts CacheSideState; draft–revise decoding, DESIGN.md "The FON model"): with
 * eviction (a small τ, so keys really die) and compactions before the truncation (the cache
 * settled between steps), a decode A that appends three speculative positions, truncates the
 * cache back by 2 or 3 (KvCache.truncate) and continues with other tokens gives, at every later
 * step, bit for bit the outputs (and logits) of a decode B that never saw the rejected positions,
 * the same kept() fractions after every settle and the same rows (kept positions in order); also
 * with re-centring inside the rejected steps, in the shared-walk stack mode, into the middle of a
 * prefill chunk, and for a whole model (logits). A truncate below the committed length (the last
 * settle) is an ArgumentError naming both lengths. On cpu (FpaDecodeState) and on webgpu
 * (DeviceFpaDecodeState; skips without an adapter). A verify-style chunk (the speculative
 * positions in one call) is compared too; it differs from B only by the order of sums.
 *
 *   node --import tsx --test test/attention/fpa_truncate.test.ts
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/fpa_truncate.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { peekFpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { FPA_BASE as BASE, FPA_C as C, FPA_D as D, FPA_H as H, fpaCall, fpaLayer, keptRows, layerInputs, setNormal, setRecentre, type LayerInputs } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const backends: [string, () => Backend | null, string | false | undefined][] = [['cpu', () => cpu, false], ['webgpu', () => gpu, skip]];

/** After a settle: what A and B must agree on. */
async function settled(cache: KvCache) {
  await cache.settle();
  return { kept: cache.kept(), rows: keptRows(cache), length: peekFpaDecodeState(cache.layers[0])!.length };
}

function worst(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i] - b[i]));
  return w;
}

interface Scenario {
  attention: Record<string, unknown>;
  /** Positions rejected (2 or 3 of the 3 speculative ones). */
  back: number;
  recentre: number;
  /** The speculative positions in one call (a verify pass) rather than one call each. */
  chunk?: boolean;
}

/**
 * A: prefill P, steps P … S−1 settling after each, speculative S, S+1, S+2 (the accepted ones from
 * the main inputs, the rejected ones from other inputs), truncate to L = S + 3 − back, then L … T−1
 * settling after each. B: the same without the rejected positions (S … L−1 unsettled, as in A).
 * Returns both decodes' outputs from L on and what they report after each settle.
 */
async function aVersusB(backend: Backend, sc: Scenario) {
  const T = 24, P = 5, S = 12, L = S + 3 - sc.back;
  const { cfg, mech } = fpaLayer(backend, sc.attention, 11);
  const main = layerInputs(backend, T, 60, H, D, C), other = layerInputs(backend, T, 160, H, D, C);
  const run = async (speculate: boolean) => {
    const cache = new KvCache(cfg, 1, T, backend);
    setRecentre(cache, sc.recentre);
    const outs: Float32Array[] = [], reports: Awaited<ReturnType<typeof settled>>[] = [];
    await fpaCall(mech, cache, main, 0, P);
    await settled(cache);
    for (let p = P; p < S; p++) { await fpaCall(mech, cache, main, p, 1); await settled(cache); }
    const before = peekFpaDecodeState(cache.layers[0])!;
    const compactionsBefore = before.compactions;
    if (speculate) {
      // The accepted positions S … L−1 see the main inputs, the rejected L … S+2 others.
      const mixed = (t: fon.Tensor, u: fon.Tensor, axis: number) => fon.concat([fon.narrow(t, axis, S, L - S), fon.narrow(u, axis, L, S + 3 - L)].filter((x) => x.shape[axis] > 0), axis);
      const spec: LayerInputs = { q: mixed(main.q, other.q, 2), k: mixed(main.k, other.k, 2), v: mixed(main.v, other.v, 2), x: mixed(main.x, other.x, 1) };
      if (sc.chunk) await fpaCall(mech, cache, spec, S, 3, 0);
      else for (let i = 0; i < 3; i++) await fpaCall(mech, cache, spec, S + i, 1, i);
      cache.truncate(L);
    } else {
      for (let p = S; p < L; p++) await fpaCall(mech, cache, main, p, 1);
    }
    for (let p = L; p < T; p++) {
      outs.push(await fpaCall(mech, cache, main, p, 1));
      reports.push(await settled(cache));
    }
    const compactions = peekFpaDecodeState(cache.layers[0])!.compactions;
    cache.dispose();
    return { outs, reports, compactionsBefore, compactions };
  };
  const a = await run(true), b = await run(false);
  mech.dispose();
  return { a, b };
}

const SCENARIOS: [string, Scenario][] = [
  ['evict τ = 2, every 1, back 2', { attention: { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, back: 2, recentre: 0 }],
  ['evict τ = 2, every 1, back 3 (to the committed length)', { attention: { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, back: 3, recentre: 0 }],
  ['evict τ = 2.5, every 2, re-centring every 2 tokens (inside the rejected steps), back 2', { attention: { type: 'fpa', walk: 'linear', evict: { tau: 2.5, every: 2 } }, back: 2, recentre: 2 }],
  ['evict τ = 3, every 3, walk tanh, re-centring every 3, back 3', { attention: { type: 'fpa', walk: 'tanh', evict: { tau: 3, every: 3 } }, back: 3, recentre: 3 }],
];

for (const [bname, get, skipIt] of backends) {
  for (const [name, sc] of SCENARIOS) {
    test(`${bname}: ${name}: after truncating the speculative positions, every later output is bit-identical to a decode that never saw them, with the same kept() and rows`, { skip: skipIt }, async () => {
      const { a, b } = await aVersusB(get()!, sc);
      assert.ok(a.compactionsBefore > 0, `compactions before the speculative steps: ${a.compactionsBefore}`);
      assert.ok(a.compactions > a.compactionsBefore, 'and after the truncation');
      assert.ok(a.reports.some((r) => r.kept[0].some((f) => f < 0.7)), `keys died: ${JSON.stringify(a.reports.at(-1)!.kept)}`);
      for (const [i, o] of a.outs.entries()) {
        assert.equal(worst(o, b.outs[i]), 0, `step ${i} after the truncation: max |Δ| ${worst(o, b.outs[i])}`);
        assert.deepEqual(a.reports[i], b.reports[i], `step ${i}: kept, rows and rows in use after its settle`);
      }
    });
  }

  test(`${bname}: the speculative positions in one call (a verify pass), back 2: later outputs within 1e-6 of the decode that never saw them, the same kept() and rows`, { skip: skipIt }, async () => {
    const { a, b } = await aVersusB(get()!, { attention: { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, back: 2, recentre: 0, chunk: true });
    let w = 0;
    for (const [i, o] of a.outs.entries()) {
      w = Math.max(w, worst(o, b.outs[i]));
      assert.deepEqual(a.reports[i], b.reports[i], `step ${i}`);
    }
    assert.ok(w <= 1e-6, `max |Δ| ${w}`);
    if (process.env.FPA_TRUNCATE_REPORT) console.log(`${bname} verify-chunk max |Δ| ${w}`);
  });

  test(`${bname}: a truncate below the committed length is an ArgumentError naming both lengths; above the positions seen too`, { skip: skipIt }, async () => {
    const backend = get()!;
    const { cfg, mech } = fpaLayer(backend, { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, 11);
    const inp = layerInputs(backend, 12, 60, H, D, C);
    const cache = new KvCache(cfg, 1, 12, backend);
    await fpaCall(mech, cache, inp, 0, 5);
    for (let p = 5; p < 9; p++) { await fpaCall(mech, cache, inp, p, 1); await cache.settle(); }
    await fpaCall(mech, cache, inp, 9, 1);
    const st = peekFpaDecodeState(cache.layers[0])!;
    assert.equal(st.committed, 9);
    assert.throws(() => cache.truncate(7), (e: unknown) => e instanceof fon.ArgumentError && /cannot truncate to 7 positions: the first 9 are committed/.test((e as Error).message));
    assert.throws(() => st.truncate(11), (e: unknown) => e instanceof fon.ArgumentError && /cannot truncate to 11 positions: 10 were seen/.test((e as Error).message));
    cache.truncate(9); // at the committed length: fine
    assert.equal(st.pos, 9);
    cache.dispose();
    mech.dispose();
  });

  test(`${bname}: a truncation into the middle of an unsettled prefill rebuilds the state as a shorter prefill makes it`, { skip: skipIt }, async () => {
    const backend = get()!;
    const { cfg, mech } = fpaLayer(backend, { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, 11);
    const T = 16, P = 8, L = 5;
    const main = layerInputs(backend, T, 60, H, D, C);
    const run = async (prefill: number) => {
      const cache = new KvCache(cfg, 1, T, backend);
      await fpaCall(mech, cache, main, 0, prefill);
      if (prefill > L) cache.truncate(L);
      const outs: Float32Array[] = [], reports: Awaited<ReturnType<typeof settled>>[] = [];
      for (let p = L; p < T; p++) { outs.push(await fpaCall(mech, cache, main, p, 1)); reports.push(await settled(cache)); }
      cache.dispose();
      return { outs, reports };
    };
    const a = await run(P), b = await run(L);
    let w = 0;
    for (const [i, o] of a.outs.entries()) {
      w = Math.max(w, worst(o, b.outs[i]));
      assert.deepEqual(a.reports[i], b.reports[i], `step ${i}`);
    }
    // The stored φ of the longer prefill's first L positions come from a longer cumsum: equal bits on cpu (a sequential scan).
    if (bname === 'cpu') assert.equal(w, 0, `max |Δ| ${w}`);
    else assert.ok(w <= 1e-6, `max |Δ| ${w}`);
    if (process.env.FPA_TRUNCATE_REPORT) console.log(`${bname} prefill truncation max |Δ| ${w}`);
    mech.dispose();
  });
}

test('cpu: the shared-walk stack mode: truncating speculative positions (stack pops among them) is bit-identical to never seeing them', async () => {
  for (const back of [2, 3]) {
    const { a, b } = await aVersusB(cpu, { attention: { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } }, back, recentre: 3 });
    assert.ok(a.compactionsBefore > 0);
    for (const [i, o] of a.outs.entries()) {
      assert.equal(worst(o, b.outs[i]), 0, `back ${back}, step ${i}: max |Δ| ${worst(o, b.outs[i])}`);
      assert.deepEqual(a.reports[i], b.reports[i], `back ${back}, step ${i}`);
    }
  }
});

test('cpu: a stack-mode prefill keeps no snapshots: a truncation into it rebuilds up to its first re-centring, and past it is an ArgumentError', async () => {
  const { cfg, mech } = fpaLayer(cpu, { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } }, 13);
  const T = 20;
  const main = layerInputs(cpu, T, 70, H, D, C);
  const run = async (prefill: number, cut?: number) => {
    const cache = new KvCache(cfg, 1, T, cpu);
    setRecentre(cache, 3);
    await fpaCall(mech, cache, main, 0, prefill);
    const from = cut ?? prefill;
    if (cut !== undefined) cache.truncate(cut);
    const outs: Float32Array[] = [];
    for (let p = from; p < T; p++) outs.push(await fpaCall(mech, cache, main, p, 1));
    cache.dispose();
    return outs;
  };
  // Re-centring every 3 decoded tokens: the prefill of 10 re-centres at position 3; rows up to 3 are stored.
  const cache = new KvCache(cfg, 1, T, cpu);
  setRecentre(cache, 3);
  await fpaCall(mech, cache, main, 0, 10);
  assert.throws(() => cache.truncate(7), (e: unknown) => e instanceof fon.ArgumentError && /cannot truncate to 7 positions inside the stack-mode prefill: it keeps no snapshots, and its φ, ℓ, W rows are stored only up to position 3 \(it re-centred there\); truncate to at most 3/.test(e.message));
  cache.dispose();
  const [a, b] = [await run(10, 3), await run(3)];
  for (const [i, o] of a.entries()) assert.ok(worst(o, b[i]) <= 1e-6, `step ${i}: max |Δ| ${worst(o, b[i])}`);
  mech.dispose();
});

/** A whole model (FPA with eviction, full, FPA with eviction and token shift [+ a stack layer on cpu]): the same for logits. */
for (const [bname, get, skipIt] of backends) test(`${bname}: a whole model: logits after truncating draft positions are bit-identical to never seeing them`, { skip: skipIt }, async () => {
  const backend = get()!;
  const attention: unknown[] = [{ type: 'fpa', walk: 'linear', evict: { tau: 2, every: 1 } }, { type: 'full' }, { type: 'fpa', walk: 'tanh', tokenShift: true, evict: { tau: 3, every: 2 } }];
  if (bname === 'cpu') attention.push({ type: 'fpa', walk: 'linear', shared: true, stack: { every: 2 } });
  const cfg = parseModelConfig({ ...BASE, nLayers: attention.length, nHeads: 4, attention });
  const m = new Decoder(cfg, new ParamFactory({ backend, seed: 5 }));
  for (const [n, p] of m.namedParameters()) if (/fpa\.(walk|field|level)\.weight/.test(n)) setNormal(p, 0.5, n.length);
  const T = 22, P = 5, S = 11;
  const ids = Array.from(fon.randint([T], 0, 40, { backend: cpu, seed: 9 }).dataSync() as Int32Array);
  const rejected = [7, 8, 9];
  const run = async (speculate: boolean, back: number) => {
    const L = S + 3 - back;
    const cache = new KvCache(cfg, 1, T, backend);
    setRecentre(cache, 3);
    const step = async (tokens: number[], pos: number) => {
      const x = fon.tensor(Int32Array.from(tokens), [1, tokens.length], { backend, dtype: 'i32' });
      const logits = fon.noGrad(() => m.forward(x, { cache: cache.layers, pos }));
      cache.length = pos + tokens.length;
      const out = (await logits.data()) as Float32Array;
      logits.dispose();
      x.dispose();
      return out;
    };
    await step(ids.slice(0, P), 0);
    await cache.settle();
    for (let p = P; p < S; p++) { await step([ids[p]], p); await cache.settle(); }
    if (speculate) {
      for (let i = 0; i < 3; i++) await step([S + i < L ? ids[S + i] : rejected[i]], S + i);
      cache.truncate(L);
    } else for (let p = S; p < L; p++) await step([ids[p]], p);
    const outs: Float32Array[] = [], kept: number[][][] = [];
    for (let p = L; p < T; p++) { outs.push(await step([ids[p]], p)); await cache.settle(); kept.push(cache.kept()); }
    cache.dispose();
    return { outs, kept };
  };
  for (const back of [2, 3]) {
    const a = await run(true, back), b = await run(false, back);
    for (const [i, o] of a.outs.entries()) assert.equal(worst(o, b.outs[i]), 0, `back ${back}, step ${i}: logits max |Δ| ${worst(o, b.outs[i])}`);
    assert.deepEqual(a.kept, b.kept);
    assert.ok(a.kept.at(-1)!.some((l) => l.some((f) => f < 1)), 'keys died');
  }
  m.dispose();
});
