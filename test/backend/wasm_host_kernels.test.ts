/**
 * The wasm backend's host (TypeScript) kernels (src/backend/wasm/host_kernels.ts) against the CPU
 * reference (src/backend/cpu/): they compute the same operations in the same order, so every
 * result must have the same bits. Covers strided copies (permutes, negative and zero strides,
 * rank 0 and 1, empty shapes), RoPE (interleaved or halves, forward or inverse), RMSNorm and its
 * backward, cross-entropy's backward with ignored and out-of-range targets; recycled outputs
 * whose stale contents must be overwritten; and null (the backend's cue to call the reference) for the cases not taken.
 *
 *   node --import tsx --test test/backend/wasm_host_kernels.test.ts
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StridedArgs } from '../../src/backend/backend.ts';
import { crossEntropyBackward, rmsnorm, rmsnormBackward, rope } from '../../src/backend/cpu/fused.ts';
import type { CpuRef } from '../../src/backend/cpu/host.ts';
import { copyStrided } from '../../src/backend/cpu/layout.ts';
import {
  copyStridedF32, crossEntropyBackwardF32, rmsnormF32, ropeF32, type Allocate,
} from '../../src/backend/wasm/host_kernels.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { f32ToHost } from '../../src/tensor/dtype.ts';

function random(shape: number[], seed: number, dtype: 'f32' | 'f16' = 'f32'): CpuRef {
  const next = uniformStream(seed);
  const n = shape.reduce((a, b) => a * b, 1);
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = 4 * next() - 2;
  return { h: f32ToHost(v, dtype), shape, dtype };
}

/** Outputs filled with NaN, as a recycled array's stale contents could be. */
const stale: Allocate = (length) => new Float32Array(length).fill(NaN);

