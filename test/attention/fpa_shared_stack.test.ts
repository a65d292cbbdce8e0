/**
 * FPA's shared walk and its stack decoding (attention/fpa.ts `shared`, `stack`; specs/fpa_depth.md
 * §2.2 "shared walk", §2.3.1, §2.3.4, §2.6 last lines, §5 items 2 and 4) on the CPU: config parsing
 * and its errors; a shared layer has no field and level parameters (names, counts, checkpoint
 * round trip, and a checkpoint of the other kind refused by name); shared + "fox" walk is the FoX
 * model from the same gate weights (logits and every gradient), for any gate weights; shared with
 * increments ≥ 0 is NoPE softmax attention; in stack mode the cache's live rows are the
 * monotone-stack alive set (by definition) after every token, with their k and v, and compaction
 * shrinks the cache; stack decoding equals the exact forward with λ = 1e4 (the hard limit), for a
 * layer and for a whole model, and differs from it at λ = 1 (it changes the function); re-centring
 * and rewinds (at or after the last settle; below it an ArgumentError); generate's cacheKept; on webgpu the stack mode decodes
 * through the device formulation as the CPU does (skips without an adapter); a `fon train` → `info` → `generate` smoke run.
 * Run: node --import tsx --test test/attention/fpa_shared_stack.test.ts
 * (the webgpu case too: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json in front)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { ConfigError, modelDims, parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { FpaAttention, RHO_OFFSET, type FpaSpec } from '../../src/attention/fpa/fpa.ts';
import { DEFAULT_STACK, fpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';
import { FpaStack } from './fpa_reference.ts';
import { generate } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { CheckpointError } from '../../src/io/checkpoint_dir.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { decodeChunks, layerInputs, maxDiff, setNormal, setParam, setRecentre } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();

const BASE = { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 40 };
const H = 2, D = 8, C = 16;
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

const setConst = (p: fon.Tensor, x: number) => setParam(p, fon.full(p.shape, x, { backend: p.backend }));

/** The stored ρ that makes λ = softplus(ρ + ln(e − 1)) equal `lambda`. */
const rhoFor = (lambda: number) => lambda + Math.log(-Math.expm1(-lambda)) - RHO_OFFSET;

/** One FPA layer (its own config, for its KvCache) with a wandering walk. */
function layer(attention: Record<string, unknown>, seed = 3, backend: fon.Backend = cpu) {
  const cfg = parseModelConfig({ ...BASE, attention });
  const mech = new FpaAttention(cfg.attention[0] as FpaSpec, { f: new ParamFactory({ backend, seed }), name: 'l0.attn', dims: modelDims(cfg) });
  setNormal(mech.walkProj.weight, 0.4, seed + 1);
  return { cfg, mech };
}

/** Random q, k, v (1, H, T, D) and x (1, T, C). */
const inputs = (t: number, seed: number) => layerInputs(cpu, t, seed, H, D, C);

/** The walk W (host, H × T): with a shared walk φ = ℓ = W. */
function walkOf(mech: FpaAttention, x: fon.Tensor): Float32Array {
  const [phi, level] = fon.noGrad(() => mech.fieldLevel(x));
  const w = phi.dataSync() as Float32Array;
  assert.deepEqual(level.dataSync(), w, 'shared: ℓ = φ');
  return w;
}

/** The hard-limit alive set by definition: j ≤ i with W_j ≤ W_t for every t ∈ (j, i]. */
function aliveByDefinition(w: Float32Array, T: number, h: number, i: number): number[] {
  return range(0, i + 1).filter((j) => range(j + 1, i + 1).every((t) => w[h * T + j] <= w[h * T + t]));
}

/** The smallest positive dip W_j − min W over (j, i] over all pairs: λ times it says how hard the exact op's limit is. */
function smallestDip(w: Float32Array, T: number): number {
  let least = Infinity;
  for (let h = 0; h < H; h++) {
    for (let i = 0; i < T; i++) {
      let m = Infinity;
      for (let j = i - 1; j >= 0; j--) {
        m = Math.min(m, w[h * T + j + 1]);
        const d = w[h * T + j] - m;
        if (d > 0) least = Math.min(least, d);
      }
    }
  }
  return least;
}

const isConfigError = (re: RegExp) => (e: unknown) => e instanceof ConfigError && re.test((e as Error).message);

