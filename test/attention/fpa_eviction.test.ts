/**
 * FPA decoding with per-key running minima and dead-key eviction (attention/fpa/fpa_decode.ts,
 * specs/fpa_depth.md §2.6) on the CPU: after a prefill the running minima are the suffix minima of
 * φ, and stay equal to the suffix minima of the longer sequence while decoding; the penalty of a
 * key never decreases along its column; decoding one token (or a chunk) at a time with eviction
 * off equals the prefill, for one layer and for a whole model; with eviction the dropped keys are
 * exactly those whose penalty passed τ, their softmax mass in the exact computation is within the
 * bound |D|·e^{2U−τ} (U = max |q·k|/√d of the row, the newest key has no penalty), and the output
 * moves by at most 2·mass·max|v|; the cache shrinks and compaction keeps the survivors' rows in
 * order; re-centring the walk changes nothing; rewinds; the config option; generate's cacheKept.
 * Run: node --import tsx --test test/attention/fpa_eviction.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ConfigError, modelDims, parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { FpaAttention, type FpaSpec } from '../../src/attention/fpa/fpa.ts';
import { DEFAULT_EVICT, fpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';
import { generate } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { decodeChunks, layerInputs, maxDiff, setNormal, setRecentre } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');

const BASE = { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 40 };
const H = 2, D = 8, C = 16;

/** One FPA layer (its own config, for its KvCache) with a wandering walk and non-zero field and level offsets. */
function layer(attention: Record<string, unknown>, seed = 3) {
  const cfg = parseModelConfig({ ...BASE, attention });
  const mech = new FpaAttention(cfg.attention[0] as FpaSpec, { f: new ParamFactory({ backend: cpu, seed }), name: 'l0.attn', dims: modelDims(cfg) });
  setNormal(mech.walkProj.weight, 0.4, seed + 1);
  setNormal(mech.fieldProj.weight, 0.5, seed + 2);
  setNormal(mech.levelProj.weight, 0.5, seed + 3);
  return { cfg, mech };
}

/** Random q, k, v (1, H, T, D) and x (1, T, C). */
const inputs = (t: number, seed: number) => layerInputs(cpu, t, seed, H, D, C);

const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

/** φ and ℓ of the whole sequence (host, H × T) and λ. */
function fieldLevel(mech: FpaAttention, x: fon.Tensor) {
  const [phi, level] = fon.noGrad(() => mech.fieldLevel(x));
  return { phi: phi.dataSync() as Float32Array, level: level.dataSync() as Float32Array, lambda: mech.lambda().dataSync() as Float32Array, t: x.shape[1] };
}

/** Reference penalty of key j at query i, head h: λ·relu(ℓ_j − min φ over (j, i]). */
function penalty(f: ReturnType<typeof fieldLevel>, h: number, i: number, j: number): number {
  let m = Infinity;
  for (let s = j + 1; s <= i; s++) m = Math.min(m, f.phi[h * f.t + s]);
  return f.lambda[h] * Math.max(0, f.level[h * f.t + j] - m);
}

