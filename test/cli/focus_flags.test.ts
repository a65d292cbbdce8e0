/**
 * The Focus helpers of the CLI (src/cli/focus.ts) in-process: --focus-top-k, the dominance and
 * collapse figures from given group counts and their lines (--add and --train-only: compose.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { focusLayers } from '../../src/attention/focus/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { keep } from '../../src/tensor/scope.ts';
import { UsageError } from '../../src/cli/args.ts';
import { ConfigError } from '../../src/errors.ts';
import { applyFocusTopK, focusDominanceLines, focusLogFields, measureFocusDominance } from '../../src/cli/focus.ts';

const cpu = await fon.initBackend('cpu');
const small = { vocabSize: 30, dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16 };

test('--focus-top-k: an integer (UsageError), on a model with Focus layers (UsageError), in [1, K] (setFocusInference\'s ConfigError)', () => {
  const plain = new Decoder(parseModelConfig(small), new ParamFactory({ backend: cpu, seed: 1 }));
  assert.equal(applyFocusTopK('eval', undefined, plain), undefined);
  assert.throws(() => applyFocusTopK('eval', '1', plain), (e) => e instanceof UsageError && e.message === 'eval: --focus-top-k 1: the model has no Focus layers (the flag sets the groups a token keeps in Focus layers)');
  plain.dispose();
  const m = new Decoder(parseModelConfig({ ...small, attention: [{ type: 'focus', groups: 4, topK: 1 }] }), new ParamFactory({ backend: cpu, seed: 1 }));
  assert.throws(() => applyFocusTopK('generate', '1.5', m), (e) => e instanceof UsageError && /generate: --focus-top-k "1\.5": expected an integer/.test(e.message));
  for (const bad of ['0', '5']) assert.throws(() => applyFocusTopK('eval', bad, m), (e) => e instanceof ConfigError && e.message.startsWith(`focus top-k ${bad}: layer 0 has K = 4 groups; expected k in [1, 4]`));
  assert.equal(applyFocusTopK('eval', '3', m), 3);
  assert.deepEqual(focusLayers(m).map(([, f]) => f.topK), [3, 3, 3]);
  m.dispose();
});

test('measureFocusDominance: the largest group\'s share per layer from the counts, its mean, 1/K, collapse when one group holds ≥ 90% of the tokens; the counts are reset', async () => {
  const cfg = parseModelConfig({ ...small, attention: [{ type: 'focus', groups: 4, topK: 1 }, { type: 'focus', groups: 4, topK: 2 }, { type: 'focus', groups: 4, topK: 1 }] });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 1 }));
  const layers = focusLayers(m);
  const set = (i: number, counts: number[]) => { layers[i][1].stats.counts = keep(fon.tensor(new Float32Array(counts), [counts.length], { backend: cpu })); };
  set(0, [25, 25, 25, 25]); // balanced, k = 1
  set(1, [95, 40, 35, 30]); // k = 2: 100 tokens, group 0 holds 95% of them (dominance 47.5%)
  set(2, [97, 1, 1, 1]); // k = 1: collapsed
  const d = (await measureFocusDominance(m))!;
  assert.deepEqual(d.layers.map((l) => [l.layer, l.dominance, l.tokenShare]), [[0, 0.25, 0.25], [1, 0.475, 0.95], [2, 0.97, 0.97]]);
  assert.ok(Math.abs(d.mean - (0.25 + 0.475 + 0.97) / 3) < 1e-12);
  assert.equal(d.ideal, 0.25);
  assert.deepEqual(d.collapsed, [1, 2]);
  assert.deepEqual(focusDominanceLines(d), [
    'focus: dominance 56.5% (ideal 25.0%), layers 25.0–97.0%',
    'focus: layer 1 collapsed: dominance 47.5%, its largest group holds 95.0% of the tokens (one group holds nearly every token)',
    'focus: layer 2 collapsed: dominance 97.0% (one group holds nearly every token)',
  ]);
  assert.deepEqual(focusLogFields(d), { focusDominance: d.mean, focusLayerDominance: { 0: 0.25, 1: 0.475, 2: 0.97 }, focusCollapsed: [1, 2] });
  for (const [, f] of layers) assert.equal(f.stats.counts, undefined, 'reset');
  assert.equal(await measureFocusDominance(m), null, 'nothing counted since');
  // k = K: every token is in every group, which is no collapse.
  set(0, [10, 10, 10, 10]);
  layers[0][1].override = { topK: 4 };
  assert.deepEqual((await measureFocusDominance(m))!.collapsed, []);
  m.dispose();
});
