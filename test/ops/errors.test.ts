/**
 * Bad input: each error has its exact class (ShapeError, DTypeError, ArgumentError, …) and a
 * message naming the op and the bad values (both shapes, both dtypes, the axis and the rank …),
 * and a failed call leaves no backend handle behind.
 * Run: node --import tsx --test test/ops/errors.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, FonError, ShapeError, type DType, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';

const backend = new CpuBackend();
fon.setBackend(backend);

type ErrorClass = typeof ShapeError | typeof DTypeError | typeof ArgumentError;

/** fn throws exactly `cls` (not a subclass or parent), with a message matching `re`, and frees what it made. */
function throwsExactly(fn: () => unknown, cls: ErrorClass, re: RegExp): void {
  const before = backend.memory().liveHandles;
  let caught: unknown = null;
  fon.tidy(() => {
    try { fn(); } catch (e) { caught = e; }
  });
  assert.ok(caught !== null, `expected ${cls.name} matching ${re}, nothing was thrown`);
  assert.ok(caught instanceof FonError, `expected a FonError, got ${String(caught)}`);
  assert.equal((caught as Error).constructor, cls, `expected ${cls.name}, got ${(caught as Error).constructor.name}: ${(caught as Error).message}`);
  assert.equal((caught as Error).name, cls.name);
  assert.match((caught as Error).message, re);
  assert.equal(backend.memory().liveHandles, before, 'the failed call left handles alive');
}

const f = (shape: number[], dtype: DType = 'f32') => fon.zeros(shape, { dtype });
const idx = (xs: number[], shape?: number[]) => fon.tensor(xs, shape, { dtype: 'i32' });

test('broadcasting mismatch names the op and both shapes', () => {
  throwsExactly(() => fon.add(f([2, 3]), f([4])), ShapeError, /^add: shapes \[2, 3\] and \[4\] cannot be broadcast together \(axis 1: 3 vs 4\)$/);
  throwsExactly(() => fon.mul(f([2, 1, 3]), f([5, 2])), ShapeError, /^mul: shapes \[2, 1, 3\] and \[5, 2\] cannot be broadcast/);
  throwsExactly(() => fon.where(f([2]), f([3]), f([1])), ShapeError, /^where: shapes \[2\] and \[3\] and \[1\] cannot be broadcast/);
  throwsExactly(() => fon.broadcastTo(f([3]), [2, 4]), ShapeError, /broadcastTo: shapes \[3\] and \[2, 4\] cannot be broadcast/);
  throwsExactly(() => fon.broadcastTo(f([2, 3]), [3]), ShapeError, /^broadcastTo: \[2, 3\] cannot be broadcast to \[3\]$/);
});

test('matmul shape errors name both shapes', () => {
  throwsExactly(() => fon.matmul(f([2, 3]), f([4, 5])), ShapeError, /^matmul: inner dimensions differ: \[2, 3\] · \[4, 5\] \(3 vs 4\)$/);
  throwsExactly(() => fon.matmul(f([3, 2]), f([4, 5]), { transA: true }), ShapeError, /^matmul: inner dimensions differ: \[3, 2\]ᵀ · \[4, 5\] \(3 vs 4\)$/);
  throwsExactly(() => fon.matmul(f([3]), f([3, 2])), ShapeError, /^matmul: operands need rank ≥ 2, got \[3\] and \[3, 2\]$/);
  throwsExactly(() => fon.matmul(f([2, 2, 3]), f([3, 3, 4])), ShapeError, /^matmul: shapes \[2\] and \[3\] cannot be broadcast/);
  throwsExactly(() => fon.linear(f([2, 3]), f([4, 5])), ShapeError, /^matmul: inner dimensions differ: \[2, 3\] · \[4, 5\]ᵀ/);
});

