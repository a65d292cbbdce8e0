/**
 * Depth-Attention in the decoder (attention/depth.ts, specs/fpa_depth.md §3 and §5 item 6) on the CPU:
 * - config: `depth` parsed with its default window, absent when off, errors naming the key and value;
 * - the candidate sets C(l) of the spec's formula, stride and window;
 * - a layer with no candidates is exactly vanilla: a one-layer model, and any block handed no candidates;
 * - logits of a 4-layer model (stride 2, window 1: recursive mixing through a mixed ṽ) equal a
 *   reference built here from the model's own modules with the mix written as plain loops;
 * - decoding token by token through the KV cache equals the prefill logits (full, local, fox, fpa);
 * - KV-cache bytes (config and allocated) and the parameter set are those of the model without depth;
 * - gradients reach every parameter, flow into earlier layers' k and v through the mix (a directional
 *   central difference on layer 0's key projection agrees), with local, fox and fpa layers;
 * - a checkpoint round trip keeps `depth`; the Hugging Face export refuses it.
 * Run: node --import tsx --test test/model/depth_attention.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { ConfigError, kvBytesPerToken, parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { ropeTables } from '../../src/nn/rope_tables.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { depthCandidates, depthMixMacsPerToken, depthSources, type LayerRecord } from '../../src/attention/depth.ts';
import { denseAttention } from '../../src/attention/dense.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { hfArchitectureFor } from '../../src/io/hf/export.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';

const cpu = await fon.initBackend('cpu');

const BASE = { vocabSize: 40, dModel: 16, nLayers: 4, nHeads: 4, nKvHeads: 2, headDim: 6, mlpHidden: 24, contextLength: 24 };
const model = (cfg: ModelConfig, seed = 7) => new Decoder(cfg, new ParamFactory({ backend: cpu, seed }));
const ids = (b: number, t: number, seed: number) => fon.randint([b, t], 0, 40, { backend: cpu, seed });
const vals = (t: fon.Tensor) => hostToF32(t.dataSync(), t.dtype);

function maxDiff(a: fon.Tensor, b: fon.Tensor): number {
  const x = vals(a), y = vals(b);
  assert.equal(x.length, y.length);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  return worst;
}

test('config: depth takes window 0 by default, is absent when off, and bad entries are ConfigErrors naming the key', () => {
  assert.deepEqual(parseModelConfig({ depth: { stride: 2 } }).depth, { stride: 2, window: 0 });
  assert.deepEqual(parseModelConfig({ depth: { stride: 3, window: 2 } }).depth, { stride: 3, window: 2 });
  assert.deepEqual(parseModelConfig({ depth: { mode: 'softmax', stride: 3 } }).depth, { stride: 3, window: 0 });
  assert.deepEqual(parseModelConfig({ depth: { mode: 'v0_mix' } }).depth, { mode: 'v0_mix' });
  assert.ok(!('depth' in parseModelConfig({})), 'no depth key without depth');
  assert.ok(!('depth' in parseModelConfig({ depth: null }, parseModelConfig({ depth: { stride: 1 } }))), 'null turns it off');
  const cases: [unknown, RegExp][] = [
    [{ depth: 2 }, /'depth' = 2: expected null, \{"stride": integer ≥ 1, "window"\?: integer ≥ 0\} or \{"mode": "v0_mix"\}/],
    [{ depth: { stride: 2, every: 1 } }, /'depth': unknown key 'every' for mode "softmax"; expected mode, stride, window/],
    [{ depth: { mode: 'v0_mix', stride: 2 } }, /'depth': unknown key 'stride' for mode "v0_mix"; expected mode/],
    [{ depth: { mode: 'dense', stride: 2 } }, /'depth': 'mode' = "dense": expected one of "softmax", "v0_mix"/],
    [{ depth: { window: 1 } }, /'depth': 'stride' = undefined: expected an integer ≥ 1/],
    [{ depth: { stride: 0 } }, /'depth': 'stride' = 0: expected an integer ≥ 1/],
    [{ depth: { stride: 1.5 } }, /'depth': 'stride' = 1\.5: expected an integer ≥ 1/],
    [{ depth: { stride: 2, window: -1 } }, /'depth': 'window' = -1: expected an integer ≥ 0/],
  ];
  for (const [json, re] of cases) assert.throws(() => parseModelConfig(json, undefined, 'my.json'), (e: Error) => e instanceof ConfigError && e.message.startsWith('my.json: ') && re.test(e.message), JSON.stringify(json));
});

test('candidates: C(l) = {m < l : m mod s = 0} ∪ {m : l − w ≤ m < l}; sources are the layers some later layer reads', () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((l) => depthCandidates({ stride: 2 }, l)), [[], [0], [0], [0, 2], [0, 2], [0, 2, 4]]);
  assert.deepEqual([0, 1, 2, 3, 4].map((l) => depthCandidates({ stride: 100, window: 1 }, l)), [[], [0], [0, 1], [0, 2], [0, 3]]);
  assert.deepEqual([0, 1, 2, 3].map((l) => depthCandidates({ stride: 1 }, l)), [[], [0], [0, 1], [0, 1, 2]]);
  // A stride past the last layer still leaves layer 0 (0 mod s = 0): by the formula, never an empty set above layer 0.
  assert.deepEqual([0, 1, 2, 3].map((l) => depthCandidates({ stride: 10 }, l)), [[], [0], [0], [0]]);
  // The 410M companion of the paper: 32 layers, stride 16 ⇒ C = {0, 16} above layer 16.
  assert.deepEqual(depthCandidates({ stride: 16 }, 31), [0, 16]);
  assert.deepEqual(depthSources({ stride: 2, window: 1 }, 5), [true, true, true, true, false]);
  assert.deepEqual([0, 1, 2, 3].map((l) => depthCandidates({ mode: 'v0_mix' }, l)), [[], [0], [0], [0]]);
  assert.deepEqual(depthSources({ mode: 'v0_mix' }, 4), [true, false, false, false]);
  // Per layer with candidates and KV head: (|C| + 1)·d·2 + r·d multiply-adds.
  assert.equal(depthMixMacsPerToken({ stride: 2 }, 4, 4, 2, 6), 2 * ((2 * 6 * 2 + 2 * 6) + (2 * 6 * 2 + 2 * 6) + (3 * 6 * 2 + 2 * 6)));
});

test('no candidates is vanilla: a one-layer model with depth gives the same logits bit for bit', () => {
  const plain = parseModelConfig({ ...BASE, nLayers: 1, qkNorm: true });
  const x = ids(2, 9, 3);
  const a = model(plain), b = model(parseModelConfig({ ...BASE, nLayers: 1, qkNorm: true, depth: { stride: 1, window: 3 } }));
  assert.equal(maxDiff(a.forward(x), b.forward(x)), 0);
  a.dispose(); b.dispose();
});

test('no candidates is vanilla: a block handed an empty candidate list computes what it computes without depth', () => fon.tidy(() => {
  const m = model(parseModelConfig({ ...BASE, qkNorm: true }));
  const x = fon.randn([2, 7, BASE.dModel], { seed: 4 });
  for (const layer of m.layers) {
    const withDepth = layer.forward(x, { pos: 0 }, undefined, { spec: { stride: 1 }, candidates: [] });
    assert.equal(maxDiff(withDepth.y, layer.forward(x, { pos: 0 }).y), 0);
    assert.deepEqual(withDepth.record.k.shape, [2, BASE.nKvHeads, 7, BASE.headDim]);
  }
  m.dispose();
}));

/** The mix as plain loops over host arrays: ṽ[b,g,t] = Σ_i softmax_i(⟨q̄, k_i⟩/√D)·v_i, q̄ the group mean. */
function mixLoops(q: fon.Tensor, ks: fon.Tensor[], vs: fon.Tensor[]): fon.Tensor {
  const [B, H, T, D] = q.shape, G = ks[0].shape[1], r = H / G;
  const qv = vals(q), kv = ks.map(vals), vv = vs.map(vals);
  const out = new Float32Array(B * G * T * D);
  for (let b = 0; b < B; b++) for (let g = 0; g < G; g++) for (let t = 0; t < T; t++) {
    const qbar = new Float64Array(D);
    for (let j = 0; j < r; j++) for (let c = 0; c < D; c++) qbar[c] += qv[((b * H + g * r + j) * T + t) * D + c] / r;
    const o = ((b * G + g) * T + t) * D;
    const e = kv.map((k) => { let s = 0; for (let c = 0; c < D; c++) s += qbar[c] * k[o + c]; return s / Math.sqrt(D); });
    const mx = Math.max(...e), z = e.reduce((s, x) => s + Math.exp(x - mx), 0);
    for (let i = 0; i < ks.length; i++) for (let c = 0; c < D; c++) out[o + c] += (Math.exp(e[i] - mx) / z) * vv[i][o + c];
  }
  return fon.tensor(out, [B, G, T, D]);
}

