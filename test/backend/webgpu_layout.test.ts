/**
 * WebGPU data-movement and optimizer kernels against the CPU reference (src/backend/cpu/layout.ts,
 * optim.ts): strided copy and assign, concat, gather / scatter-add, embedding and its backward,
 * AdamW and SGD, on every dtype each takes, at sizes that are not multiples of any workgroup.
 * Data movement must match bit for bit; scatterAdd and embeddingBackward too (same f32 order);
 * the optimizers to float rounding.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_layout.test.ts
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as fon from '../../src/index.ts';
import type { Backend, DType, Tensor } from '../../src/index.ts';
import type { AdamWArgs, Ref, SGDArgs, StridedArgs } from '../../src/backend/backend.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { f32ToHost, hostToF32, type AnyHostArray } from '../../src/tensor/dtype.ts';
import { fromHandle } from '../../src/tensor/tensor.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { ShapeError } from '../../src/errors.ts';

const maybeGpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();
const cpu = new CpuBackend();
const gpu = (): Backend => maybeGpu ?? assert.fail('no webgpu backend');

const ALL: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'u8'];
const FLOATS: readonly DType[] = ['f32', 'f16', 'bf16'];
const SIZES = [1, 7, 33, 257, 1000];

/** Deterministic uniforms (FON's counter-based stream) so a failure reproduces. */
const rng = uniformStream;

/** Random host data of a dtype: normals for floats, full-range i32 (beyond f32's exact integers), any u8. */
function randomHost(dtype: DType, n: number, seed: number): AnyHostArray {
  const r = rng(seed);
  if (dtype === 'i32') return Int32Array.from({ length: n }, () => ((r() * 2 ** 32) | 0));
  if (dtype === 'u8') return Uint8Array.from({ length: n }, () => Math.floor(r() * 256));
  return f32ToHost(Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * 2), dtype);
}

function randomIds(n: number, low: number, high: number, seed: number): Int32Array {
  const r = rng(seed);
  return Int32Array.from({ length: n }, () => low + Math.floor(r() * (high - low)));
}

/** The same host data as a tensor on the CPU and on the GPU (uploaded raw: i32 stays exact). */
function pair(host: AnyHostArray, shape: readonly number[], dtype: DType): [Tensor, Tensor] {
  return [fromHandle(cpu, cpu.upload(host, dtype), shape, dtype), fromHandle(gpu(), gpu().upload(host, dtype), shape, dtype)];
}

const refOf = (t: Tensor): Ref<unknown> => ({ h: t.handle, shape: t.shape, dtype: t.dtype });

async function same(got: Tensor, want: Tensor, what: string): Promise<void> {
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  assert.equal(got.dtype, want.dtype, `${what}: dtype`);
  assert.deepStrictEqual(await got.data(), await want.data(), what);
}

/** Runs a raw kernel on both backends and compares the outputs bit for bit. */
async function sameKernel(dtype: DType, size: number, what: string, run: (b: Backend, pick: (p: [Tensor, Tensor]) => Ref<unknown>) => unknown): Promise<void> {
  const want = run(cpu, (p) => refOf(p[0]));
  const g = gpu();
  const h = run(g, (p) => refOf(p[1]));
  const got = await g.read(h, dtype, size);
  g.free(h);
  assert.deepStrictEqual(got, await cpu.read(want as AnyHostArray), what);
}

