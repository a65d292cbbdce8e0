/** Training batches are a pure function of (seed, step); evaluation windows score every id once. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError } from '../../src/errors.ts';
import { BatchSampler, evalWindows } from '../../src/train/data/batches.ts';
import { DataError } from '../../src/train/data/data_error.ts';
import { buildTokenStore, MemoryTokenStore } from '../../src/train/data/token_store.ts';

/** A store whose id at position i is i, so a window's first input says where it starts. */
function positions(n: number): MemoryTokenStore {
  return new MemoryTokenStore(Int32Array.from({ length: n }, (_, i) => i));
}

test('targets are the inputs shifted by one; windows start at multiples of T', () => {
  const T = 8;
  const sampler = new BatchSampler(positions(1000), { batch: 4, context: T, seed: 1 });
  assert.equal(sampler.windowsPerEpoch, Math.floor(999 / T));
  for (let step = 0; step < 5; step++) {
    const { inputs, targets } = sampler.batchAt(step);
    assert.equal(inputs.length, 4 * T);
    for (let b = 0; b < 4; b++) {
      const start = sampler.windowAt(step, b) * T;
      for (let t = 0; t < T; t++) {
        assert.equal(inputs[b * T + t], start + t);
        assert.equal(targets[b * T + t], start + t + 1);
      }
    }
  }
});

test('every window once per epoch, epochs shuffled differently, batches straddling an epoch boundary', () => {
  const T = 4;
  const store = positions(4 * 37 + 1); // W = 37 windows, not a multiple of B
  const sampler = new BatchSampler(store, { batch: 5, context: T, seed: 42 });
  const W = sampler.windowsPerEpoch;
  assert.equal(W, 37);
  const seen: number[] = [];
  for (let step = 0; seen.length < 3 * W; step++) {
    const { inputs } = sampler.batchAt(step);
    for (let b = 0; b < 5 && seen.length < 3 * W; b++) seen.push(inputs[b * T] / T);
  }
  const epochs = [seen.slice(0, W), seen.slice(W, 2 * W), seen.slice(2 * W)];
  const all = Array.from({ length: W }, (_, i) => i);
  for (const e of epochs) assert.deepEqual([...e].sort((a, b) => a - b), all, 'a permutation of all windows');
  assert.notDeepEqual(epochs[0], all, 'shuffled');
  assert.notDeepEqual(epochs[0], epochs[1], 'each epoch has its own order');
});

test('batchAt(step) is a pure function of (seed, step): a new sampler after a "restart" gives the same batch', async () => {
  const text = Array.from({ length: 40 }, (_, i) => `Document number ${i} says something.`);
  const tok = { encode: (t: string) => Array.from(new TextEncoder().encode(t)), eosId: 256, vocabSize: 257 };
  const store = await buildTokenStore(text, tok);
  const opts = { batch: 3, context: 16, seed: 7 };
  const run = new BatchSampler(store, opts);
  const seq = Array.from({ length: 200 }, (_, s) => run.batchAt(s)); // steps 0…199 in order (several epochs)
  const restarted = new BatchSampler(store, opts);
  for (const s of [150, 0, 199, 37, 38]) assert.deepEqual(restarted.batchAt(s), seq[s], `step ${s}`);
  const onDisk = await buildTokenStore(text, tok, { memoryTokens: 0 });
  try {
    assert.deepEqual(new BatchSampler(onDisk, opts).batchAt(123), seq[123], 'the same from a store on disk');
  } finally {
    onDisk.close();
  }
  const otherSeed = new BatchSampler(store, { ...opts, seed: 8 });
  assert.notDeepEqual(otherSeed.batchAt(0), seq[0]);
});

test('evalWindows scores every id after the first exactly once, in order, for any stride', () => {
  for (const [n, T, stride] of [[100, 10, 10], [101, 10, 10], [97, 10, 3], [11, 10, 10], [7, 10, 10], [50, 8, 1]]) {
    const scored: number[] = [];
    for (const w of evalWindows(positions(n), T, stride)) {
      assert.ok(w.inputs.length <= T && w.inputs.length === w.targets.length);
      for (let i = 0; i < w.inputs.length; i++) assert.equal(w.targets[i], w.inputs[i] + 1);
      scored.push(...w.targets.slice(w.scoredFrom));
    }
    assert.deepEqual(scored, Array.from({ length: n - 1 }, (_, i) => i + 1), `n ${n}, T ${T}, stride ${stride}`);
  }
  const windows = [...evalWindows(positions(31), 10)];
  assert.deepEqual(windows.map((w) => [w.inputs[0], w.scoredFrom]), [[0, 0], [10, 0], [20, 0]], 'non-overlapping by default');
  // transformers' loop: starts at multiples of the stride, the last window shorter, ending at the store's end.
  const cut = (n: number, T: number, stride?: number) => [...evalWindows(positions(n), T, stride)].map((w) => [w.inputs[0], w.inputs.length, w.scoredFrom]);
  assert.deepEqual(cut(36, 10), [[0, 10, 0], [10, 10, 0], [20, 10, 0], [30, 5, 0]]);
  assert.deepEqual(cut(20, 10, 4), [[0, 10, 0], [4, 10, 6], [8, 10, 6], [12, 7, 6]]);
});

test('bad arguments and a store too short for one window', () => {
  assert.throws(() => new BatchSampler(positions(8), { batch: 1, context: 8, seed: 0 }), (e: unknown) => e instanceof DataError && /holds 8 ids; context 8 needs at least 9/.test(e.message));
  assert.throws(() => new BatchSampler(positions(100), { batch: 0, context: 8, seed: 0 }), ArgumentError);
  assert.throws(() => new BatchSampler(positions(100), { batch: 2, context: 2.5, seed: 0 }), ArgumentError);
  assert.throws(() => new BatchSampler(positions(100), { batch: 2, context: 8, seed: 0 }).batchAt(-1), ArgumentError);
  assert.throws(() => [...evalWindows(positions(100), 8, 9)], ArgumentError);
  assert.throws(() => [...evalWindows(positions(1), 8)], DataError);
});