test('dtype mismatch names both dtypes', () => {
  throwsExactly(() => fon.add(f([2]), f([2], 'i32')), DTypeError, /^add: dtypes differ \(f32 and i32\); cast one first$/);
  throwsExactly(() => fon.matmul(f([2, 2], 'f16'), f([2, 2])), DTypeError, /^matmul: dtypes differ \(f16 and f32\)/);
  throwsExactly(() => fon.where(f([2]), f([2], 'bf16'), f([2])), DTypeError, /^where: dtypes differ \(bf16 and f32\)/);
  throwsExactly(() => fon.concat([f([2]), f([2], 'u8')]), DTypeError, /^concat: dtypes differ \(f32 and u8\)/);
  throwsExactly(() => fon.scatterAdd(f([3]), idx([0]), f([1], 'f16'), 0), DTypeError, /^scatterAdd: dtypes differ \(f32 and f16\)/);
});

test('float-only ops reject integer tensors, index arguments must be i32', () => {
  throwsExactly(() => fon.exp(f([2], 'i32')), DTypeError, /^exp: expected a float tensor \(f32, f16, bf16\), got i32$/);
  throwsExactly(() => fon.mean(f([2], 'u8')), DTypeError, /^mean: expected a float tensor/);
  throwsExactly(() => fon.softmax(f([2], 'i32')), DTypeError, /^softmax: expected a float tensor .* got i32$/);
  throwsExactly(() => fon.matmul(f([2, 2], 'i32'), f([2, 2], 'i32')), DTypeError, /^matmul: expected a float tensor/);
  throwsExactly(() => fon.gather(f([3]), f([1]), 0), DTypeError, /^gather: index must be i32, got f32$/);
  throwsExactly(() => fon.embedding(f([3, 2]), f([1], 'u8')), DTypeError, /^embedding: ids must be i32, got u8$/);
  throwsExactly(() => fon.crossEntropy(f([2, 3]), f([2])), DTypeError, /^crossEntropy: targets must be i32, got f32$/);
  throwsExactly(() => fon.rope(f([2, 4]), f([2, 2], 'f16'), f([2, 2])), DTypeError, /^rope: cos must be f32, got f16$/);
});

test('unknown dtype strings are DTypeErrors listing the valid ones', () => {
  const bad = 'f64' as DType;
  throwsExactly(() => fon.zeros([2], { dtype: bad }), DTypeError, /^full: unknown dtype 'f64', expected one of f32, f16, bf16, i32, u8$/);
  throwsExactly(() => fon.tensor([1, 2], undefined, { dtype: 'float32' as DType }), DTypeError, /^tensor: unknown dtype 'float32'/);
  throwsExactly(() => fon.cast(f([2]), 'int8' as DType), DTypeError, /^cast: unknown dtype 'int8'/);
  throwsExactly(() => fon.randn([2], { dtype: bad }), DTypeError, /^randn: unknown dtype 'f64'/);
  throwsExactly(() => fon.randn([2], { dtype: 'i32' }), ArgumentError, /^randn: dtype must be a float type, got i32$/);
});

test('out-of-range axes name the op, the axis and the rank', () => {
  throwsExactly(() => fon.sum(f([2, 3]), 2), ArgumentError, /^sum: axis 2 out of range for a tensor of rank 2$/);
  throwsExactly(() => fon.max(f([2, 3]), -3), ArgumentError, /^max: axis -3 out of range for a tensor of rank 2$/);
  throwsExactly(() => fon.softmax(f([2, 3]), 5), ArgumentError, /axis 5 out of range for a tensor of rank 2/);
  throwsExactly(() => fon.logsumexp(f([4]), 1), ArgumentError, /^logsumexp: axis 1 out of range for a tensor of rank 1$/);
  throwsExactly(() => fon.cumsum(f([4]), 1), ArgumentError, /^cumsum: axis 1 out of range/);
  throwsExactly(() => fon.sort(f([4]), -2), ArgumentError, /^sort: axis -2 out of range/);
  throwsExactly(() => fon.gather(f([4]), idx([0]), 1), ArgumentError, /^gather: axis 1 out of range/);
  throwsExactly(() => fon.concat([f([2])], 1), ArgumentError, /^concat: axis 1 out of range/);
  throwsExactly(() => fon.flip(f([2]), [1]), ArgumentError, /^flip: axis 1 out of range/);
  throwsExactly(() => fon.transpose(f([2])), ArgumentError, /^transpose: axis -2 out of range for a tensor of rank 1$/);
  throwsExactly(() => fon.sum(f([2, 3]), 0.5), ArgumentError, /^sum: axis 0.5 out of range/);
  throwsExactly(() => fon.sum(f([2, 3]), [1, -1]), ArgumentError, /^sum: repeated axis in \[1, -1\]$/);
  throwsExactly(() => fon.permute(f([2, 3]), [0, 0]), ArgumentError, /^permute: \[0, 0\] is not a permutation of the axes of a rank-2 tensor$/);
  throwsExactly(() => fon.permute(f([2, 3]), [0]), ArgumentError, /^permute: \[0\] is not a permutation/);
});