test('config: shared and stack parse, take their defaults, and bad values are ConfigErrors naming the key', () => {
  const at = (a: unknown) => parseModelConfig({ ...BASE, attention: a }).attention[0];
  assert.deepEqual(at({ type: 'fpa', walk: 'tanh', shared: true }), { type: 'fpa', walk: 'tanh', outputGate: false, shared: true });
  assert.deepEqual(at({ type: 'fpa', shared: false }), { type: 'fpa', walk: 'fox', outputGate: false }, 'shared false is left out');
  assert.deepEqual(at({ type: 'fpa', walk: 'linear', shared: true, stack: true }), { type: 'fpa', walk: 'linear', outputGate: false, shared: true, stack: DEFAULT_STACK });
  assert.deepEqual(DEFAULT_STACK, { every: 64, deadFraction: 0.25 });
  assert.deepEqual(at({ type: 'fpa', shared: true, stack: { every: 4 } }), { type: 'fpa', walk: 'fox', outputGate: false, shared: true, stack: { every: 4, deadFraction: 0.25 } });
  assert.deepEqual(at({ type: 'fpa', shared: true, stack: false }), { type: 'fpa', walk: 'fox', outputGate: false, shared: true });
  const bad: [unknown, RegExp][] = [
    [{ type: 'fpa', stack: true }, /attention\[0\]: 'stack' = true needs 'shared': true .*; got 'shared' = false/],
    [{ type: 'fpa', shared: false, stack: { every: 2 } }, /'stack' = \{"every":2\} needs 'shared': true/],
    [{ type: 'fpa', shared: true, stack: true, evict: true }, /attention\[0\]: 'stack' and 'evict' exclude each other/],
    [{ type: 'fpa', shared: 'yes' }, /attention\[0\]: 'shared' = "yes": expected true or false/],
    [{ type: 'fpa', shared: true, stack: 'on' }, /'stack' = "on": expected true or an object \{"every"\?/],
    [{ type: 'fpa', shared: true, stack: { every: 0 } }, /'stack.every' = 0: expected an integer ≥ 1/],
    [{ type: 'fpa', shared: true, stack: { deadFraction: 0 } }, /'stack.deadFraction' = 0: expected a number in \(0, 1\]/],
    [{ type: 'fpa', shared: true, stack: { tau: 3 } }, /unknown key 'stack.tau'; expected every, deadFraction/],
    [{ type: 'fox', shared: true }, /unknown key 'shared' for attention type "fox"/],
    [{ type: 'fpa', lambda: 2 }, /unknown key 'lambda' for attention type "fpa"; expected walk, outputGate, tokenShift, evict, shared, stack/],
  ];
  for (const [a, re] of bad) assert.throws(() => parseModelConfig({ ...BASE, attention: a }), isConfigError(re), JSON.stringify(a));
  // A spec made in code gets the same checks from the layer.
  const mk = (spec: FpaSpec) => new FpaAttention(spec, { f: new ParamFactory({ backend: cpu, seed: 1 }), name: 'x', dims: modelDims(parseModelConfig(BASE)) });
  assert.throws(() => mk({ type: 'fpa', walk: 'fox', outputGate: false, stack: DEFAULT_STACK }), (e: unknown) => e instanceof fon.ArgumentError && /'stack' needs 'shared'/.test((e as Error).message));
  assert.equal(mk({ type: 'fpa', walk: 'tanh', outputGate: false, shared: true, stack: DEFAULT_STACK }).name, 'fpa(walk=tanh, shared, stack)');
});

test('parameters: a shared layer has no field and level projections (2·Hkv·(C+1) fewer per layer); checkpoints round-trip and refuse the other kind by name', async () => {
  const attention = (shared: boolean) => [{ type: 'full' }, { type: 'fpa', walk: 'tanh', shared }, { type: 'fpa', walk: 'linear', shared, outputGate: true }];
  const cfg = (shared: boolean) => parseModelConfig({ ...BASE, vocabSize: 257, nLayers: 3, nHeads: 4, nKvHeads: 2, attention: attention(shared) });
  const shared = new Decoder(cfg(true), new ParamFactory({ backend: cpu, seed: 7 }));
  const general = new Decoder(cfg(false), new ParamFactory({ backend: cpu, seed: 7 }));
  const fpaNames = (m: Decoder) => m.namedParameters().map(([n]) => n).filter((n) => n.includes('.fpa.'));
  assert.deepEqual(fpaNames(shared), ['layers.1.attn.fpa.rho', 'layers.1.attn.fpa.kappa', 'layers.1.attn.fpa.walk.weight', 'layers.1.attn.fpa.walk.bias', 'layers.2.attn.fpa.rho', 'layers.2.attn.fpa.walk.weight', 'layers.2.attn.fpa.walk.bias']);
  assert.equal(general.parameterCount() - shared.parameterCount(), 2 * (2 * 2 * (C + 1)));
  const mech = shared.layers[1].attn.mechanism as FpaAttention;
  assert.throws(() => mech.fieldProj, (e: unknown) => e instanceof fon.ArgumentError && /fpa\(walk=tanh, shared\): a shared walk has no field projection/.test((e as Error).message));
  assert.throws(() => mech.levelProj, /no level projection/);

  const dir = mkdtempSync(join(tmpdir(), 'fon-fpa-shared-'));
  const ckpt = await saveCheckpoint(dir, 'step-000001', shared, byteTokenizer());
  const loaded = await loadModel(dir, cpu);
  assert.deepEqual(loaded.config, cfg(true));
  assert.equal(loaded.model.parameterCount(), shared.parameterCount());
  const x = fon.randint([1, 9], 0, 257, { backend: cpu, seed: 5 });
  assert.equal(await maxDiff(loaded.model.forward(x), shared.forward(x)), 0);
  loaded.model.dispose();
  // The shared checkpoint under a config without `shared`: the field rows are missing.
  const cfgFile = join(ckpt, 'config.json');
  const saved = JSON.parse(readFileSync(cfgFile, 'utf8'));
  writeFileSync(cfgFile, JSON.stringify({ ...saved, attention: attention(false) }));
  await assert.rejects(loadModel(dir, cpu), (e: unknown) => e instanceof fon.ShapeError && /tensor 'layers\.1\.attn\.fpa\.field\.weight' is missing/.test((e as Error).message));
  // A general checkpoint under a config with `shared`: its field and level rows are unused.
  const dir2 = mkdtempSync(join(tmpdir(), 'fon-fpa-general-'));
  const ckpt2 = await saveCheckpoint(dir2, 'step-000001', general, byteTokenizer());
  writeFileSync(join(ckpt2, 'config.json'), JSON.stringify({ ...saved, attention: attention(true) }));
  await assert.rejects(loadModel(dir2, cpu), (e: unknown) => e instanceof CheckpointError && /has tensors the config does not use: layers\.1\.attn\.fpa\.field\.bias, layers\.1\.attn\.fpa\.field\.weight, layers\.1\.attn\.fpa\.level\.bias/.test((e as Error).message));
  shared.dispose();
  general.dispose();
});

test('shared + "fox" walk is FoX from the same gate weights (any gate weights, λ = 1): logits and every gradient', async () => {
  const common = { ...BASE, nLayers: 2, nHeads: 4, nKvHeads: 4 };
  const fox = new Decoder(parseModelConfig({ ...common, attention: { type: 'fox', outputGate: true } }), new ParamFactory({ backend: cpu, seed: 11 }));
  // Gates far from init: FPA's general layer is FoX only while u = w = 0; the shared one always.
  for (const [n, p] of fox.namedParameters()) if (n.includes('.fgate.')) setNormal(p, 0.8, n.length);
  const weights: Record<string, fon.Tensor> = {};
  for (const [n, t] of fox.namedParameters()) weights[n.replace('.fgate.', '.fpa.walk.')] = t;
  for (let l = 0; l < 2; l++) weights[`layers.${l}.attn.fpa.rho`] = fon.zeros([4], { backend: cpu });
  const fpaCfg = parseModelConfig({ ...common, attention: { type: 'fpa', walk: 'fox', shared: true, outputGate: true } });
  const f = new ParamFactory({ backend: cpu, weights });
  const fpa = new Decoder(fpaCfg, f);
  assert.deepEqual(f.unused(), [], 'every FoX weight has its FPA place and no FPA weight is left over');
  const x = fon.randint([2, 15], 0, 40, { backend: cpu, seed: 21 }), y = fon.randint([2, 15], 0, 40, { backend: cpu, seed: 22 });
  const dLogits = await maxDiff(fpa.forward(x), fox.forward(x));
  assert.ok(dLogits < 2e-5, `logits max |Δ| ${dLogits}`);
  // Same weights, so the gradients land on the same tensors: take FoX's, then FPA's, and compare.
  const grads = (m: Decoder) => {
    for (const p of m.parameters()) { p.grad?.dispose(); p.grad = null; }
    fon.backward(m.loss(x, y));
    return new Map(m.namedParameters().map(([n, p]) => [n.replace('.fgate.', '.fpa.walk.'), (p.grad!.dataSync() as Float32Array).slice()]));
  };
  const gFox = grads(fox), gFpa = grads(fpa);
  for (const [n, g] of gFox) {
    const h = gFpa.get(n)!;
    const scale = g.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    const worst = g.reduce((a, v, i) => Math.max(a, Math.abs(v - h[i])), 0);
    assert.ok(scale > 0 && worst <= 1e-4 * scale + 1e-6, `${n}: grad max |Δ| ${worst} (scale ${scale})`);
  }
  assert.ok(gFpa.get('layers.0.attn.fpa.rho')!.some((v) => v !== 0), 'λ gets a gradient');
  // λ ≠ 1 is FoX with gates f^λ, no longer this FoX: the comparison can fail.
  setConst((fpa.layers[0].attn.mechanism as FpaAttention).rho, 1);
  const dLambda = await maxDiff(fpa.forward(x), fox.forward(x));
  assert.ok(dLambda > 1e-3, `λ ≈ 1.74 (ρ = 1) is no longer this FoX: max |Δ| ${dLambda}`);
  fox.dispose();
  fpa.dispose();
});

test('shared walk with increments ≥ 0 (rising, and flat with ties everywhere) is NoPE softmax attention; a falling one is not', async () => {
  const common = { ...BASE, nLayers: 2, nHeads: 4, nKvHeads: 2 };
  const fpa = new Decoder(parseModelConfig({ ...common, attention: { type: 'fpa', walk: 'linear', shared: true } }), new ParamFactory({ backend: cpu, seed: 13 }));
  const weights = Object.fromEntries(fpa.namedParameters().filter(([n]) => !n.includes('.fpa.')));
  const nope = new Decoder(parseModelConfig({ ...common, attention: 'full', positions: 'none' }), new ParamFactory({ backend: cpu, weights }));
  const x = fon.randint([2, 17], 0, 40, { backend: cpu, seed: 23 });
  const ref = nope.forward(x);
  const walks = () => fpa.layers.map((l) => l.attn.mechanism as FpaAttention);
  for (const [std, bias, rising] of [[0.05, 3, true], [0, 0, true], [0.05, -3, false]] as const) {
    for (const [l, m] of walks().entries()) {
      setNormal(m.walkProj.weight, std, 40 + l);
      setConst(m.walkProj.bias!, bias);
      setConst(m.rho, 2); // λ ≈ 2.6: a falling walk is far from NoPE
    }
    // Check the increments' sign where the layers see them (the block's normed input).
    const seen: number[] = [];
    for (const m of walks()) {
      const orig = m.increments.bind(m);
      m.increments = (h: fon.Tensor) => { const d = orig(h); seen.push(...(d.dataSync() as Float32Array)); return d; };
    }
    const d = await maxDiff(fon.noGrad(() => fpa.forward(x)), ref);
    for (const m of walks()) delete (m as { increments?: unknown }).increments;
    assert.equal(seen.length, 2 * 2 * 2 * 17);
    if (rising) {
      assert.ok(seen.every((v) => v >= 0), `increments ≥ 0 (min ${Math.min(...seen)})`);
      if (std === 0) assert.ok(seen.every((v) => v === 0), 'flat walk');
      assert.ok(d < 2e-5, `bias ${bias}: max |Δ| ${d}`);
    } else {
      assert.ok(seen.every((v) => v < 0), `increments < 0 (max ${Math.max(...seen)})`);
      assert.ok(d > 1e-2, `a falling walk forgets: max |Δ| ${d}`);
    }
  }
  fpa.dispose();
  nope.dispose();
});

test('stack mode: after every token the cache\'s live rows are the monotone-stack alive set, with their k and v rows; compaction shrinks the cache', async () => {
  for (const [stack, seed] of [[{ every: 1 }, 3], [true, 5]] as const) {
    const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', shared: true, stack }, seed);
    const T = 30, P = 7;
    const inp = inputs(T, 60 + seed);
    const w = walkOf(mech, inp.x);
    const cache = new KvCache(cfg, 1, T, cpu);
    const st = fpaDecodeState(cache.layers[0]);
    let pops = 0, shorter = 0;
    const ref = new FpaStack(H, T); // the explicit stack (the reference), stepped over the same walk
    await decodeChunks(mech, cache, inp, [0, P, ...range(P + 1, T + 1)], async (end) => {
      while (ref.pos < end) { const col = range(0, H).map((h) => w[h * T + ref.pos]); ref.step(col, col); }
      const [k, v, kc, vc] = [inp.k, inp.v, cache.layers[0].k, cache.layers[0].v].map((t) => t.dataSync() as Float32Array);
      const alive = await st.alivePositions();
      for (let h = 0; h < H; h++) {
        const rows = range(0, st.length).map((r) => st.position[h * st.rows + r]);
        const live = alive[h];
        const want = aliveByDefinition(w, T, h, end - 1);
        assert.deepEqual(live, want, `head ${h} after position ${end - 1}`);
        assert.deepEqual(ref.alive(h), want, 'the reference stack holds the same keys');
        if (want.length < end) pops++;
        for (const [r, p] of rows.entries()) {
          if (p < 0) continue;
          for (let e = 0; e < D; e++) {
            assert.equal(kc[(h * T + r) * D + e], k[(h * T + p) * D + e], `k row ${r} ← position ${p}`);
            assert.equal(vc[(h * T + r) * D + e], v[(h * T + p) * D + e], `v row ${r} ← position ${p}`);
          }
        }
      }
      // Compacting every step: the rows in use are the longest head's alive keys, nothing more.
      if (typeof stack === 'object') assert.equal(st.length, Math.max(...range(0, H).map((h) => aliveByDefinition(w, T, h, end - 1).length)));
      if (st.length < end) shorter++;
    });
    assert.ok(pops > 10 && shorter > 0 && st.compactions > 0, `keys were popped (${pops}), the cache shrank (${shorter} steps, ${st.compactions} compactions)`);
    const kept = cache.kept()[0];
    for (let h = 0; h < H; h++) assert.equal(kept[h], aliveByDefinition(w, T, h, T - 1).length / T);
    cache.dispose();
  }
});

test('stack mode with ties: a flat walk (δ ≡ 0) pops nothing (relu(0) = 0), so stack decoding keeps every key and equals the exact forward', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } }, 7);
  setConst(mech.walkProj.weight, 0);
  setConst(mech.rho, rhoFor(1e4));
  const T = 16;
  const inp = inputs(T, 110);
  assert.ok(walkOf(mech, inp.x).every((x) => x === 0), 'a flat walk');
  const cache = new KvCache(cfg, 1, T, cpu);
  const d = await maxDiff(await decodeChunks(mech, cache, inp, [0, 3, ...range(4, T + 1)]), fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x })));
  assert.ok(d < 2e-5, `max |Δ| ${d}`);
  assert.deepEqual(cache.kept(), [[1, 1]]);
  assert.equal(fpaDecodeState(cache.layers[0]).length, T);
  cache.dispose();
});