test('logits of a 4-layer model (stride 2, window 1; QK-norm, RoPE, GQA) equal a reference built layer by layer', () => fon.tidy(() => {
  const cfg = parseModelConfig({ ...BASE, qkNorm: true, depth: { stride: 2, window: 1 } });
  const m = model(cfg);
  const x = ids(2, 8, 5);
  const [B, T] = x.shape;
  const { nHeads: H, nKvHeads: G, headDim: D } = cfg;
  const { cos, sin } = ropeTables(T, D, cfg.ropeTheta, cpu, cfg.ropeScaling);
  const heads = (y: fon.Tensor, n: number) => fon.reshape(y, [B, T, n, D]);
  const toBhtd = (y: fon.Tensor) => fon.permute(y, [0, 2, 1, 3]);
  let h = m.embed.forward(x);
  const kHat: fon.Tensor[] = [], vMix: fon.Tensor[] = [];
  const want = [[], [0], [0, 1], [0, 2]];
  m.layers.forEach((layer, l) => {
    const a = layer.attn, xn = layer.attnNorm.forward(h);
    const q = toBhtd(fon.rope(a.qNorm!.forward(heads(a.q.forward(xn), H)), cos, sin, { seqAxis: 1 }));
    const k = toBhtd(fon.rope(a.kNorm!.forward(heads(a.k.forward(xn), G)), cos, sin, { seqAxis: 1 }));
    const v = toBhtd(heads(a.v.forward(xn), G));
    const c = want[l];
    const vt = c.length ? mixLoops(q, [...c.map((i) => kHat[i]), k], [...c.map((i) => vMix[i]), v]) : v;
    kHat.push(k); vMix.push(vt);
    const o = denseAttention(q, k, vt); // (B, H, T, D)
    h = fon.add(h, a.o.forward(fon.reshape(fon.permute(o, [0, 2, 1, 3]), [B, T, H * D])));
    h = fon.add(h, layer.mlp.forward(layer.mlpNorm.forward(h)));
  });
  const ref = fon.matmul(m.norm.forward(h), m.embed.weight, { transB: true });
  const got = m.forward(x);
  assert.ok(maxDiff(got, ref) < 2e-5, `max |Δ| ${maxDiff(got, ref)}`);
  // The mix matters: the model without depth gives other logits.
  const plain = model(parseModelConfig({ ...BASE, qkNorm: true }));
  assert.ok(maxDiff(plain.forward(x), got) > 1e-3, 'depth changed nothing');
  m.dispose(); plain.dispose();
}));

