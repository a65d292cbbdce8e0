/**
 * Finite-difference gradient check of every differentiable op on the CPU backend, through the case
 * table (test/parity/cases.ts): the analytical gradient of L = Σ sum(out ⊙ w) (random w, so every
 * output element matters) against central differences (see checkGradient in test/parity/run.ts).
 * Cases whose op cannot be checked that way carry an `fdSkip` reason and show up here as skipped
 * tests (counted by the runner); the cast gradients they would cover are checked analytically below.
 * Run: node --import tsx --test test/ops/grad.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { checkGradient, gradCases } from '../parity/run.ts';

const { check, skip } = gradCases();

test('the gradient check covers a few hundred cases', () => {
  assert.ok(check.length > 300, `only ${check.length} cases`);
  assert.ok(skip.length <= 6, `more skips than expected: ${skip.map((c) => c.name).join(', ')}`);
});

for (const c of check) {
  test(`grad ${c.name}`, async () => {
    const r = await checkGradient(c);
    assert.ok(r.ok, `${c.name}: ${r.detail}`);
    assert.ok(r.checks > 0 || c.inputs.every((s, i) => !c.grad.includes(i) || s.shape.includes(0)), `${c.name}: nothing was compared`);
  });
}

for (const c of skip) test(`grad ${c.name}`, { skip: c.fdSkip }, () => {});

const values = (t: fon.Tensor) => Array.from(hostToF32(t.dataSync(), t.dtype));

test('grad cast f32→f16/bf16: the gradient is the output gradient cast back to f32', () => {
  for (const to of ['f16', 'bf16'] as const) {
    const x = fon.randn([7, 33], { seed: 1, requiresGrad: true });
    const w = fon.randn([7, 33], { seed: 2, dtype: to });
    fon.backward(fon.sum(fon.mul(fon.cast(x, to), w)));
    assert.ok(x.grad);
    assert.equal(x.grad.dtype, 'f32');
    // d/dx Σ cast(x)·w = w (as f32), exactly: only the sum's rounding could differ, and it is not involved.
    assert.deepEqual(values(x.grad), values(w));
    x.dispose(); w.dispose();
  }
});

test('grad cast f16→f32: the gradient arrives in f16', () => {
  const x = fon.randn([33], { seed: 3, dtype: 'f16', requiresGrad: true });
  const w = fon.randn([33], { seed: 4 });
  fon.backward(fon.sum(fon.mul(fon.cast(x, 'f32'), w)));
  assert.equal(x.grad?.dtype, 'f16');
  assert.deepEqual(values(x.grad!), values(fon.cast(w, 'f16')));
});

test('grad cast to an integer dtype does not flow', () => {
  const x = fon.randn([5], { seed: 5, requiresGrad: true });
  const y = fon.cast(x, 'i32');
  assert.equal(y.requiresGrad, false);
  assert.equal(y.node, null);
});

test('grad matmul/linear with a 16-bit outDType: exactly the gradients of the f32 result cast to it (with a bias too)', () => {
  const x = fon.randn([2, 3, 17], { seed: 1 }), w = fon.randn([5, 17], { seed: 2 }), b = fon.randn([5], { seed: 3 });
  const g = fon.randn([2, 3, 5], { seed: 4 });
  for (const to of ['f16', 'bf16'] as const) {
    for (const bias of [undefined, b]) {
      const grads = (f: (x: fon.Tensor, w: fon.Tensor, b?: fon.Tensor) => fon.Tensor) => {
        const [xl, wl, bl] = [x, w, b].map((t) => { const c = fon.mul(t, 1); c.requiresGrad = true; return c; });
        fon.backward(fon.sum(fon.mul(fon.cast(f(xl, wl, bias ? bl : undefined), 'f32'), g)));
        return [xl, wl, ...(bias ? [bl] : [])].map((t) => values(t.grad!));
      };
      const got = grads((xx, ww, bb) => fon.linear(xx, ww, bb, true, { outDType: to }));
      const want = grads((xx, ww, bb) => fon.cast(fon.linear(xx, ww, bb), to));
      assert.deepEqual(got, want, `${to}${bias ? ' with a bias' : ''}`);
    }
  }
});