test('stack decoding equals the exact forward with λ = 1e4 (the hard limit), one token at a time and in chunks; at λ = 1 it differs', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', shared: true, stack: true }, 15);
  const T = 26;
  const inp = inputs(T, 90);
  const w = walkOf(mech, inp.x);
  const run = async (cuts: number[]) => {
    const cache = new KvCache(cfg, 1, T, cpu);
    const o = await decodeChunks(mech, cache, inp, cuts);
    cache.dispose();
    return o;
  };
  const cutsList = [[0, ...range(1, T + 1)], [0, 9, ...range(10, T + 1)], [0, 4, 11, 12, 20, T]];
  const exact1 = fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x }));
  const atOne = await maxDiff(await run(cutsList[0]), exact1);
  assert.ok(atOne > 1e-2, `at λ = 1 stack decoding changes the outputs (max |Δ| ${atOne})`);
  setConst(mech.rho, rhoFor(1e4));
  const lam = mech.lambda().dataSync()[0];
  assert.ok(Math.abs(lam - 1e4) < 1, `λ = ${lam}`);
  // The exact op's dead keys weigh ≤ e^{−λ·d}: the smallest dip makes that negligible here.
  assert.ok(lam * smallestDip(w, T) > 40, `λ·d_min = ${lam * smallestDip(w, T)}`);
  const hard = fon.noGrad(() => mech.forward(inp.q, inp.k, inp.v, { x: inp.x }));
  for (const cuts of cutsList) {
    const d = await maxDiff(await run(cuts), hard);
    assert.ok(d < 2e-5, `cuts ${cuts}: max |Δ| ${d}`);
  }
});

