/**
 * Forward values of the ops against hand-computed or independently computed references: small
 * explicit examples, direct formulas in f64 (norms, rope, cross-entropy), tie rules (stable sort,
 * cummax's latest index), and the rounding of f16/bf16 casts bit by bit.
 * Run: node --import tsx --test test/ops/forward.test.ts
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { ropeAngles } from '../parity/cases.ts';

/** Values as plain numbers (f16/bf16 widened; integers as they are — through f32 they would round). */
const vals = (t: Tensor): number[] => (t.isFloat ? Array.from(hostToF32(t.dataSync(), t.dtype)) : Array.from(t.dataSync()));
/** Raw storage (16-bit patterns for f16/bf16). */
const bits = (t: Tensor): number[] => Array.from(t.dataSync());

function close(actual: readonly number[], expected: readonly number[], tol = 1e-6, what = ''): void {
  assert.equal(actual.length, expected.length, `${what}: length ${actual.length} vs ${expected.length}`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i], e = expected[i];
    if (Object.is(a, e) || (Number.isNaN(a) && Number.isNaN(e))) continue;
    assert.ok(Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)), `${what}[${i}]: got ${a}, want ${e}`);
  }
}

const t = (data: Parameters<typeof fon.tensor>[0], shape?: readonly number[], dtype?: fon.DType) => fon.tensor(data, shape, dtype ? { dtype } : {});

describe('unary', () => {
  const x = [-2, -0.5, 0, 0.5, 3];
  const sig = (v: number) => 1 / (1 + Math.exp(-v));
  const cases: [string, (t: Tensor) => Tensor, (v: number) => number][] = [
    ['neg', fon.neg, (v) => -v],
    ['abs', fon.abs, Math.abs],
    ['relu', fon.relu, (v) => Math.max(v, 0)],
    ['square', fon.square, (v) => v * v],
    ['exp', fon.exp, Math.exp],
    ['tanh', fon.tanh, Math.tanh],
    ['sigmoid', fon.sigmoid, sig],
    ['silu', fon.silu, (v) => v * sig(v)],
    ['gelu', fon.gelu, (v) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)))],
    ['softplus', fon.softplus, (v) => Math.log(1 + Math.exp(v))],
    ['sin', fon.sin, Math.sin],
    ['cos', fon.cos, Math.cos],
  ];
  for (const [name, fn, ref] of cases) test(name, () => close(vals(fn(t(x))), x.map(ref), 1e-6, name));

  test('sign, with zero', () => assert.deepEqual(vals(fon.sign(t([-2, -0.5, 0, 0.5, 3]))), [-1, -1, 0, 1, 1]));
  test('sqrt, rsqrt, log, reciprocal on known values', () => {
    assert.deepEqual(vals(fon.sqrt(t([0.25, 1, 4]))), [0.5, 1, 2]);
    assert.deepEqual(vals(fon.rsqrt(t([0.25, 1, 4]))), [2, 1, 0.5]);
    close(vals(fon.log(t([1, Math.E, 0.5]))), [0, 1, Math.log(0.5)]);
    assert.deepEqual(vals(fon.reciprocal(t([0.25, -2]))), [4, -0.5]);
  });
  test('gelu(1) is the tanh approximation (GPT-2 gelu_new), 0.841192', () => close(vals(fon.gelu(t([1]))), [0.8411919906], 1e-6));
  test('softplus is accurate far out in both tails', () => close(vals(fon.softplus(t([30, -30]))), [30, 9.357622968839737e-14], 1e-6));
  test('log(0) = -inf, sqrt(-1) = NaN, exp(100) = inf in f32', () => {
    const [a, b, c] = [vals(fon.log(t([0])))[0], vals(fon.sqrt(t([-1])))[0], vals(fon.exp(t([100])))[0]];
    assert.equal(a, -Infinity); assert.ok(Number.isNaN(b)); assert.equal(c, Infinity);
  });
  test('f16 input gives an f16 result, rounded once', () => {
    const y = fon.exp(t([1], undefined, 'f16'));
    assert.equal(y.dtype, 'f16');
    assert.deepEqual(vals(y), [2.71875]);
  });
});

