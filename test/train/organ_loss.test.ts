/**
 * The organ objective CE(p_L) + λ_D·CE(p_D) + λ_KL·KL(sg(p_L) ‖ p_D) (train/organ_loss.ts) and
 * LayerSkip-style layer dropout (Decoder.forwardWithExit's layerKeep, layerKeepMasks), on tiny models:
 * host references, where the gradient goes, the KL's gradient by finite differences, the plain CE
 * when the organ terms are off, the masks' rules and determinism, and the trainer's report and
 * exact resume. Run: node --import tsx --test test/train/organ_loss.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initBackend } from '../../src/backend/registry.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { randint, randn, tensor } from '../../src/ops/creation.ts';
import { crossEntropy } from '../../src/ops/fused.ts';
import { zeroGrad } from '../../src/ops/grad.ts';
import { narrow } from '../../src/ops/layout.ts';
import { noGrad } from '../../src/tensor/scope.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import { distillKl, layerDropRamp, layerDropRate, layerDropUniform, layerKeepMasks, organLoss, trainingLoss } from '../../src/train/organ_loss.ts';
import { DEFAULT_TRAIN, Trainer, type TrainConfig } from '../../src/train/trainer.ts';
import { formulaBatches } from './fixtures.ts';

const cpu = await initBackend('cpu');
const V = 11;
const BASE: Partial<ModelConfig> = { vocabSize: V, dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 8 };

function model(extra: Partial<ModelConfig> | Record<string, unknown> = {}, seed = 3): Decoder {
  return new Decoder(parseModelConfig({ ...BASE, ...extra }), new ParamFactory({ backend: cpu, seed }));
}
/** The same architecture with matrices of std 0.3 (not 0.02): layers that change the stream, so the exit head and the full model disagree. */
function strongModel(extra: Partial<ModelConfig> | Record<string, unknown>, seed = 3): Decoder {
  const m0 = model(extra, seed);
  const weights: Record<string, Tensor> = {};
  m0.namedParameters().forEach(([n, p], i) => { weights[n] = p.rank >= 2 ? randn(p.shape, { backend: cpu, std: 0.3, seed: 100 + i }) : p; });
  const m = new Decoder(m0.config, new ParamFactory({ backend: cpu, weights }));
  m0.dispose();
  return m;
}
const ids = (b: number, t: number, seed: number) => randint([b, t], 0, V, { backend: cpu, seed });
const host = async (t: Tensor) => Array.from((await t.data()) as Float32Array);
const value = async (t: Tensor) => (await host(t))[0];

/** log softmax of one row, in f64. */
function logSoftmaxRow(row: ArrayLike<number>): number[] {
  let m = -Infinity;
  for (let i = 0; i < row.length; i++) m = Math.max(m, row[i]);
  let s = 0;
  for (let i = 0; i < row.length; i++) s += Math.exp(row[i] - m);
  const lse = m + Math.log(s);
  return Array.from(row, (x) => x - lse);
}

/** CE of logits (N·V, row-major) against targets, and KL(p ‖ q) of teacher against student rows: plain loops. */
function hostCe(logits: number[], targets: number[]): number {
  let s = 0;
  targets.forEach((y, n) => { s -= logSoftmaxRow(logits.slice(n * V, (n + 1) * V))[y]; });
  return s / targets.length;
}
function hostKl(teacher: number[], student: number[], v = V): number {
  const n = teacher.length / v;
  let s = 0;
  for (let r = 0; r < n; r++) {
    const lp = logSoftmaxRow(teacher.slice(r * v, (r + 1) * v)), lq = logSoftmaxRow(student.slice(r * v, (r + 1) * v));
    for (let i = 0; i < v; i++) s += Math.exp(lp[i]) * (lp[i] - lq[i]);
  }
  return s / n;
}

function gradOf(m: Decoder, name: string): Promise<number[]> {
  const p = m.namedParameters().find(([n]) => n === name);
  assert.ok(p, `parameter ${name}`);
  return p[1].grad ? host(p[1].grad) : Promise.resolve(new Array<number>(p[1].size).fill(0));
}

function maxDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length);
  return a.reduce((w, x, i) => Math.max(w, Math.abs(x - b[i])), 0);
}