test('running minima (evict with a τ no key reaches): after a prefill the excess ℓ − m is ℓ minus the suffix minimum of φ, and decoding keeps it so; penalties never decrease along a column', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', evict: { tau: 1e6 } });
  const T = 20, P = 8;
  const inp = inputs(T, 40);
  const f = fieldLevel(mech, inp.x);
  const cache = new KvCache(cfg, 1, T, cpu);
  const st = fpaDecodeState(cache.layers[0]);
  const lastPen = new Float64Array(H * T).fill(-1);
  let checked = 0;
  await decodeChunks(mech, cache, inp, [0, P, ...range(P + 1, T + 1)], async (end) => {
    assert.equal(st.length, end);
    const e = (await st.attentionLevels.data()) as Float32Array; // ℓ − m per row (−1e30 for the newest key)
    for (let h = 0; h < H; h++) {
      for (let j = 0; j < end; j++) {
        const r = h * st.rows + j;
        assert.equal(st.position[r], j);
        let suffix = Infinity;
        for (let s = j + 1; s < end; s++) suffix = Math.min(suffix, f.phi[h * T + s]);
        if (suffix === Infinity) assert.ok(e[r] <= -1e29, `newest key of head ${h} at ${end}: e = ${e[r]}`);
        else {
          const want = f.level[h * T + j] - suffix;
          assert.ok(Math.abs(e[r] - want) <= 1e-5 * (1 + Math.abs(suffix)), `e_${j} = ${e[r]} vs ℓ − suffix min ${want} (head ${h}, after ${end})`);
        }
        const pen = f.lambda[h] * Math.max(0, e[r]);
        assert.ok(pen >= lastPen[h * T + j], `penalty of key ${j} (head ${h}) fell from ${lastPen[h * T + j]} to ${pen}`);
        assert.ok(Math.abs(pen - penalty(f, h, end - 1, j)) < 1e-4, `penalty of key ${j} at ${end - 1}: ${pen} vs ${penalty(f, h, end - 1, j)}`);
        if (pen > lastPen[h * T + j] && lastPen[h * T + j] >= 0) checked++;
        lastPen[h * T + j] = pen;
      }
    }
  });
  assert.ok(checked > 10, `the walk raised ${checked} penalties: the monotonicity check saw some change`);
  cache.dispose();
});

test('decode with eviction off: one token at a time and in chunks equals the prefill (one layer)', async () => {
  for (const walk of ['linear', 'fox', 'tanh']) {
    const { cfg, mech } = layer({ type: 'fpa', walk });
    const T = 18;
    const inp = inputs(T, 50);
    const exact = fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x }));
    for (const cuts of [[0, 1, ...range(2, T + 1)], [0, 3, 7, 8, 12, T]]) {
      const cache = new KvCache(cfg, 1, T, cpu);
      const d = await maxDiff(await decodeChunks(mech, cache, inp, cuts), exact);
      assert.ok(d < 2e-5, `walk ${walk}, cuts ${cuts}: max |Δ| ${d}`);
      assert.deepEqual(cache.kept(), [[1, 1]]);
      cache.dispose();
    }
  }
});

test('decode with eviction off equals the prefill logits for a whole model (prompt of 1, then one token at a time)', async () => {
  const cfg = parseModelConfig({ ...BASE, nLayers: 2, nHeads: 4, attention: [{ type: 'fpa', walk: 'linear' }, { type: 'fpa', walk: 'tanh', outputGate: true }] });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 5 }));
  for (const [n, p] of m.namedParameters()) if (/fpa\.(walk|field|level)\.weight/.test(n)) setNormal(p, 0.4, n.length);
  const T = 16;
  const x = fon.randint([1, T], 0, 40, { backend: cpu, seed: 9 });
  const host = x.dataSync() as Int32Array;
  const full = fon.noGrad(() => m.forward(x));
  const cache = new KvCache(cfg, 1, T, cpu);
  setRecentre(cache, 3);
  const rows = range(0, T).map((p) => fon.noGrad(() => m.forward(fon.tensor(host.slice(p, p + 1), [1, 1], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: p })));
  const d = await maxDiff(fon.concat(rows, 1), full);
  assert.ok(d < 2e-5, `max |Δ| ${d}`);
  cache.dispose();
  m.dispose();
});