describe('binary and where', () => {
  test('broadcast (2,1) with (3)', () => {
    const a = t([[1], [2]]), b = t([10, 20, 30]);
    const s = fon.add(a, b);
    assert.deepEqual(s.shape, [2, 3]);
    assert.deepEqual(vals(s), [11, 21, 31, 12, 22, 32]);
    assert.deepEqual(vals(fon.sub(a, b)), [-9, -19, -29, -8, -18, -28]);
    assert.deepEqual(vals(fon.mul(a, b)), [10, 20, 30, 20, 40, 60]);
    close(vals(fon.div(a, b)), [0.1, 0.05, 1 / 30, 0.2, 0.1, 2 / 30]);
  });
  test('broadcast (3,1,2) with (4,1) gives (3,4,2)', () => {
    const a = fon.reshape(fon.cast(fon.arange(6), 'f32'), [3, 1, 2]), b = t([[0], [10], [20], [30]]);
    const y = fon.add(a, b);
    assert.deepEqual(y.shape, [3, 4, 2]);
    const want: number[] = [];
    for (let i = 0; i < 3; i++) for (let j = 0; j < 4; j++) for (let k = 0; k < 2; k++) want.push(i * 2 + k + j * 10);
    assert.deepEqual(vals(y), want);
  });
  test('number operands on either side', () => {
    assert.deepEqual(vals(fon.sub(10, t([1, 2]))), [9, 8]);
    assert.deepEqual(vals(fon.pow(2, t([0, 1, 3]))), [1, 2, 8]);
    assert.deepEqual(vals(fon.pow(t([3, 4]), 2)), [9, 16]);
    assert.deepEqual(vals(fon.maximum(t([-1, 0.5, 2]), 0.5)), [0.5, 0.5, 2]);
    assert.deepEqual(vals(fon.minimum(t([-1, 0.5, 2]), 0.5)), [-1, 0.5, 0.5]);
  });
  test('comparisons give 1/0 in the input dtype', () => {
    const a = t([1, 2, 3]), b = t([2, 2, 2]);
    const cmp: [(a: Tensor, b: Tensor) => Tensor, number[]][] = [
      [fon.eq, [0, 1, 0]], [fon.ne, [1, 0, 1]], [fon.lt, [1, 0, 0]], [fon.le, [1, 1, 0]], [fon.gt, [0, 0, 1]], [fon.ge, [0, 1, 1]],
    ];
    for (const [f, want] of cmp) {
      const y = f(a, b);
      assert.equal(y.dtype, 'f32');
      assert.deepEqual(vals(y), want);
    }
    const yi = fon.lt(t([1, 5], undefined, 'i32'), t([3], undefined, 'i32'));
    assert.equal(yi.dtype, 'i32');
    assert.deepEqual(vals(yi), [1, 0]);
  });
  test('integer division truncates toward zero; u8 arithmetic wraps', () => {
    assert.deepEqual(vals(fon.div(t([7, -7, 7, -7], undefined, 'i32'), t([2, 2, -2, -2], undefined, 'i32'))), [3, -3, -3, 3]);
    assert.deepEqual(vals(fon.add(t([200], undefined, 'u8'), t([100], undefined, 'u8'))), [44]);
    assert.deepEqual(vals(fon.sub(t([3], undefined, 'u8'), t([5], undefined, 'u8'))), [254]);
  });
  test('where broadcasts condition and both branches', () => {
    const y = fon.where(t([[1], [0]]), t([1, 2, 3]), 0);
    assert.deepEqual(y.shape, [2, 3]);
    assert.deepEqual(vals(y), [1, 2, 3, 0, 0, 0]);
    const z = fon.where(t([0, 3, -1], undefined, 'i32'), t([1, 1, 1], undefined, 'i32'), t([7], undefined, 'i32'));
    assert.deepEqual(vals(z), [7, 1, 1]);
  });
});

describe('reductions', () => {
  const m = () => t([[1, 2, 3], [4, 5, 6]]);
  test('sum over all, one axis, keepDims', () => {
    const all = fon.sum(m());
    assert.deepEqual(all.shape, []);
    assert.deepEqual(vals(all), [21]);
    assert.deepEqual(vals(fon.sum(m(), 0)), [5, 7, 9]);
    const k = fon.sum(m(), 1, { keepDims: true });
    assert.deepEqual(k.shape, [2, 1]);
    assert.deepEqual(vals(k), [6, 15]);
    assert.deepEqual(vals(fon.sum(m(), [-1, 0])), [21]);
  });
  test('sum over two axes of a rank-3 tensor', () => {
    const x = fon.reshape(fon.cast(fon.arange(24), 'f32'), [2, 3, 4]);
    const s = fon.sum(x, [0, 2]);
    assert.deepEqual(s.shape, [3]);
    // Σ over i, k of 12i + 4j + k = 8·(4j) + Σi 12i·4 + Σk k·2 = 32j + 48 + 12
    assert.deepEqual(vals(s), [60, 92, 124]);
  });
  test('mean, max, min', () => {
    assert.deepEqual(vals(fon.mean(m(), -1)), [2, 5]);
    assert.deepEqual(vals(fon.max(m(), 0)), [4, 5, 6]);
    assert.deepEqual(vals(fon.min(m())), [1]);
    assert.deepEqual(vals(fon.max(t([-5, -Infinity, -3]))), [-3]);
  });
  test('sum over an empty axis is 0, mean is NaN', () => {
    const z = fon.zeros([3, 0]);
    assert.deepEqual(vals(fon.sum(z, 1)), [0, 0, 0]);
    assert.ok(vals(fon.mean(z, 1)).every(Number.isNaN));
    assert.deepEqual(fon.sum(z, 0).shape, [0]);
  });
  test('the gradient of max is split evenly among ties', () => {
    const x = t([1, 3, 3, 2]);
    x.requiresGrad = true;
    fon.backward(fon.max(x));
    assert.deepEqual(vals(x.grad!), [0, 0.5, 0.5, 0]);
  });
  test('i32 beyond 2^24 stays exact in sum, max, cumsum, sort and int casts', () => {
    const x = t([16777217, 1, 16777219, 16777218], undefined, 'i32');
    assert.deepEqual(vals(fon.sum(x)), [50331655]);
    assert.deepEqual(vals(fon.max(x)), [16777219]);
    assert.deepEqual(vals(fon.cumsum(x)), [16777217, 16777218, 33554437, 50331655]);
    const s = fon.sort(x);
    assert.deepEqual(vals(s.values), [1, 16777217, 16777218, 16777219]);
    assert.deepEqual(vals(s.indices), [1, 0, 3, 2]);
    assert.deepEqual(vals(fon.cast(x, 'u8')), [1, 1, 3, 2]);
    assert.deepEqual(vals(fon.sum(t([2147483647, 1], undefined, 'i32'))), [-2147483648], 'wraps like i32 arithmetic');
  });
  test('integer sum stays integer', () => {
    const s = fon.sum(t([1, 2, 2147483], undefined, 'i32'));
    assert.equal(s.dtype, 'i32');
    assert.deepEqual(vals(s), [2147486]);
  });
});