const MECHANISMS: Record<string, unknown> = {
  full: 'full',
  local: [{ type: 'local', window: 3 }, { type: 'full' }, { type: 'local', window: 4 }, { type: 'full' }],
  fox: { type: 'fox', outputGate: true },
  fpa: { type: 'fpa', walk: 'tanh' },
  'mix full / fox / fpa / local': [{ type: 'full' }, { type: 'fox' }, { type: 'fpa' }, { type: 'local', window: 2 }],
};

for (const [name, attention] of Object.entries(MECHANISMS)) {
  test(`decode step by step through the KV cache equals the prefill logits: ${name}, stride 1`, () => {
    const cfg = parseModelConfig({ ...BASE, attention, depth: { stride: 1 } });
    const m = model(cfg);
    const t = 11;
    const x = ids(1, t, 8);
    const host = x.dataSync() as Int32Array;
    const full = m.forward(x);
    const cache = new KvCache(cfg, 1, 16, cpu);
    const rows = [m.forward(fon.tensor(host.slice(0, 4), [1, 4], { dtype: 'i32' }), { cache: cache.layers, pos: 0 })];
    for (let p = 4; p < t; p++) rows.push(m.forward(fon.tensor([host[p]], [1, 1], { dtype: 'i32' }), { cache: cache.layers, pos: p }));
    const d = maxDiff(fon.concat(rows, 1), full);
    assert.ok(d < 5e-5, `${name}: max |Δ| ${d}`);
    // The cache's value slot of a mixing layer holds ṽ, not the raw v: here, what the prefill's layer 2 hands on.
    fon.tidy(() => {
      const kept: LayerRecord[] = [];
      let h = m.embed.forward(x);
      m.layers.forEach((layer, l) => {
        const c = depthCandidates(cfg.depth!, l).map((i) => kept[i]);
        const out = layer.forward(h, { pos: 0 }, undefined, c.length ? { spec: cfg.depth!, candidates: c } : undefined);
        h = out.y;
        kept.push(out.record);
      });
      const cached = fon.narrow(cache.layers[2].v, 2, 0, t);
      assert.ok(maxDiff(cached, kept[2].v) < 5e-5, 'cache holds the mixed value');
    });
    cache.dispose();
    m.dispose();
  });
}