test('stack decoding equals the hard-limit forward for a whole model (GQA, two stack layers, a prompt then one token at a time)', async () => {
  const cfg = parseModelConfig({ ...BASE, nLayers: 3, nHeads: 4, nKvHeads: 2, attention: [{ type: 'fpa', walk: 'tanh', shared: true, stack: { every: 2 } }, { type: 'full' }, { type: 'fpa', walk: 'linear', shared: true, stack: true, outputGate: true }] });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 29 }));
  for (const [n, p] of m.namedParameters()) {
    if (n.endsWith('fpa.walk.weight')) setNormal(p, 0.5, n.length);
    if (n.endsWith('fpa.kappa')) setConst(p, 2);
    if (n.endsWith('fpa.rho')) setConst(p, rhoFor(1e4));
  }
  const T = 20;
  const x = fon.randint([1, T], 0, 40, { backend: cpu, seed: 31 });
  const host = x.dataSync() as Int32Array;
  const full = fon.noGrad(() => m.forward(x));
  const cache = new KvCache(cfg, 1, T, cpu);
  const step = (a: number, b: number) => fon.noGrad(() => m.forward(fon.tensor(host.slice(a, b), [1, b - a], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: a }));
  const rows = [step(0, 6), ...range(6, T).map((p) => step(p, p + 1))];
  const d = await maxDiff(fon.concat(rows, 1), full);
  assert.ok(d < 1e-4, `max |Δ| ${d}`);
  await cache.settle(); // kept() reports the counts of the last settle
  const kept = cache.kept();
  assert.deepEqual(kept[1], [1, 1]);
  assert.ok([...kept[0], ...kept[2]].some((f) => f < 1), `keys were dropped: ${JSON.stringify(kept)}`);
  cache.dispose();
  m.dispose();
});

