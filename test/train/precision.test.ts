/**
 * Mixed-precision training (tensor/autocast.ts, train/loss_scale.ts, the Trainer's precision) on the
 * CPU backend, which computes 16-bit values exactly as rounded inputs in f32: linear and attention
 * under autocast equal the computation on rounded copies with f32 results and f32 weight gradients;
 * f16 and bf16 training track f32 training; f16's loss scale skips an overflowing step and halves,
 * doubles after its interval, and is refused where the backend lacks the precision.
 *
 *   node --import tsx --test test/train/precision.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { UnsupportedError } from '../../src/errors.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import type { PrecisionSupport } from '../../src/backend/backend.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { attention } from '../../src/ops/attention.ts';
import { cast } from '../../src/ops/cast.ts';
import { linear } from '../../src/ops/matmul.ts';
import { autocast, autocastDType } from '../../src/tensor/autocast.ts';
import { DynamicLossScale, parseLossScale } from '../../src/train/loss_scale.ts';
import { DEFAULT_TRAIN, parseTrainConfig, Trainer, type TrainConfig } from '../../src/train/trainer.ts';
import { formulaBatches } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');
const cfg = parseModelConfig({ vocabSize: 30, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16 });
const batches = () => formulaBatches(4, 16, (g) => (g * 7 + (g >> 3)) % 30, (g) => (g * 11 + 3) % 30);
const data = async (t: fon.Tensor) => Float32Array.from(await t.data() as ArrayLike<number>);

function maxDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('autocast: scopes nest and restore; f32 inside means none', () => {
  assert.equal(autocastDType(), null);
  autocast('f16', () => {
    assert.equal(autocastDType(), 'f16');
    autocast('f32', () => assert.equal(autocastDType(), null));
    autocast('bf16', () => assert.equal(autocastDType(), 'bf16'));
    assert.equal(autocastDType(), 'f16');
  });
  assert.throws(() => autocast('f16', () => { throw new Error('inside'); }), /inside/);
  assert.equal(autocastDType(), null, 'restored after a throw');
});

test('linear and attention under autocast: the product of rounded copies, an f32 result, f32 gradients', async () => {
  for (const low of ['f16', 'bf16'] as const) {
    const x = fon.randn([3, 5, 8], { seed: 1, backend: cpu, requiresGrad: true });
    const w = fon.randn([6, 8], { seed: 2, backend: cpu, requiresGrad: true });
    const y = autocast(low, () => linear(x, w));
    assert.equal(y.dtype, 'f32');
    // The reference: rounded copies multiplied in f32 (what the CPU's 16-bit matmul computes).
    const xr = cast(cast(x.detach(), low), 'f32'), wr = cast(cast(w.detach(), low), 'f32');
    const want = linear(xr, wr);
    assert.ok(maxDiff(await data(y), await data(want)) < 1e-5, `${low} linear`);
    const plain = linear(x.detach(), w.detach());
    assert.ok(maxDiff(await data(y), await data(plain)) > 0, `${low}: the inputs were rounded`);
    fon.backward(fon.sum(fon.square(y)));
    assert.equal(w.grad!.dtype, 'f32');
    assert.equal(x.grad!.dtype, 'f32');
    // d/dW Σ y² = 2 yᵀ x: with rounding, close to the f32 gradient.
    const gw = fon.matmul(fon.reshape(fon.mul(y.detach(), 2), [15, 6]), fon.reshape(x.detach(), [15, 8]), { transA: true });
    // Relative to the gradient's largest entry: the 16-bit rounding of y's gradient and of x.
    const tol = low === 'f16' ? 4e-3 : 3e-2, gwv = await data(gw), err = maxDiff(await data(w.grad!), gwv) / Math.max(...gwv.map(Math.abs));
    assert.ok(err < tol && err > 0, `${low} dW: relative error ${err}`);

    const q = fon.randn([1, 2, 7, 8], { seed: 3, backend: cpu, requiresGrad: true });
    const k = fon.randn([1, 1, 7, 8], { seed: 4, backend: cpu, requiresGrad: true });
    const v = fon.randn([1, 1, 7, 8], { seed: 5, backend: cpu, requiresGrad: true });
    const o = autocast(low, () => attention(q, k, v));
    assert.equal(o.dtype, 'f32');
    const oRef = cast(attention(cast(q.detach(), low), cast(k.detach(), low), cast(v.detach(), low)), 'f32');
    assert.ok(maxDiff(await data(o), await data(oRef)) === 0, `${low} attention is the attention of the rounded inputs`);
    fon.backward(fon.sum(o));
    for (const t of [q, k, v]) assert.equal(t.grad!.dtype, 'f32');
    for (const t of [x, w, y, xr, wr, want, plain, gw, q, k, v, o, oRef]) t.dispose();
  }
});

test('DynamicLossScale: halves on an overflow, doubles after its interval of finite steps, stays in [min, max]', () => {
  const s = new DynamicLossScale({ scale: 8, goodSteps: 0 }, 3, 2, 32);
  s.update(true); s.update(true);
  assert.deepEqual(s.state(), { scale: 8, goodSteps: 2 });
  s.update(true);
  assert.deepEqual(s.state(), { scale: 16, goodSteps: 0 });
  s.update(true); s.update(false);
  assert.deepEqual(s.state(), { scale: 8, goodSteps: 0 });
  s.update(false); s.update(false); s.update(false);
  assert.equal(s.scale, 2, 'never below min');
  for (let i = 0; i < 30; i++) s.update(true);
  assert.equal(s.scale, 32, 'never above max');
  assert.deepEqual(parseLossScale({ scale: 1024, goodSteps: 3 }, 'x'), { scale: 1024, goodSteps: 3 });
  assert.throws(() => parseLossScale({ scale: 0.5, goodSteps: 0 }, 'trainer.json: lossScale'), /trainer.json: lossScale: 'scale' = 0.5: expected a finite number ≥ 1/);
  assert.throws(() => parseLossScale({ scale: 2, goodSteps: 1.5 }, 'w'), /'goodSteps' = 1.5/);
  assert.throws(() => parseLossScale({ scale: 2, goodSteps: 1, extra: 1 }, 'w'), /unknown key 'extra'/);
});

async function train(precision: TrainConfig['precision'], steps: number, lossScale?: { scale: number; goodSteps: number }) {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const tc: TrainConfig = { ...DEFAULT_TRAIN, steps: 20, batchSize: 4, context: 16, warmup: 1, lr: 1e-2, minLr: 1e-3, precision };
  const tr = new Trainer(m, batches(), tc, lossScale);
  const results = [];
  for (let s = 0; s < steps; s++) results.push(await tr.trainStep());
  return { m, tr, results };
}

test('training in f16 and bf16 tracks f32; auto takes the CPU backend\'s fastest (f32)', async () => {
  const ref = await train('auto', 6);
  assert.equal(ref.tr.precision, 'f32');
  assert.equal(ref.tr.lossScale, null);
  for (const [p, tol] of [['f16', 0.01], ['bf16', 0.05]] as const) {
    const run = await train(p, 6);
    assert.equal(run.tr.precision, p);
    assert.equal(run.tr.lossScale !== null, p === 'f16', `${p}: loss scaling only in f16`);
    run.results.forEach((r, i) => {
      assert.ok(!r.skipped, `${p} step ${i + 1} was not skipped`);
      assert.ok(Math.abs(r.loss - ref.results[i].loss) < tol * ref.results[i].loss, `${p} step ${i + 1}: loss ${r.loss} vs f32 ${ref.results[i].loss}`);
      assert.ok(Math.abs(r.gradNorm - ref.results[i].gradNorm) < 5 * tol * ref.results[i].gradNorm, `${p} step ${i + 1}: grad norm ${r.gradNorm} vs f32 ${ref.results[i].gradNorm} (unscaled)`);
    });
    for (const w of run.m.parameters()) assert.equal(w.dtype, 'f32', 'master weights stay f32');
    run.tr.dispose(); run.m.dispose();
  }
  assert.ok(ref.results[5].loss < ref.results[0].loss, 'the loss falls');
  ref.tr.dispose(); ref.m.dispose();
});

test('f16: a step whose scaled gradients overflow is skipped (weights and optimizer untouched) and the scale halves', async () => {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const before = await Promise.all(m.parameters().map(data));
  // 2^40 times the loss overflows f16 (max 65504) in the first gradient cast.
  const tr = new Trainer(m, batches(), { ...DEFAULT_TRAIN, steps: 20, batchSize: 4, context: 16, warmup: 1, precision: 'f16' }, { scale: 2 ** 40, goodSteps: 5 });
  const r = await tr.trainStep();
  assert.equal(r.skipped, true);
  assert.ok(Number.isNaN(r.gradNorm));
  assert.ok(Number.isFinite(r.loss), 'the loss itself is finite');
  assert.deepEqual(tr.lossScale!.state(), { scale: 2 ** 39, goodSteps: 0 });
  assert.equal(tr.step, 1, 'the step counts (the schedule moves on)');
  const after = await Promise.all(m.parameters().map(data));
  after.forEach((a, i) => assert.equal(maxDiff(a, before[i]), 0, `parameter ${i} unchanged`));
  assert.equal(tr.optimizer.stateDict().scalars.t, 0, 'AdamW took no step');
  // Scale by scale it comes down until a step is taken.
  let taken = 0;
  for (let s = 0; s < 40 && !taken; s++) if (!(await tr.trainStep()).skipped) taken = tr.lossScale!.scale;
  assert.ok(taken > 0 && taken <= 2 ** 24, `a step was taken at scale ${taken}`);
  tr.dispose(); m.dispose();
});

test('a precision the backend lacks is refused, naming it and what the backend offers; config files name a bad precision', () => {
  class NoF16 extends CpuBackend {
    override precisions(): PrecisionSupport { return { offered: ['f32', 'bf16'], fastest: 'f32', missing: 'test device lacks shader-f16' }; }
  }
  const m = new Decoder(cfg, new ParamFactory({ backend: new NoF16(), seed: 2 }));
  assert.throws(() => new Trainer(m, batches(), { ...DEFAULT_TRAIN, batchSize: 4, context: 16, precision: 'f16' }),
    (e: Error) => e instanceof UnsupportedError && e.message === "train: precision 'f16' is not offered by the cpu backend (test device lacks shader-f16); it offers f32, bf16");
  const tr = new Trainer(m, batches(), { ...DEFAULT_TRAIN, batchSize: 4, context: 16, precision: 'bf16' });
  assert.equal(tr.precision, 'bf16');
  tr.dispose(); m.dispose();
  const { precision: _p, ...old } = DEFAULT_TRAIN;
  assert.equal(parseTrainConfig(old, 'trainer.json').precision, 'f32', 'a run described before precisions existed trained in f32');
  assert.equal(parseTrainConfig({ ...DEFAULT_TRAIN, precision: 'f16' }, 'trainer.json').precision, 'f16');
  assert.throws(() => parseTrainConfig({ ...DEFAULT_TRAIN, precision: 'f64' }, 'trainer.json: run.train'), /trainer.json: run.train: 'precision' = "f64": expected f32, bf16, f16, auto/);
});
