import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { DEFAULT_TRAIN, Trainer, type TrainConfig } from '../../src/train/trainer.ts';
import { AdamW } from '../../src/train/optim.ts';
import { formulaBatches } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const cfg = parseModelConfig({ vocabSize: 30, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16 });

/** Step s uses rows 4s … 4s+3 of a fixed random stream of sequences; `rows` per batchAt call. */
const batches = (rows: number, t: number) => formulaBatches(rows, t, (g) => (g * 7 + (g >> 3)) % 30, (g) => (g * 11 + 3) % 30);

async function run(rows: number, accumulate: number, steps: number): Promise<{ losses: number[]; params: Float32Array[] }> {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const tc: TrainConfig = { ...DEFAULT_TRAIN, steps, batchSize: rows, accumulate, context: 16, warmup: 1, lr: 1e-2, minLr: 1e-3 };
  const tr = new Trainer(m, batches(rows, 16), tc);
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) losses.push((await tr.trainStep()).loss);
  const params = await Promise.all(m.parameters().map(async (p) => (await p.data()) as Float32Array));
  tr.dispose();
  m.dispose();
  return { losses, params };
}

test('trainer: 2 accumulated micro-batches of 2 equal one batch of 4', async () => {
  const a = await run(4, 1, 3);
  const b = await run(2, 2, 3);
  a.losses.forEach((l, i) => assert.ok(Math.abs(l - b.losses[i]) < 1e-5, `step ${i}: ${l} vs ${b.losses[i]}`));
  a.params.forEach((p, i) => p.forEach((v, j) => assert.ok(Math.abs(v - b.params[i][j]) < 1e-5, `param ${i}[${j}]`)));
  const init = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const w0 = (await init.parameters()[1].data()) as Float32Array;
  assert.ok(w0.some((v, j) => Math.abs(v - a.params[1][j]) > 1e-4), 'the parameters moved');
  init.dispose();
});

test('trainer: bad hyper-parameters are named', () => {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 32 }), /context 32 passes the model's context length 16/);
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 16, steps: 10, warmup: 20 }), /^ArgumentError: train: 'warmup' = 20: expected at most 'steps' = 10$/);
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 16, lr: 1e-4, minLr: 1e-3 }), /need lr > 0 and 0 ≤ minLr ≤ lr/);
  // The rules a resumed trainer.json is held to hold for a config given in code too.
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 16, beta1: 1 }), /^ArgumentError: train: 'beta1' = 1: expected a number ≥ 0 and < 1$/);
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 16, gradClip: NaN }), /^ArgumentError: train: 'gradClip' = NaN: expected a number ≥ 0$/);
  assert.throws(() => new Trainer(m, batches(2, 16), { ...DEFAULT_TRAIN, context: 16, steps: 2.5 }), /^ArgumentError: train: 'steps' = 2.5: expected an integer ≥ 1$/);
  m.dispose();
});

test('AdamW: decayMask leaves unmasked parameters without weight decay', async () => {
  const w = fon.ones([3], { backend: cpu, requiresGrad: true });
  const b = fon.ones([3], { backend: cpu, requiresGrad: true });
  const opt = new AdamW([w, b], { lr: 0.1, weightDecay: 0.5 });
  opt.decayMask = [true, false];
  w.grad = fon.zeros([3], { backend: cpu });
  b.grad = fon.zeros([3], { backend: cpu });
  opt.step();
  assert.deepEqual(Array.from((await w.data()) as Float32Array).map((x) => +x.toFixed(6)), [0.95, 0.95, 0.95]);
  assert.deepEqual(Array.from((await b.data()) as Float32Array), [1, 1, 1]);
  opt.decayMask = [true];
  assert.throws(() => opt.step(), /decayMask has 1 entries for 2 parameters/);
  opt.dispose();
});
