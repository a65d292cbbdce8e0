/**
 * FoX and FPA as layer types of the decoder (attention/fox.ts, attention/fpa.ts) on the CPU:
 * config parsing (defaults, NoPE by default, errors naming the bad key or value); forward and
 * every parameter's gradient; a few AdamW steps lower the loss on a repeated text; FPA with the
 * "fox" walk at init computes the FoX model's logits from the same weights; decoding through the
 * KV cache (a prompt, then one token at a time) equals the prefill logits; cache bytes (config and
 * KvCache agree, the state counted in f32); parameter names and logits survive a FON checkpoint
 * round trip; the Hugging Face export refuses these layers.
 * Run: node --import tsx --test test/attention/fox_fpa_layers.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { ConfigError, DEFAULT_CONFIG, kvBytesPerToken, layerAttention, modelDims, parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { layoutBytesPerToken } from '../../src/attention/mechanism.ts';
import { mechanismCache } from '../../src/attention/table.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { AdamW } from '../../src/train/optim.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { hfArchitectureFor } from '../../src/io/hf/export.ts';
import { FoxAttention } from '../../src/attention/fox/fox.ts';
import { FpaAttention } from '../../src/attention/fpa/fpa.ts';
import { maxDiff } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');

const BASE = { vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 24 };

/** Layer layouts under test: all FoX (with output gate), all FPA of each walk, GQA, and a mix with full attention. */
const VARIANTS: Record<string, Omit<Partial<ModelConfig>, 'attention'> & { attention: unknown }> = {
  fox: { ...BASE, attention: { type: 'fox', outputGate: true } },
  'fpa fox walk': { ...BASE, attention: { type: 'fpa' } },
  'fpa linear walk, GQA': { ...BASE, nHeads: 4, nKvHeads: 2, attention: { type: 'fpa', walk: 'linear' } },
  'fpa tanh walk, output gate, qkNorm': { ...BASE, qkNorm: true, attention: { type: 'fpa', walk: 'tanh', outputGate: true } },
  'mix full / fox / fpa': { ...BASE, nLayers: 3, attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa', walk: 'tanh' }] },
};

const config = (name: string) => parseModelConfig(VARIANTS[name]);
const model = (cfg: ModelConfig, seed = 7) => new Decoder(cfg, new ParamFactory({ backend: cpu, seed }));
const ids = (b: number, t: number, seed: number) => fon.randint([b, t], 0, 40, { backend: cpu, seed });

test('config: fox and fpa entries take their defaults, and positions become "none" unless set', () => {
  const c = parseModelConfig({ attention: [{ type: 'fox' }, 'fpa', { type: 'full' }, { type: 'fpa', walk: 'tanh', outputGate: true }] });
  assert.deepEqual(c.attention, [
    { type: 'fox', outputGate: false }, { type: 'fpa', walk: 'fox', outputGate: false }, { type: 'full' }, { type: 'fpa', walk: 'tanh', outputGate: true },
  ]);
  assert.equal(c.positions, 'none');
  assert.equal(parseModelConfig({ attention: { type: 'fox' }, positions: 'rope' }).positions, 'rope', 'an explicit value wins');
  assert.equal(parseModelConfig({ attention: { type: 'full' } }).positions, DEFAULT_CONFIG.positions, 'full attention keeps the default');
  // A config that does not touch attention keeps its base's positions (a checkpoint's saved config, flags over a file).
  const base = parseModelConfig({ attention: 'fox', positions: 'learned' });
  assert.equal(parseModelConfig({ dModel: 32 }, base).positions, 'learned');
});

test('config: bad fox / fpa options are ConfigErrors naming the key and the value', () => {
  const bad: [unknown, RegExp][] = [
    [{ type: 'fox', window: 8 }, /attention\[0\]: unknown key 'window' for attention type "fox"; expected outputGate/],
    [{ type: 'fpa', lambda: 2 }, /attention\[0\]: unknown key 'lambda' for attention type "fpa"; expected walk, outputGate/],
    [{ type: 'fpa', walk: 'cubic' }, /attention\[0\]: 'walk' = "cubic": expected one of "fox", "linear", "tanh"/],
    [{ type: 'fox', outputGate: 'yes' }, /attention\[0\]: 'outputGate' = "yes": expected true or false/],
    [{ type: 'full', outputGate: true }, /unknown key 'outputGate' for attention type "full"/],
    [{ type: 'mamba' }, /'type' = "mamba": expected one of "full", "local", "fox", "fpa"/],
  ];
  for (const [a, re] of bad) assert.throws(() => parseModelConfig({ attention: a }), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), JSON.stringify(a));
});

