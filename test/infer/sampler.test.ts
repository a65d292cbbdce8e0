/**
 * Sampler: greedy is argmax, temperature draws follow softmax(logits / T), top-k and top-p keep
 * exactly the ids they should, the repetition penalty matches hand-computed logits, a seed fixes
 * the sequence, and every bad option or row is an ArgumentError naming it.
 * Run: node --import tsx --test test/infer/sampler.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Sampler, type SamplingOptions } from '../../src/infer/sampler.ts';
import { ArgumentError } from '../../src/errors.ts';
import { normalArray } from '../../src/ops/random.ts';

const row = (xs: number[]) => Float32Array.from(xs);

/** Softmax in float64 of the given values. */
function softmax(xs: ArrayLike<number>, T = 1): number[] {
  let max = -Infinity;
  for (let i = 0; i < xs.length; i++) max = Math.max(max, xs[i]);
  const e = Array.from(xs, (x) => Math.exp((x - max) / T));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / z);
}

/** Ids sorted best first (highest logit, ties to the lower id): the plain reference for top-k/top-p. */
function rankedIds(logits: Float32Array): number[] {
  return Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
}

/** Counts of `draws` samples from `sampler` on one row. */
function histogram(sampler: Sampler, logits: Float32Array, draws: number, history: number[] = []): number[] {
  const counts = new Array<number>(logits.length).fill(0);
  for (let i = 0; i < draws; i++) counts[sampler.next(logits, history)]++;
  return counts;
}

test('greedy (temperature 0) is the argmax, ties go to the lowest id', () => {
  const logits = normalArray(7, 5000);
  const want = rankedIds(logits)[0];
  const s = new Sampler(5000, { temperature: 0, seed: 1 });
  assert.equal(s.next(logits, []), want);
  assert.equal(new Sampler(5, { temperature: 0 }).next(row([1, 3, -2, 3, 2]), []), 1);
  assert.equal(new Sampler(3, { temperature: 0 }).next(row([-Infinity, -Infinity, -5]), []), 2);
  // top-k / top-p do not change the argmax under greedy
  assert.equal(new Sampler(5000, { temperature: 0, topK: 3, topP: 0.1 }).next(logits, []), want);
});

test('temperature: draws follow softmax(logits / T) within 5 standard errors per id', () => {
  const logits = row([1.0, 2.0, 0.5, -1.0, 1.5, 0.0]);
  const N = 100_000;
  for (const T of [0.5, 1, 2.5]) {
    const s = new Sampler(6, { temperature: T, seed: 42 });
    const p = softmax(logits, T);
    const d = s.distribution(logits, []);
    assert.deepEqual(Array.from(d.ids), [0, 1, 2, 3, 4, 5]);
    d.probs.forEach((q, i) => assert.ok(Math.abs(q - p[i]) < 1e-12, `T=${T} id ${i}: ${q} vs ${p[i]}`));
    const counts = histogram(s, logits, N);
    counts.forEach((c, i) => {
      const se = Math.sqrt((p[i] * (1 - p[i])) / N);
      assert.ok(Math.abs(c / N - p[i]) < 5 * se, `T=${T} id ${i}: frequency ${c / N} vs probability ${p[i]} (5σ = ${5 * se})`);
    });
  }
});

test('top-k never yields an id outside the k best, and draws each of them', () => {
  const V = 2000, k = 7;
  const logits = normalArray(3, V);
  const best = new Set(rankedIds(logits).slice(0, k));
  const s = new Sampler(V, { topK: k, temperature: 3, seed: 5 });
  const seen = new Set<number>();
  for (let i = 0; i < 20_000; i++) {
    const id = s.next(logits, []);
    assert.ok(best.has(id), `id ${id} is not among the ${k} best`);
    seen.add(id);
  }
  assert.equal(seen.size, k);
  // the kept distribution is softmax over the k best, best first
  const ranked = rankedIds(logits).slice(0, k);
  const d = s.distribution(logits, []);
  assert.deepEqual(Array.from(d.ids), ranked);
  const p = softmax(ranked.map((i) => logits[i]), 3);
  d.probs.forEach((q, i) => assert.ok(Math.abs(q - p[i]) < 1e-12));
});