test('organ loss: equals CE + λ_D·CE(exit) + λ_KL·KL computed with plain loops over the logits', async () => {
  const m = strongModel({ organs: { draftLayers: 2, exitLoss: 0.3, distill: 0.7 } });
  const x = ids(2, 8, 1), y = ids(2, 8, 2);
  const logits = m.forward(x);
  const exitLogits = m.logits(m.runLayers(m.embedTokens(x), 0, 2, { pos: 0 }).x);
  const both = m.forwardWithExit(x);
  assert.deepEqual(await host(both.logits), await host(logits), 'the full logits are forward\'s, bit for bit');
  assert.deepEqual(await host(both.exitLogits), await host(exitLogits), 'the exit head is logits() after layer D−1');

  const L = await host(logits), E = await host(exitLogits), targets = await host(y);
  const ce = hostCe(L, targets), exitCe = hostCe(E, targets), kl = hostKl(L, E);
  assert.ok(kl > 1e-2, `the exit head differs from the full model (KL ${kl})`);
  const parts = trainingLoss(m, x, y);
  assert.ok(Math.abs((await value(parts.ce)) - ce) < 1e-5, 'CE');
  assert.ok(Math.abs((await value(parts.exitCe!)) - exitCe) < 1e-5, 'exit CE');
  assert.ok(Math.abs((await value(parts.distill!)) - kl) < 1e-6, `KL ${await value(parts.distill!)} vs ${kl}`);
  const want = ce + 0.3 * exitCe + 0.7 * kl;
  assert.ok(Math.abs((await value(parts.loss)) - want) < 1e-5, 'objective');
  assert.ok(Math.abs((await value(m.loss(x, y))) - ce) < 1e-5, 'Decoder.loss is the plain CE');
  m.dispose();
});

test('organ loss: the exit CE and the KL reach the draft layers, never a revise-organ layer (≥ D)', async () => {
  const m = strongModel({ organs: { draftLayers: 2 } });
  const x = ids(2, 8, 3), y = ids(2, 8, 4);
  const grads = async (exitLoss: number, distill: number) => {
    zeroGrad(m.parameters());
    const { logits, exitLogits } = m.forwardWithExit(x, 2);
    organLoss(logits, exitLogits, y, { exitLoss, distill }).loss.backward();
    return { revise: await gradOf(m, 'layers.2.attn.q.weight'), reviseMlp: await gradOf(m, 'layers.2.mlp.down.weight'), draft: await gradOf(m, 'layers.0.attn.q.weight'), draftMlp: await gradOf(m, 'layers.1.mlp.up.weight') };
  };
  const plain = await grads(0, 0), exit = await grads(2, 0), kl = await grads(0, 3), both = await grads(0.3, 0.7);
  for (const [name, g] of Object.entries({ exit, kl, both })) {
    assert.deepEqual(g.revise, plain.revise, `${name}: layer 2's q gradient does not depend on λ_D, λ_KL`);
    assert.deepEqual(g.reviseMlp, plain.reviseMlp, `${name}: layer 2's MLP gradient does not depend on λ_D, λ_KL`);
    assert.ok(maxDiff(g.draft, plain.draft) > 1e-6, `${name}: layer 0's q gradient does (Δ ${maxDiff(g.draft, plain.draft)})`);
    assert.ok(maxDiff(g.draftMlp, plain.draftMlp) > 1e-6, `${name}: layer 1's MLP gradient does`);
  }
  assert.ok(plain.revise.some((v) => v !== 0), 'layer 2 has a gradient at all');
  m.dispose();
});

test('distillKl: the gradient matches finite differences and (softmax(s) − softmax(t))/N; none reaches the teacher', async () => {
  const v = 5, shape = [2, 3, v];
  const t = randn(shape, { backend: cpu, seed: 7, std: 2, requiresGrad: true });
  const s0 = await host(randn(shape, { backend: cpu, seed: 8, std: 2 }));
  const tv = await host(t);
  const s = tensor(Float32Array.from(s0), shape, { backend: cpu, requiresGrad: true });
  const kl = distillKl(t, s);
  assert.ok(Math.abs((await value(kl)) - hostKl(tv, s0, v)) < 1e-6, 'value');
  kl.backward();
  const g = await host(s.grad!);
  assert.equal(t.grad, null, 'stop-gradient: the teacher gets no gradient');
  const n = 6, eps = 1e-2;
  for (let i = 0; i < s0.length; i++) {
    const at = (d: number) => noGrad(() => { const p = Float32Array.from(s0); p[i] += d; return distillKl(t, tensor(p, shape, { backend: cpu })); });
    const fd = ((await value(at(eps))) - (await value(at(-eps)))) / (2 * eps);
    assert.ok(Math.abs(fd - g[i]) < 2e-4, `∂KL/∂s[${i}]: finite difference ${fd} vs ${g[i]}`);
    const r = Math.floor(i / v);
    const q = logSoftmaxRow(s0.slice(r * v, (r + 1) * v)).map(Math.exp), p = logSoftmaxRow(tv.slice(r * v, (r + 1) * v)).map(Math.exp);
    assert.ok(Math.abs((q[i % v] - p[i % v]) / n - g[i]) < 1e-6, `∂KL/∂s[${i}] analytic`);
  }
});