function sameBits(actual: ArrayLike<number> | null, expected: ArrayLike<number>, what: string): void {
  assert.ok(actual, `${what}: the host kernel declined an f32 case`);
  assert.equal(actual.length, expected.length, `${what}: length`);
  const a = new Uint32Array(Float32Array.from(actual).buffer), e = new Uint32Array(Float32Array.from(expected).buffer);
  for (let i = 0; i < a.length; i++) assert.equal(a[i], e[i], `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
}

describe('wasm host kernels equal the CPU reference bit for bit', () => {
  const strided: [string, number[], StridedArgs][] = [
    ['split heads (B,T,H,D) → (B,H,T,D)', [2, 5, 3, 4], { outShape: [2, 3, 5, 4], strides: [60, 4, 12, 1], offset: 0 }],
    ['merge heads (B,H,T,D) → (B,T,H,D)', [2, 3, 5, 4], { outShape: [2, 5, 3, 4], strides: [60, 4, 20, 1], offset: 0 }],
    ['transpose of the last two axes', [3, 7, 6], { outShape: [3, 6, 7], strides: [42, 1, 6], offset: 0 }],
    ['reversed rows, negative stride', [4, 5], { outShape: [4, 5], strides: [5, -1], offset: 4 }],
    ['broadcast, zero stride', [5], { outShape: [3, 5], strides: [0, 1], offset: 0 }],
    ['slice with an offset', [6, 8], { outShape: [3, 4], strides: [16, 2], offset: 9 }],
    ['rank 1', [9], { outShape: [4], strides: [2], offset: 1 }],
    ['rank 0', [9], { outShape: [], strides: [], offset: 7 }],
    ['empty', [4, 3], { outShape: [0, 3], strides: [3, 1], offset: 0 }],
  ];
  for (const [name, shape, args] of strided) {
    test(`copyStrided: ${name}`, () => {
      const x = random(shape, 1);
      sameBits(copyStridedF32(x, args, stale), copyStrided(x, args), name);
    });
  }

  for (const interleaved of [false, true]) for (const inverse of [false, true]) {
    test(`rope, ${interleaved ? 'interleaved' : 'halves'}, ${inverse ? 'inverse' : 'forward'}`, () => {
      const [o, t, inner, d] = [2, 5, 3, 6];
      const x = random([o, t, inner, d], 2), cos = random([t, d / 2], 3), sin = random([t, d / 2], 4);
      sameBits(ropeF32(x, cos, sin, o, t, inner, d, interleaved, inverse, stale), rope(x, cos, sin, o, t, inner, d, interleaved, inverse), 'rope');
    });
  }

  test('rmsnorm and its backward', () => {
    const args = { rows: 7, cols: 13, eps: 1e-5 };
    const x = random([7, 13], 5), w = random([13], 6), dy = random([7, 13], 7);
    const [y, rstd] = rmsnorm(x, w, args);
    const got = rmsnormF32(x, w, args, stale);
    assert.ok(got);
    sameBits(got[0], y, 'y');
    sameBits(got[1], rstd, 'rstd');
    const [dx, dw] = rmsnormBackward(x, w, { h: rstd, shape: [7], dtype: 'f32' }, dy, args);
    // The wasm backend runs the reference itself with its allocator: the output lands in the given array.
    const back = rmsnormBackward(x, w, { h: rstd, shape: [7], dtype: 'f32' }, dy, args, stale);
    sameBits(back[0], dx, 'dx');
    sameBits(back[1], dw, 'dw');
  });

  test('crossEntropyBackward with ignored and out-of-range targets', () => {
    const n = 6, v = 11;
    const logits = random([n, v], 8), dloss = random([n], 9);
    const targets: CpuRef = { h: Int32Array.from([3, -100, 0, 10, 11, -1]), shape: [n], dtype: 'i32' };
    const lse: CpuRef = { h: Float32Array.from({ length: n }, (_, r) => Math.log(r + 2)), shape: [n], dtype: 'f32' };
    sameBits(crossEntropyBackwardF32(logits, targets, lse, dloss, n, v, -100, stale), crossEntropyBackward(logits, targets, lse, dloss, n, v, -100), 'dlogits');
  });
});

describe('wasm host kernels decline what they do not take', () => {
  test('non-f32 inputs and other broadcasts give null', () => {
    const h = random([2, 4], 13, 'f16'), f = random([2, 4], 14), row = random([4], 15);
    assert.equal(copyStridedF32(h, { outShape: [2, 4], strides: [4, 1], offset: 0 }, stale), null);
    assert.equal(ropeF32(h, row, row, 1, 2, 1, 4, false, false, stale), null);
    assert.equal(rmsnormF32(h, row, { rows: 2, cols: 4, eps: 1e-5 }, stale), null);
    const targets: CpuRef = { h: Float32Array.from([1, 2]), shape: [2], dtype: 'f32' };
    assert.equal(crossEntropyBackwardF32(f, targets, row, row, 2, 4, -1, stale), null, 'f32 targets');
  });
});

test('the wasm backend refuses a strided view reaching past its tensor, as the CPU does (no read outside the heap block)', async () => {
  const { WasmBackend } = await import('../../src/backend/wasm/index.ts');
  const { ShapeError } = await import('../../src/errors.ts');
  const b = await WasmBackend.create({ threads: 1 });
  const x = b.upload(Float32Array.from({ length: 20 }, (_, i) => i), 'f32');
  const ref = { h: x, shape: [20], dtype: 'f32' as const };
  assert.throws(() => b.copyStrided(ref, { outShape: [4, 5], strides: [5, 2], offset: 3 }),
    (e) => e instanceof ShapeError && e.message === 'copyStrided: the view (shape [4, 5], strides [5, 2], offset 3) reaches elements 3 … 26 of a tensor of 20; expected 0 … 19');
  assert.deepEqual(Array.from(b.copyStrided(ref, { outShape: [4, 5], strides: [5, 1], offset: 0 }) as Float32Array), Array.from({ length: 20 }, (_, i) => i));
});
