/**
 * Training a model with Focus layers (attention/focus): the ParamFactory makes fresh the Focus
 * tensors a checkpoint lacks when asked (freshMissing: seeded as a fresh model's, every other
 * missing or misshapen tensor still an error); the Trainer's optimizer takes only parameters with
 * requiresGrad (never the log-normalizers, updated in place), so a Focus model trains whole, and
 * with the rest frozen the frozen tensors stay bit for bit and the optimizer state indexes W_g and
 * C alone (a resume that freezes the same loads it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { focusLayers } from '../../src/attention/focus/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { DEFAULT_TRAIN, Trainer, trainableParameters, type TrainConfig } from '../../src/train/trainer.ts';
import { freezeAllBut, isComposedParameter as isFocusParameter } from '../../src/cli/compose.ts';
import { formulaBatches } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const cfg = parseModelConfig({
  vocabSize: 30, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16,
  attention: [{ type: 'focus', groups: 4, topK: 1, groupDim: 4, window: 4 }, { type: 'full' }],
});
const batches = formulaBatches(2, 16, (g) => (g * 7 + (g >> 3)) % 30, (g) => (g * 11 + 3) % 30);
const tc: TrainConfig = { ...DEFAULT_TRAIN, steps: 3, batchSize: 2, context: 16, warmup: 1, lr: 1e-2, minLr: 1e-3 };
const bytes = async (t: fon.Tensor) => Buffer.from(((await t.data()) as Float32Array).buffer);

test('ParamFactory freshMissing: the Focus tensors a checkpoint lacks start as a fresh model\'s of the same seed; others missing or misshapen still fail by name', async () => {
  const whole = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 3 }));
  const stored = Object.fromEntries(whole.namedParameters().filter(([n]) => !isFocusParameter(n)));
  const f = new ParamFactory({ backend: cpu, weights: stored, seed: 3, freshMissing: isFocusParameter, source: 'ckpt' });
  const grown = new Decoder(cfg, f);
  assert.deepEqual(f.freshNames, ['layers.0.attn.focus.proj.weight', 'layers.0.attn.focus.centroids', 'layers.0.attn.focus.lognorm']);
  const mine = new Map(grown.namedParameters());
  for (const [name, p] of whole.namedParameters()) assert.ok((await bytes(p)).equals(await bytes(mine.get(name)!)), name);
  assert.equal(focusLayers(grown)[0][1].lognorm.requiresGrad, false);
  grown.dispose();

  const strict = new ParamFactory({ backend: cpu, weights: stored, source: 'ckpt' });
  assert.throws(() => new Decoder(cfg, strict), /^ShapeError: ckpt: tensor 'layers\.0\.attn\.focus\.proj\.weight' is missing \(expected shape \[4,16\]\)$/);
  strict.disposeMade();
  const onlyCentroids = new ParamFactory({ backend: cpu, weights: stored, source: 'ckpt', freshMissing: (n) => n.endsWith('.centroids') });
  assert.throws(() => new Decoder(cfg, onlyCentroids), /tensor 'layers\.0\.attn\.focus\.proj\.weight' is missing/);
  onlyCentroids.disposeMade();
  // A checkpoint whose centroids do not match its config: present, so loaded, so refused.
  const wrong = { ...Object.fromEntries(whole.namedParameters()), 'layers.0.attn.focus.centroids': fon.zeros([3, 4], { backend: cpu }) };
  const mismatched = new ParamFactory({ backend: cpu, weights: wrong, seed: 3, freshMissing: isFocusParameter, source: 'ckpt' });
  assert.throws(() => new Decoder(cfg, mismatched), /^ShapeError: ckpt: tensor 'layers\.0\.attn\.focus\.centroids' has shape \[3,4\], the config expects \[4,4\]$/);
  mismatched.disposeMade();
  wrong['layers.0.attn.focus.centroids'].dispose();
  whole.dispose();
});

test('Trainer on a Focus model: the optimizer leaves out the log-normalizers (they follow Sinkhorn in place) and trains the rest', async () => {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const [[, f]] = focusLayers(m);
  const tr = new Trainer(m, batches, tc);
  assert.equal(tr.optimizer.params.length, m.parameters().length - 1);
  assert.ok(!tr.optimizer.params.includes(f.lognorm));
  assert.deepEqual(trainableParameters(m), tr.optimizer.params);
  const q0 = await bytes(m.layers[1].attn.q.weight), c0 = await bytes(f.centroids), u0 = await bytes(f.lognorm);
  for (let s = 0; s < 2; s++) assert.ok(Number.isFinite((await tr.trainStep()).loss));
  assert.ok(!(await bytes(m.layers[1].attn.q.weight)).equals(q0), 'the full layer trained');
  assert.ok(!(await bytes(f.centroids)).equals(c0), 'the centroids trained');
  assert.ok(!(await bytes(f.lognorm)).equals(u0), 'the log-normalizers moved in place');
  tr.dispose();
  m.dispose();
});

test('Trainer with all but Focus frozen: W_g and C alone in the optimizer, the rest bit for bit, the state loads into a trainer frozen the same', async () => {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const [[, f]] = focusLayers(m);
  const { trained, total } = freezeAllBut('focus', m);
  assert.equal(trained, 4 * 16 + 4 * 4);
  assert.equal(total, m.parameterCount());
  const tr = new Trainer(m, batches, tc);
  assert.deepEqual(tr.optimizer.params, [f.centroids, f.proj.weight], 'in the model\'s order');
  const frozen = await Promise.all(m.namedParameters().filter(([n]) => !isFocusParameter(n)).map(async ([n, p]) => [n, await bytes(p)] as const));
  const w0 = await bytes(f.proj.weight);
  for (let s = 0; s < 2; s++) assert.ok((await tr.trainStep()).gradNorm > 0);
  const now = new Map(m.namedParameters());
  for (const [n, b] of frozen) assert.ok((await bytes(now.get(n)!)).equals(b), `${n} frozen`);
  assert.ok(!(await bytes(f.proj.weight)).equals(w0), 'W_g trained');

  const state = tr.optimizer.stateDict();
  assert.deepEqual(Object.keys(state.tensors).sort(), ['m.0', 'm.1', 'v.0', 'v.1']);
  const again = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  freezeAllBut('focus', again);
  const tr2 = new Trainer(again, batches, tc);
  tr2.optimizer.loadStateDict(state);
  tr2.dispose();
  again.dispose();
  tr.dispose();
  m.dispose();
});