test('organ loss: λ_D = λ_KL = 0 and no layer dropout give exactly the plain CE, value and gradients', async () => {
  const organ = model({ organs: { draftLayers: 1, exitLoss: 0, distill: 0, layerDropout: 0 } });
  const plain = model();
  const x = ids(3, 8, 5), y = ids(3, 8, 6);
  const lo = trainingLoss(organ, x, y).loss, lp = trainingLoss(plain, x, y).loss;
  assert.equal(await value(lo), await value(lp));
  assert.equal(await value(lp), await value(crossEntropy(plain.forward(x), y)), 'a model without organs: the plain CE');
  lo.backward(); lp.backward();
  const a = organ.namedParameters(), b = plain.namedParameters();
  assert.deepEqual(a.map(([n]) => n), b.map(([n]) => n));
  for (let i = 0; i < a.length; i++) assert.deepEqual(await host(a[i][1].grad!), await host(b[i][1].grad!), a[i][0]);
  const parts = trainingLoss(organ, x, y);
  assert.ok((await value(parts.exitCe!)) > 0 && (await value(parts.distill!)) > 0, 'the terms are still reported');
  organ.dispose(); plain.dispose();
});

test('layer dropout: the rates rise with depth and ramp over the run; p = 0 draws nothing; masks are a pure function of (seed, step, micro, layer)', () => {
  assert.equal(layerDropRate(0.8, 0, 4), 0);
  assert.ok(Math.abs(layerDropRate(0.8, 2, 5) - 0.4) < 1e-12);
  assert.equal(layerDropRate(0.8, 3, 4), 0.8);
  assert.equal(layerDropRate(0.8, 3, 4, 0.5), 0.4);
  assert.deepEqual([layerDropRamp(0, 11), layerDropRamp(5, 11), layerDropRamp(10, 11), layerDropRamp(0, 1)], [0, 0.5, 1, 1]);
  const at = { seed: 9, step: 99, micro: 0, steps: 100 };
  assert.deepEqual(layerKeepMasks(0, 4, 16, at), [null, null, null, null], 'p = 0: every layer runs for every sequence');
  assert.deepEqual(layerKeepMasks(0.9, 4, 16, { ...at, step: 0 }), [null, null, null, null], 'the ramp starts at 0');
  for (let step = 0; step < 100; step += 7) {
    for (const micro of [0, 1]) assert.equal(layerKeepMasks(0.99, 4, 16, { ...at, step, micro })[0], null, 'layer 0 is never skipped');
  }
  const a = layerKeepMasks(0.5, 4, 64, at), b = layerKeepMasks(0.5, 4, 64, at);
  assert.deepEqual(a, b, 'same step → same masks');
  assert.ok(a[3] && a[3].some((v) => v === 0) && a[3].some((v) => v === 1));
  const other = layerKeepMasks(0.5, 4, 64, { ...at, step: 98 }), micro1 = layerKeepMasks(0.5, 4, 64, { ...at, micro: 1 });
  assert.notDeepEqual(other[3], a[3], 'another step, other masks');
  assert.notDeepEqual(micro1[3], a[3], 'another micro-batch, other masks');
  assert.notDeepEqual(layerKeepMasks(0.5, 4, 64, { ...at, seed: 10 })[3], a[3], 'another seed, other masks');
  assert.notDeepEqual(a[2], a[3], 'layers draw apart');
  assert.equal(layerDropUniform(9, 99, 0, 3, 5), layerDropUniform(9, 99, 0, 3, 5));
  // Frequency: the last layer at rate 0.5 over many sequences.
  const many = layerKeepMasks(0.5, 4, 4000, at)[3]!;
  const skipped = many.reduce((s, v) => s + (v === 0 ? 1 : 0), 0) / 4000;
  assert.ok(Math.abs(skipped - 0.5) < 0.04, `skip frequency ${skipped}`);
});

