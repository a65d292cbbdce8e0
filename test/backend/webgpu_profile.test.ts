/**
 * The GPU profiler (src/backend/webgpu/profile.ts, GpuRuntime.startProfile/stopProfile): every
 * dispatch made while profiling is counted once under its kernel, across many submits (more
 * dispatches than one submit holds), results stay right while dispatches run in passes of their
 * own, nothing is counted after stopProfile; and profileTable's merging, "others" row and totals.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_profile.test.ts
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as fon from '../../src/index.ts';
import { ArgumentError, UnsupportedError } from '../../src/errors.ts';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { profileTable, type KernelTime } from '../../src/backend/webgpu/profile.ts';
import { FLUSH_DISPATCHES } from '../../src/backend/webgpu/runtime.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const maybeGpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

test('profileTable merges variants, folds the tail into one row and totals every dispatch', () => {
  const rows: KernelTime[] = [
    { kernel: 'matmul', variant: '{"A":1}', dispatches: 2, ms: 3 },
    { kernel: 'matmul', variant: '{"A":2}', dispatches: 1, ms: 1 },
    { kernel: 'add', variant: '{}', dispatches: 4, ms: 0.5 },
    { kernel: 'fill', variant: '{}', dispatches: 1, ms: 0.25 },
  ];
  const lines = profileTable(rows, { top: 2 }).split('\n');
  assert.deepEqual(lines.slice(2), [
    '| matmul | 3 | 4.000 | 1333.3 | 84.2% |',
    '| add | 4 | 0.500 | 125.0 | 10.5% |',
    '| (1 others) | 1 | 0.250 | 250.0 | 5.3% |',
    '| total | 8 | 4.750 | 593.8 | 100.0% |',
  ]);
  const byVariant = profileTable(rows, { byVariant: true }).split('\n');
  assert.equal(byVariant[2], '| matmul {"A":1} | 2 | 3.000 | 1500.0 | 63.2% |');
  assert.equal(byVariant.length, 2 + 4 + 1);
});

test('profiling counts each dispatch once, across many submits, without changing results [webgpu]', { skip }, async (t) => {
  const gpu = maybeGpu as WebGpuBackend;
  if (!gpu.caps.timestamps) { t.skip(`no timestamp-query on ${gpu.caps.adapterName} (the refusal is tested below)`); return; }
  const n = 16 * FLUSH_DISPATCHES + 50; // many submits, the last one partly filled
  let x = fon.zeros([3, 5], { backend: gpu });
  const one = fon.ones([3, 5], { backend: gpu });
  gpu.rt.startProfile();
  for (let i = 0; i < n; i++) {
    const y = fon.add(x, one);
    x.dispose();
    x = y;
  }
  const m = fon.matmul(x, fon.transpose(one, 0, 1));
  const rows = await gpu.rt.stopProfile();
  assert.deepEqual([...(await x.data())], new Array(15).fill(n), 'each add ran once, in order, with its own uniforms');
  assert.deepEqual([...(await m.data())], new Array(9).fill(5 * n));
  const count = (name: string) => rows.filter((r) => r.kernel.startsWith(name)).reduce((s, r) => s + r.dispatches, 0);
  assert.equal(count('binary'), n, JSON.stringify(rows.map((r) => [r.kernel, r.dispatches])));
  assert.ok(count('matmul') >= 1);
  for (const r of rows) assert.ok(Number.isFinite(r.ms) && r.ms >= 0, `${r.kernel}: ${r.ms} ms`);
  for (let i = 1; i < rows.length; i++) assert.ok(rows[i - 1].ms >= rows[i].ms, 'slowest first');
  // After stopProfile nothing is timed: a later profile holds only its own dispatches.
  fon.add(x, one).dispose();
  await assert.rejects(gpu.rt.stopProfile(), (e: Error) => e instanceof ArgumentError && e.message === 'webgpu: stopProfile without startProfile');
  gpu.rt.startProfile();
  fon.mul(x, one).dispose();
  assert.deepEqual((await gpu.rt.stopProfile()).map((r) => [r.kernel, r.dispatches]), [['binary', 1]]);
  x.dispose();
  one.dispose();
  m.dispose();
});

test('startProfile names the adapter when timestamps are missing [webgpu]', { skip }, () => {
  const gpu = maybeGpu as WebGpuBackend;
  const had = gpu.caps.timestamps;
  try {
    (gpu.caps as { timestamps: boolean }).timestamps = false;
    assert.throws(() => gpu.rt.startProfile(), (e: Error) => e instanceof UnsupportedError
      && e.message === `webgpu: profiling needs the timestamp-query feature, which ${gpu.caps.adapterName} does not offer`);
  } finally {
    (gpu.caps as { timestamps: boolean }).timestamps = had;
  }
});