test('bad reshapes and layout arguments', () => {
  throwsExactly(() => fon.reshape(f([2, 3]), [4]), ShapeError, /^reshape: cannot reshape \[2, 3\] \(6 elements\) into \[4\]$/);
  throwsExactly(() => fon.reshape(f([2, 3]), [4, -1]), ShapeError, /^reshape: cannot reshape \[2, 3\] into \[4, -1\]$/);
  throwsExactly(() => fon.reshape(f([2, 3]), [-1, -1]), ShapeError, /^reshape: cannot reshape \[2, 3\].* into \[-1, -1\]$/);
  throwsExactly(() => fon.reshape(f([2, 3]), [2.5, 2.4]), ShapeError, /^reshape: cannot reshape \[2, 3\]/);
  throwsExactly(() => fon.squeeze(f([2, 3]), 1), ShapeError, /^squeeze: axis 1 of \[2, 3\] has size 3, expected 1$/);
  throwsExactly(() => fon.slice(f([4, 4]), [3, 0], [2, 4]), ShapeError, /^slice: start \[3, 0\] size \[2, 4\] out of bounds for shape \[4, 4\]$/);
  throwsExactly(() => fon.narrow(f([4]), 0, -6, 1), ShapeError, /^slice: start \[-6\] size \[1\] out of bounds for shape \[4\]$/);
  throwsExactly(() => fon.concat([f([2, 3]), f([3, 3])], 1), ShapeError, /^concat: shapes \[2, 3\], \[3, 3\] differ outside axis 1$/);
  throwsExactly(() => fon.concat([]), ArgumentError, /^concat: needs at least one tensor$/);
  throwsExactly(() => fon.split(f([5]), [2, 2]), ShapeError, /^split: sizes \[2, 2\] do not add up to 5 \(axis 0 of \[5\]\)$/);
  throwsExactly(() => fon.stack([f([2]), f([3])]), ShapeError, /^concat: shapes \[1, 2\], \[1, 3\] differ outside axis 0$/);
});

test('index out of range names the op, the index and the valid range', () => {
  throwsExactly(() => fon.gather(f([3]), idx([0, 5]), 0), ArgumentError, /^gather: index 5 out of range \[0, 3\)$/);
  throwsExactly(() => fon.gather(f([2, 3]), idx([-1, 0], [2, 1]), 1), ArgumentError, /^gather: index -1 out of range \[0, 3\)$/);
  throwsExactly(() => fon.scatterAdd(f([3]), idx([3]), f([1]), 0), ArgumentError, /^scatterAdd: index 3 out of range \[0, 3\)$/);
  throwsExactly(() => fon.embedding(f([5, 2]), idx([1, 7])), ArgumentError, /^embedding: index 7 out of range \[0, 5\)$/);
  throwsExactly(() => fon.topk(f([4]), 5), ArgumentError, /^topk: k = 5 out of range \[0, 4\] for axis -1$/);
  throwsExactly(() => fon.max(f([3, 0]), 1), ArgumentError, /^max: cannot reduce over an empty axis of \[3, 0\]$/);
  throwsExactly(() => fon.arange(0, 5, 0), ArgumentError, /^arange: step must not be 0$/);
});

