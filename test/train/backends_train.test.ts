/** The MLP task on the wasm backend follows the CPU reference's loss curve. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import '../../src/backend/wasm/index.ts';
import { trainMlp } from './mlp_task.ts';

test('MLP loss curve on wasm matches the CPU within 1e-3 relative over 60 steps', async () => {
  const wasm = await fon.initBackend('wasm');
  const want = await trainMlp(new CpuBackend(), 60);
  const got = await trainMlp(wasm, 60);
  got.losses.forEach((l, i) => {
    const w = want.losses[i];
    assert.ok(Math.abs(l - w) <= 1e-3 * Math.abs(w) + 1e-5, `step ${i}: wasm loss ${l} vs cpu ${w}`);
  });
});
