/**
 * Golden fixture from PyTorch (STYLE.md §4): the MLP task's first-step gradients and 60-step loss
 * curve, computed by torch (test/fixtures/make_torch_mlp.py) from the same initial values
 * (test/fixtures/mlp_init.json). Catches mistakes the CPU reference and the kernels would share —
 * the AdamW formula, clipping, the schedule, GELU's approximation, cross-entropy's mean.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { mlpInit, mlpLossAndGrads, trainMlp } from './mlp_task.ts';

const fixture = JSON.parse(readFileSync(new URL('../fixtures/torch_mlp.json', import.meta.url), 'utf8')) as {
  torch: string; losses: number[]; grads0: Record<'w1' | 'b1' | 'w2' | 'b2', number[]>;
};
const init = JSON.parse(readFileSync(new URL('../fixtures/mlp_init.json', import.meta.url), 'utf8')) as Record<string, { data: number[] }>;

test('the seeded MLP inputs still equal the ones the fixture was made from', () => {
  const { x, targets, params } = mlpInit(new CpuBackend());
  const same = (got: ArrayLike<number>, want: number[]) => want.every((v, i) => got[i] === v);
  assert.ok(same(x.dataSync(), init.x.data), 'x changed: regenerate test/fixtures with make_mlp_init.ts and make_torch_mlp.py');
  assert.ok(same(targets.dataSync(), init.targets.data), 'targets changed');
  ['w1', 'b1', 'w2', 'b2'].forEach((n, i) => assert.ok(same(params[i].dataSync(), init[n].data), `${n} changed`));
});

test(`first-step gradients equal PyTorch's (${fixture.torch}) within 1e-5`, () => {
  const { x, targets, params } = mlpInit(new CpuBackend());
  mlpLossAndGrads(x, targets, params).dispose();
  (['w1', 'b1', 'w2', 'b2'] as const).forEach((n, i) => {
    const got = params[i].grad!.dataSync();
    const want = fixture.grads0[n];
    assert.equal(got.length, want.length);
    want.forEach((w, j) => assert.ok(Math.abs(got[j] - w) <= 1e-5 + 1e-4 * Math.abs(w), `d${n}[${j}]: ${got[j]} vs torch ${w}`));
  });
});

test("60 AdamW steps with clipping and warm-up + cosine follow PyTorch's loss curve within 1e-3", async () => {
  const run = await trainMlp(new CpuBackend(), 60);
  run.losses.forEach((l, i) => {
    const w = fixture.losses[i];
    assert.ok(Math.abs(l - w) <= 1e-3 * Math.abs(w) + 1e-5, `step ${i}: FON ${l} vs torch ${w}`);
  });
});