test('layer dropout: a skipped layer is the identity for its sequence; near p = 1 the last layer is skipped for most sequences', async () => {
  const m = model({ nLayers: 2, organs: { draftLayers: 1, layerDropout: 0.99 } });
  const B = 32;
  const x = ids(B, 8, 11);
  const masks = layerKeepMasks(0.99, 2, B, { seed: 1, step: 9, micro: 0, steps: 10 });
  assert.equal(masks[0], null, 'layer 0 runs');
  const last = masks[1]!;
  const skipped = last.reduce((s, v) => s + (v === 0 ? 1 : 0), 0);
  assert.ok(skipped >= 0.75 * B, `the last layer is skipped for most sequences (${skipped} of ${B})`);
  const all = m.forwardWithExit(x);
  const full = await host(all.logits), without = await host(all.exitLogits); // layer 0 alone: the model without its last layer
  // A mixed mask, and the drawn one: a skipped sequence's logits are those of the model without the layer, a kept one's the full model's.
  for (const keep of [Float32Array.from({ length: B }, (_, b) => b % 2), last]) {
    const dropped = await host(m.forwardWithExit(x, 1, { layerKeep: [null, keep] }).logits);
    const row = 8 * V;
    for (let b = 0; b < B; b++) {
      const want = keep[b] ? full : without;
      assert.deepEqual(dropped.slice(b * row, (b + 1) * row), want.slice(b * row, (b + 1) * row), `sequence ${b} (${keep[b] ? 'kept' : 'skipped'})`);
    }
  }
  // Every sequence skipping the last layer: it gets no gradient.
  const y = ids(B, 8, 12);
  trainingLoss(m, x, y, { layerKeep: [null, new Float32Array(B)] }).loss.backward();
  assert.ok((await gradOf(m, 'layers.1.mlp.down.weight')).every((v) => v === 0), 'a layer every sequence skips gets no gradient');
  assert.ok((await gradOf(m, 'layers.0.mlp.down.weight')).some((v) => v !== 0));
  // All ones: the model as it is.
  assert.deepEqual(await host(m.forwardWithExit(x, 1, { layerKeep: [new Float32Array(B).fill(1), new Float32Array(B).fill(1)] }).logits), full);
  assert.throws(() => m.forwardWithExit(x, 1, { layerKeep: [null, new Float32Array(3)] }), /layerKeep\[1\] has 3 entries for a batch of 32 sequences/);
  m.dispose();
});

test('layer dropout with Depth-Attention: a skipped layer\'s record is still read by the layers above', async () => {
  const m = model({ depth: { stride: 1 }, organs: { draftLayers: 1, layerDropout: 0.5 } });
  const x = ids(2, 8, 13);
  const keep = Float32Array.from([0, 1]); // sequence 0 skips layer 1, which layer 2 reads
  const dropped = await host(m.forwardWithExit(x, 1, { layerKeep: [null, keep, null] }).logits);
  // Reference for sequence 0: layer 1 runs (for its record) but the stream after it is the one before it.
  const x0 = narrow(x, 0, 0, 1);
  const h0 = m.runLayers(m.embedTokens(x0), 0, 1, { pos: 0 });
  const h1 = m.runLayers(h0.x, 1, 2, { pos: 0, records: h0.records });
  const ref0 = await host(m.logits(m.runLayers(h0.x, 2, 3, { pos: 0, records: h1.records }).x));
  const row = 8 * V;
  assert.deepEqual(dropped.slice(0, row), ref0, 'sequence 0: layer 2 reads the skipped layer 1\'s record');
  assert.deepEqual(dropped.slice(row), (await host(m.forward(x))).slice(row), 'sequence 1: the full model');
  assert.notDeepEqual(dropped.slice(0, row), (await host(m.forward(x))).slice(0, row));
  // Every sequence skipping a layer whose record is read: still run for the record, the loss is finite and trains.
  const parts = trainingLoss(m, x, ids(2, 8, 14), { layerKeep: [null, new Float32Array(2), null] });
  assert.ok(Number.isFinite(await value(parts.loss)));
  parts.loss.backward();
  assert.ok((await gradOf(m, 'layers.1.attn.k.weight')).some((v) => v !== 0), 'the skipped layer\'s keys still get gradient through the record');
  m.dispose();
});