test('stack mode: re-centring (every token, or never) changes nothing; a rewind before any settle restores the stack and rows, and below the last settle (after a compaction) it is an ArgumentError', async () => {
  const { cfg, mech } = layer({ type: 'fpa', walk: 'linear', shared: true, stack: { every: 5 } }, 37);
  const T = 24;
  const inp = inputs(T, 100);
  const run = async (recentreEvery: number) => {
    const cache = new KvCache(cfg, 1, T, cpu);
    setRecentre(cache, recentreEvery);
    const o = await decodeChunks(mech, cache, inp, [0, 4, ...range(5, T + 1)]);
    const st = fpaDecodeState(cache.layers[0]);
    const r = { o, kept: cache.kept(), walk: Array.from((await st.walk.data()) as Float32Array), alive: await st.alivePositions() };
    cache.dispose();
    return r;
  };
  const a = await run(1), b = await run(0);
  assert.ok(a.walk.every((x) => x === 0) && b.walk.some((x) => Math.abs(x) > 0.5), `re-centred ${a.walk}, wandering ${b.walk}`);
  const dRecentre = await maxDiff(a.o, b.o);
  assert.ok(dRecentre < 2e-5, `re-centring: max |Δ| ${dRecentre}`);
  assert.deepEqual(a.kept, b.kept);
  assert.deepEqual(a.alive, b.alive);

  // Rewind: never compacting (dead fraction never passes 1), so every position keeps its row; no settle before the rewind.
  const nc = layer({ type: 'fpa', walk: 'linear', shared: true, stack: { every: 1000, deadFraction: 1 } }, 37);
  const straight = new KvCache(nc.cfg, 1, T, cpu);
  setRecentre(straight, 0);
  const want = await decodeChunks(nc.mech, straight, inp, [0, 4, ...range(5, T + 1)]);
  const wantAlive = await fpaDecodeState(straight.layers[0]).alivePositions();
  straight.dispose();
  const cache = new KvCache(nc.cfg, 1, T, cpu);
  setRecentre(cache, 0);
  await decodeChunks(nc.mech, cache, inp, [0, 4, 5, 6, 7, 8, 9, 10, 11, 12], undefined, { settle: false });
  const tail = await decodeChunks(nc.mech, cache, inp, [6, ...range(7, T + 1)]);
  const dRewind = await maxDiff(tail, fon.narrow(want, 2, 6, T - 6));
  assert.ok(dRewind < 2e-5, `rewind: max |Δ| ${dRewind}`);
  const st = fpaDecodeState(cache.layers[0]);
  assert.equal(st.compactions, 0);
  assert.deepEqual(await st.alivePositions(), wantAlive);
  cache.dispose();

  const c2 = new KvCache(cfg, 1, T, cpu);
  await decodeChunks(mech, c2, inp, [0, 4, 5, 6, 7, 8, 9, 10]);
  assert.ok(fpaDecodeState(c2.layers[0]).compactions > 0, 'compacted before the rewind');
  await assert.rejects(decodeChunks(mech, c2, inp, [6, 7]), (e: unknown) => e instanceof fon.ArgumentError && /decoding at position 6 after 10: the first 10 positions are committed/.test((e as Error).message));
  c2.dispose();
});