describe('layout kernels [webgpu]', () => {
  test('copyStrided: permute, slice, flip, broadcastTo on every dtype [webgpu]', { skip }, async () => {
    for (const dtype of ALL) {
      const [c, g] = pair(randomHost(dtype, 7 * 33 * 5, 1), [7, 33, 5], dtype);
      await same(fon.permute(g, [2, 0, 1]), fon.permute(c, [2, 0, 1]), `${dtype} permute`);
      await same(fon.permute(g, [1, 2, 0]), fon.permute(c, [1, 2, 0]), `${dtype} permute 2`);
      await same(fon.slice(g, [1, 3, 1], [5, 29, 3]), fon.slice(c, [1, 3, 1], [5, 29, 3]), `${dtype} slice`);
      await same(fon.slice(g, [3], [2]), fon.slice(c, [3], [2]), `${dtype} slice rows`);
      await same(fon.flip(g, [0, 2]), fon.flip(c, [0, 2]), `${dtype} flip`);
      const [c1, g1] = pair(randomHost(dtype, 33, 2), [33, 1], dtype);
      await same(fon.broadcastTo(g1, [3, 33, 7]), fon.broadcastTo(c1, [3, 33, 7]), `${dtype} broadcastTo`);
      for (const n of SIZES) {
        const [cx, gx] = pair(randomHost(dtype, n + 5, n), [n + 5], dtype);
        for (const start of [0, 1, 3, 4, 5]) await same(fon.slice(gx, [start], [n]), fon.slice(cx, [start], [n]), `${dtype} slice ${start}+${n}`);
        await same(fon.flip(gx, [0]), fon.flip(cx, [0]), `${dtype} flip ${n}`);
      }
    }
  });

  test('copyStrided: rank 8 after coalescing, zero and negative strides, offsets [webgpu]', { skip }, async () => {
    const shape8 = [2, 3, 2, 3, 2, 3, 2, 3];
    for (const dtype of ALL) {
      const [c, g] = pair(randomHost(dtype, 1296, 3), shape8, dtype);
      const perm = [7, 6, 5, 4, 3, 2, 1, 0];
      await same(fon.permute(g, perm), fon.permute(c, perm), `${dtype} rank-8 permute`);
      const [c2, g2] = pair(randomHost(dtype, 1200, 4), [1200], dtype);
      const cases: StridedArgs[] = [
        { outShape: [1], strides: [1], offset: 1199 },
        { outShape: [7, 3], strides: [-5, 0], offset: 600 },
        { outShape: [33, 2, 4], strides: [3, -1, 0], offset: 1 },
        { outShape: [257], strides: [-3], offset: 1199 },
        { outShape: [10, 10, 10], strides: [-100, 10, -1], offset: 999 },
        { outShape: [3, 0, 2], strides: [1, 1, 1], offset: 0 },
      ];
      for (const args of cases) {
        const n = args.outShape.reduce((a, b) => a * b, 1);
        await sameKernel(dtype, n, `${dtype} copyStrided ${JSON.stringify(args)}`, (b, pick) => b.copyStrided(pick([c2, g2]), args));
      }
    }
  });

  test('assignStrided: slice backward and direct views with zero and negative strides [webgpu]', { skip }, async () => {
    for (const dtype of FLOATS) {
      // The last three are whole words for 16-bit dtypes (the word path: no widening).
      for (const [shape, starts, sizes] of [[[7, 33], [2, 1], [4, 31]], [[1000], [3], [257]], [[5, 3, 9], [1, 0, 3], [3, 3, 5]], [[9], [0], [1]], [[4, 8, 6], [1, 2, 0], [2, 4, 6]], [[3, 10], [1, 2], [2, 8]], [[2, 5, 4, 8], [1, 1, 0, 2], [1, 3, 4, 4]]] as const) {
        const n = shape.reduce((a: number, b: number) => a * b, 1);
        const m = sizes.reduce((a: number, b: number) => a * b, 1);
        const host = randomHost(dtype, n, 5);
        const dy = randomHost(dtype, m, 6);
        const grads: AnyHostArray[] = [];
        for (const b of [cpu, gpu()]) {
          const x = fromHandle(b, b.upload(host, dtype), shape, dtype);
          x.requiresGrad = true;
          const y = fon.slice(x, starts, sizes);
          fon.backward(y, fromHandle(b, b.upload(dy, dtype), sizes, dtype));
          grads.push(await x.grad!.data());
        }
        assert.deepStrictEqual(grads[1], grads[0], `${dtype} slice backward ${JSON.stringify(shape)}`);
      }
    }
    for (const dtype of ALL) {
      const base = pair(randomHost(dtype, 1000, 7), [1000], dtype);
      const cases: [StridedArgs, number][] = [
        [{ outShape: [7, 3], strides: [-5, 2], offset: 600 }, 21],
        [{ outShape: [33, 4], strides: [9, 0], offset: 3 }, 132],
        [{ outShape: [257], strides: [-3], offset: 999 }, 257],
        [{ outShape: [1], strides: [1], offset: 999 }, 1],
        [{ outShape: [10, 10, 10], strides: [-100, -10, -1], offset: 999 }, 1000],
        // Whole words for 16-bit dtypes (assigned as words), a stride-0 axis among them.
        [{ outShape: [6, 2], strides: [8, 1], offset: 2 }, 12],
        [{ outShape: [5, 4], strides: [0, 1], offset: 100 }, 20],
        [{ outShape: [3, 4, 10], strides: [200, 20, 1], offset: 40 }, 120],
      ];
      for (const [args, m] of cases) {
        const src = pair(randomHost(dtype, m, m), args.outShape, dtype);
        await sameKernel(dtype, 1000, `${dtype} assignStrided ${JSON.stringify(args)}`, (b, pick) => b.assignStrided(pick(base), pick(src), args));
      }
    }
  });

  test('copyStrided and assignStrided refuse a view reaching past its tensor, and an assign whose src holds fewer values than the view, on the CPU and the GPU (no read or write outside the buffer) [webgpu]', { skip }, async () => {
    const [c, g] = pair(randomHost('f32', 1000, 9), [1000], 'f32');
    const [cs, gs] = pair(randomHost('f32', 1000, 10), [10, 10, 10], 'f32');
    const [c5, g5] = pair(randomHost('f32', 5, 11), [5], 'f32');
    for (const [b, x, src, src5] of [[cpu as Backend, c, cs, c5], [gpu(), g, gs, g5]] as const) {
      const view = '(shape [10, 10, 10], strides [-100, 10, -1], offset 999)';
      const past = { outShape: [10, 10, 10], strides: [-100, 10, -1], offset: 999 };
      assert.throws(() => b.copyStrided(refOf(x), past), (e) => e instanceof ShapeError && e.message === `copyStrided: the view ${view} reaches elements 90 … 1089 of a tensor of 1000; expected 0 … 999`);
      assert.throws(() => b.assignStrided(refOf(x), refOf(src), past), (e) => e instanceof ShapeError && e.message === `assignStrided: the view ${view} reaches elements 90 … 1089 of a tensor of 1000; expected 0 … 999`);
      assert.throws(() => b.copyStrided(refOf(x), { outShape: [4], strides: [-2], offset: 5 }), (e) => e instanceof ShapeError && e.message === 'copyStrided: the view (shape [4], strides [-2], offset 5) reaches elements -1 … 5 of a tensor of 1000; expected 0 … 999');
      assert.throws(() => b.assignStrided(refOf(x), refOf(src5), { outShape: [6], strides: [1], offset: 0 }), (e) => e instanceof ShapeError && e.message === 'assignStrided: the view (shape [6], strides [1], offset 0) takes 6 values; src holds 5');
      // The edges themselves are in bounds.
      const last = b.copyStrided(refOf(x), { outShape: [2], strides: [-999], offset: 999 });
      b.free(last);
    }
  });

  test('concat and its backward on every dtype and axis [webgpu]', { skip }, async () => {
    for (const dtype of ALL) {
      for (const [shapes, axis] of [
        [[[7, 3], [7, 1], [7, 5]], 1], [[[1], [7], [33]], 0], [[[3, 257], [4, 257]], 0], [[[2, 3, 5], [2, 1, 5], [2, 2, 5]], 1],
        [[[33, 1], [33, 2], [33, 3]], -1], [[[5, 0], [5, 2]], 1], [[[2], [3], [1], [4], [2], [1], [5], [3], [7]], 0],
      ] as const) {
        const parts = shapes.map((s, k) => pair(randomHost(dtype, s.reduce((a: number, b: number) => a * b, 1), 10 + k), s, dtype));
        await same(fon.concat(parts.map((p) => p[1]), axis), fon.concat(parts.map((p) => p[0]), axis), `${dtype} concat ${JSON.stringify(shapes)}`);
      }
    }
    for (const dtype of FLOATS) {
      const shapes = [[7, 3], [7, 1], [7, 5]];
      const dy = randomHost(dtype, 7 * 9, 20);
      const grads: AnyHostArray[][] = [];
      for (const b of [cpu, gpu()]) {
        const xs = shapes.map((s, k) => {
          const t = fromHandle(b, b.upload(randomHost(dtype, s[0] * s[1], 30 + k), dtype), s, dtype);
          t.requiresGrad = true;
          return t;
        });
        fon.backward(fon.concat(xs, 1), fromHandle(b, b.upload(dy, dtype), [7, 9], dtype));
        grads.push(await Promise.all(xs.map((x) => x.grad!.data())));
      }
      assert.deepStrictEqual(grads[1], grads[0], `${dtype} concat backward`);
    }
  });

  test('gather and scatterAdd against the reference [webgpu]', { skip }, async () => {
    for (const dtype of ALL) {
      const cases: [number[], number, number][] = [[[7, 33], 1, 5], [[33, 7], 0, 40], [[1], 0, 1], [[3, 257, 2], 1, 9], [[1000], 0, 1000]];
      for (const [shape, axis, m] of cases) {
        const n = shape[axis];
        const idxShape = shape.map((d: number, i: number) => (i === axis ? m : d));
        const count = idxShape.reduce((a, b) => a * b, 1);
        const x = pair(randomHost(dtype, shape.reduce((a: number, b: number) => a * b, 1), 40), shape, dtype);
        const idx = pair(randomIds(count, 0, n, 41), idxShape, 'i32');
        await same(fon.gather(x[1], idx[1], axis), fon.gather(x[0], idx[0], axis), `${dtype} gather ${JSON.stringify(shape)}`);
        // i32 sums are exact on the GPU and in f32 on the CPU: keep them below 2^24 to compare.
        const small = (h: AnyHostArray) => (dtype === 'i32' ? h.map((v) => v >> 12) : h);
        const base = pair(small(randomHost(dtype, x[0].size, 43)), shape, dtype);
        const src = pair(small(randomHost(dtype, count, 42)), idxShape, dtype);
        await same(fon.scatterAdd(base[1], idx[1], src[1], axis), fon.scatterAdd(base[0], idx[0], src[0], axis), `${dtype} scatterAdd ${JSON.stringify(shape)}`);
      }
    }
    // Out-of-range indices: zeros from gather, nothing added by scatterAdd (the CPU throws instead).
    const x = pair(Float32Array.from([1, 2, 3, 4]), [4], 'f32');
    const idx = pair(Int32Array.from([3, -1, 4, 0]), [4], 'i32');
    assert.deepEqual([...await fon.gather(x[1], idx[1], 0).data()], [4, 0, 0, 1]);
    assert.deepEqual([...await fon.scatterAdd(x[1], idx[1], x[1], 0).data()], [5, 2, 3, 5]);
    // i32 adds exactly, past f32's 2^24 (and wraps like i32 arithmetic).
    const big = fromHandle(gpu(), gpu().upload(Int32Array.from([2 ** 30 + 1, 2 ** 31 - 1]), 'i32'), [2], 'i32');
    const at = fromHandle(gpu(), gpu().upload(Int32Array.from([0, 1, 1]), 'i32'), [3], 'i32');
    const add = fromHandle(gpu(), gpu().upload(Int32Array.from([3, 1, 5]), 'i32'), [3], 'i32');
    assert.deepEqual([...await fon.scatterAdd(big, at, add, 0).data()], [2 ** 30 + 4, -(2 ** 31) + 5]);
  });

  test('embedding forward on every dtype; out-of-range ids give zeros [webgpu]', { skip }, async () => {
    for (const dtype of ALL) {
      for (const [v, c, t] of [[1, 1, 1], [7, 3, 33], [33, 7, 257], [1000, 5, 7], [50, 1, 1000]] as const) {
        const table = pair(randomHost(dtype, v * c, 50), [v, c], dtype);
        const ids = pair(randomIds(t, 0, v, 51), [t], 'i32');
        await same(fon.embedding(table[1], ids[1]), fon.embedding(table[0], ids[0]), `${dtype} embedding ${v}x${c} T=${t}`);
      }
    }
    const table = pair(Float32Array.from([1, 2, 3, 4, 5, 6]), [3, 2], 'f32');
    const ids = pair(Int32Array.from([2, 3, -1, 0]), [2, 2], 'i32');
    const out = fon.embedding(table[1], ids[1]);
    assert.deepEqual(out.shape, [2, 2, 2]);
    assert.deepEqual([...await out.data()], [5, 6, 0, 0, 0, 0, 1, 2]);
  });

  test('embeddingBackward sums repeated ids in token order, bit for bit [webgpu]', { skip }, async () => {
    for (const dtype of FLOATS) {
      for (const [v, c, t] of [[1, 1, 1], [7, 3, 33], [5, 7, 257], [1000, 2, 7], [50, 3, 1000], [3000, 1, 2500], [4, 33, 0]] as const) {
        const dy = pair(randomHost(dtype, t * c, 60 + t), [t, c], dtype);
        const ids = pair(randomIds(t, 0, v, 61 + t), [t], 'i32');
        await sameKernel(dtype, v * c, `${dtype} embeddingBackward V=${v} C=${c} T=${t}`, (b, pick) => b.embeddingBackward(pick(dy), pick(ids), v, c));
      }
    }
    // Through autograd, with an id out of range dropped on the GPU.
    const table = fromHandle(gpu(), gpu().upload(new Float32Array(6), 'f32'), [3, 2], 'f32');
    table.requiresGrad = true;
    const ids = fromHandle(gpu(), gpu().upload(Int32Array.from([2, 0, 2, 7]), 'i32'), [4], 'i32');
    fon.backward(fon.embedding(table, ids), fromHandle(gpu(), gpu().upload(Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]), 'f32'), [4, 2], 'f32'));
    assert.deepEqual([...await table.grad!.data()], [3, 4, 0, 0, 6, 8]);
  });
});

