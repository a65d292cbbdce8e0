/**
 * Autograd behaviour: accumulation across backward calls, detach, noGrad, retainGraph and the
 * GradErrors for misuse, shared subexpressions, and which results carry requiresGrad.
 * Run: node --import tsx --test test/tensor/autograd.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { GradError, type Tensor } from '../../src/index.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';

const vals = (t: Tensor): number[] => Array.from(hostToF32(t.dataSync(), t.dtype));
const leaf = (xs: number[]) => fon.tensor(xs, undefined, { requiresGrad: true });

test('gradients accumulate over two backward calls until zeroGrad', () => {
  const x = leaf([1, -2, 3]);
  fon.backward(fon.sum(fon.mul(x, x)));
  assert.deepEqual(vals(x.grad!), [2, -4, 6]);
  fon.backward(fon.sum(fon.mul(x, x)));
  assert.deepEqual(vals(x.grad!), [4, -8, 12]);
  fon.zeroGrad([x]);
  assert.equal(x.grad, null);
  fon.sum(fon.mul(x, 3)).backward();
  assert.deepEqual(vals(x.grad!), [3, 3, 3]);
});

test('a tensor used twice and a diamond-shaped graph sum their gradient paths', () => {
  const x = leaf([0.5, 2]);
  const a = fon.mul(x, 2), b = fon.add(x, 1);
  fon.backward(fon.sum(fon.mul(a, b))); // d/dx 2x(x+1) = 4x + 2
  assert.deepEqual(vals(x.grad!), [4, 10]);
});

test('detach stops gradients and shares the values', () => {
  const x = leaf([1, 2, 3]);
  const d = fon.detach(x);
  assert.equal(d.requiresGrad, false);
  assert.deepEqual(vals(d), [1, 2, 3]);
  fon.backward(fon.sum(fon.mul(x, x.detach()))); // only one path: d/dx (x · const) = const
  assert.deepEqual(vals(x.grad!), [1, 2, 3]);
});

test('noGrad records nothing and restores the switch, even after a throw', () => {
  const x = leaf([1, 2]);
  assert.equal(fon.isGradEnabled(), true);
  const y = fon.noGrad(() => {
    assert.equal(fon.isGradEnabled(), false);
    return fon.sum(fon.exp(x));
  });
  assert.equal(y.requiresGrad, false);
  assert.equal(y.node, null);
  assert.equal(fon.isGradEnabled(), true);
  assert.throws(() => fon.backward(y), (e: unknown) => e instanceof GradError && /does not require grad/.test(e.message));
  assert.throws(() => fon.noGrad(() => { throw new Error('inside'); }), /inside/);
  assert.equal(fon.isGradEnabled(), true);
  assert.equal(x.grad, null);
});

test('backward twice without retainGraph throws GradError naming the op and the fix', () => {
  const x = leaf([1, 2]);
  const y = fon.sum(fon.exp(x));
  fon.backward(y);
  assert.throws(() => fon.backward(y), (e: unknown) => {
    assert.ok(e instanceof GradError);
    assert.match(e.message, /^backward through '\w+' a second time: its saved tensors were freed; pass \{ retainGraph: true \} to the first backward\(\)$/);
    return true;
  });
});

test('retainGraph lets backward run again through the same graph', () => {
  const x = leaf([0, 1]);
  const y = fon.sum(fon.exp(x));
  fon.backward(y, undefined, { retainGraph: true });
  fon.backward(y);
  close2(vals(x.grad!), [2, 2 * Math.E]);
  assert.throws(() => fon.backward(y), GradError, 'the second call did not retain');
});

test('non-scalar backward needs a gradient of the same shape', () => {
  const x = leaf([1, 2, 3]);
  const y = fon.mul(x, x);
  assert.throws(() => y.backward(), (e: unknown) => e instanceof GradError && /root of shape \[3\] is not a scalar; pass a gradient of the same shape/.test(e.message));
  assert.throws(() => y.backward(fon.ones([2])), (e: unknown) => e instanceof GradError && /gradient shape \[2\] does not match root shape \[3\]/.test(e.message));
  y.backward(fon.tensor([1, 0, -1]));
  assert.deepEqual(vals(x.grad!), [2, 0, -6]);
});

test('backward of a leaf itself gives ones; a tensor without requiresGrad has no graph', () => {
  const x = fon.tensor([5], [], { requiresGrad: true });
  x.backward();
  assert.deepEqual(vals(x.grad!), [1]);
  const c = fon.tensor([1, 2]);
  assert.throws(() => fon.sum(c).backward(), GradError);
});

test('results carry requiresGrad only along float paths from a leaf that needs it', () => {
  const x = leaf([3, 1, 2]);
  const c = fon.tensor([1, 1, 1]);
  assert.equal(fon.add(x, c).requiresGrad, true);
  assert.equal(fon.add(c, c).requiresGrad, false);
  assert.equal(fon.argsort(x).requiresGrad, false);
  assert.equal(fon.sort(x).indices.requiresGrad, false);
  assert.equal(fon.sort(x).values.requiresGrad, true);
  assert.equal(fon.gt(x, 0).requiresGrad, false, 'comparisons have no gradient');
  assert.equal(fon.sign(x).requiresGrad, false);
  assert.equal(x.grad, null, 'building a graph computes nothing');
});

test('the gradient of a broadcast operand is summed back to its shape', () => {
  const a = fon.tensor([[1, 2, 3], [4, 5, 6]], undefined, { requiresGrad: true });
  const b = fon.tensor([10, 20, 30], undefined, { requiresGrad: true });
  const s = fon.tensor(2, undefined, { requiresGrad: true });
  fon.backward(fon.sum(fon.mul(fon.add(a, b), s)));
  assert.deepEqual(vals(a.grad!), [2, 2, 2, 2, 2, 2]);
  assert.deepEqual(vals(b.grad!), [4, 4, 4]);
  assert.deepEqual(vals(s.grad!), [141]); // Σ(a + b) = 21 + 2·60
  assert.deepEqual(b.grad!.shape, [3]);
  assert.deepEqual(s.grad!.shape, []);
});

test('a leaf of dtype f16 receives an f16 gradient', () => {
  const x = fon.tensor([1, 2], undefined, { dtype: 'f16', requiresGrad: true });
  fon.backward(fon.sum(fon.cast(fon.mul(x, x), 'f32')));
  assert.equal(x.grad!.dtype, 'f16');
  assert.deepEqual(vals(x.grad!), [2, 4]);
});

test('gradients flow through a graph whose intermediate tensors the user disposed', () => {
  const x = leaf([1, 2]);
  const h = fon.exp(x);
  const y = fon.sum(fon.mul(h, 3));
  h.dispose();
  fon.backward(y);
  close2(vals(x.grad!), [3 * Math.E, 3 * Math.E ** 2]);
});

function close2(a: number[], b: number[]): void {
  assert.equal(a.length, b.length);
  a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) <= 1e-5 * Math.max(1, Math.abs(b[i])), `[${i}] ${v} vs ${b[i]}`));
}
