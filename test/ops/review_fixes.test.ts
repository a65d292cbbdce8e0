/**
 * Regression tests for the op layer: pow's gradients at base 0, per-op saved tensors of binary
 * ops, integer checks in slice/narrow/split, input validation of creation and fused ops, the
 * shared shape helpers, and gather's gradient after its input was disposed.
 * Run: node --import tsx --test test/ops/review_fixes.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, FonError, ShapeError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import * as shape from '../../src/tensor/shape.ts';
import * as host from '../../src/backend/cpu/host.ts';
import * as strides from '../../src/backend/webgpu/strides.ts';
import * as run from '../../src/ops/run.ts';

const backend = new CpuBackend();
fon.setBackend(backend);
const live = () => backend.memory().liveHandles;
const vals = (t: Tensor): number[] => Array.from(hostToF32(t.dataSync(), t.dtype));
const leaf = (xs: number[]) => fon.tensor(xs, undefined, { requiresGrad: true });

function throwsFon(fn: () => unknown, cls: typeof FonError, re: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${String(e)}`);
    assert.match((e as Error).message, re);
    return true;
  });
}

test('pow: gradients at base 0 are finite, as in PyTorch', () => {
  const a = leaf([0, 2, 0]);
  const b = leaf([2, 3, 0]);
  fon.backward(fon.sum(fon.pow(a, b)));
  // d/db a^b = a^b·log a → 0 at a = 0 (b ≥ 0); d/da = b·a^(b−1) → 0 where b = 0.
  const gb = vals(b.grad!), ga = vals(a.grad!);
  assert.deepEqual(gb.map((v) => Number.isNaN(v)), [false, false, false]);
  assert.equal(gb[0], 0);
  assert.ok(Math.abs(gb[1] - 8 * Math.log(2)) < 1e-5);
  assert.equal(gb[2], 0);
  assert.deepEqual(ga, [0, 12, 0]);
});

test('binary ops save only what their gradient reads', () => {
  const x = leaf([1, 2, 3]);
  const keepsInput = (op: (h: Tensor) => Tensor): boolean => {
    const h = fon.mul(x, 2);
    const y = op(h);
    const before = live();
    h.dispose();
    const freed = live() < before;
    y.dispose();
    return !freed;
  };
  assert.equal(keepsInput((h) => fon.add(h, 1)), false, 'add keeps neither input');
  assert.equal(keepsInput((h) => fon.sub(h, 1)), false, 'sub keeps neither input');
  assert.equal(keepsInput((h) => fon.div(h, 2)), false, 'div keeps b and y, not a');
  assert.equal(keepsInput((h) => fon.mul(h, 2)), true, 'mul keeps a');
  assert.equal(keepsInput((h) => fon.maximum(h, 2)), true, 'max keeps a');
  // Numbers made into scalars are saved only when read: add keeps nothing at all.
  const base = live();
  const y = fon.add(x, 1);
  assert.equal(live(), base + 1);
  y.dispose();
  x.dispose();
});

test('slice / narrow / split require integers and name the op and the value', () => {
  const x = fon.tensor([1, 2, 3, 4], [2, 2]);
  throwsFon(() => fon.slice(x, [0.5, 0]), ArgumentError, /slice: start 0\.5/);
  throwsFon(() => fon.slice(x, [0, 0], [1, 1.5]), ArgumentError, /slice: size 1\.5/);
  throwsFon(() => fon.slice(x, [NaN]), ArgumentError, /slice: start NaN/);
  throwsFon(() => fon.narrow(x, 1, 0.5, 1), ArgumentError, /narrow: start 0\.5/);
  throwsFon(() => fon.narrow(x, 1, 0, 1.25), ArgumentError, /narrow: length 1\.25/);
  throwsFon(() => fon.split(x, [3, -1], 0), ArgumentError, /split: size -1/);
  throwsFon(() => fon.split(x, [0.5, 1.5], 0), ArgumentError, /split: size 0\.5/);
  x.dispose();
});

test('creation ops validate their numbers with FonErrors naming the value', () => {
  throwsFon(() => fon.arange(0, Infinity), ArgumentError, /arange: stop .*Infinity/);
  throwsFon(() => fon.arange(NaN), ArgumentError, /arange: stop .*NaN/);
  throwsFon(() => fon.arange(0, 4, -Infinity), ArgumentError, /arange: step .*-Infinity/);
  throwsFon(() => fon.randint([2], 3, 3), ArgumentError, /randint: high 3 .*low 3/);
  throwsFon(() => fon.randint([2], 5, 1), ArgumentError, /randint: high 1 .*low 5/);
});

test('fused ops reject rank-0 inputs and mismatched weight/bias dtypes', () => {
  const s = fon.scalar(1);
  const w1 = fon.ones([1]);
  throwsFon(() => fon.crossEntropy(s, fon.tensor([0], [], { dtype: 'i32' })), ShapeError, /crossEntropy: logits .*rank ≥ 1.*\[\]/);
  for (const f of [() => fon.rmsnorm(s, w1), () => fon.layernorm(s, w1, w1)]) {
    assert.throws(f, (e: unknown) => e instanceof ShapeError && /rank ≥ 1/.test(e.message) && !/undefined/.test(e.message));
  }
  const x = fon.ones([2, 3]);
  const w = fon.ones([3]), w16 = fon.ones([3], { dtype: 'f16' });
  throwsFon(() => fon.rmsnorm(x, w16), DTypeError, /rmsnorm: weight dtype f16 .*f32/);
  throwsFon(() => fon.layernorm(x, w16, w), DTypeError, /layernorm: weight dtype f16/);
  throwsFon(() => fon.layernorm(x, w, w16), DTypeError, /layernorm: bias dtype f16/);
});

test('sizeOf and broadcastStrides have one definition, re-exported where they used to live', () => {
  assert.equal(host.sizeOf, shape.sizeOf);
  assert.equal(run.sizeOf, shape.sizeOf);
  assert.equal(host.broadcastStrides, shape.broadcastStrides);
  assert.equal(strides.broadcastStrides, shape.broadcastStrides);
  assert.equal(shape.sizeOf([]), 1);
  assert.equal(shape.sizeOf([2, 3, 4]), 24);
  assert.deepEqual(shape.broadcastStrides([3, 1], [2, 3, 4]), [0, 1, 0]);
});

test('gather backward works after its (non-leaf) input was disposed', () => {
  const x = leaf([1, 2, 3, 4]);
  const h = fon.mul(x, 1);
  const idx = fon.tensor([3, 3, 0], undefined, { dtype: 'i32' });
  const y = fon.gather(h, idx, 0);
  h.dispose();
  fon.backward(fon.sum(y));
  assert.deepEqual(vals(x.grad!), [1, 0, 0, 2]);
  assert.equal(x.grad!.dtype, 'f32');
});