test('layout kernels allocate exactly their output and free their temporaries [webgpu]', { skip }, async () => {
  const g = gpu();
  for (const dtype of ['f32', 'bf16', 'u8'] as const) {
    const x = pair(randomHost(dtype, 66, 1), [66], dtype)[1];
    const ids = pair(randomIds(33, 0, 6, 2), [33], 'i32')[1];
    const dy = pair(randomHost(dtype, 66, 3), [33, 2], dtype)[1];
    const calls: [string, () => unknown][] = [
      ['copyStrided', () => g.copyStrided(refOf(x), { outShape: [33], strides: [-2], offset: 65 })],
      ['assignStrided', () => g.assignStrided(refOf(x), refOf(dy), { outShape: [33, 2], strides: [1, 33], offset: 0 })],
      ['concat', () => g.concat([refOf(x), refOf(dy)], 1, [66, 66])],
      ['gather', () => g.gather(refOf(x), refOf(ids), 1, 66, 33, 1)],
      ['scatterAdd', () => g.scatterAdd(refOf(x), refOf(ids), refOf(dy), 1, 66, 33, 1)],
      ['embedding', () => g.embedding(refOf(x), refOf(ids), 33, 2)],
      ['embeddingBackward', () => g.embeddingBackward(refOf(dy), refOf(ids), 6, 2)],
    ];
    for (const [name, call] of calls) {
      const before = g.memory().liveHandles;
      const h = call();
      assert.equal(g.memory().liveHandles, before + 1, `${dtype} ${name}: live handles`);
      g.free(h);
    }
  }
  await g.sync();
});

