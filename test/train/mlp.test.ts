/** The MLP task trains on the CPU reference: loss falls, and memory returns to baseline. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { trainMlp } from './mlp_task.ts';

test('MLP on cpu: loss falls by more than half in 60 steps and no handle leaks', async () => {
  const cpu = new CpuBackend();
  const before = cpu.memory().liveHandles;
  const run = await trainMlp(cpu, 60);
  assert.ok(run.losses[0] > 1.0, `first loss ${run.losses[0]} should be near ln 4`);
  assert.ok(run.losses.at(-1)! < run.losses[0] * 0.5, `loss ${run.losses[0]} → ${run.losses.at(-1)} did not halve`);
  assert.equal(cpu.memory().liveHandles, before, 'live handles after training');
});