/** Step-dependent batches of B sequences of T tokens. */
const batches = (rows: number, t: number) => formulaBatches(rows, t, (g) => (g * 7 + (g >> 3)) % V, (g) => (g * 5 + (g >> 2) + 1) % V);

test('trainer with organs: reports the full CE, the exit CE and the KL of the masked forward; resumes exactly', async () => {
  const organs = { draftLayers: 1, exitLoss: 0.2, distill: 0.5, layerDropout: 0.9 };
  const tc: TrainConfig = { ...DEFAULT_TRAIN, steps: 4, batchSize: 4, accumulate: 2, context: 8, warmup: 1, lr: 1e-2, minLr: 1e-3, seed: 21 };
  const data = batches(4, 8);
  const m = model({ organs });
  const tr = new Trainer(m, data, tc);
  const results = [];
  for (let s = 0; s < 4; s++) {
    // What the step should see: the masks of (seed, step, micro) on the weights before it.
    let ce = 0, exitCe = 0, kl = 0, dropped = false;
    for (let micro = 0; micro < 2; micro++) {
      const { inputs, targets } = data.batchAt(s * 2 + micro);
      const layerKeep = layerKeepMasks(0.9, 3, 4, { seed: 21, step: s, micro, steps: 4 });
      dropped ||= layerKeep.some((k) => k);
      const p = noGrad(() => trainingLoss(m, tensor(inputs, [4, 8], { backend: cpu, dtype: 'i32' }), tensor(targets, [4, 8], { backend: cpu, dtype: 'i32' }), { layerKeep }));
      ce += (await value(p.ce)) / 2; exitCe += (await value(p.exitCe!)) / 2; kl += (await value(p.distill!)) / 2;
    }
    const r = await tr.trainStep();
    assert.ok(Math.abs(r.loss - ce) < 1e-5 && Math.abs(r.exitLoss! - exitCe) < 1e-5 && Math.abs(r.distill! - kl) < 1e-6, `step ${s}: ${JSON.stringify(r)} vs ${ce}, ${exitCe}, ${kl}`);
    if (s === 3) assert.ok(dropped, 'the last step drops layers');
    results.push(r);
  }
  tr.dispose(); m.dispose();

  // Stopped after step 2 and resumed in a fresh trainer (same weights, the optimizer's state): the same curve.
  const m2 = model({ organs });
  const first = new Trainer(m2, data, tc);
  const resumedLosses = [(await first.trainStep()).loss, (await first.trainStep()).loss];
  const state = first.optimizer.stateDict();
  const second = new Trainer(m2, data, tc);
  second.optimizer.loadStateDict(state);
  first.dispose();
  second.step = 2;
  for (let s = 2; s < 4; s++) {
    const r = await second.trainStep();
    resumedLosses.push(r.loss);
    assert.equal(r.exitLoss, results[s].exitLoss, `step ${s}: exit CE`);
  }
  assert.deepEqual(resumedLosses, results.map((r) => r.loss));
  second.dispose(); m2.dispose();
});

test('trainer without organs: no organ fields, the loss as before', async () => {
  const m = model();
  const tr = new Trainer(m, batches(2, 8), { ...DEFAULT_TRAIN, steps: 1, batchSize: 2, context: 8, warmup: 0 });
  const { inputs, targets } = batches(2, 8).batchAt(0);
  const want = await value(noGrad(() => m.loss(tensor(inputs, [2, 8], { backend: cpu, dtype: 'i32' }), tensor(targets, [2, 8], { backend: cpu, dtype: 'i32' }))));
  const r = await tr.trainStep();
  assert.equal(r.loss, want);
  assert.equal(r.exitLoss, undefined);
  assert.equal(r.distill, undefined);
  assert.throws(() => trainingLoss(m, tensor(inputs, [2, 8], { backend: cpu, dtype: 'i32' }), tensor(targets, [2, 8], { backend: cpu, dtype: 'i32' }), { layerKeep: [null, new Float32Array(2)] }), /needs a model with organs/);
  tr.dispose(); m.dispose();
});