test('top-k on a 150K vocabulary matches a full sort, and ties at the cut keep exactly k (lowest ids)', () => {
  const V = 150_000;
  const logits = normalArray(11, V);
  for (const k of [1, 50, 1000]) {
    const d = new Sampler(V, { topK: k }).distribution(logits, []);
    assert.deepEqual(Array.from(d.ids), rankedIds(logits).slice(0, k), `k=${k}`);
  }
  const tied = row([0, 2, 1, 2, 2, 1, 2]);
  assert.deepEqual(Array.from(new Sampler(7, { topK: 3 }).distribution(tied, []).ids), [1, 3, 4]);
  // k ≥ V is the same as off
  assert.deepEqual(Array.from(new Sampler(7, { topK: 9 }).distribution(tied, []).ids), [0, 1, 2, 3, 4, 5, 6]);
});

test('top-p keeps the smallest best-first prefix whose mass reaches p (exact example)', () => {
  // probabilities 0.1, 0.5, 0.05, 0.2, 0.15 at ids 0..4: best first 1 (0.5), 3 (0.2), 4 (0.15), 0 (0.1), 2 (0.05)
  const probs = [0.1, 0.5, 0.05, 0.2, 0.15];
  const logits = row(probs.map(Math.log));
  const kept = (topP: number, extra: SamplingOptions = {}) => {
    const d = new Sampler(5, { topP, ...extra }).distribution(logits, []);
    return { ids: Array.from(d.ids), probs: Array.from(d.probs) };
  };
  assert.deepEqual(kept(0.3).ids, [1]);
  assert.deepEqual(kept(0.5).ids, [1], 'mass exactly p is enough');
  assert.deepEqual(kept(0.6).ids, [1, 3]);
  assert.deepEqual(kept(0.85).ids, [1, 3, 4]);
  assert.deepEqual(kept(0.86).ids, [1, 3, 4, 0]);
  assert.deepEqual(kept(1).ids, [0, 1, 2, 3, 4], 'p = 1 is off: every id, in id order');
  const r = kept(0.6).probs;
  assert.ok(Math.abs(r[0] - 5 / 7) < 1e-6 && Math.abs(r[1] - 2 / 7) < 1e-6, `renormalised ${r}`);
  // after top-k = 3 the mass is renormalised over 0.5, 0.2, 0.15 first: 0.5 / 0.85 = 0.588 ≥ 0.55 keeps one id
  assert.deepEqual(kept(0.55).ids, [1, 3]);
  assert.deepEqual(kept(0.55, { topK: 3 }).ids, [1]);
  // draws stay inside the nucleus
  const s = new Sampler(5, { topP: 0.6, seed: 3 });
  const counts = histogram(s, logits, 20_000);
  assert.equal(counts[0] + counts[2] + counts[4], 0);
  assert.ok(Math.abs(counts[1] / 20_000 - 5 / 7) < 0.02, `frequency of id 1: ${counts[1] / 20_000}`);
});

test('top-p on a 150K vocabulary matches a full sort of the probabilities', () => {
  const V = 150_000;
  const logits = normalArray(13, V, 0, 3);
  const ranked = rankedIds(logits);
  const p = softmax(ranked.map((i) => logits[i]));
  for (const topP of [0.1, 0.9]) {
    let cum = 0, n = 0;
    while (cum < topP) cum += p[n++];
    const d = new Sampler(V, { topP }).distribution(logits, []);
    assert.deepEqual(Array.from(d.ids), ranked.slice(0, n), `topP=${topP}`);
    d.probs.forEach((q, i) => assert.ok(Math.abs(q - p[i] / cum) < 1e-9));
  }
});

test('repetition penalty: hand-computed logits, each seen id once, input row untouched', () => {
  const logits = row([2, -1, 0.5, 3, 0]);
  const copy = logits.slice();
  const s = new Sampler(5, { repetitionPenalty: 2 });
  // ids 0, 1, 4 seen (0 and 1 twice): 2 → 1, -1 → -2, 0 → 0; ids 2 and 3 unchanged
  const d = s.distribution(logits, [0, 1, 0, 1, 4]);
  const want = softmax([1, -2, 0.5, 3, 0]);
  d.probs.forEach((q, i) => assert.ok(Math.abs(q - want[i]) < 1e-12, `id ${i}: ${q} vs ${want[i]}`));
  assert.deepEqual(logits, copy);
  // greedy flips exactly where the hand computation says
  const greedy = (xs: number[], penalty: number, history: number[]) =>
    new Sampler(xs.length, { temperature: 0, repetitionPenalty: penalty }).next(row(xs), history);
  assert.equal(greedy([2.0, 1.5], 1.5, [0]), 1, '2 / 1.5 = 1.33 < 1.5');
  assert.equal(greedy([2.0, 1.5], 1.2, [0]), 0, '2 / 1.2 = 1.67 > 1.5');
  assert.equal(greedy([-1.0, -1.2], 1.25, [0]), 1, '-1 · 1.25 = -1.25 < -1.2');
  assert.equal(greedy([-1.0, -1.2], 1.1, [0]), 0, '-1 · 1.1 = -1.1 > -1.2');
  assert.equal(greedy([1.0, 1.5], 0.5, [0]), 0, 'a penalty below 1 favours seen ids: 1 / 0.5 = 2');
  assert.equal(greedy([2.0, 1.5], 1.5, []), 0, 'empty history: no penalty');
  // the penalty comes before top-k: it decides which id survives k = 1
  assert.deepEqual(Array.from(new Sampler(2, { topK: 1, repetitionPenalty: 1.5 }).distribution(row([2, 1.5]), [0]).ids), [1]);
});