test('index, weight and table shapes are checked against the input', () => {
  throwsExactly(() => fon.gather(f([2, 3]), idx([0, 0, 0], [3, 1]), 1), ShapeError, /^gather: index shape \[3, 1\] must equal input shape \[2, 3\] except along axis 1$/);
  throwsExactly(() => fon.scatterAdd(f([2, 3]), idx([0, 0], [2, 1]), f([2, 2]), 1), ShapeError, /^scatterAdd: src shape \[2, 2\] must equal index shape \[2, 1\]$/);
  throwsExactly(() => fon.embedding(f([5]), idx([0])), ShapeError, /^embedding: table must be \(vocab, dim\), got \[5\]$/);
  throwsExactly(() => fon.rmsnorm(f([2, 3]), f([4])), ShapeError, /^rmsnorm: weight shape \[4\] must be \[3\] for input \[2, 3\]$/);
  throwsExactly(() => fon.layernorm(f([2, 3]), f([3]), f([2])), ShapeError, /^layernorm: bias shape \[2\] must equal weight shape \[3\]$/);
  throwsExactly(() => fon.crossEntropy(f([4, 3]), idx([0, 1, 2])), ShapeError, /^crossEntropy: targets shape \[3\] must be logits shape \[4, 3\] without its last axis$/);
  throwsExactly(() => fon.rope(f([2, 5]), f([2, 2]), f([2, 2])), ShapeError, /^rope: last dimension 5 of \[2, 5\] must be even$/);
  throwsExactly(() => fon.rope(f([3, 4]), f([2, 2]), f([2, 2])), ShapeError, /^rope: cos\/sin must be \[3, 2\] for input \[3, 4\], got \[2, 2\] and \[2, 2\]$/);
  throwsExactly(() => fon.rope(f([3, 4]), f([4, 2]), f([4, 2]), { seqAxis: 1 }), ShapeError, /^rope: seqAxis 1 must come before the last axis of \[3, 4\]$/);
});

test('creation errors: bad shapes, ragged data, value counts, requiresGrad on integers', () => {
  throwsExactly(() => fon.zeros([2, -1]), ShapeError, /^full: bad shape \[2, -1\]: dimensions must be non-negative integers$/);
  throwsExactly(() => fon.tensor([[1, 2], [3]]), ShapeError, /^tensor: ragged nested array: length 1 at depth 1, expected 2$/);
  throwsExactly(() => fon.tensor([1, 2, 3], [2, 2]), ShapeError, /^tensor: 3 values do not fill shape \[2, 2\] \(4 elements\)$/);
  throwsExactly(() => fon.zeros([2], { dtype: 'i32', requiresGrad: true }), ArgumentError, /^requiresGrad needs a float dtype, got i32$/);
  throwsExactly(() => fon.add(1 as unknown as Tensor, 2), ArgumentError, /^add: at least one operand must be a tensor, got two numbers \(1, 2\)$/);
});

test('tensors on two different backends are refused, naming both', () => {
  const other = new CpuBackend();
  (other as { name: string }).name = 'other';
  const y = fon.ones([2], { backend: other });
  throwsExactly(() => fon.add(f([2]), y), ArgumentError, /^add: tensors live on different backends \('cpu' and 'other'\); move one with toBackend\(\)$/);
  throwsExactly(() => fon.concat([f([2]), y]), ArgumentError, /^concat: tensors live on different backends/);
});

test('the backend registry names unknown backends', async () => {
  await assert.rejects(fon.initBackend('nope' as 'cpu'), (e: unknown) => e instanceof ArgumentError && /^initBackend: unknown backend 'nope', expected one of cpu/.test(e.message));
  assert.throws(() => fon.setBackend('webgpu'), (e: unknown) => e instanceof ArgumentError && /setBackend: backend 'webgpu' is not initialised; await initBackend\('webgpu'\) first/.test(e.message));
});
