/**
 * The check shared by the CPU and webgpu tests of Focus's device plan (device_plan.ts): on backend
 * `be`, the plan built from a membership one-hot equals the host plan (sparse.ts) — sorted
 * positions, each copy's row, set A's entries for every query block (partial bits included), its
 * segment ids and words, set B's whole table — and the prefill through it equals the host path's.
 */
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { maskEntries } from '../../src/attention/block_mask.ts';
import { planFocusPrefillOnDevice } from '../../src/attention/focus/device_plan.ts';
import { focusSparseAttention, planFocusPrefill, runSortedPrefill } from '../../src/attention/focus/sparse.ts';

/** Balanced-ish memberships: each token in k distinct groups of K, from a fixed LCG. */
export function planBits(n: number, groups: number, k: number, seed: number): Uint32Array {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  return Uint32Array.from({ length: n }, () => { let w = 0, c = 0; while (c < k) { const g = Math.floor(rnd() * groups); if (!(w & (1 << g))) { w |= 1 << g; c++; } } return w >>> 0; });
}

export async function checkDevicePlan(be: Backend, o: { batch: number; t: number; groups: number; topK: number; window: number; heads: number; kvHeads: number; d: number }): Promise<void> {
  const { batch: b, t, groups, topK: k } = o;
  const bits = planBits(b * t, groups, k, 7 + k);
  const onehot = Float32Array.from({ length: b * t * groups }, (_, e) => ((bits[Math.floor(e / groups)] >>> (e % groups)) & 1));
  const member = fon.tensor(onehot, [b, t, groups], { backend: be });
  const plan = planFocusPrefillOnDevice(member, o);
  const ref = planFocusPrefill(bits, b, t, o);
  const s = ref.sorted!, r = s.rows;
  const ints = async (x: fon.Tensor) => Array.from((await x.data()) as Int32Array);
  const what = `K ${groups}, k ${k}, T ${t}`;
  assert.deepEqual(await ints(plan.position), Array.from(s.position), `${what}: sorted positions`);
  for (let j = 0; j < k; j++) assert.deepEqual(await ints(plan.copies[j]), Array.from(ref.copies[j]), `${what}: rows of copy ${j}`);
  const a = plan.maskA, ha = ref.maskA!;
  const table = Int32Array.from(await ints(a.device));
  assert.deepEqual([a.qBlocks, a.kBlocks, a.tq, a.tk, a.batch], [ha.qBlocks, ha.kBlocks, ha.tq, ha.tk, ha.batch], `${what}: set A's geometry`);
  const got = { ...a, table };
  for (let bb = 0; bb < b; bb++) for (let qb = 0; qb < a.qBlocks; qb++) {
    assert.deepEqual(Array.from(maskEntries(got, bb, 0, qb)), Array.from(maskEntries(ha, bb, 0, qb)), `${what}: set A, batch ${bb}, query block ${qb}`);
  }
  assert.deepEqual(Array.from(table.subarray(a.segmentOffset, a.segmentOffset + b * r)), Array.from(ha.table.subarray(ha.segmentOffset, ha.segmentOffset + b * r)), `${what}: segment ids`);
  assert.equal(a.bitsOffset > 0, k > 1);
  if (k > 1) assert.deepEqual(Array.from(table.subarray(a.bitsOffset, a.bitsOffset + b * r)), Array.from(ha.table.subarray(ha.bitsOffset, ha.bitsOffset + b * r)), `${what}: words of set A`);
  assert.deepEqual(await ints(plan.maskB.device), Array.from(ref.maskB!.table), `${what}: set B's table`);
  // The prefill through the device plan equals the host path's.
  const x = (shape: number[], seed: number) => fon.tensor(fon.randn(shape, { seed }).dataSync(), shape, { backend: be });
  const q = x([b, o.heads, t, o.d], 1), kk = x([b, o.kvHeads, t, o.d], 2), v = x([b, o.kvHeads, t, o.d], 3);
  const want = (await focusSparseAttention(q, kk, v, bits, o).data()) as Float32Array;
  const out = fon.noGrad(() => runSortedPrefill(q, kk, v, plan));
  const gotOut = (await out.data()) as Float32Array;
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(gotOut[i] - want[i]));
  assert.ok(worst <= 1e-5, `${what}: prefill max |Δ| ${worst}`);
}
