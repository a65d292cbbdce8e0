/**
 * Training on WebGPU: the MLP task follows the CPU reference's loss curve, and 200 steps keep
 * the buffer pool flat (every step allocates the same buffers and gives them back).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { trainMlp } from '../train/mlp_task.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = await webgpuOrSkip();
exitAfterWebgpu();

test('MLP loss curve on webgpu matches the CPU within 2e-3 relative over 60 steps [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const want = await trainMlp(new CpuBackend(), 60);
  const got = await trainMlp(gpu!, 60);
  assert.equal(got.losses.length, want.losses.length);
  got.losses.forEach((l, i) => {
    const w = want.losses[i];
    assert.ok(Math.abs(l - w) <= 2e-3 * Math.abs(w) + 1e-4, `step ${i}: webgpu loss ${l} vs cpu ${w}`);
  });
  assert.ok(got.losses.at(-1)! < got.losses[0] * 0.5, 'loss should fall');
});

test('200 training steps keep the buffer pool bytes flat [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const run = await trainMlp(gpu!, 200, 50);
  // After the first steps have filled the pool, live + pooled bytes must not grow.
  const total = run.liveBytes.map((b, i) => b + run.pooledBytes[i]);
  const settled = total[10];
  for (let i = 10; i < total.length; i++) assert.equal(total[i], settled, `step ${i}: pool holds ${total[i]} bytes, step 10 held ${settled}`);
  assert.equal(run.liveBytes.at(-1), run.liveBytes[10], 'live bytes at the last step equal those at step 10');
});