describe('softmax family', () => {
  const sm = [0.09003057317038046, 0.24472847105479767, 0.6652409557748219];
  test('softmax of [1, 2, 3]', () => close(vals(fon.softmax(t([1, 2, 3]))), sm));
  test('softmax is shift invariant and stable for large inputs', () => close(vals(fon.softmax(t([1000, 1001, 1002]))), sm));
  test('softmax along axis 0', () => {
    const y = fon.softmax(t([[1, 5], [2, 5], [3, 5]]), 0);
    close(vals(y), [sm[0], 1 / 3, sm[1], 1 / 3, sm[2], 1 / 3]);
  });
  test('logsumexp and logSoftmax of [1, 2, 3]', () => {
    close(vals(fon.logsumexp(t([1, 2, 3]))), [3.40760596444438]);
    close(vals(fon.logSoftmax(t([1, 2, 3]))), [1, 2, 3].map((v) => v - 3.40760596444438));
    close(vals(fon.logsumexp(t([[1, 2, 3]]), -1, { keepDims: true })), [3.40760596444438]);
    assert.deepEqual(fon.logsumexp(t([[1, 2, 3]]), -1, { keepDims: true }).shape, [1, 1]);
  });
  test('logsumexp of all −∞ is −∞; over an empty axis it is −∞ per row', () => {
    assert.deepEqual(vals(fon.logsumexp(t([-Infinity, -Infinity]))), [-Infinity]);
    const e = fon.logsumexp(fon.zeros([3, 0]), 1);
    assert.deepEqual(e.shape, [3]);
    assert.deepEqual(vals(e), [-Infinity, -Infinity, -Infinity]);
  });
});

describe('matmul and linear', () => {
  const A = [[1, 2, 3], [4, 5, 6]], B = [[7, 8], [9, 10], [11, 12]], AB = [58, 64, 139, 154];
  test('known 2×3 · 3×2', () => {
    const y = fon.matmul(t(A), t(B));
    assert.deepEqual(y.shape, [2, 2]);
    assert.deepEqual(vals(y), AB);
  });
  test('transposed operands give the same product', () => {
    const At = fon.transpose(t(A)), Bt = fon.transpose(t(B));
    assert.deepEqual(vals(fon.matmul(At, t(B), { transA: true })), AB);
    assert.deepEqual(vals(fon.matmul(t(A), Bt, { transB: true })), AB);
    assert.deepEqual(vals(fon.matmul(At, Bt, { transA: true, transB: true })), AB);
  });
  test('batch broadcasting (2,1,2,3)·(3,3,2) equals a direct loop', () => {
    const a = fon.randn([2, 1, 2, 3], { seed: 1 }), b = fon.randn([3, 3, 2], { seed: 2 });
    const y = fon.matmul(a, b);
    assert.deepEqual(y.shape, [2, 3, 2, 2]);
    const av = vals(a), bv = vals(b), want: number[] = [];
    for (let p = 0; p < 2; p++) for (let q = 0; q < 3; q++) for (let i = 0; i < 2; i++) for (let j = 0; j < 2; j++) {
      let s = 0;
      for (let k = 0; k < 3; k++) s += av[p * 6 + i * 3 + k] * bv[q * 6 + k * 2 + j];
      want.push(s);
    }
    close(vals(y), want, 1e-5);
  });
  test('inner dimension 0 gives zeros', () => {
    const y = fon.matmul(fon.zeros([2, 0]), fon.zeros([0, 3]));
    assert.deepEqual(y.shape, [2, 3]);
    assert.deepEqual(vals(y), [0, 0, 0, 0, 0, 0]);
  });
  test('linear with PyTorch-layout weights (out, in) and bias; and (in, out)', () => {
    const x = t([[1, 2]]), w = t([[1, 0], [0, 1], [1, 1]]), b = t([0.5, 0.5, 0.5]);
    assert.deepEqual(vals(fon.linear(x, w, b)), [1.5, 2.5, 3.5]);
    assert.deepEqual(vals(fon.linear(x, fon.transpose(w), undefined, false)), [1, 2, 3]);
    const x3 = fon.reshape(x, [1, 1, 2]);
    assert.deepEqual(fon.linear(x3, w, b).shape, [1, 1, 3]);
  });
  test('linear with outDType: the f32 result rounded once, bias included; 16-bit operands to f32', () => {
    // 1/3-ish values whose f32 sums are not f16 values: the f16 result is their rounding, not a copy.
    const x = fon.reshape(t([1 / 3, 2 / 3, 1 / 7, 5 / 7]), [1, 1, 4]), w = t([[1, 1, 1, 1], [0.1, 0.2, 0.3, 0.4]]), b = t([1 / 9, 0.01]);
    const y = fon.linear(x, w, b, true, { outDType: 'f16' });
    assert.equal(y.dtype, 'f16');
    assert.deepEqual(y.shape, [1, 1, 2]);
    assert.deepEqual(bits(y), bits(fon.cast(fon.linear(x, w, b), 'f16')));
    assert.notDeepEqual(vals(y), vals(fon.linear(x, w, b)), 'rounded to f16');
    const xh = fon.cast(x, 'f16'), wh = fon.cast(w, 'f16');
    const z = fon.linear(xh, wh, undefined, true, { outDType: 'f32' });
    assert.equal(z.dtype, 'f32');
    assert.deepEqual(vals(z), vals(fon.linear(fon.cast(xh, 'f32'), fon.cast(wh, 'f32'))), 'the f32 product of the f16 values, not rounded to f16');
  });
});