test('generate reports cacheKept: 1 on a full layer, the stack\'s share of the positions on stack layers (1/positions with the always-falling "fox" walk)', async () => {
  const tok = byteTokenizer();
  const cfg: ModelConfig = parseModelConfig({ ...BASE, vocabSize: 257, nLayers: 3, contextLength: 64, attention: [{ type: 'full' }, { type: 'fpa', walk: 'fox', shared: true, stack: true }, { type: 'fpa', walk: 'linear', shared: true, stack: true }] });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  setNormal((m.layers[2].attn.mechanism as FpaAttention).walkProj.weight, 0.5, 3);
  const prompt = 'hello there, general';
  const r = await generate(m, tok, prompt, { maxTokens: 12, temperature: 0 });
  assert.equal(r.stopReason, 'maxTokens');
  // The positions fed: the start token (EOS), the prompt, every sampled token but the last.
  const fed = [tok.eosId, ...tok.encode(prompt), ...r.ids.slice(0, -1)];
  assert.deepEqual(r.cacheKept[0], [1, 1]);
  for (const f of r.cacheKept[1]) assert.ok(Math.abs(f - 1 / fed.length) < 1e-9, `fox walk: kept ${f}, 1/${fed.length}`);
  // The reference for the linear walk: its increments over the fed tokens (one full forward), the walk summed in f32, the alive set by definition.
  const mech = m.layers[2].attn.mechanism as FpaAttention;
  let inc: Float32Array | null = null;
  const orig = mech.increments.bind(mech);
  mech.increments = (h: fon.Tensor) => { const d = orig(h); inc = d.dataSync() as Float32Array; return d; };
  fon.noGrad(() => m.forward(fon.tensor(Int32Array.from(fed), [1, fed.length], { backend: cpu, dtype: 'i32' })));
  const T = fed.length, w = new Float32Array(H * T);
  for (let h = 0; h < H; h++) for (let t = 0, acc = 0; t < T; t++) w[h * T + t] = acc = Math.fround(acc + inc![h * T + t]);
  const want = range(0, H).map((h) => aliveByDefinition(w, T, h, T - 1).length / T);
  assert.deepEqual(r.cacheKept[2], want);
  assert.ok(want.some((f) => f > 1 / T && f < 1), `the linear walk keeps some keys and drops others: ${want}`);
  m.dispose();
});