test('KV-cache bytes and parameters are those of the same model without depth', () => {
  for (const attention of Object.values(MECHANISMS)) {
    const plain = parseModelConfig({ ...BASE, attention });
    const deep = parseModelConfig({ ...BASE, attention, depth: { stride: 1, window: 2 } });
    for (const bytes of [4, 2]) assert.equal(kvBytesPerToken(deep, bytes), kvBytesPerToken(plain, bytes));
    const c1 = new KvCache(plain, 2, 12, cpu), c2 = new KvCache(deep, 2, 12, cpu);
    assert.equal(c2.bytes, c1.bytes);
    c1.dispose(); c2.dispose();
    const a = model(plain), b = model(deep);
    assert.deepEqual(b.namedParameters().map(([n, p]) => [n, p.shape]), a.namedParameters().map(([n, p]) => [n, p.shape]));
    assert.equal(b.parameterCount(), a.parameterCount());
    a.dispose(); b.dispose();
  }
});

for (const [name, attention] of Object.entries(MECHANISMS)) {
  test(`gradients reach every parameter and flow into layer 0's k and v through the mix: ${name}`, () => {
    const cfg = parseModelConfig({ ...BASE, attention, depth: { stride: 2, window: 1 } });
    const m = model(cfg), plain = model(parseModelConfig({ ...BASE, attention }));
    const x = ids(2, 7, 1), y = ids(2, 7, 2);
    const grads = (mm: Decoder) => {
      fon.backward(mm.loss(x, y));
      const out = new Map(mm.namedParameters().map(([n, p]) => {
        assert.ok(p.grad, `${name}: ${n} has no gradient`);
        const g = vals(p.grad);
        assert.ok(g.every(Number.isFinite), `${name}: ${n} has a non-finite gradient`);
        return [n, g] as const;
      }));
      fon.zeroGrad(mm.parameters());
      return out;
    };
    const g1 = grads(m), g0 = grads(plain);
    // Same weights (same seed, same names); layer 0's k is read by later layers' mixes only with depth.
    for (const p of ['layers.0.attn.k.weight', 'layers.0.attn.v.weight']) {
      const a = g1.get(p)!, b = g0.get(p)!;
      assert.ok(a.some((v, i) => Math.abs(v - b[i]) > 1e-6), `${name}: ${p} gets no gradient from the mix`);
    }
    m.dispose(); plain.dispose();
  });
}

test('directional central difference of the loss along layer 0\'s key projection matches its gradient (stride 1)', () => {
  const cfg = parseModelConfig({ ...BASE, nLayers: 3, qkNorm: true, depth: { stride: 1 } });
  const m = model(cfg);
  const x = ids(1, 6, 11), y = ids(1, 6, 12);
  const w = m.namedParameters().find(([n]) => n === 'layers.0.attn.k.weight')![1];
  fon.backward(m.loss(x, y));
  const g = vals(w.grad!);
  const dir = vals(fon.randn(w.shape, { seed: 13 }));
  const base = Float32Array.from(vals(w));
  const lossAt = (s: number) => fon.noGrad(() => {
    const t = Float32Array.from(base, (v, i) => v + s * dir[i]);
    setData(w, t);
    return vals(m.loss(x, y))[0];
  });
  const eps = 1e-3; // QK-norm bends the loss enough that 1e-2 is already outside the linear range
  const fd = (lossAt(eps) - lossAt(-eps)) / (2 * eps);
  setData(w, base);
  const an = g.reduce((s, v, i) => s + v * dir[i], 0);
  assert.ok(Math.abs(fd - an) <= 2e-3 + 2e-2 * Math.abs(an), `finite difference ${fd} vs gradient ${an}`);
  assert.ok(Math.abs(an) > 1e-4, 'the directional derivative is not trivially zero');
  m.dispose();
});