test('the same seed gives the same sequence, a different seed a different one', () => {
  const V = 100;
  const logits = normalArray(17, V);
  const draw = (seed: number, peekBetween = false) => {
    const s = new Sampler(V, { seed, topK: 40, topP: 0.95 });
    const out: number[] = [];
    for (let i = 0; i < 60; i++) {
      if (peekBetween) s.distribution(logits, out);
      out.push(s.next(logits, out));
    }
    return out;
  };
  assert.deepEqual(draw(1), draw(1));
  assert.deepEqual(draw(1), draw(1, true), 'distribution() does not advance the random stream');
  assert.notDeepEqual(draw(1), draw(2));
});

test('+Infinity logits take all the mass, shared evenly; -Infinity ids are never drawn', () => {
  const logits = row([0, Infinity, -Infinity, Infinity, 5]);
  const d = new Sampler(5, {}).distribution(logits, []);
  assert.deepEqual(Array.from(d.ids), [1, 3]);
  assert.deepEqual(Array.from(d.probs), [0.5, 0.5]);
  const counts = histogram(new Sampler(3, { seed: 9 }), row([0, -Infinity, 1]), 5000);
  assert.equal(counts[1], 0);
});

test('bad options and rows are ArgumentErrors naming the option and the value', () => {
  const err = (fn: () => unknown, message: string) =>
    assert.throws(fn, (e: unknown) => {
      assert.ok(e instanceof ArgumentError, `expected ArgumentError, got ${String(e)}`);
      assert.equal(e.message, message);
      return true;
    });
  err(() => new Sampler(4, { temperature: -0.5 }), 'Sampler: temperature must be a finite number ≥ 0 (0 = greedy), got -0.5');
  err(() => new Sampler(4, { temperature: NaN }), 'Sampler: temperature must be a finite number ≥ 0 (0 = greedy), got NaN');
  err(() => new Sampler(4, { topP: 0 }), 'Sampler: topP must be in (0, 1] (1 = off), got 0');
  err(() => new Sampler(4, { topP: 1.5 }), 'Sampler: topP must be in (0, 1] (1 = off), got 1.5');
  err(() => new Sampler(4, { topK: -1 }), 'Sampler: topK must be an integer ≥ 0 (0 = off), got -1');
  err(() => new Sampler(4, { topK: 2.5 }), 'Sampler: topK must be an integer ≥ 0 (0 = off), got 2.5');
  err(() => new Sampler(4, { repetitionPenalty: 0 }), 'Sampler: repetitionPenalty must be a finite number > 0 (1 = off), got 0');
  err(() => new Sampler(4, { repetitionPenalty: -1.2 }), 'Sampler: repetitionPenalty must be a finite number > 0 (1 = off), got -1.2');
  err(() => new Sampler(4, { seed: 1.5 }), 'Sampler: seed must be an integer, got 1.5');
  err(() => new Sampler(0, {}), 'Sampler: vocabSize must be a positive integer, got 0');
  const s = new Sampler(4, { repetitionPenalty: 1.3 });
  err(() => s.next(row([1, 2, 3]), []), 'Sampler: logits length 3 does not match vocabSize 4');
  err(() => s.next(row([1, NaN, 3, 4]), []), 'Sampler: logits[1] is NaN');
  err(() => new Sampler(4, { temperature: 0 }).next(row([1, 2, NaN, 4]), []), 'Sampler: logits[2] is NaN');
  err(() => s.next(row([1, 2, 3, 4]), [0, 4]), 'Sampler: history[1] = 4 is not a token id in [0, 4)');
  err(() => s.next(row([-Infinity, -Infinity, -Infinity, -Infinity]), []), 'Sampler: every candidate logit is -Infinity, nothing can be sampled');
});