test('webgpu: a stack layer trains (forward) and decodes through the device formulation (threshold 0) as the CPU\'s host stack does', { skip: webgpuSkipReason() }, async () => {
  const attention = { type: 'fpa', walk: 'linear', shared: true, stack: { every: 1 } };
  const c = layer(attention, 3), g = layer(attention, 3, gpu!);
  const T = 12;
  const inp = inputs(T, 130);
  const toGpu = (t: fon.Tensor) => fon.tensor(t.dataSync() as Float32Array, t.shape, { backend: gpu! });
  const ginp = { q: toGpu(inp.q), k: toGpu(inp.k), v: toGpu(inp.v), x: toGpu(inp.x) };
  assert.deepEqual(g.mech.forward(ginp.q, ginp.k, ginp.v, { x: ginp.x }).shape, [1, H, T, D]);
  const cuts = [0, 3, ...range(4, T + 1)];
  const cc = new KvCache(c.cfg, 1, T, cpu), gc = new KvCache(g.cfg, 1, T, gpu!);
  const d = await maxDiff(await decodeChunks(g.mech, gc, ginp, cuts), await decodeChunks(c.mech, cc, inp, cuts));
  assert.ok(d < 1e-4, `max |Δ| ${d}`);
  assert.deepEqual(gc.kept(), cc.kept());
  assert.ok(cc.kept()[0].some((f) => f < 1), 'keys were popped');
  cc.dispose();
  gc.dispose();
});

