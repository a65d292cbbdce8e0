/**
 * WebGPU edge cases, the same expectations as cpu_edges.test.ts (and the CPU's answers): NaN in
 * sort, i32 wrap-around, the float → int cast rule (and i32 → u8 without an f32 detour),
 * logsumexp with +Infinity; plus trimming the buffer pool with work still pending, the runtime's
 * bind-group cache, and kernel source loading errors.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_edges.test.ts
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Backend } from '../../src/backend/backend.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import type { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { loadText } from '../../src/backend/webgpu/sources.ts';
import { f32bits, type Kernel } from '../../src/backend/webgpu/runtime.ts';
import { sizeClass } from '../../src/backend/webgpu/pool.ts';
import { DeviceError } from '../../src/errors.ts';
import type { AnyHostArray, DType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const maybeGpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();
const gpu = (): Backend => maybeGpu ?? assert.fail('no webgpu backend');
const cpu = new CpuBackend();

import { SORT_ROW, SORT_ASC, SORT_DESC, I32_OPS, CAST_F32, CAST_I32_U8, LSE_ROWS } from './edge_cases.ts';

/** Runs `f` on both backends with the same host inputs and returns both results as number arrays. */
async function both(inputs: [AnyHostArray, DType, number[]][], f: (be: Backend, refs: { h: never; shape: number[]; dtype: DType }[]) => unknown,
  outDType: DType, n: number): Promise<[number[], number[]]> {
  const out: number[][] = [];
  for (const be of [gpu(), cpu] as Backend[]) {
    const refs = inputs.map(([data, dtype, shape]) => ({ h: be.upload(data, dtype) as never, shape, dtype }));
    out.push(Array.from(await be.read(f(be, refs) as never, outDType, n)));
  }
  return [out[0], out[1]];
}

test('sort puts NaN last ascending, first descending, stably [webgpu]', { skip }, async () => {
  const n = SORT_ROW.length;
  for (const [desc, want] of [[false, SORT_ASC], [true, SORT_DESC]] as const) {
    const [gi, ci] = await both([[new Float32Array(SORT_ROW), 'f32', [1, n]]], (be, [x]) => be.sort(x, 1, n, desc)[1], 'i32', n);
    assert.deepEqual(gi, want, `gpu indices, descending=${desc}`);
    assert.deepEqual(ci, want, `cpu indices, descending=${desc}`);
    const [gv, cv] = await both([[new Float32Array(SORT_ROW), 'f32', [1, n]]], (be, [x]) => be.sort(x, 1, n, desc)[0], 'f32', n);
    assert.deepEqual(gv, cv, `values, descending=${desc}`);
  }
});

test('i32 add/sub/mul wrap like 32-bit integers, as on the CPU [webgpu]', { skip }, async () => {
  for (const { op, a, b, want } of I32_OPS) {
    const [g, c] = await both([[new Int32Array(a), 'i32', [a.length]], [new Int32Array(b), 'i32', [b.length]]],
      (be, [ra, rb]) => be.binary(ra, rb, op, [a.length]), 'i32', a.length);
    assert.deepEqual(g, want, `gpu ${op}`);
    assert.deepEqual(c, want, `cpu ${op}`);
  }
});

test('float → i32 / u8 casts follow the one rule on both backends [webgpu]', { skip }, async () => {
  const n = CAST_F32.x.length;
  for (const from of ['f32', 'bf16'] as const) {
    // bf16 holds every probe except the odd ones; compare with the CPU for it, with the table for f32.
    const data = new Float32Array(CAST_F32.x);
    const src = from === 'f32' ? data : cpu.cast({ h: cpu.upload(data, 'f32'), shape: [n], dtype: 'f32' }, 'bf16');
    for (const to of ['i32', 'u8'] as const) {
      const [g, c] = await both([[src, from, [n]]], (be, [x]) => be.cast(x, to), to, n);
      assert.deepEqual(g, c, `${from} → ${to}: gpu vs cpu`);
      if (from === 'f32') assert.deepEqual(g, CAST_F32[to], `${from} → ${to}`);
    }
  }
  const m = CAST_I32_U8.x.length;
  const [g, c] = await both([[new Int32Array(CAST_I32_U8.x), 'i32', [m]]], (be, [x]) => be.cast(x, 'u8'), 'u8', m);
  assert.deepEqual(g, CAST_I32_U8.u8, 'i32 → u8 gpu');
  assert.deepEqual(c, CAST_I32_U8.u8, 'i32 → u8 cpu');
});

test('logsumexp and cross-entropy with ±Infinity and NaN agree with the CPU [webgpu]', { skip }, async () => {
  for (const { row, lse } of LSE_ROWS) {
    const [g, c] = await both([[new Float32Array(row), 'f32', [1, row.length]]], (be, [x]) => be.logsumexp(x, 1, row.length), 'f32', 1);
    assert.deepEqual(g, [lse], `gpu row ${row}`);
    assert.deepEqual(c, [lse], `cpu row ${row}`);
  }
  const inputs: [AnyHostArray, DType, number[]][] = [[new Float32Array([1, Infinity, 2]), 'f32', [1, 3]], [new Int32Array([0]), 'i32', [1]]];
  for (const k of [0, 1]) {
    const [g, c] = await both(inputs, (be, [l, t]) => be.crossEntropy(l, t, 1, 3, -100)[k], 'f32', 1);
    assert.deepEqual(g, [Infinity], `gpu output ${k}`);
    assert.deepEqual(c, [Infinity], `cpu output ${k}`);
  }
});