describe('optimizer kernels [webgpu]', () => {
  const close = (got: Float32Array, want: Float32Array, tol: number, what: string) => {
    for (let i = 0; i < want.length; i++) {
      if (!(Math.abs(got[i] - want[i]) <= tol * (1 + Math.abs(want[i])))) assert.fail(`${what}: [${i}] ${got[i]} vs ${want[i]}`);
    }
  };

  /** Runs `steps` updates on both backends (fresh random grads each step) and compares every state buffer. */
  async function compareSteps(pd: DType, sd: DType, n: number, states: number, steps: number, update: (b: Backend, refs: Ref<unknown>[], step: number) => void, what: string, tol: number) {
    // Optimizer state: small values, the second state (AdamW's v) non-negative.
    const state = (k: number) => f32ToHost(Float32Array.from(randomHost('f32', n, 80 + k) as Float32Array, (x) => (k === 1 ? x * x : x) * 0.1), sd);
    const hosts = [randomHost(pd, n, 70 + n), ...Array.from({ length: states }, (_, k) => state(k))];
    const results: Float32Array[][] = [];
    for (const b of [cpu, gpu()] as Backend[]) {
      const dts = [pd, ...Array.from({ length: states }, () => sd)];
      const hs = hosts.map((h, k) => b.upload(h, dts[k]));
      const refs: Ref<unknown>[] = hs.map((h, k) => ({ h, shape: [n], dtype: dts[k] }));
      for (let s = 0; s < steps; s++) {
        const g = b.upload(randomHost(pd, n, 90 + s), pd);
        update(b, [refs[0], { h: g, shape: [n], dtype: pd }, ...refs.slice(1)], s + 1);
        b.free(g);
      }
      results.push(await Promise.all(hs.map(async (h, k) => hostToF32(await b.read(h, dts[k], n), dts[k]))));
      hs.forEach((h) => b.free(h));
    }
    results[0].forEach((want, k) => close(results[1][k], want, tol, `${what} buffer ${k}`));
  }

  test('adamw in place over several steps, f32 and packed params [webgpu]', { skip }, async () => {
    for (const [pd, sd, tol] of [['f32', 'f32', 1e-5], ['bf16', 'f32', 1e-2], ['f16', 'f16', 2e-3], ['bf16', 'bf16', 1e-2]] as const) {
      for (const n of SIZES) {
        await compareSteps(pd, sd, n, 2, 4, (b, [p, g, m, v], t) => {
          const args: AdamWArgs = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, bias1: 1 - 0.9 ** t, bias2: 1 - 0.999 ** t, gradScale: 0.5 };
          b.adamw(p, g, m, v, args);
        }, `adamw ${pd}/${sd} n=${n}`, tol);
      }
    }
  });

  test('sgd in place over several steps: plain, momentum, nesterov [webgpu]', { skip }, async () => {
    const variants: SGDArgs[] = [
      { lr: 0.1, momentum: 0, weightDecay: 0, nesterov: false, gradScale: 1 },
      { lr: 0.05, momentum: 0.9, weightDecay: 0.01, nesterov: false, gradScale: 0.5 },
      { lr: 0.05, momentum: 0.9, weightDecay: 0.01, nesterov: true, gradScale: 2 },
    ];
    for (const [pd, sd, tol] of [['f32', 'f32', 1e-5], ['bf16', 'bf16', 1e-2], ['f16', 'f32', 2e-3]] as const) {
      for (const args of variants) {
        for (const n of [1, 33, 1000]) {
          await compareSteps(pd, sd, n, 1, 3, (b, [p, g, buf]) => b.sgd(p, g, buf, args), `sgd ${pd}/${sd} ${JSON.stringify(args)} n=${n}`, tol);
        }
      }
    }
  });

  test('optimizers reject integer tensors, naming the op and dtype [webgpu]', { skip }, () => {
    const p = gpu().upload(new Int32Array(4), 'i32');
    const f = gpu().upload(new Float32Array(4), 'f32');
    const r = (h: unknown, dtype: DType): Ref<unknown> => ({ h, shape: [4], dtype });
    assert.throws(() => gpu().sgd(r(p, 'i32'), r(f, 'f32'), r(f, 'f32'), { lr: 1, momentum: 0, weightDecay: 0, nesterov: false, gradScale: 1 }), /sgd.*i32/);
    assert.throws(() => gpu().adamw(r(f, 'f32'), r(f, 'f32'), r(p, 'i32'), r(f, 'f32'), { lr: 1, beta1: 0.9, beta2: 0.9, eps: 1e-8, weightDecay: 0, bias1: 1, bias2: 1, gradScale: 1 }), /adamw.*i32/);
    gpu().free(p);
    gpu().free(f);
  });
});