describe('layout', () => {
  const r24 = () => fon.reshape(fon.cast(fon.arange(24), 'f32'), [2, 3, 4]);
  test('permute moves axes: out[i,j,k] = x[j,k,i]', () => {
    const y = fon.permute(r24(), [2, 0, 1]);
    assert.deepEqual(y.shape, [4, 2, 3]);
    const v = vals(y);
    for (let i = 0; i < 4; i++) for (let j = 0; j < 2; j++) for (let k = 0; k < 3; k++) assert.equal(v[i * 6 + j * 3 + k], j * 12 + k * 4 + i);
  });
  test('transpose, reshape with -1, squeeze, unsqueeze, flatten', () => {
    assert.deepEqual(vals(fon.transpose(t([[1, 2, 3], [4, 5, 6]]))), [1, 4, 2, 5, 3, 6]);
    assert.deepEqual(fon.reshape(r24(), [-1, 6]).shape, [4, 6]);
    assert.deepEqual(fon.unsqueeze(r24(), -1).shape, [2, 3, 4, 1]);
    assert.deepEqual(fon.squeeze(fon.zeros([1, 3, 1])).shape, [3]);
    assert.deepEqual(fon.flatten(r24()).shape, [24]);
    assert.deepEqual(vals(fon.moveAxisLast(t([[1, 2], [3, 4]]), 0)[0]), [1, 3, 2, 4]);
  });
  test('slice with negative start and -1 size; narrow', () => {
    const x = fon.cast(fon.arange(10), 'f32');
    assert.deepEqual(vals(fon.slice(x, [-3])), [7, 8, 9]);
    assert.deepEqual(vals(fon.slice(x, [2], [3])), [2, 3, 4]);
    const m = t([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(vals(fon.slice(m, [1, 1], [-1, 2])), [5, 6]);
    assert.deepEqual(vals(fon.narrow(m, 1, 1, 1)), [2, 5]);
  });
  test('concat, stack, split', () => {
    assert.deepEqual(vals(fon.concat([t([[1, 2]]), t([[3]]), fon.zeros([1, 0])], 1)), [1, 2, 3]);
    const s = fon.stack([t([1, 2]), t([3, 4])], 1);
    assert.deepEqual(s.shape, [2, 2]);
    assert.deepEqual(vals(s), [1, 3, 2, 4]);
    const [a, b] = fon.split(t([[1, 2, 3], [4, 5, 6]]), [1, 2], 1);
    assert.deepEqual(vals(a), [1, 4]);
    assert.deepEqual(vals(b), [2, 3, 5, 6]);
  });
  test('flip one and both axes', () => {
    const m = t([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(vals(fon.flip(m, [1])), [3, 2, 1, 6, 5, 4]);
    assert.deepEqual(vals(fon.flip(m, [0])), [4, 5, 6, 1, 2, 3]);
    assert.deepEqual(vals(fon.flip(m, [0, -1])), [6, 5, 4, 3, 2, 1]);
  });
  test('broadcastTo and sumTo', () => {
    const b = fon.broadcastTo(t([[1, 2, 3]]), [2, 2, 3]);
    assert.deepEqual(b.shape, [2, 2, 3]);
    assert.deepEqual(vals(b), [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]);
    assert.deepEqual(vals(fon.sumTo(b, [1, 3])), [4, 8, 12]);
  });
});

describe('indexing', () => {
  test('gather along axis 1 and 0 (PyTorch documentation example)', () => {
    const x = t([[1, 2], [3, 4]]);
    assert.deepEqual(vals(fon.gather(x, t([[0, 0], [1, 0]], undefined, 'i32'), 1)), [1, 1, 4, 3]);
    assert.deepEqual(vals(fon.gather(x, t([[1, 0], [1, 1], [0, 1]], undefined, 'i32'), 0)), [3, 2, 3, 4, 1, 4]);
  });
  test('scatterAdd accumulates repeated indices', () => {
    const y = fon.scatterAdd(fon.zeros([5]), t([0, 1, 0, 4], undefined, 'i32'), t([1, 2, 3, 4]), 0);
    assert.deepEqual(vals(y), [4, 2, 0, 0, 4]);
    const z = fon.scatterAdd(fon.ones([2, 3]), t([[2, 2], [0, 1]], undefined, 'i32'), t([[1, 2], [3, 4]]), 1);
    assert.deepEqual(vals(z), [1, 1, 4, 4, 5, 1]);
  });
  test('embedding looks rows up; its gradient sums repeated ids', () => {
    const table = t([[0, 1], [2, 3], [4, 5]]);
    table.requiresGrad = true;
    const y = fon.embedding(table, t([[2, 0], [1, 2]], undefined, 'i32'));
    assert.deepEqual(y.shape, [2, 2, 2]);
    assert.deepEqual(vals(y), [4, 5, 0, 1, 2, 3, 4, 5]);
    fon.backward(fon.sum(y));
    assert.deepEqual(vals(table.grad!), [1, 1, 1, 1, 2, 2]);
  });
  test('gatherRows: each batch entry\'s heads read its list of rows, as gather with the list spelt out; its gradient sums repeats; bad lists refused', () => {
    // x (2, 2, 3, 2): row r of head h of batch entry b holds 100·b + 10·h + r, twice.
    const ref = (b: number, h: number, r: number) => 100 * b + 10 * h + r;
    const data = Array.from({ length: 24 }, (_, i) => ref(Math.floor(i / 12), Math.floor(i / 6) % 2, Math.floor((i % 6) / 2)));
    const xx = fon.tensor(data, [2, 2, 3, 2], { requiresGrad: true });
    const rows = t([[2, 0, 2, 1], [1, 1, 0, 0]], undefined, 'i32');
    const y = fon.gatherRows(xx, rows, 2);
    assert.deepEqual(y.shape, [2, 2, 4, 2]);
    const want = [[2, 0, 2, 1], [1, 1, 0, 0]].flatMap((list, b) => [0, 1].flatMap((h) => list.flatMap((r) => [ref(b, h, r), ref(b, h, r)])));
    assert.deepEqual(vals(y), want);
    const full = t(Array.from({ length: 32 }, (_, i) => [[2, 0, 2, 1], [1, 1, 0, 0]][i >> 4][(i >> 1) & 3]), [2, 2, 4, 2], 'i32');
    assert.deepEqual(vals(fon.gather(xx, full, 2)), want);
    fon.backward(fon.sum(y));
    // Batch entry 0 reads row 2 twice, rows 0 and 1 once; entry 1 reads rows 0 and 1 twice each, row 2 never.
    assert.deepEqual(vals(xx.grad!), [1, 1, 1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0, 0, 2, 2, 2, 2, 0, 0]);
    assert.throws(() => fon.gatherRows(xx, t([[0], [1], [2]], undefined, 'i32'), 2), /gatherRows: rows \[3, 1\] must be \(S, M\) with S dividing the 4 entries before axis 2 of \[2, 2, 3, 2\]/);
    assert.throws(() => fon.gatherRows(xx, t([[0, 3]], undefined, 'i32'), 2), /gatherRows: index 3 out of range \[0, 3\)/);
  });
});

describe('scans and sorting', () => {
  test('sort is stable: ties keep their original order, ascending and descending', () => {
    const x = t([3, 1, 2, 1, 3, 0]);
    const up = fon.sort(x);
    assert.deepEqual(vals(up.values), [0, 1, 1, 2, 3, 3]);
    assert.deepEqual(vals(up.indices), [5, 1, 3, 2, 0, 4]);
    const down = fon.sort(x, -1, { descending: true });
    assert.deepEqual(vals(down.values), [3, 3, 2, 1, 1, 0]);
    assert.deepEqual(vals(down.indices), [0, 4, 2, 1, 3, 5]);
    assert.deepEqual(vals(fon.argsort(x)), [5, 1, 3, 2, 0, 4]);
  });
  test('sort along axis 0 of a matrix', () => {
    const s = fon.sort(t([[3, 1], [1, 2], [2, 0]]), 0);
    assert.deepEqual(vals(s.values), [1, 0, 2, 1, 3, 2]);
    assert.deepEqual(vals(s.indices), [1, 2, 2, 0, 0, 1]);
    assert.equal(s.indices.dtype, 'i32');
  });
  test('topk largest and smallest', () => {
    const x = t([1, 5, 3, 5, 2]);
    const big = fon.topk(x, 2);
    assert.deepEqual(vals(big.values), [5, 5]);
    assert.deepEqual(vals(big.indices), [1, 3]);
    const small = fon.topk(x, 2, -1, { largest: false });
    assert.deepEqual(vals(small.values), [1, 2]);
    assert.deepEqual(vals(small.indices), [0, 4]);
  });
  test('cumsum along each axis', () => {
    assert.deepEqual(vals(fon.cumsum(t([1, 2, 3, 4]))), [1, 3, 6, 10]);
    assert.deepEqual(vals(fon.cumsum(t([[1, 2], [3, 4]]), 0)), [1, 2, 4, 6]);
  });
  test('cummax index on ties is the latest index (as PyTorch); cummin likewise', () => {
    const mx = fon.cummax(t([1, 3, 2, 3, 0, 5, 5]));
    assert.deepEqual(vals(mx.values), [1, 3, 3, 3, 3, 5, 5]);
    assert.deepEqual(vals(mx.indices), [0, 1, 1, 3, 3, 5, 6]);
    const mn = fon.cummin(t([2, 1, 1, 3, 0, 0]));
    assert.deepEqual(vals(mn.values), [2, 1, 1, 1, 0, 0]);
    assert.deepEqual(vals(mn.indices), [0, 1, 2, 2, 4, 5]);
  });
  test('cummax sends each gradient to the index it took', () => {
    const x = t([1, 3, 2, 4]);
    x.requiresGrad = true;
    fon.backward(fon.sum(fon.cummax(x).values));
    assert.deepEqual(vals(x.grad!), [1, 2, 0, 1]);
  });
});

describe('fused ops against direct formulas', () => {
  test('rmsnorm: x / √(mean(x²) + eps) · w', () => {
    const x = fon.randn([3, 7], { seed: 3 }), w = fon.randn([7], { seed: 4 });
    const xv = vals(x), wv = vals(w), eps = 1e-6, want: number[] = [];
    for (let r = 0; r < 3; r++) {
      const row = xv.slice(r * 7, r * 7 + 7);
      const rms = Math.sqrt(row.reduce((s, v) => s + v * v, 0) / 7 + eps);
      row.forEach((v, c) => want.push((v / rms) * wv[c]));
    }
    close(vals(fon.rmsnorm(x, w, eps)), want, 1e-5);
  });
  test('layernorm: (x − μ)/√(σ² + eps) · w + b, biased variance', () => {
    const x = fon.randn([3, 7], { seed: 5, mean: 2 }), w = fon.randn([7], { seed: 6 }), b = fon.randn([7], { seed: 7 });
    const xv = vals(x), wv = vals(w), bv = vals(b), eps = 1e-5, want: number[] = [];
    for (let r = 0; r < 3; r++) {
      const row = xv.slice(r * 7, r * 7 + 7);
      const mu = row.reduce((s, v) => s + v, 0) / 7;
      const varr = row.reduce((s, v) => s + (v - mu) ** 2, 0) / 7;
      row.forEach((v, c) => want.push(((v - mu) / Math.sqrt(varr + eps)) * wv[c] + bv[c]));
    }
    close(vals(fon.layernorm(x, w, b, eps)), want, 1e-5);
    // Unit weight and zero bias: every row has mean 0 and variance ≈ 1.
    const y = vals(fon.layernorm(x, fon.ones([7]), fon.zeros([7]), 0));
    for (let r = 0; r < 3; r++) {
      const row = y.slice(r * 7, r * 7 + 7);
      close([row.reduce((s, v) => s + v, 0) / 7, row.reduce((s, v) => s + v * v, 0) / 7], [0, 1], 1e-5);
    }
  });

  /** Direct RoPE on x (B, T, H, D) (positions on axis 1). */
  function ropeDirect(xv: number[], [B, T, H, D]: number[], interleaved: boolean): number[] {
    const th = ropeAngles(T, D), out = xv.slice(), half = D / 2;
    for (let b = 0; b < B; b++) for (let p = 0; p < T; p++) for (let h = 0; h < H; h++) {
      const base = ((b * T + p) * H + h) * D;
      for (let j = 0; j < half; j++) {
        const [i0, i1] = interleaved ? [2 * j, 2 * j + 1] : [j, j + half];
        const c = Math.cos(th[p * half + j]), s = Math.sin(th[p * half + j]);
        out[base + i0] = xv[base + i0] * c - xv[base + i1] * s;
        out[base + i1] = xv[base + i0] * s + xv[base + i1] * c;
      }
    }
    return out;
  }
  const tables = (T: number, D: number) => {
    const th = Array.from(ropeAngles(T, D));
    return [t(th.map(Math.cos), [T, D / 2]), t(th.map(Math.sin), [T, D / 2])];
  };
  for (const interleaved of [false, true]) {
    test(`rope (${interleaved ? 'interleaved pairs, GPT-J' : 'half pairs, NeoX/Llama'}) with seqAxis 1 and the default layout`, () => {
      const shape = [2, 5, 3, 8];
      const x = fon.randn(shape, { seed: 8 });
      const [cos, sin] = tables(5, 8);
      const y = fon.rope(x, cos, sin, { seqAxis: 1, interleaved });
      close(vals(y), ropeDirect(vals(x), shape, interleaved), 1e-5);
      // The same rotation with positions on axis -2 of (B, H, T, D).
      const xh = fon.permute(x, [0, 2, 1, 3]);
      const yh = fon.rope(xh, cos, sin, { interleaved });
      close(vals(fon.permute(yh, [0, 2, 1, 3])), vals(y), 1e-6);
      // Position 0 is the identity.
      close(vals(fon.narrow(y, 1, 0, 1)), vals(fon.narrow(x, 1, 0, 1)), 1e-7);
    });
  }
  test('rope halves and interleaved differ unless D = 2', () => {
    const x = fon.randn([1, 3, 8], { seed: 9 });
    const [cos, sin] = tables(3, 8);
    assert.notDeepEqual(vals(fon.rope(x, cos, sin)), vals(fon.rope(x, cos, sin, { interleaved: true })));
  });

  /** Mean cross-entropy over the kept rows, in f64. */
  function ceDirect(lv: number[], targets: number[], v: number, ignore: number): { rows: number[]; mean: number } {
    const rows = targets.map((tg, r) => {
      if (tg === ignore) return 0;
      const row = lv.slice(r * v, r * v + v), m = Math.max(...row);
      return m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0)) - row[tg];
    });
    const kept = targets.filter((tg) => tg !== ignore).length;
    return { rows, mean: rows.reduce((s, x) => s + x, 0) / kept };
  }
  test('crossEntropy with the default ignore index equals the manual mean over kept rows', () => {
    const logits = fon.randn([4, 5], { seed: 10, std: 2 });
    const targets = [1, -100, 4, 0];
    const tt = t(targets, undefined, 'i32');
    const ref = ceDirect(vals(logits), targets, 5, -100);
    close(vals(fon.crossEntropy(logits, tt)), [ref.mean], 1e-6);
    close(vals(fon.crossEntropy(logits, tt, { reduction: 'sum' })), [ref.rows.reduce((s, x) => s + x, 0)], 1e-6);
    const none = fon.crossEntropy(logits, tt, { reduction: 'none' });
    assert.deepEqual(none.shape, [4]);
    close(vals(none), ref.rows, 1e-6);
    assert.equal(vals(none)[1], 0);
  });
  test('crossEntropy with a custom ignore index; its gradient is (softmax − onehot)/kept on kept rows, 0 on ignored', () => {
    const logits = fon.randn([3, 4], { seed: 11 });
    logits.requiresGrad = true;
    const targets = [2, 3, 0];
    const loss = fon.crossEntropy(logits, t(targets, undefined, 'i32'), { ignoreIndex: 3 });
    const lv = vals(logits);
    close(vals(loss), [ceDirect(lv, targets, 4, 3).mean], 1e-6);
    fon.backward(loss);
    const want: number[] = [];
    targets.forEach((tg, r) => {
      const row = lv.slice(r * 4, r * 4 + 4), z = row.reduce((s, x) => s + Math.exp(x), 0);
      row.forEach((x, c) => want.push(tg === 3 ? 0 : (Math.exp(x) / z - (c === tg ? 1 : 0)) / 2));
    });
    close(vals(logits.grad!), want, 1e-6);
  });
  test('crossEntropy over (B, T, V) logits', () => {
    const logits = fon.randn([2, 3, 6], { seed: 12 });
    const targets = [0, 5, 2, 2, -100, 1];
    const y = fon.crossEntropy(logits, t(targets, [2, 3], 'i32'), { reduction: 'none' });
    assert.deepEqual(y.shape, [2, 3]);
    close(vals(y), ceDirect(vals(logits), targets, 6, -100).rows, 1e-6);
  });
});

describe('cast rounding', () => {
  const f16 = (xs: number[]) => bits(fon.cast(t(xs), 'f16'));
  const bf16 = (xs: number[]) => bits(fon.cast(t(xs), 'bf16'));
  test('f32 → f16 rounds to nearest, ties to even', () => {
    // 1 + 2⁻¹¹ is halfway between 1 (even) and 1 + 2⁻¹⁰; 1 + 3·2⁻¹¹ halfway between …01 (odd) and …10 (even).
    assert.deepEqual(f16([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20, 1 - 2 ** -12]), [0x3c00, 0x3c02, 0x3c01, 0x3c00]);
    assert.deepEqual(f16([-0, 0.1, -2.5]), [0x8000, 0x2e66, 0xc100]);
  });
  test('f32 → f16 subnormals round to even too; below half the smallest goes to zero', () => {
    assert.deepEqual(f16([2 ** -24, 2 ** -25, 3 * 2 ** -25, 5 * 2 ** -25, 2 ** -26, -(2 ** -24), 2 ** -14 - 2 ** -25]), [0x0001, 0x0000, 0x0002, 0x0002, 0x0000, 0x8001, 0x0400]);
    assert.deepEqual(vals(fon.cast(t([2 ** -24, 1023 * 2 ** -24]), 'f16')), [2 ** -24, 1023 * 2 ** -24]);
  });
  test('f32 → f16 overflows to ±inf past 65519.99…; NaN stays NaN', () => {
    assert.deepEqual(f16([65504, 65519, 65520, 1e6, -1e6, Infinity]), [0x7bff, 0x7bff, 0x7c00, 0x7c00, 0xfc00, 0x7c00]);
    const n = f16([NaN])[0];
    assert.equal(n & 0x7c00, 0x7c00);
    assert.notEqual(n & 0x3ff, 0);
  });
  test('f32 → bf16 rounds to nearest even, overflows to inf, keeps subnormals and NaN', () => {
    assert.deepEqual(bf16([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -1.5]), [0x3f80, 0x3f82, 0x3f81, 0xbfc0]);
    assert.deepEqual(bf16([3.4028234663852886e38, 3.3895313892515355e38, -Infinity]), [0x7f80, 0x7f7f, 0xff80]);
    assert.deepEqual(bf16([2 ** -130, 2 ** -149]), [0x0008, 0x0000]);
    assert.equal(bf16([NaN])[0], 0x7fc0);
  });
  test('float → int truncates toward zero; u8 wraps like a C cast of the int', () => {
    assert.deepEqual(vals(fon.cast(t([2.7, -2.7, 0.5, -0.5, 1e3]), 'i32')), [2, -2, 0, 0, 1000]);
    assert.deepEqual(vals(fon.cast(t([3.9, 255.5, 256, -1]), 'u8')), [3, 255, 0, 255]);
    assert.deepEqual(vals(fon.cast(t([-2.5, 2.5], undefined, 'f16'), 'i32')), [-2, 2]);
  });
  test('int → 16-bit floats rounds to even; between 16-bit formats too', () => {
    assert.deepEqual(vals(fon.cast(t([2049, 2051, -2049], undefined, 'i32'), 'f16')), [2048, 2052, -2048]);
    assert.deepEqual(vals(fon.cast(t([255, 257, 259], undefined, 'i32'), 'bf16')), [255, 256, 260]);
    assert.deepEqual(vals(fon.cast(t([255], undefined, 'u8'), 'f32')), [255]);
    assert.deepEqual(vals(fon.cast(t([65504], undefined, 'f16'), 'bf16')), [65536]);
    assert.deepEqual(vals(fon.cast(t([1e5], undefined, 'bf16'), 'f16')), [Infinity]);
  });
  test('cast to the same dtype is a free copy with the same values', () => {
    const x = t([1, 2, 3], undefined, 'i32');
    const y = fon.cast(x, 'i32');
    assert.notEqual(y, x);
    assert.deepEqual(vals(y), [1, 2, 3]);
  });
});

describe('creation and transfer', () => {
  test('arange: integer default, float steps, negative steps, empty', () => {
    const a = fon.arange(5);
    assert.equal(a.dtype, 'i32');
    assert.deepEqual(vals(a), [0, 1, 2, 3, 4]);
    assert.deepEqual(vals(fon.arange(1, 2, 0.25, { dtype: 'f32' })), [1, 1.25, 1.5, 1.75]);
    assert.deepEqual(vals(fon.arange(5, 0, -2)), [5, 3, 1]);
    assert.deepEqual(fon.arange(3, 3).shape, [0]);
    assert.deepEqual(vals(fon.arange(16777216, 16777219)), [16777216, 16777217, 16777218]);
  });
  test('tensor infers nested shapes and keeps integers exact', () => {
    const x = fon.tensor([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(x.shape, [2, 3]);
    assert.equal(x.dtype, 'f32');
    assert.deepEqual(vals(fon.tensor(new Int32Array([16777217, -2147483648]))), [16777217, -2147483648]);
    assert.deepEqual(vals(fon.tensor([2147483647], undefined, { dtype: 'i32' })), [2147483647]);
    assert.deepEqual(bits(fon.tensor(new Uint16Array([0x3c00]), undefined, { dtype: 'f16' })), [0x3c00]);
    assert.deepEqual(fon.scalar(2).shape, []);
  });
  test('full and the like helpers', () => {
    assert.deepEqual(vals(fon.full([2], 2.75, { dtype: 'bf16' })), [2.75, 2.75]);
    assert.deepEqual(vals(fon.full([2], -2.75, { dtype: 'i32' })), [-2, -2]);
    const z = fon.zerosLike(fon.ones([2, 3], { dtype: 'f16' }));
    assert.equal(z.dtype, 'f16');
    assert.deepEqual(vals(z), [0, 0, 0, 0, 0, 0]);
  });
  test('seeded random: same seed same values, on every backend; different seeds differ', () => {
    const a = vals(fon.randn([64], { seed: 42 }));
    assert.deepEqual(vals(fon.randn([64], { seed: 42, backend: new CpuBackend() })), a);
    assert.notDeepEqual(vals(fon.randn([64], { seed: 43 })), a);
    fon.manualSeed(7);
    const u = vals(fon.rand([16]));
    fon.manualSeed(7);
    assert.deepEqual(vals(fon.rand([16])), u);
  });
  test('random ranges and moments', () => {
    const u = vals(fon.rand([4096], { seed: 1, low: -2, high: 3 }));
    assert.ok(u.every((v) => v >= -2 && v < 3));
    const n = vals(fon.randn([8192], { seed: 2, mean: 1, std: 2 }));
    const mean = n.reduce((s, v) => s + v, 0) / n.length;
    const sd = Math.sqrt(n.reduce((s, v) => s + (v - mean) ** 2, 0) / n.length);
    assert.ok(Math.abs(mean - 1) < 0.08 && Math.abs(sd - 2) < 0.08, `mean ${mean}, std ${sd}`);
    const r = fon.randint([4096], -3, 4, { seed: 3 });
    assert.equal(r.dtype, 'i32');
    const rv = vals(r);
    assert.ok(rv.every((v) => Number.isInteger(v) && v >= -3 && v < 4));
    assert.equal(new Set(rv).size, 7);
  });
  test('toBackend moves values to another backend; clone owns its storage', async () => {
    const other = new CpuBackend();
    const x = fon.tensor([1, 2, 3], undefined, { dtype: 'bf16' });
    const y = await fon.toBackend(x, other);
    assert.equal(y.backend, other);
    assert.equal(y.dtype, 'bf16');
    assert.deepEqual(vals(y), [1, 2, 3]);
    const c = fon.clone(x);
    x.dispose();
    assert.deepEqual(vals(c), [1, 2, 3]);
  });
});
