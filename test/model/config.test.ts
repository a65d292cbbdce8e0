import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, DEFAULT_CONFIG, parseModelConfig, kvBytesPerToken } from '../../src/model/config.ts';
import { preset } from '../../src/model/presets.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { initBackend } from '../../src/index.ts';

test('config: overrides merge over the defaults and attention entries are normalised', () => {
  const c = parseModelConfig({ dModel: 64, attention: ['full', { type: 'local', window: 16 }, 'full', 'full'] });
  assert.equal(c.dModel, 64);
  assert.equal(c.nLayers, DEFAULT_CONFIG.nLayers);
  assert.deepEqual(c.attention[1], { type: 'local', window: 16 });
  assert.deepEqual(c.attention[0], { type: 'full' });
});

test('config: bad input names the key and the value', () => {
  const cases: [unknown, RegExp][] = [
    [{ dModle: 64 }, /unknown key 'dModle' \(value 64\)/],
    [{ nLayers: 2.5 }, /'nLayers' = 2\.5: expected an integer/],
    [{ mlp: 'relu' }, /'mlp' = "relu": expected one of "swiglu", "gelu"/],
    [{ qkNorm: 'yes' }, /'qkNorm' = "yes": expected true or false/],
    [{ nHeads: 6, nKvHeads: 4 }, /'nKvHeads' = 4 must divide 'nHeads' = 6/],
    [{ headDim: 33 }, /'headDim' = 33 must be even for RoPE/],
    [{ dModel: 0 }, /'dModel' = 0: expected a positive integer/],
    [{ attention: [{ type: 'local' }] }, /attention\[0\]: 'window' = undefined: expected a positive integer/],
    [{ attention: [{ type: 'mamba' }] }, /'type' = "mamba": expected one of "full", "local"/],
    [{ attention: [{ type: 'full', window: 3 }] }, /unknown key 'window' for attention type "full"/],
    [{ attention: ['full', 'full'] }, /'attention' has 2 entries; expected 1 or nLayers = 4/],
    [[1, 2], /expected a JSON object/],
  ];
  for (const [json, re] of cases) assert.throws(() => parseModelConfig(json, DEFAULT_CONFIG, 'my.json'), (e: Error) => e instanceof ConfigError && e.message.startsWith('my.json: ') && re.test(e.message), JSON.stringify(json));
});

test('presets: tiny, small and base are about 1M, 20M and 100M parameters', async () => {
  const cpu = await initBackend('cpu');
  const counts: Record<string, number> = {};
  for (const name of ['tiny', 'small']) {
    const m = new Decoder(preset(name), new ParamFactory({ backend: cpu, seed: 1 }));
    counts[name] = m.parameterCount();
    m.dispose();
  }
  // base is counted from its shapes (allocating 85M parameters on the CPU is slow in a test).
  const b = preset('base');
  const perLayer = 4 * b.dModel * b.nHeads * b.headDim + 3 * b.dModel * b.mlpHidden + 2 * b.dModel;
  counts.base = b.nLayers * perLayer + b.vocabSize * b.dModel + b.dModel;
  assert.ok(counts.tiny > 0.7e6 && counts.tiny < 1.3e6, `tiny ${counts.tiny}`);
  assert.ok(counts.small > 15e6 && counts.small < 25e6, `small ${counts.small}`);
  assert.ok(counts.base > 80e6 && counts.base < 120e6, `base ${counts.base}`);
  assert.throws(() => preset('huge'), /unknown preset 'huge'; expected one of tiny, small, base/);
});

test('config: KV-cache bytes per token', () => {
  const c = parseModelConfig({ nLayers: 2, nHeads: 8, nKvHeads: 2, headDim: 16, attention: ['full'] });
  assert.equal(kvBytesPerToken(c, 2), 2 * 2 * 2 * 16 * 2);
});

test('config: inherited property names are unknown keys; absurd sizes are refused before anything is allocated', () => {
  for (const k of ['toString', 'constructor', 'hasOwnProperty']) {
    assert.throws(() => parseModelConfig(JSON.parse(`{"${k}": 3}`)), new RegExp(`unknown key '${k}'`));
  }
  assert.throws(() => parseModelConfig(JSON.parse('{"__proto__": {"dModel": 8}}')), /unknown key '__proto__'/);
  assert.throws(() => parseModelConfig({ contextLength: 1e9 }), /'contextLength' = 1000000000: expected a positive integer ≤ 2097152/);
  assert.throws(() => parseModelConfig({ vocabSize: 0 }), /'vocabSize' = 0: expected a positive integer ≤ 16777216/);
});
