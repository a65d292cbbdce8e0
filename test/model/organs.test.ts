/**
 * The 'organs' config key (model/organs.ts) and the draft layer count's checks, in the config and
 * in draft–revise decoding: defaults, every bad value named, D within [1, L − 1].
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';


const cpu = await fon.initBackend('cpu');
const base = { dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32 };

test('parseOrgans: null is none, defaults fill the weights, the given ones are kept', () => {
  assert.equal(fon.parseOrgans(null, 'c'), null);
  assert.deepEqual(fon.parseOrgans({ draftLayers: 2 }, 'c'), { draftLayers: 2, ...fon.ORGANS_DEFAULTS });
  assert.deepEqual(fon.parseOrgans({ draftLayers: 1, exitLoss: 0, distill: 1.5, layerDropout: 0.25 }, 'c'), { draftLayers: 1, exitLoss: 0, distill: 1.5, layerDropout: 0.25 });
  assert.equal(fon.parseModelConfig(base).organs, undefined, 'off is absent, so the config reads and is written as before');
  assert.equal(fon.parseModelConfig({ ...base, organs: { draftLayers: 2 } }).organs?.draftLayers, 2);
});

test('parseOrgans: every bad value is a ConfigError naming the key, the value and what was expected', () => {
  const bad: [unknown, RegExp][] = [
    [3, /^c: 'organs' = 3: expected null or \{"draftLayers": D/],
    [[1], /^c: 'organs' = \[1\]: expected null or/],
    [{ draftLayers: 1, depth: 2 }, /^c: 'organs': unknown key 'depth'; expected draftLayers, exitLoss, distill, layerDropout$/],
    [{}, /^c: 'organs': 'draftLayers' = undefined: expected an integer D with 1 ≤ D ≤ nLayers − 1$/],
    [{ draftLayers: 1.5 }, /'draftLayers' = 1\.5: expected an integer/],
    [{ draftLayers: 1, exitLoss: -0.1 }, /^c: 'organs': 'exitLoss' = -0\.1: expected a finite number ≥ 0$/],
    [{ draftLayers: 1, distill: 'x' }, /'distill' = "x": expected a finite number ≥ 0$/],
    [{ draftLayers: 1, layerDropout: 1 }, /^c: 'organs': 'layerDropout' = 1: expected a number in \[0, 1\)$/],
  ];
  for (const [v, re] of bad) {
    assert.throws(() => fon.parseOrgans(v, 'c'), (e: unknown) => e instanceof fon.ConfigError && re.test(e.message), `${JSON.stringify(v)}`);
  }
});

test('checkDraftLayers: D in [1, L − 1] in the config and in draft–revise decoding', () => {
  assert.equal(fon.checkDraftLayers(2, 3, 'd'), 2);
  assert.throws(() => fon.checkDraftLayers(3, 3, 'd'), (e: unknown) => e instanceof fon.ConfigError && /^d = 3: expected an integer in \[1, 2\] \(the draft organ is layers 0 … D−1 of the model's 3, and the revise organ needs at least one\)$/.test(e.message));
  assert.throws(() => fon.checkDraftLayers(0, 3, 'd'), /d = 0: expected an integer in \[1, 2\]/);
  assert.throws(() => fon.parseModelConfig({ ...base, organs: { draftLayers: 3 } }), (e: unknown) => e instanceof fon.ConfigError && /organs.draftLayers' = 3: expected an integer in \[1, 2\]/.test(e.message));

  const plain = new fon.Decoder(fon.parseModelConfig(base), new fon.ParamFactory({ backend: cpu, seed: 1 }));
  assert.throws(() => fon.draftLayersOf(plain, {}), (e: unknown) => e instanceof fon.ArgumentError && /the model has no organs; give the draft layer count D/.test(e.message));
  assert.equal(fon.draftLayersOf(plain, { draftLayers: 1 }), 1);
  assert.throws(() => fon.draftLayersOf(plain, { draftLayers: 5 }), (e: unknown) => e instanceof fon.ArgumentError && /draftLayers = 5: expected an integer in \[1, 2\]/.test(e.message));
  const organs = new fon.Decoder(fon.parseModelConfig({ ...base, organs: { draftLayers: 2 } }), new fon.ParamFactory({ backend: cpu, seed: 1 }));
  assert.equal(fon.draftLayersOf(organs, {}), 2);
  assert.equal(fon.draftLayersOf(organs, { draftLayers: 1 }), 1, 'the option overrides the config');
  plain.dispose?.(); organs.dispose?.();
});