/** Two regimes: scores of order 1 and a small τ (most keys die), small scores and τ = 6 (a tight bound). */
for (const [tau, qScale] of [[2.5, 1], [6, 0.2]]) test(`eviction (τ = ${tau}, q × ${qScale}): dropped keys are those past τ, their exact softmax mass is within |D|·e^{2U−τ}, the output moves by at most 2·mass·max|v|`, async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', evict: { tau, every: 1 } }, 11);
  const T = 30, P = 6;
  const inp = inputs(T, 60);
  inp.q = fon.mul(inp.q, qScale);
  const f = fieldLevel(mech, inp.x);
  const exact = fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x }));
  const ex = exact.dataSync() as Float32Array;
  const [q, k, v] = [inp.q, inp.k, inp.v].map((t) => t.dataSync() as Float32Array);
  const vmax = v.reduce((a, b) => Math.max(a, Math.abs(b)), 0);
  const cache = new KvCache(cfg, 1, T, cpu);
  const st = fpaDecodeState(cache.layers[0]);
  const alive: Set<number>[][] = []; // per query position i ≥ P−1, per head: the kept positions when i was answered
  const snapshot = () => range(0, H).map((h) => new Set(range(0, st.length).map((r) => st.position[h * st.rows + r]).filter((p) => p >= 0)));
  const out = await decodeChunks(mech, cache, inp, [0, P, ...range(P + 1, T + 1)], (end) => { alive[end - 1] = snapshot(); });
  const o = out.dataSync() as Float32Array;
  // Right after the prefill: the keys past τ at its last query are gone, and the cache is compacted to the longest head's survivors.
  for (let h = 0; h < H; h++) assert.deepEqual([...alive[P - 1][h]], range(0, P).filter((j) => penalty(f, h, P - 1, j) <= tau), `head ${h} after the prefill`);
  if (tau < 3) assert.ok(alive[P - 1].some((set) => set.size < P), 'the prefill itself dropped keys');
  let dropped = 0, worstRatio = 0, moved = 0, worstBound = 0;
  for (let i = P; i < T; i++) {
    for (let h = 0; h < H; h++) {
      const s = range(0, i + 1).map((j) => {
        let dot = 0;
        for (let e = 0; e < D; e++) dot += q[(h * T + i) * D + e] * k[(h * T + j) * D + e];
        return dot / Math.sqrt(D);
      });
      const U = Math.max(...s.map(Math.abs));
      const logits = s.map((x, j) => x - penalty(f, h, i, j));
      const mx = Math.max(...logits);
      const z = logits.reduce((a, x) => a + Math.exp(x - mx), 0);
      // Keys kept when query i was answered: after its own step (dead keys are marked before attending).
      const D_ = range(0, i + 1).filter((j) => !alive[i][h].has(j));
      for (const j of D_) assert.ok(penalty(f, h, i, j) > tau - 1e-4, `dropped key ${j} (head ${h}) at query ${i} has penalty ${penalty(f, h, i, j)} ≤ τ`);
      for (const j of alive[i][h]) assert.ok(penalty(f, h, i, j) <= tau + 1e-4, `kept key ${j} (head ${h}) at query ${i} has penalty ${penalty(f, h, i, j)} > τ`);
      const mass = D_.reduce((a, j) => a + Math.exp(logits[j] - mx) / z, 0);
      const bound = D_.length * Math.exp(2 * U - tau);
      assert.ok(mass <= bound + 1e-7, `query ${i}, head ${h}: dropped mass ${mass} > |D|·e^{2U−τ} = ${bound}`);
      if (D_.length) worstRatio = Math.max(worstRatio, mass / bound);
      let diff = 0;
      for (let e = 0; e < D; e++) diff = Math.max(diff, Math.abs(o[(h * T + i) * D + e] - ex[(h * T + i) * D + e]));
      assert.ok(diff <= 2 * mass * vmax + 2e-5, `query ${i}, head ${h}: output moved ${diff} > 2·${mass}·${vmax}`);
      assert.ok(diff <= 2 * bound * vmax + 2e-5, `query ${i}, head ${h}: output moved ${diff} > 2·|D|·e^{2U−τ}·max|v|`);
      worstBound = Math.max(worstBound, 2 * bound * vmax);
      dropped += D_.length;
      moved = Math.max(moved, diff);
    }
  }
  assert.ok(dropped > 20, `keys were dropped (${dropped})`);
  assert.ok(moved > 0, 'eviction changed the output a little');
  assert.ok(worstRatio < 1, `mass / bound ≤ ${worstRatio}`);
  if (process.env.FPA_EVICT_REPORT) console.log(JSON.stringify({ tau, qScale, dropped, worstRatio, moved, worstBound, kept: cache.kept()[0], rows: st.length, compactions: st.compactions }));
  // The cache shrank: fewer rows than positions, kept fraction < 1, and the kept fraction is the live count.
  const kept = cache.kept()[0];
  assert.ok(st.length < T && st.compactions > 0, `rows in use ${st.length} of ${T}, ${st.compactions} compactions`);
  for (let h = 0; h < H; h++) assert.equal(kept[h], alive[T - 1][h].size / T);
  assert.ok(kept.every((x) => x < 1), `kept ${kept}`);
  cache.dispose();
});