test('webgpu: a shared layer decodes (exact, and with evict through the device minima) as on the CPU', { skip: webgpuSkipReason() }, async () => {
  for (const attention of [{ type: 'fpa', walk: 'linear', shared: true }, { type: 'fpa', walk: 'tanh', shared: true, evict: { tau: 2, every: 1 } }]) {
    const c = layer(attention, 9);
    const g = layer(attention, 9, gpu!);
    const gp = Object.fromEntries(g.mech.namedParameters());
    for (const [n, p] of c.mech.namedParameters()) setParam(gp[n], fon.tensor(p.dataSync() as Float32Array, p.shape, { backend: gpu! }));
    const T = 14;
    const inp = inputs(T, 120);
    const toGpu = (t: fon.Tensor) => fon.tensor(t.dataSync() as Float32Array, t.shape, { backend: gpu! });
    const ginp = { q: toGpu(inp.q), k: toGpu(inp.k), v: toGpu(inp.v), x: toGpu(inp.x) };
    const cuts = [0, 4, ...range(5, T + 1)];
    const cc = new KvCache(c.cfg, 1, T, cpu), gc = new KvCache(g.cfg, 1, T, gpu!);
    const d = await maxDiff(await decodeChunks(g.mech, gc, ginp, cuts), await decodeChunks(c.mech, cc, inp, cuts));
    assert.ok(d < 1e-4, `${JSON.stringify(attention)}: max |Δ| ${d}`);
    if (attention.evict) assert.ok(cc.kept()[0].some((f) => f < 1), 'keys died');
    cc.dispose();
    gc.dispose();
  }
});

test('fon train → info → generate with a shared stack FPA layer', () => {
  const FON = join(import.meta.dirname, '../../bin/fon.js');
  const dir = mkdtempSync(join(tmpdir(), 'fon-fpa-stack-cli-'));
  const corpus = join(dir, 'corpus.txt');
  writeFileSync(corpus, Array.from({ length: 200 }, (_, i) => ['The cat sat.', 'A dog ran.'][i % 2]).join(' '));
  const run = (...args: string[]) => {
    const p = spawnSync(process.execPath, [FON, ...args], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(p.status, 0, p.stderr);
    return p;
  };
  const attention = [{ type: 'full' }, { type: 'fpa', walk: 'tanh', shared: true, stack: true }];
  const model = { dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 32 };
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...model, attention }));
  const out = join(dir, 'run');
  run('train', '--data', corpus, '--config', join(dir, 'config.json'), '--tokenizer', 'byte', '--steps', '2', '--batch', '2', '--backend', 'cpu',
    '--eval-every', '0', '--checkpoint-every', '0', '--final-eval-windows', '1', '--out', out);
  const info = JSON.parse(run('info', '--model', out, '--json').stdout);
  assert.deepEqual(info.config.attention, [{ type: 'full' }, { type: 'fpa', walk: 'tanh', outputGate: false, shared: true, stack: DEFAULT_STACK }]);
  const expected = (a: unknown) => new Decoder(parseModelConfig({ ...model, vocabSize: 257, attention: a }), new ParamFactory({ backend: cpu, seed: 1 })).parameterCount();
  assert.equal(info.parameters, expected(attention));
  assert.equal(expected([{ type: 'full' }, { type: 'fpa', walk: 'tanh' }]) - info.parameters, 2 * 1 * (16 + 1));
  assert.deepEqual(info.layers, [{ mechanism: 'full' }, { mechanism: 'fpa(walk=tanh, shared, stack)', stack: DEFAULT_STACK }], 'fon info --json names the stack layer');
  assert.match(run('info', '--model', out).stdout, new RegExp(`^  layer 1: stack decoding \\(shared walk, hard limit; compact every ${DEFAULT_STACK.every} steps`, 'm'), 'fon info prints it');
  const g = run('generate', '--model', out, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '8', '--backend', 'cpu', '--stats');
  assert.match(g.stderr, /KV cache kept: \d+\.\d% of keys; per layer and head: 0: 1\.000 \| 1: 0\.\d{3}/);
});
