/**
 * Edge cases of the CPU reference backend (src/backend/cpu, src/tensor/dtype.ts) and of the
 * backend registry: NaN in sort, i32 wrap-around, the float → int cast rule, logsumexp and
 * cross-entropy with +Infinity, concurrent initBackend and 'auto' skipping a software WebGPU.
 * The same expectations run on WebGPU in webgpu_edges.test.ts.
 *
 *   node --import tsx --test test/backend/cpu_edges.test.ts
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { DeviceError } from '../../src/errors.ts';
import { zeros } from '../../src/ops/creation.ts';
import { initBackend, registerBackendFactory, setBackend, getBackend } from '../../src/backend/registry.ts';
import type { Backend } from '../../src/backend/backend.ts';
import { floatToI32, floatToU8, roundTo } from '../../src/tensor/dtype.ts';

import { SORT_ROW, SORT_ASC, SORT_DESC, I32_OPS, CAST_F32, CAST_I32_U8, LSE_ROWS } from './edge_cases.ts';

const cpu = new CpuBackend();

async function readAll(be: Backend, h: unknown, dtype: 'f32' | 'i32' | 'u8', n: number): Promise<number[]> {
  return Array.from(await be.read(h as never, dtype, n));
}

test('sort puts NaN last ascending, first descending, stably', async () => {
  const x = { h: cpu.upload(new Float32Array(SORT_ROW), 'f32'), shape: [1, SORT_ROW.length], dtype: 'f32' as const };
  for (const [desc, want] of [[false, SORT_ASC], [true, SORT_DESC]] as const) {
    const [v, i] = cpu.sort(x, 1, SORT_ROW.length, desc);
    assert.deepEqual(await readAll(cpu, i, 'i32', SORT_ROW.length), want, `indices, descending=${desc}`);
    assert.deepEqual(await readAll(cpu, v, 'f32', SORT_ROW.length), want.map((k) => Math.fround(SORT_ROW[k])), `values, descending=${desc}`);
  }
});

test('i32 add/sub/mul wrap like 32-bit integers', async () => {
  for (const { op, a, b, want } of I32_OPS) {
    const ra = { h: cpu.upload(new Int32Array(a), 'i32'), shape: [a.length], dtype: 'i32' as const };
    const rb = { h: cpu.upload(new Int32Array(b), 'i32'), shape: [b.length], dtype: 'i32' as const };
    assert.deepEqual(await readAll(cpu, cpu.binary(ra, rb, op, [a.length]), 'i32', a.length), want, op);
  }
});

test('float → i32 truncates, saturates, NaN → 0; float → u8 wraps the saturated i32', async () => {
  const x = { h: cpu.upload(new Float32Array(CAST_F32.x), 'f32'), shape: [CAST_F32.x.length], dtype: 'f32' as const };
  assert.deepEqual(await readAll(cpu, cpu.cast(x, 'i32'), 'i32', CAST_F32.x.length), CAST_F32.i32);
  assert.deepEqual(await readAll(cpu, cpu.cast(x, 'u8'), 'u8', CAST_F32.x.length), CAST_F32.u8);
  assert.deepEqual(CAST_F32.x.map(floatToI32), CAST_F32.i32);
  assert.deepEqual(CAST_F32.x.map(floatToU8), CAST_F32.u8);
  assert.deepEqual(CAST_F32.x.map((v) => roundTo('i32', v)), CAST_F32.i32);
  const xi = { h: cpu.upload(new Int32Array(CAST_I32_U8.x), 'i32'), shape: [CAST_I32_U8.x.length], dtype: 'i32' as const };
  assert.deepEqual(await readAll(cpu, cpu.cast(xi, 'u8'), 'u8', CAST_I32_U8.x.length), CAST_I32_U8.u8);
});

test('logsumexp of a row with +Infinity is +Infinity; cross-entropy follows', async () => {
  for (const { row, lse } of LSE_ROWS) {
    const x = { h: cpu.upload(new Float32Array(row), 'f32'), shape: [1, row.length], dtype: 'f32' as const };
    assert.deepEqual(await readAll(cpu, cpu.logsumexp(x, 1, row.length), 'f32', 1), [lse], `row ${row}`);
  }
  const logits = { h: cpu.upload(new Float32Array([1, Infinity, 2]), 'f32'), shape: [1, 3], dtype: 'f32' as const };
  const targets = { h: cpu.upload(new Int32Array([0]), 'i32'), shape: [1], dtype: 'i32' as const };
  const [loss, lse] = cpu.crossEntropy(logits, targets, 1, 3, -100);
  assert.deepEqual(await readAll(cpu, loss, 'f32', 1), [Infinity]);
  assert.deepEqual(await readAll(cpu, lse, 'f32', 1), [Infinity]);
});

test('concurrent initBackend of one name creates it once', async () => {
  let made = 0;
  registerBackendFactory('edge_fake', async () => {
    made++;
    await new Promise((r) => setTimeout(r, 20));
    return new CpuBackend();
  });
  const init = initBackend as (n: string) => Promise<Backend>;
  const [a, b] = await Promise.all([init('edge_fake'), init('edge_fake')]);
  assert.equal(made, 1);
  assert.equal(a, b);
  assert.equal(await init('edge_fake'), a);
});

test("'auto' destroys and forgets a software webgpu backend it skipped", async () => {
  let destroyed = 0;
  const soft = Object.assign(new CpuBackend(), { caps: { software: true } });
  soft.destroy = () => { destroyed++; };
  registerBackendFactory('webgpu', async () => soft);
  const b = await initBackend('auto');
  assert.notEqual(b, soft);
  assert.equal(b.name, 'cpu');
  assert.equal(destroyed, 1);
  assert.throws(() => setBackend('webgpu'), /not initialised/);
  assert.notEqual(getBackend(), soft);
});

test('a host allocation the engine refuses is a DeviceError naming the size, not a RangeError', () => {
  assert.throws(() => zeros([2 ** 33], { backend: cpu }), (e: unknown) => e instanceof DeviceError
    && /^host memory: cannot allocate 8589934592 f32 values \(32\.00 GiB\): /.test(e.message));
});