test('compaction (at each settle) keeps the surviving keys\' rows, in order, with their k and v', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', evict: { tau: 1.5, every: 1 } }, 21);
  const T = 26;
  const inp = inputs(T, 70);
  const f = fieldLevel(mech, inp.x);
  const cache = new KvCache(cfg, 1, T, cpu);
  const st = fpaDecodeState(cache.layers[0]);
  await decodeChunks(mech, cache, inp, [0, 5, ...range(6, T + 1)]);
  assert.ok(st.compactions > 1);
  const [k, v, kc, vc] = [inp.k, inp.v, cache.layers[0].k, cache.layers[0].v].map((t) => t.dataSync() as Float32Array);
  for (let h = 0; h < H; h++) {
    const rows = range(0, st.length).map((r) => st.position[h * st.rows + r]);
    const live = rows.filter((p) => p >= 0);
    // Survivors first, in increasing position, then only padding.
    assert.deepEqual(rows.slice(0, live.length), live);
    assert.ok(rows.slice(live.length).every((p) => p === -1));
    for (let a = 1; a < live.length; a++) assert.ok(live[a] > live[a - 1]);
    // Exactly the keys whose penalty at the last query is ≤ τ (monotone death: they were never dropped).
    assert.deepEqual(live, range(0, T).filter((j) => penalty(f, h, T - 1, j) <= 1.5));
    for (const [r, p] of live.entries()) {
      for (let e = 0; e < D; e++) {
        assert.equal(kc[(h * T + r) * D + e], k[(h * T + p) * D + e], `k row ${r} ← position ${p}`);
        assert.equal(vc[(h * T + r) * D + e], v[(h * T + p) * D + e], `v row ${r} ← position ${p}`);
      }
    }
  }
  cache.dispose();
});

test('re-centring the walk (every token, or never) leaves outputs and evictions unchanged', async () => {
  for (const evict of [{ tau: 1e6 }, { tau: 2, every: 3 }]) {
    const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', evict }, 31);
    const T = 24;
    const inp = inputs(T, 80);
    const run = async (recentreEvery: number) => {
      const cache = new KvCache(cfg, 1, T, cpu);
      setRecentre(cache, recentreEvery);
      const o = await decodeChunks(mech, cache, inp, [0, 4, ...range(5, T + 1)]);
      const r = { o, kept: cache.kept(), walk: Array.from((await fpaDecodeState(cache.layers[0]).walk.data()) as Float32Array) };
      cache.dispose();
      return r;
    };
    const a = await run(1), b = await run(0);
    assert.ok(a.walk.every((w) => w === 0), 'the walk was re-centred to 0');
    assert.ok(b.walk.some((w) => Math.abs(w) > 0.5), `without re-centring the walk wandered: ${b.walk}`);
    const d = await maxDiff(a.o, b.o);
    assert.ok(d < 2e-5, `evict ${JSON.stringify(evict)}: max |Δ| ${d}`);
    assert.deepEqual(a.kept, b.kept);
  }
});

