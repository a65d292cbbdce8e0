/**
 * FPA decoding with dead-key eviction on the webgpu backend (attention/fpa/fpa_decode.ts
 * FpaDecodeState: running minima on the device, kept counts and compaction in KvCache.settle),
 * against the same formulation on the CPU (itself checked against the host references in
 * fpa_device_formulation.test.ts), for the same weights and inputs: one layer decoded a token at a time (and in chunks) gives the CPU's outputs, the CPU's
 * kept fractions after every settle, and — with compaction due at every settle — the CPU's rows
 * (the surviving positions, in order, and their k rows); re-centring changes nothing; with a τ no
 * key reaches, the minima path equals the prefill, and so does the exact path without `evict`;
 * a rewind before any settle restores the state, below the last settle it is an ArgumentError; generate on a tiny model gives the CPU's tokens and cacheKept, below 1 on the FPA layer.
 * Skips without a WebGPU adapter (test/backend/webgpu_setup.ts). Run on a machine without a GPU:
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/fpa_evict_webgpu.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import type { FpaAttention } from '../../src/attention/fpa/fpa.ts';
import { FpaDecodeState, fpaDecodeState, peekFpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';
import { generate } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { FPA_BASE as BASE, FPA_C as C, FPA_D as D, FPA_H as H, fpaLayer, keptRows, layerInputs, range, setRecentre, type LayerInputs } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

/** q, k, v (1, H, T, D) and x (1, T, C) on `backend` (host-drawn values: the same on every backend). */
const inputs = (backend: Backend, t: number, seed: number) => layerInputs(backend, t, seed, H, D, C);

/** Cached outputs for chunks [cuts[i], cuts[i+1]), settling the cache after each (as generate does) → host (1, H, T, D). */
async function decodeChunks(mech: FpaAttention, cache: KvCache, inp: LayerInputs, cuts: number[], each?: (end: number) => void | Promise<void>, settle = true): Promise<Float32Array> {
  const outs: Float32Array[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const [a, b] = [cuts[i], cuts[i + 1]];
    const part = (t: fon.Tensor) => fon.narrow(t, 2, a, b - a);
    const o = fon.noGrad(() => mech.forwardCached(part(inp.q), part(inp.k), part(inp.v), { x: fon.narrow(inp.x, 1, a, b - a) }, cache.layers[0], a));
    cache.length = b;
    const [host] = await Promise.all([o.data(), settle ? cache.settle() : undefined]);
    outs.push(host as Float32Array);
    await each?.(b);
  }
  // (1, H, n_i, D) pieces → (1, H, T, D)
  const T = cuts[cuts.length - 1] - cuts[0];
  const out = new Float32Array(H * T * D);
  let at = 0;
  for (const [i, piece] of outs.entries()) {
    const n = cuts[i + 1] - cuts[i];
    for (let h = 0; h < H; h++) out.set(piece.subarray(h * n * D, (h + 1) * n * D), (h * T + at) * D);
    at += n;
  }
  return out;
}

function maxDiff(x: ArrayLike<number>, y: ArrayLike<number>): number {
  assert.equal(x.length, y.length);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  return worst;
}

for (const [tau, every] of [[2.5, 1], [4, 5]] as const) test(`one layer, evict τ = ${tau}, every ${every}: webgpu gives the CPU's outputs and kept fractions after each step${every === 1 ? ', and its rows' : ''}`, { skip }, async () => {
  const attention = { type: 'fpa', walk: 'linear', evict: { tau, every } };
  const T = 26, P = 6;
  const ref = fpaLayer(cpu, attention, 11), dev = fpaLayer(gpu!, attention, 11);
  const ri = inputs(cpu, T, 60), di = inputs(gpu!, T, 60);
  const cuts = [0, P, ...range(P + 1, 12), 14, ...range(15, T + 1)]; // one chunk of two tokens in the middle
  const rc = new KvCache(ref.cfg, 1, T, cpu), dc = new KvCache(dev.cfg, 1, T, gpu!);
  const rs = fpaDecodeState(rc.layers[0]);
  const keptRef: number[][][] = [], rowsRef: number[][][] = [];
  const o1 = await decodeChunks(ref.mech, rc, ri, cuts, () => { keptRef.push(rc.kept()); rowsRef.push(keptRows(rs)); });
  let step = 0, sawDead = false;
  const o2 = await decodeChunks(dev.mech, dc, di, cuts, () => {
    const ds = peekFpaDecodeState(dc.layers[0]);
    assert.ok(ds instanceof FpaDecodeState && ds.backend === gpu, 'the webgpu slot holds its decode state');
    const kept = dc.kept();
    for (let h = 0; h < H; h++) assert.ok(Math.abs(kept[0][h] - keptRef[step][0][h]) < 1e-9, `step ${step}, head ${h}: kept ${kept[0][h]} vs cpu ${keptRef[step][0][h]}`);
    if (kept[0].some((x) => x < 1)) sawDead = true;
    if (every === 1) {
      assert.deepEqual(keptRows(ds), rowsRef[step], `step ${step}: rows (kept positions in order)`);
      assert.equal(ds.length, Math.max(...rowsRef[step].map((r) => r.length)), `step ${step}: rows in use`);
    }
    step++;
  });
  assert.ok(sawDead, 'keys died');
  const d = maxDiff(o1, o2);
  assert.ok(d < 1e-4, `max |Δ| between cpu and webgpu outputs ${d}`);
  const ds = fpaDecodeState(dc.layers[0]);
  assert.ok(ds.compactions > 0 && ds.length < T, `compactions ${ds.compactions}, rows in use ${ds.length} of ${T}`);
  if (every === 1) {
    // The cache's k rows are the survivors' k rows.
    const kc = (await dc.layers[0].k.data()) as Float32Array, k = (await di.k.data()) as Float32Array;
    for (const [h, live] of keptRows(ds).entries()) {
      for (const [r, p] of live.entries()) for (let e = 0; e < D; e++) assert.equal(kc[(h * T + r) * D + e], k[(h * T + p) * D + e], `head ${h}: k row ${r} ← position ${p}`);
    }
  }
  rc.dispose();
  dc.dispose();
});