test('parameters: FoX and FPA layers own their gates under the block\'s name, with the documented init', async () => {
  const m = model(config('mix full / fox / fpa'));
  const names = m.namedParameters().map(([n]) => n).filter((n) => /^layers\.\d\.attn\./.test(n));
  assert.deepEqual(names, [
    'layers.0.attn.q.weight', 'layers.0.attn.k.weight', 'layers.0.attn.v.weight', 'layers.0.attn.o.weight',
    'layers.1.attn.q.weight', 'layers.1.attn.k.weight', 'layers.1.attn.v.weight', 'layers.1.attn.o.weight',
    'layers.1.attn.fgate.weight', 'layers.1.attn.fgate.bias',
    'layers.2.attn.q.weight', 'layers.2.attn.k.weight', 'layers.2.attn.v.weight', 'layers.2.attn.o.weight',
    'layers.2.attn.fpa.rho', 'layers.2.attn.fpa.kappa', 'layers.2.attn.fpa.walk.weight', 'layers.2.attn.fpa.walk.bias',
    'layers.2.attn.fpa.field.weight', 'layers.2.attn.fpa.field.bias', 'layers.2.attn.fpa.level.weight', 'layers.2.attn.fpa.level.bias',
  ]);
  const p = Object.fromEntries(m.namedParameters());
  assert.ok(m.layers[1].attn.mechanism instanceof FoxAttention && m.layers[2].attn.mechanism instanceof FpaAttention);
  const allZero = async (n: string) => (await p[n].data()).every((x) => x === 0);
  for (const n of ['fpa.field.weight', 'fpa.field.bias', 'fpa.level.weight', 'fpa.level.bias', 'fpa.rho', 'fpa.walk.bias']) assert.ok(await allZero(`layers.2.attn.${n}`), n);
  assert.ok(!(await allZero('layers.2.attn.fpa.walk.weight')));
  assert.ok(await allZero('layers.1.attn.fgate.bias'));
  const lambda = await (m.layers[2].attn.mechanism as FpaAttention).lambda().data();
  for (const l of lambda) assert.ok(Math.abs(l - 1) < 1e-6, `λ at init ${l}`);
  m.dispose();
});

for (const name of Object.keys(VARIANTS)) {
  test(`${name}: every parameter gets a finite, non-zero gradient`, async () => {
    const m = model(config(name));
    const x = ids(2, 11, 3), y = ids(2, 11, 4);
    const loss = m.loss(x, y);
    const l0 = (await loss.data())[0];
    assert.ok(Math.abs(l0 - Math.log(40)) < 0.5, `initial loss ${l0} near ln 40`);
    fon.backward(loss);
    for (const [n, t] of m.namedParameters()) {
      assert.ok(t.grad, `${n} has a gradient`);
      const g = await t.grad!.data();
      assert.ok(g.every(Number.isFinite), `${n}: finite`);
      assert.ok(g.some((v) => v !== 0), `${n}: not all zero`);
    }
    m.dispose();
  });

  test(`${name}: decoding through the KV cache (prompt of 4, then one token at a time) equals the prefill logits`, async () => {
    const cfg = config(name);
    const m = model(cfg);
    const t = 13;
    const x = ids(1, t, 9);
    const host = (await x.data()) as Int32Array;
    const full = fon.noGrad(() => m.forward(x));
    const cache = new KvCache(cfg, 1, 20, cpu);
    const step = (a: number, b: number) => fon.noGrad(() => m.forward(fon.tensor(host.slice(a, b), [1, b - a], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: a }));
    const rows = [step(0, 4)];
    for (let p = 4; p < t; p++) rows.push(step(p, p + 1));
    const d = await maxDiff(fon.concat(rows, 1), full);
    assert.ok(d < 2e-5, `max |Δ| ${d}`);
    cache.dispose();
    m.dispose();
  });
}

test('a few AdamW steps lower the loss on a repeated text (fox, fpa and a mix with full layers)', async () => {
  const text = Array.from({ length: 6 }, () => 'abcabdabe').join('');
  const codes = Array.from(text, (ch) => ch.charCodeAt(0) - 90); // 7 … 11, inside the vocabulary of 40
  const x = fon.tensor(Int32Array.from(codes.slice(0, 20)), [1, 20], { backend: cpu, dtype: 'i32' });
  const y = fon.tensor(Int32Array.from(codes.slice(1, 21)), [1, 20], { backend: cpu, dtype: 'i32' });
  for (const name of ['fox', 'fpa fox walk', 'mix full / fox / fpa']) {
    const m = model(config(name));
    const opt = new AdamW(m.parameters(), { lr: 1e-2, weightDecay: 0 });
    const losses: number[] = [];
    for (let s = 0; s < 8; s++) {
      opt.zeroGrad();
      const loss = m.loss(x, y);
      losses.push((await loss.data())[0]);
      fon.backward(loss);
      loss.dispose();
      opt.step();
    }
    assert.ok(losses[7] < losses[0] - 0.5, `${name}: loss ${losses[0].toFixed(3)} → ${losses[7].toFixed(3)}`);
    m.dispose();
  }
});