test('pool size classes cover the request and stay within the binding limit', () => {
  const h200 = 2 ** 31 - 4; // the H200's maxStorageBufferBindingSize under Dawn
  assert.equal(sizeClass(1000), 1024);
  assert.equal(sizeClass(70_000), 81_920); // four classes per power of two above 64 KiB
  // 1.9 GiB rounds to 2³¹ without the limit; with it the class is the limit itself, so it binds.
  const big = Math.round(1.9 * 2 ** 30);
  assert.equal(sizeClass(big), 2 ** 31);
  assert.equal(sizeClass(big, h200), h200);
  assert.equal(sizeClass(h200, h200), h200);
  // Below the top class nothing changes; a request past the limit keeps its class (alloc refuses it).
  assert.equal(sizeClass(1.6 * 2 ** 30, h200), 1.75 * 2 ** 30);
  assert.equal(sizeClass(h200 + 4, h200), 2 ** 31);
  for (let b = 17; b < 2 ** 31; b = Math.ceil(b * 1.37)) {
    const c = sizeClass(b, h200);
    assert.ok(c >= b && c % 4 === 0 && c <= h200, `class ${c} of ${b} bytes`);
  }
});

test('trimming the pool with commands pending keeps their buffers alive [webgpu]', { skip }, async () => {
  const be = gpu() as WebGpuBackend;
  const x = be.upload(new Float32Array([1, 2, 3, 4]), 'f32');
  const y = be.binary({ h: x, shape: [4], dtype: 'f32' }, { h: x, shape: [4], dtype: 'f32' }, 'add', [4]);
  be.free(x); // parked in the pool while the pending add still reads it
  assert.ok(be.memory().pooledBytes > 0);
  be.rt.trimPool();
  assert.equal(be.memory().pooledBytes, 0);
  assert.deepEqual(Array.from(await be.read(y, 'f32', 4)), [2, 4, 6, 8]);
  assert.equal((be.rt.pool as unknown as { trim?: unknown }).trim, undefined, 'no public pool.trim that skips the flush');
});

// Adds the uniform `a` to every element of x (4 elements), so the dynamic uniform offset of a
// reused bind group must differ per dispatch for the sum to come out right.
const ADD_UNIFORM: Kernel = {
  name: 'test_add_uniform',
  source: () => `struct Params { a: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(4) fn main(@builtin(local_invocation_index) i: u32) { x[i] += P.a; }`,
};
// Declares a buffer the dispatch below does not bind.
const TWO_BUFFERS: Kernel = {
  name: 'test_two_buffers',
  source: () => `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(1) fn main() { b[0] = a[0]; }`,
};

test('bind groups are reused across dispatches of the same buffers, each with its own uniforms; a missing binding is a DeviceError [webgpu]', { skip }, async () => {
  const be = gpu() as WebGpuBackend;
  const x = be.upload(new Float32Array(4), 'f32'), y = be.upload(new Float32Array(4), 'f32');
  const group = (be.rt as unknown as { groups: Map<string, GPUBindGroup> }).groups;
  const before = group.size;
  for (const a of [1, 2, 4, 8]) be.rt.run({ kernel: ADD_UNIFORM, variant: {}, uniforms: [f32bits(a)], buffers: [x.buffer], workgroups: [1] });
  be.rt.run({ kernel: ADD_UNIFORM, variant: {}, uniforms: [f32bits(100)], buffers: [y.buffer], workgroups: [1] });
  assert.equal(group.size - before, 2, 'one cached group per buffer, whatever the uniforms');
  assert.deepEqual(Array.from(await be.read(x, 'f32', 4)), [15, 15, 15, 15]);
  assert.deepEqual(Array.from(await be.read(y, 'f32', 4)), [100, 100, 100, 100]);
  // After a trim the cache is empty and the same dispatch still runs (a new group).
  be.rt.trimPool();
  assert.equal(group.size, 0);
  be.rt.run({ kernel: ADD_UNIFORM, variant: {}, uniforms: [f32bits(1)], buffers: [x.buffer], workgroups: [1] });
  assert.deepEqual(Array.from(await be.read(x, 'f32', 4)), [16, 16, 16, 16]);
  assert.throws(() => be.rt.run({ kernel: TWO_BUFFERS, variant: {}, buffers: [x.buffer], workgroups: [1] }),
    (e) => e instanceof DeviceError && e.message === "webgpu: kernel test_two_buffers{} declares bindings 'rw' (u uniform, r/w storage) but the dispatch binds 1 buffers");
  be.free(x); be.free(y);
});

test('a kernel source that cannot be loaded is a DeviceError [webgpu]', async () => {
  await assert.rejects(loadText(new URL('file:///nonexistent/fon_kernel.wgsl')), DeviceError);
  const realFetch = globalThis.fetch;
  globalThis.fetch = (async () => new Response('missing', { status: 404 })) as typeof fetch;
  try {
    await assert.rejects(loadText(new URL('https://example.invalid/kernels/x.wgsl')), (e: unknown) => e instanceof DeviceError && /HTTP 404/.test((e as Error).message));
  } finally {
    globalThis.fetch = realFetch;
  }
});
