/** Optimizers: updates against PyTorch's formulas, state dicts that copy, schedules, clipping. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { AdamW, SGD } from '../../src/train/optim.ts';
import { clipGradNorm } from '../../src/train/clip.ts';
import { constant, warmupCosine } from '../../src/train/schedule.ts';

function withGrad(values: number[], grad: number[], backend = new CpuBackend()) {
  const p = fon.tensor(values, [values.length], { requiresGrad: true, backend });
  p.grad = fon.keep(fon.tensor(grad, [grad.length], { backend }));
  return p;
}

test('AdamW step equals the formula (bias correction, decoupled decay)', () => {
  const p = withGrad([1, -2], [0.5, 0.25]);
  const opt = new AdamW([p], { lr: 0.1, betas: [0.9, 0.99], eps: 1e-8, weightDecay: 0.1 });
  opt.step();
  const got = p.dataSync();
  // t = 1: m̂ = g, v̂ = g², update = g / (|g| + eps) = sign(g)
  [1, -2].forEach((w, i) => {
    const g = [0.5, 0.25][i];
    const want = w * (1 - 0.1 * 0.1) - 0.1 * (g / (Math.abs(g) + 1e-8));
    assert.ok(Math.abs(got[i] - want) < 1e-6, `p[${i}] = ${got[i]}, want ${want}`);
  });
});

test('SGD with momentum and nesterov follows PyTorch', () => {
  const p = withGrad([1], [2]);
  const opt = new SGD([p], { lr: 0.1, momentum: 0.9, nesterov: true });
  opt.step();
  // buf = g = 2; g' = g + 0.9·buf = 3.8; p = 1 − 0.38
  assert.ok(Math.abs(p.dataSync()[0] - 0.62) < 1e-6);
  assert.throws(() => new SGD([p], { nesterov: true }), ArgumentError);
});

test("loadStateDict copies: loading its own state, or another optimizer's, shares nothing", () => {
  const cpu = new CpuBackend();
  const a = withGrad([1, 2, 3], [1, 1, 1], cpu);
  const b = withGrad([1, 2, 3], [1, 1, 1], cpu);
  const oa = new AdamW([a]), ob = new AdamW([b]);
  oa.step();
  oa.loadStateDict(oa.stateDict());
  ob.loadStateDict(oa.stateDict());
  oa.step();
  assert.deepEqual(Array.from(ob.stateDict().tensors['m.0'].dataSync()), [0.1, 0.1, 0.1].map(Math.fround), 'ob kept its own copy of step 1');
  assert.equal(ob.stateDict().scalars.t, 1);
});

test('loadStateDict rejects a wrong shape, dtype or backend, a missing or extra tensor, an unknown scalar or a bad t, and changes nothing', () => {
  const cpu = new CpuBackend();
  const p = withGrad([1, 2], [1, 1], cpu);
  const opt = new AdamW([p]);
  const good = opt.stateDict();
  const bad = (patch: Record<string, fon.Tensor>) => ({ tensors: { ...good.tensors, ...patch }, scalars: good.scalars });
  assert.throws(() => opt.loadStateDict(bad({ 'm.0': fon.zeros([3], { backend: cpu }) })), /'m.0' has shape \[3\], expected \[2\]/);
  assert.throws(() => opt.loadStateDict(bad({ 'v.0': fon.zeros([2], { dtype: 'f16', backend: cpu }) })), /'v.0' has dtype f16, expected f32/);
  assert.throws(() => opt.loadStateDict(bad({ 'm.0': fon.zeros([2], { backend: new CpuBackend() }) })), /lives on backend/);
  assert.throws(() => opt.loadStateDict({ tensors: {}, scalars: {} }), /'m.0' is missing/);
  assert.throws(() => opt.loadStateDict(bad({ 'm.1': fon.zeros([2], { backend: cpu }) })), /^ArgumentError: optimizer state: unexpected tensor 'm.1'; AdamW holds m.0 … m.0 and v.0 … v.0$/);
  assert.throws(() => opt.loadStateDict({ tensors: good.tensors, scalars: { ...good.scalars, a: 1 } }), /unknown scalar 'a'; AdamW holds t and lr/);
  assert.throws(() => opt.loadStateDict({ tensors: good.tensors, scalars: { lr: 1 } }), /t = undefined; expected the number of steps taken, an integer ≥ 0/);
  assert.throws(() => opt.loadStateDict({ tensors: good.tensors, scalars: { t: 1.5, lr: 1 } }), /t = 1.5;/);
  opt.step();
  assert.ok(Math.abs(p.dataSync()[0] - (1 * (1 - 1e-3 * 0.01) - 1e-3)) < 1e-6, 'the optimizer still works with its own state');
});

test('schedules: warm-up rises linearly, cosine ends at minLr; constant is constant', () => {
  const s = warmupCosine(1, 10, 110, 0.1);
  assert.equal(s(0), 0.1);
  assert.equal(s(9), 1);
  assert.ok(Math.abs(s(60) - 0.55) < 1e-12);
  assert.equal(s(110), 0.1);
  assert.equal(constant(3)(1000), 3);
  assert.throws(() => warmupCosine(1, 20, 10), ArgumentError);
});

test('clipGradNorm scales gradients to the max norm and returns the norm before clipping', () => {
  const p = withGrad([0, 0], [3, 4]);
  const norm = clipGradNorm([p], 1);
  assert.ok(Math.abs(norm.dataSync()[0] - 5) < 1e-6);
  const g = p.grad!.dataSync();
  assert.ok(Math.abs(g[0] - 0.6) < 1e-6 && Math.abs(g[1] - 0.8) < 1e-6, `clipped grad ${g}`);
  const q = withGrad([0], [0.5]);
  clipGradNorm([q], 1);
  assert.equal(q.grad!.dataSync()[0], 0.5, 'a norm under the bound leaves the gradient alone');
});
