/**
 * SpotAttention's block selection (attention/spot/selection.ts, specs/focus_spot.md B4): the
 * threshold search equals the sort-based reference for dual top-p and static top-K over random
 * scores with ties and random masses; the reservation, the floor and p = 1 behave as the rule says;
 * bad rules are refused by name.
 * Run: node --import tsx --test test/attention/spot_selection.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError } from '../../src/errors.ts';
import { selectBlocks, selectBySort, SPOT_BLOCK, type SpotRule } from '../../src/attention/spot/selection.ts';

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

test('the threshold search picks what sorting picks: dual top-p and static top-K, scores with ties, 300 queries', () => {
  const rnd = lcg(5);
  const rules: SpotRule[] = [{ kind: 'top-p', p: 0.5 }, { kind: 'top-p', p: 0.9 }, { kind: 'top-p', p: 1 }, { kind: 'top-k', fraction: 0.25 }, { kind: 'top-k', fraction: 0.5 }, { kind: 'top-k', fraction: 1 }];
  let nonTrivial = 0;
  for (let c = 0; c < 300; c++) {
    const q = Math.floor(rnd() * 6000);
    const n = Math.floor(q / SPOT_BLOCK) + 1;
    // Scores on a coarse grid (many ties), some negative; masses dyadic (exact sums) or random.
    const scores = Float32Array.from({ length: n }, () => Math.round((rnd() - 0.3) * 12) / 4);
    const dyadic = c % 2 === 0;
    const mass = Float64Array.from({ length: n }, () => (dyadic ? Math.floor(rnd() * 16) / 16 : rnd() ** 4));
    for (const rule of rules) {
      const got = selectBlocks(q, scores, mass, rule), want = selectBySort(q, scores, mass, rule);
      assert.deepEqual(Array.from(got.blocks), Array.from(want.blocks), `query ${q}, ${JSON.stringify(rule)}`);
      assert.equal(got.reserved, want.reserved);
      if (got.blocks.length > got.reserved && got.blocks.length < n) nonTrivial++;
    }
  }
  assert.ok(nonTrivial > 300, `only ${nonTrivial} selections kept some but not all open blocks`);
});

test('the rule: short contexts are all reserved; p = 1 keeps every block with mass; the floor is 32 blocks; top-K counts the reserved blocks in', () => {
  // Position 383: blocks 0 … 23, sink 0 … 7 and recency 8 … 23: all reserved, whatever the scores.
  const short = selectBlocks(383, new Float32Array(24), new Float32Array(24), { kind: 'top-p', p: 0.1 });
  assert.deepEqual(Array.from(short.blocks), Array.from({ length: 24 }, (_, b) => b));
  const q = 100 * SPOT_BLOCK + 3, n = 101; // blocks 0 … 100; reserved 0 … 7 and 85 … 100 (24)
  const scores = Float32Array.from({ length: n }, (_, b) => b);
  const flat = new Float32Array(n).fill(1);
  assert.equal(selectBlocks(q, scores, flat, { kind: 'top-p', p: 1 }).blocks.length, n);
  // All mass in one open block, which also scores best: the nucleus is that block, and the floor
  // lifts the selection to 32 blocks in all with the 7 next best-scored open blocks (84 … 78).
  const peaked = new Float32Array(n), top = Float32Array.from(scores);
  peaked[40] = 1;
  top[40] = 1e3;
  const s = selectBlocks(q, top, peaked, { kind: 'top-p', p: 0.9 });
  assert.equal(s.blocks.length, 32);
  assert.equal(s.reserved, 24);
  assert.deepEqual(Array.from(s.blocks.subarray(8, 16)), [40, 78, 79, 80, 81, 82, 83, 84]);
  // Blocks are ranked by score and the nucleus is counted in that order: with the mass in block 40
  // but block 40 scored below 44 others, the nucleus runs down to it (45 open blocks, 69 in all).
  assert.equal(selectBlocks(q, scores, peaked, { kind: 'top-p', p: 0.9 }).blocks.length, 69);
  // Top-K 0.5 of 101 blocks: 51 in all, 24 reserved and the 27 best-scored open ones.
  const k = selectBlocks(q, scores, flat, { kind: 'top-k', fraction: 0.5 });
  assert.equal(k.blocks.length, 51);
  assert.deepEqual(Array.from(k.blocks.subarray(8, 35)), Array.from({ length: 27 }, (_, i) => 58 + i));
});

test('bad rules and inputs are refused, naming the value', () => {
  const z = new Float32Array(4);
  for (const [rule, msg] of [
    [{ kind: 'top-p', p: 0 }, 'spot: top-p 0 must lie in (0, 1]'],
    [{ kind: 'top-p', p: 1.5 }, 'spot: top-p 1.5 must lie in (0, 1]'],
    [{ kind: 'top-k', fraction: 0 }, 'spot: top-K fraction 0 must lie in (0, 1]'],
    [{ kind: 'top-k', fraction: Number.NaN }, 'spot: top-K fraction NaN must lie in (0, 1]'],
  ] as const) assert.throws(() => selectBlocks(20, z, z, rule), (e: Error) => e instanceof ArgumentError && e.message === msg);
  assert.throws(() => selectBlocks(100, z, z, { kind: 'top-p', p: 0.9 }), /spot: 4 scores and 4 masses for a query in block 6; expected at least 7 each/);
  assert.throws(() => selectBlocks(20, Float32Array.of(0, Number.NaN), z, { kind: 'top-p', p: 0.9 }), /spot: block 1 has score NaN and mass 0; expected a number and a mass ≥ 0/);
});
