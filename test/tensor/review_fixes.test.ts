/**
 * Regression tests for the tensor layer: iterative graph release, freeing unreached nodes,
 * tidy's brand-based tensor detection and async refusal, backward's gradient checks.
 * Run: node --import tsx --test test/tensor/review_fixes.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { record } from '../../src/tensor/autograd.ts';
import { isTensor } from '../../src/tensor/tensor.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';

const backend = new CpuBackend();
fon.setBackend(backend);
const live = () => backend.memory().liveHandles;
const vals = (t: Tensor): number[] => Array.from(hostToF32(t.dataSync(), t.dtype));

test('disposing the end of a 20000-long chain neither overflows the stack nor leaks', () => {
  const base = live();
  const x = fon.tensor([1, 2], undefined, { requiresGrad: true });
  let h = fon.mul(x, 1);
  for (let i = 0; i < 20000; i++) { const n = fon.mul(h, 1); h.dispose(); h = n; }
  h.dispose();
  assert.equal(live(), base + 1, 'only x is left');
  x.dispose();
  assert.equal(live(), base);
});

test('backward frees nodes that received no gradient (unless retainGraph)', () => {
  const base = live();
  const x = fon.tensor([1, 2], undefined, { requiresGrad: true });
  const h = fon.exp(x);
  const hNode = h.node!;
  // An op whose rule sends no gradient to its input: h's node is reached but gets nothing.
  const d = fon.detach(h);
  const y = record('noGradTo', fon.sum(d), [h], () => [null], [h]);
  h.dispose(); d.dispose();
  fon.backward(y);
  assert.equal(hNode.released, true, "the unreached node's saved tensors are freed");
  y.dispose(); x.dispose();
  assert.equal(live(), base);
});

test('tidy finds tensors by brand, not by constructor name (minified or subclassed)', () => {
  const base = live();
  const desc = Object.getOwnPropertyDescriptor(Tensor, 'name')!;
  Object.defineProperty(Tensor, 'name', { value: 'e', configurable: true }); // as a minifier would
  try {
    const out = fon.tidy(() => ({ t: fon.add(fon.ones([2]), 1) }));
    assert.equal(out.t.disposed, false);
    assert.deepEqual(vals(out.t), [2, 2]);
    out.t.dispose();
  } finally {
    Object.defineProperty(Tensor, 'name', desc);
  }
  class MyTensor extends Tensor {}
  const sub = fon.tidy(() => {
    const t = fon.ones([3]);
    Object.setPrototypeOf(t, MyTensor.prototype);
    return [t];
  });
  assert.equal(sub[0].disposed, false);
  assert.equal(isTensor(sub[0]), true);
  assert.equal(isTensor({ shape: [1] }), false);
  sub[0].dispose();
  assert.equal(live(), base);
});

test('tidy(async fn) throws ArgumentError and frees what the scope made', () => {
  const base = live();
  let made: Tensor | null = null;
  assert.throws(
    () => fon.tidy(async () => { made = fon.ones([4]); return made; }),
    (e: unknown) => e instanceof ArgumentError && /tidy/.test(e.message) && /synchronous/.test(e.message),
  );
  assert.equal(made!.disposed, true);
  assert.equal(live(), base);
});

test('backward(root, grad) requires the root dtype and backend and never stores the caller\'s tensor', () => {
  const x = fon.tensor([1, 2], undefined, { requiresGrad: true });
  const y = fon.mul(x, 3);
  const g16 = fon.tensor([1, 1], undefined, { dtype: 'f16' });
  assert.throws(() => fon.backward(y, g16), (e: unknown) => e instanceof DTypeError && /f16/.test(e.message) && /f32/.test(e.message));
  assert.throws(() => fon.backward(x, g16), DTypeError);
  assert.notEqual(x.grad, g16, 'a leaf root never adopts the caller\'s gradient object');
  const other = new CpuBackend();
  const gOther = fon.tensor([1, 1], undefined, { backend: other });
  assert.throws(() => fon.backward(y, gOther), (e: unknown) => e instanceof ArgumentError && /backend/.test(e.message));
  const g = fon.tensor([1, 1]);
  fon.backward(x, g);
  assert.notEqual(x.grad, g);
  g.dispose();
  assert.deepEqual(vals(x.grad!), [1, 1], 'the stored gradient survives disposing the caller\'s tensor');
  fon.backward(y, fon.tensor([1, 1]));
  assert.deepEqual(vals(x.grad!), [4, 4]);
  for (const t of [x, y, g16, gOther]) t.dispose();
});

test('views and optimizer-style in-place updates share storage (doc comment of tensor.ts)', () => {
  const x = fon.tensor([1, 2, 3, 4]);
  const views = [fon.reshape(x, [2, 2]), fon.detach(x), fon.cast(x, 'f32')];
  for (const v of views) assert.equal(v.storage, x.storage);
  for (const v of views) v.dispose();
  x.dispose();
});