test('rewinds: an earlier position at or after the last settle restores the state; below it (the cache settled, and compacted) it is an ArgumentError', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', evict: { tau: 1e6 } }, 41);
  const T = 14;
  const inp = inputs(T, 90);
  const exact = fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x }));
  const cache = new KvCache(cfg, 1, T, cpu);
  setRecentre(cache, 0);
  await decodeChunks(mech, cache, inp, [0, 4, 5, 6, 7, 8, 9, 10], undefined, { settle: false });
  // Back to position 6 (nothing settled since the prefill), then on to the end.
  const tail = await decodeChunks(mech, cache, inp, [6, ...range(7, T + 1)]);
  assert.ok((await maxDiff(tail, fon.narrow(exact, 2, 6, T - 6))) < 2e-5);
  cache.dispose();

  const ev = layer({ type: 'fpa', walk: 'linear', evict: { tau: 1, every: 1 } }, 41);
  const c2 = new KvCache(ev.cfg, 1, T, cpu);
  await decodeChunks(ev.mech, c2, inp, [0, 4, 5, 6, 7, 8, 9, 10]);
  assert.ok(fpaDecodeState(c2.layers[0]).compactions > 0);
  await assert.rejects(decodeChunks(ev.mech, c2, inp, [6, 7]), (e: unknown) => e instanceof fon.ArgumentError && /decoding at position 6 after 10: the first 10 positions are committed/.test((e as Error).message));
  // A restart at 0 is always possible.
  await decodeChunks(ev.mech, c2, inp, [0, 3]);
  assert.equal(fpaDecodeState(c2.layers[0]).pos, 3);
  c2.dispose();
});

test('config: evict takes true or an object, fills defaults, and names bad values', () => {
  const on = parseModelConfig({ ...BASE, attention: [{ type: 'fpa', evict: true }] });
  assert.deepEqual(on.attention[0], { type: 'fpa', walk: 'fox', outputGate: false, evict: DEFAULT_EVICT });
  assert.deepEqual(DEFAULT_EVICT, { tau: 16, every: 64, deadFraction: 0.25 });
  assert.deepEqual(parseModelConfig({ ...BASE, attention: { type: 'fpa', evict: { tau: 12 } } }).attention[0], { type: 'fpa', walk: 'fox', outputGate: false, evict: { tau: 12, every: 64, deadFraction: 0.25 } });
  assert.deepEqual(parseModelConfig({ ...BASE, attention: { type: 'fpa', evict: false } }).attention[0], { type: 'fpa', walk: 'fox', outputGate: false });
  const bad: [unknown, RegExp][] = [
    [{ tau: -1 }, /'evict.tau' = -1: expected a finite number > 0/],
    [{ every: 0.5 }, /'evict.every' = 0.5: expected an integer ≥ 1/],
    [{ deadFraction: 2 }, /'evict.deadFraction' = 2: expected a number in \(0, 1\]/],
    [{ k: 1 }, /unknown key 'evict.k'; expected tau, every, deadFraction/],
    ['yes', /'evict' = "yes": expected true or an object/],
  ];
  for (const [e, re] of bad) assert.throws(() => parseModelConfig({ ...BASE, attention: { type: 'fpa', evict: e } }), (x: unknown) => x instanceof ConfigError && re.test((x as Error).message), JSON.stringify(e));
  assert.throws(() => parseModelConfig({ ...BASE, attention: { type: 'fox', evict: true } }), ConfigError);
});

test('generate reports the KV cache kept per layer and head: 1 without eviction, below 1 where FPA keys die', async () => {
  const tok = byteTokenizer();
  const run = async (attention: unknown) => {
    const cfg: ModelConfig = parseModelConfig({ ...BASE, vocabSize: 257, nLayers: 2, contextLength: 64, attention });
    const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
    const r = await generate(m, tok, 'hello there, general', { maxTokens: 12, temperature: 0 });
    m.dispose();
    return r;
  };
  const off = await run({ type: 'fpa' });
  assert.deepEqual(off.cacheKept, [[1, 1], [1, 1]]);
  // The "fox" walk at init lowers W by about ln 2 a token: keys more than ~4 tokens old pass τ = 3.
  const on = await run([{ type: 'full' }, { type: 'fpa', evict: { tau: 3 } }]);
  assert.deepEqual(on.cacheKept[0], [1, 1]);
  assert.ok(on.cacheKept[1].every((x) => x > 0 && x < 0.5), `kept ${on.cacheKept[1]}`);
});
