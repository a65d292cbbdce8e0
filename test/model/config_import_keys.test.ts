/** The config keys added for imported models: ropeScaling (RoPE frequency scaling) and qkvBias (Qwen2). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initBackend } from '../../src/index.ts';
import { ConfigError, DEFAULT_CONFIG, parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { ropeFrequencies, ropeTables } from '../../src/nn/rope_tables.ts';

test('config: ropeScaling and qkvBias default to off and are validated by name', () => {
  assert.equal(DEFAULT_CONFIG.ropeScaling, null);
  assert.equal(DEFAULT_CONFIG.qkvBias, false);
  const llama3 = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 };
  assert.deepEqual(parseModelConfig({ ropeScaling: llama3 }).ropeScaling, llama3);
  assert.deepEqual(parseModelConfig({ ropeScaling: { type: 'linear', factor: 2 } }).ropeScaling, { type: 'linear', factor: 2 });
  assert.equal(parseModelConfig({ qkvBias: true }).qkvBias, true);
  const cases: [unknown, RegExp][] = [
    [{ ropeScaling: 'llama3' }, /'ropeScaling' = "llama3": expected null, \{"type": "linear"/],
    [{ ropeScaling: { type: 'yarn', factor: 4 } }, /'ropeScaling': 'type' = "yarn": expected one of "linear", "llama3"/],
    [{ ropeScaling: { type: 'linear', factor: 2, beta: 1 } }, /'ropeScaling': unknown key 'beta' for type "linear"; expected factor/],
    [{ ropeScaling: { type: 'linear', factor: 0 } }, /'ropeScaling': 'factor' = 0: expected a positive number/],
    [{ ropeScaling: { ...llama3, originalContextLength: 10.5 } }, /'ropeScaling': 'originalContextLength' = 10\.5: expected a positive integer/],
    [{ ropeScaling: { ...llama3, lowFreqFactor: 4 } }, /'highFreqFactor' = 4 must be greater than 'lowFreqFactor' = 4/],
    [{ ropeScaling: { type: 'linear', factor: 2 }, positions: 'learned' }, /'ropeScaling' = \{"type":"linear","factor":2\} needs positions "rope", not "learned"/],
    [{ qkvBias: 1 }, /'qkvBias' = 1: expected true or false/],
    [{ qkvBias: true, bias: true }, /'qkvBias' = true with 'bias' = true: 'bias' already puts biases on q, k and v/],
  ];
  for (const [json, re] of cases) assert.throws(() => parseModelConfig(json, DEFAULT_CONFIG, 'my.json'), (e: Error) => e instanceof ConfigError && e.message.startsWith('my.json: ') && re.test(e.message), JSON.stringify(json));
});

test('rope: plain frequencies are θ^(−2j/D) exactly; linear divides; llama3 keeps, stretches and blends by wavelength', () => {
  const plain = ropeFrequencies(16, 500000);
  for (let j = 0; j < 8; j++) assert.equal(plain[j], Math.pow(500000, (-2 * j) / 16));
  const linear = ropeFrequencies(16, 500000, { type: 'linear', factor: 4 });
  for (let j = 0; j < 8; j++) assert.equal(linear[j], plain[j] / 4);
  // L = 64, lo = 1, hi = 4: wavelengths below 16 kept, above 64 divided by 8, between blended.
  const scaled = ropeFrequencies(16, 500000, { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 64 });
  const bands = Array.from(plain, (w) => { const l = (2 * Math.PI) / w; return l < 16 ? 'keep' : l > 64 ? 'stretch' : 'blend'; });
  assert.deepEqual(bands, ['keep', 'blend', 'stretch', 'stretch', 'stretch', 'stretch', 'stretch', 'stretch']);
  assert.equal(scaled[0], plain[0]);
  for (let j = 2; j < 8; j++) assert.equal(scaled[j], plain[j] / 8);
  const s = (64 / ((2 * Math.PI) / plain[1]) - 1) / 3;
  assert.ok(s > 0 && s < 1);
  assert.ok(Math.abs(scaled[1] - ((1 - s) * plain[1] / 8 + s * plain[1])) < 1e-15);
});

test('rope tables without scaling are the plain p·θ^(−2j/D) tables bit for bit (FON checkpoints unchanged)', async () => {
  const cpu = await initBackend('cpu');
  const { cos, sin } = ropeTables(50, 8, 10000, cpu);
  const c = await cos.data(), s = await sin.data();
  for (let p = 0; p < 50; p++) {
    for (let j = 0; j < 4; j++) {
      const a = p * Math.pow(10000, (-2 * j) / 8);
      assert.equal(c[p * 4 + j], Math.fround(Math.cos(a)));
      assert.equal(s[p * 4 + j], Math.fround(Math.sin(a)));
    }
  }
  cos.dispose(); sin.dispose();
});

test('qkvBias puts biases on q, k and v only', async () => {
  const cpu = await initBackend('cpu');
  const m = new Decoder(parseModelConfig({ vocabSize: 20, dModel: 8, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 4, mlpHidden: 12, contextLength: 8, qkvBias: true }), new ParamFactory({ backend: cpu, seed: 1 }));
  const biases = m.namedParameters().map(([n]) => n).filter((n) => n.endsWith('.bias'));
  assert.deepEqual(biases, ['layers.0.attn.q.bias', 'layers.0.attn.k.bias', 'layers.0.attn.v.bias']);
  assert.deepEqual(m.layers[0].attn.k.bias?.shape, [4]);
  m.dispose();
});