/** Overwrites a parameter's values in place (CPU handles are host arrays). */
function setData(p: fon.Tensor, values: Float32Array): void {
  (p.handle as Float32Array).set(values);
}

test('a FON checkpoint keeps depth; the Hugging Face export refuses it naming the key', async () => {
  const cfg = parseModelConfig({ ...BASE, vocabSize: 257, depth: { stride: 2, window: 1 } });
  const m = model(cfg);
  const dir = mkdtempSync(join(tmpdir(), 'fon-depth-'));
  await saveCheckpoint(dir, 'step-000001', m, byteTokenizer());
  const loaded = await loadModel(dir, cpu);
  assert.deepEqual(loaded.config, cfg);
  const x = ids(1, 9, 5);
  assert.equal(maxDiff(loaded.model.forward(x), m.forward(x)), 0);
  loaded.model.dispose(); m.dispose();
  const llama = parseModelConfig({ ...BASE, depth: { stride: 2 } });
  assert.throws(() => hfArchitectureFor(llama), (e: unknown) => e instanceof fon.UnsupportedError && /^cannot export as a Hugging Face model: 'depth' = \{"stride":2,"window":0\}; .*Depth-Attention/.test((e as Error).message));
});

test('v0_mix: every layer l ≥ 1 sees ṽ = ½v⁽⁰⁾ + ½v (layer 0 raw), in the forward and in its cache; decode equals prefill', () => fon.tidy(() => {
  const cfg = parseModelConfig({ ...BASE, nLayers: 3, attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa' }], depth: { mode: 'v0_mix' } });
  const m = model(cfg);
  const x = ids(1, 8, 21);
  const host = x.dataSync() as Int32Array;
  const full = m.forward(x);
  const cache = new KvCache(cfg, 1, 10, cpu);
  const rows = [m.forward(fon.tensor(host.slice(0, 3), [1, 3], { dtype: 'i32' }), { cache: cache.layers, pos: 0 })];
  for (let p = 3; p < 8; p++) rows.push(m.forward(fon.tensor([host[p]], [1, 1], { dtype: 'i32' }), { cache: cache.layers, pos: p }));
  assert.ok(maxDiff(fon.concat(rows, 1), full) < 5e-5);
  // The raw v of each layer, from the modules, along the prefill: the cached value of layer l ≥ 1 is their mean with layer 0's.
  const [B, T] = x.shape, { nKvHeads: G, headDim: D } = cfg;
  const rawV: fon.Tensor[] = [];
  const kept: LayerRecord[] = [];
  let h = m.embed.forward(x);
  m.layers.forEach((layer, l) => {
    rawV.push(fon.permute(fon.reshape(layer.attn.v.forward(layer.attnNorm.forward(h)), [B, T, G, D]), [0, 2, 1, 3]));
    const c = depthCandidates(cfg.depth!, l).map((i) => kept[i]);
    const out = layer.forward(h, { pos: 0 }, undefined, c.length ? { spec: cfg.depth!, candidates: c } : undefined);
    h = out.y;
    kept.push(out.record);
  });
  assert.equal(maxDiff(kept[0].v, rawV[0]), 0);
  for (const l of [1, 2]) {
    const want = fon.mul(fon.add(rawV[0], rawV[l]), 0.5);
    assert.ok(maxDiff(kept[l].v, want) < 1e-6, `layer ${l}`);
    assert.ok(maxDiff(fon.narrow(cache.layers[l].v, 2, 0, T), want) < 5e-5, `cache of layer ${l}`);
  }
  cache.dispose();
  m.dispose();
}));