test('FPA with the "fox" walk at init (u = w = 0, λ = 1) gives the FoX model\'s logits from the same weights', async () => {
  const foxCfg = parseModelConfig({ ...BASE, nLayers: 3, attention: 'fox' });
  const fox = model(foxCfg, 11);
  // FoX's forget-gate rows become FPA's walk rows; every other weight is shared; field, level and ρ keep their zero init.
  const weights: Record<string, fon.Tensor> = {};
  for (const [n, t] of fox.namedParameters()) weights[n.replace('.fgate.', '.fpa.walk.')] = t;
  const fpaCfg = parseModelConfig({ ...BASE, nLayers: 3, attention: 'fpa' });
  const f = new ParamFactory({ backend: cpu, seed: 999, weights: new Proxy(weights, {
    get: (w, k: string) => w[k] ?? (/\.fpa\.(field|level)\.|\.fpa\.rho/.test(k) ? fon.zeros(k.endsWith('weight') ? [2, 16] : [2], { backend: cpu }) : undefined),
  }) });
  const fpa = new Decoder(fpaCfg, f);
  const x = ids(2, 15, 21);
  const d = await maxDiff(fpa.forward(x), fox.forward(x));
  assert.ok(d < 2e-5, `max |Δ| ${d}`);
  // And a trained-looking FPA (field rows non-zero) no longer is FoX: the test can fail.
  const p = Object.fromEntries(fpa.namedParameters());
  fon.noGrad(() => fon.kvWrite(fon.reshape(p['layers.0.attn.fpa.field.bias'], [1, 1, 2, 1]), fon.full([1, 1, 2, 1], -3, { backend: cpu }), 0));
  assert.ok((await maxDiff(fpa.forward(x), fox.forward(x))) > 1e-3);
  fox.dispose();
  fpa.dispose();
});

test('KV-cache bytes: k and v at the element size plus FoX\'s c per query head and FPA\'s φ, ℓ, W per KV head in f32', () => {
  const c = parseModelConfig({ ...BASE, nLayers: 3, nHeads: 4, nKvHeads: 2, attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa' }] });
  const kv = 2 * 2 * 8; // k and v elements per layer per token
  assert.equal(kvBytesPerToken(c, 4), 3 * kv * 4 + 4 * (4 + 3 * 2));
  assert.equal(kvBytesPerToken(c, 2), 3 * kv * 2 + 4 * (4 + 3 * 2));
  const m = model(c);
  for (let i = 0; i < 3; i++) assert.equal(layoutBytesPerToken(mechanismCache(layerAttention(c, i), modelDims(c)), modelDims(c), 2), kv * 2 + 4 * [0, 4, 6][i]);
  for (const dtype of ['f32', 'f16'] as const) {
    const cache = new KvCache(c, 3, 10, cpu, dtype);
    assert.equal(cache.bytes, 3 * 10 * kvBytesPerToken(c, dtype === 'f32' ? 4 : 2));
    assert.deepEqual(Object.keys(cache.layers[1].state!), ['c']);
    assert.deepEqual(cache.layers[2].state!.phi.shape, [3, 2, 10, 1]);
    assert.equal(cache.layers[2].state!.walk.dtype, 'f32');
    assert.equal(cache.layers[0].state, undefined);
    cache.dispose();
  }
  m.dispose();
});

test('FON checkpoint round trip: parameter names, config and logits survive saveCheckpoint / loadModel', async () => {
  const cfg = parseModelConfig({ ...VARIANTS['mix full / fox / fpa'], vocabSize: 257 }); // the byte tokenizer's size
  const m = model(cfg);
  const dir = mkdtempSync(join(tmpdir(), 'fon-foxfpa-'));
  await saveCheckpoint(dir, 'step-000001', m, byteTokenizer());
  const loaded = await loadModel(dir, cpu);
  assert.deepEqual(loaded.config, cfg);
  assert.deepEqual(loaded.model.namedParameters().map(([n]) => n), m.namedParameters().map(([n]) => n));
  const x = ids(1, 9, 5);
  assert.equal(await maxDiff(loaded.model.forward(x), m.forward(x)), 0);
  loaded.model.dispose();
  m.dispose();
});

test('Hugging Face export refuses fox and fpa layers with an UnsupportedError naming them', () => {
  for (const attention of [{ type: 'fox' }, [{ type: 'full' }, { type: 'fpa' }]]) {
    const c = parseModelConfig({ ...BASE, attention, positions: 'rope', qkNorm: true });
    assert.throws(() => hfArchitectureFor(c), (e: unknown) => e instanceof fon.UnsupportedError && /'attention' = .*"(fox|fpa)" layers \([^)]*\) have no Hugging Face counterpart/.test((e as Error).message));
  }
});