test('webgpu: re-centring the walk every token changes neither outputs nor kept fractions', { skip }, async () => {
  const attention = { type: 'fpa', walk: 'linear', evict: { tau: 2, every: 3 } };
  const T = 20;
  const { cfg, mech } = fpaLayer(gpu!, attention, 31);
  const inp = inputs(gpu!, T, 80);
  const run = async (recentreEvery: number) => {
    const cache = new KvCache(cfg, 1, T, gpu!);
    setRecentre(cache, recentreEvery);
    const o = await decodeChunks(mech, cache, inp, [0, 4, ...range(5, T + 1)]);
    const r = { o, kept: cache.kept() };
    cache.dispose();
    return r;
  };
  const a = await run(1), b = await run(0);
  assert.ok(maxDiff(a.o, b.o) < 2e-5, `max |Δ| ${maxDiff(a.o, b.o)}`);
  assert.deepEqual(a.kept, b.kept);
  assert.ok(a.kept[0].some((x) => x < 1), `keys died: kept ${a.kept[0]}`);
});

test('webgpu: decode equals the prefill — without evict (exact recompute) and with a τ no key reaches (device minima)', { skip }, async () => {
  const T = 18;
  for (const attention of [{ type: 'fpa', walk: 'tanh' }, { type: 'fpa', walk: 'linear', evict: { tau: 1e6, every: 1 } }, { type: 'fpa', walk: 'fox', evict: { tau: 1e6 } }]) {
    const { cfg, mech } = fpaLayer(gpu!, attention, 5);
    const inp = inputs(gpu!, T, 50);
    const exact = (await fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x })).data()) as Float32Array;
    for (const cuts of [[0, 1, ...range(2, T + 1)], [0, 3, 7, 8, 12, T]]) {
      const cache = new KvCache(cfg, 1, T, gpu!);
      setRecentre(cache, 4);
      const d = maxDiff(await decodeChunks(mech, cache, inp, cuts), exact);
      assert.ok(d < 2e-5, `${JSON.stringify(attention)}, cuts ${cuts}: max |Δ| ${d}`);
      assert.deepEqual(cache.kept(), [[1, 1]]);
      cache.dispose();
    }
  }
});

test('webgpu: a rewind before any settle restores the device minima; below the last settle (after a compaction) it is an ArgumentError', { skip }, async () => {
  const T = 14;
  const inp = inputs(gpu!, T, 90);
  const off = fpaLayer(gpu!, { type: 'fpa', walk: 'linear', evict: { tau: 1e6 } }, 41);
  const exact = (await fon.noGrad(() => off.mech.forward(inp.q, inp.k, inp.v, { x: inp.x })).data()) as Float32Array;
  const cache = new KvCache(off.cfg, 1, T, gpu!);
  setRecentre(cache, 0);
  await decodeChunks(off.mech, cache, inp, [0, 4, 5, 6, 7, 8, 9, 10], undefined, false);
  const tail = await decodeChunks(off.mech, cache, inp, [6, ...range(7, T + 1)]);
  const want = new Float32Array(H * (T - 6) * D);
  for (let h = 0; h < H; h++) want.set(exact.subarray((h * T + 6) * D, (h + 1) * T * D), h * (T - 6) * D);
  assert.ok(maxDiff(tail, want) < 2e-5, `max |Δ| ${maxDiff(tail, want)}`);
  cache.dispose();

  const ev = fpaLayer(gpu!, { type: 'fpa', walk: 'linear', evict: { tau: 1, every: 1 } }, 41);
  const c2 = new KvCache(ev.cfg, 1, T, gpu!);
  await decodeChunks(ev.mech, c2, inp, [0, 4, 5, 6, 7, 8, 9, 10]);
  assert.ok(fpaDecodeState(c2.layers[0]).compactions > 0);
  await assert.rejects(decodeChunks(ev.mech, c2, inp, [6, 7]), (e: unknown) => e instanceof fon.ArgumentError && /decoding at position 6 after 10: the first 10 positions are committed/.test((e as Error).message));
  c2.dispose();
});

test('generate with evict on webgpu: the CPU\'s tokens and cacheKept, below 1 on the FPA layer', { skip }, async () => {
  const tok = byteTokenizer();
  const run = async (backend: Backend) => {
    const cfg: ModelConfig = parseModelConfig({ ...BASE, vocabSize: 257, nLayers: 2, contextLength: 64, attention: [{ type: 'full' }, { type: 'fpa', evict: { tau: 3, every: 4 } }] });
    const m = new Decoder(cfg, new ParamFactory({ backend, seed: 2 }));
    const r = await generate(m, tok, 'hello there, general', { maxTokens: 12, temperature: 0 });
    m.dispose();
    return r;
  };
  const want = await run(cpu), got = await run(gpu!);
  assert.deepEqual(got.ids, want.ids);
  assert.equal(got.cacheKept.length, 2);
  assert.deepEqual(got.cacheKept[0], [1, 1]);
  for (let h = 0; h < H; h++) assert.ok(Math.abs(got.cacheKept[1][h] - want.cacheKept[1][h]) < 1e-9, `head ${h}: kept ${got.cacheKept[1][h]} vs cpu ${want.cacheKept[1][h]}`);
  assert.ok(got.cacheKept[1].every((x) => x > 0 && x < 0.5), `kept ${got.cacheKept[1]}`);
});
