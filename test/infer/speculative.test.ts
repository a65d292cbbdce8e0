/**
 * Speculative acceptance (specs/lighthouse_fon.md §2.3): greedy reduces to "accept while equal to
 * the target argmax" without random numbers; sampled acceptance is lossless (chi-square goodness
 * of fit of the emitted tokens against p, with a negative control that shows the test has power);
 * the γ controller and the stats follow their documented rules; bad arguments are ArgumentErrors.
 * Run: node --import tsx --test test/infer/speculative.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  acceptDrafts, drawFrom, probabilityOf, residual, GammaController, SpeculativeStats, type AcceptResult,
} from '../../src/infer/speculative.ts';
import { Sampler, type TokenDistribution } from '../../src/infer/sampler.ts';
import { ArgumentError } from '../../src/errors.ts';
import { normalArray, uniformAt, uniformStream } from '../../src/ops/random.ts';

const dist = (ids: number[], probs: number[]): TokenDistribution => ({ ids: Int32Array.from(ids), probs: Float64Array.from(probs) });
const pointMass = (id: number): TokenDistribution => dist([id], [1]);
const noRandom = (): number => { throw new Error('uniform must not be called'); };

/** A distribution over [0, V) from a weight per id (0 = outside the support), in the given id order. */
function fromWeights(weights: number[], order: number[] = weights.map((_, i) => i)): TokenDistribution {
  const z = weights.reduce((a, b) => a + b, 0);
  const ids = order.filter((i) => weights[i] > 0);
  return dist(ids, ids.map((i) => weights[i] / z));
}

/** Dense probability vector of `d` over [0, V). */
function dense(d: TokenDistribution, V: number): number[] {
  const out = new Array<number>(V).fill(0);
  for (let i = 0; i < d.ids.length; i++) out[d.ids[i]] += d.probs[i];
  return out;
}

/**
 * Chi-square 0.999 quantiles, from scipy.stats.chi2.ppf(0.999, df); the Wilson–Hilferty cube
 * approximation (slightly conservative at small df) for any df not in the table.
 */
const CHI2_999: Record<number, number> = { 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322, 8: 26.124, 15: 37.697, 24: 51.179, 35: 66.619, 48: 84.037 };
function chi2Quantile999(df: number): number {
  const z = 3.090232; // standard normal 0.999 quantile
  return CHI2_999[df] ?? df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}

/**
 * Pearson's statistic of `counts` against probabilities `expected` over the cells with positive
 * probability; cells of probability 0 must be empty (else Infinity). Returns it with its df.
 */
function chiSquare(counts: number[], expected: number[]): { stat: number; df: number } {
  const n = counts.reduce((a, b) => a + b, 0);
  let stat = 0, cells = 0;
  for (let i = 0; i < counts.length; i++) {
    if (expected[i] > 0) { const e = n * expected[i]; stat += (counts[i] - e) ** 2 / e; cells++; }
    else if (counts[i] > 0) return { stat: Infinity, df: cells };
  }
  return { stat, df: cells - 1 };
}

type Accept = typeof acceptDrafts;

/** A deliberately wrong variant: accepts like acceptDrafts but resamples a rejection from p, not max(0, p − q). */
const acceptResampleFromP: Accept = (drafted, q, p, uniform) => {
  for (let i = 0; i < drafted.length; i++) {
    const px = probabilityOf(p[i], drafted[i]), qx = probabilityOf(q[i], drafted[i]);
    const u = uniform() + uniform() / 16777216;
    if (!(u < px / qx)) return { accepted: i, next: drawFrom(p[i], uniform) };
  }
  return { accepted: drafted.length, next: drawFrom(p[drafted.length], uniform) };
};

/**
 * Generates until `want` tokens are out, with γ drafts per pass from the position-indexed draft
 * distributions Q (independent of the prefix, so the target joint is the product of P's), and
 * returns the first `want` emitted tokens.
 */
function generate(accept: Accept, P: TokenDistribution[], Q: TokenDistribution[], gamma: number, want: number, uniform: () => number): number[] {
  const out: number[] = [];
  while (out.length < want) {
    const pos = out.length;
    const q = Q.slice(pos, pos + gamma), p = P.slice(pos, pos + gamma + 1);
    const drafted = q.map((d) => drawFrom(d, uniform));
    const r: AcceptResult = accept(drafted, q, p, uniform);
    out.push(...drafted.slice(0, r.accepted), r.next);
  }
  return out.slice(0, want);
}

/** Counts of the first emitted token over `trials` passes with γ = 1. */
function firstTokenCounts(accept: Accept, p: TokenDistribution, q: TokenDistribution, V: number, trials: number, seed: number): number[] {
  const uniform = uniformStream(seed);
  const counts = new Array<number>(V).fill(0);
  for (let t = 0; t < trials; t++) counts[generate(accept, [p, p], [q], 1, 1, uniform)[0]]++;
  return counts;
}

/** Synthetic (p, q) pairs: q has support where p has none and vice versa; not in id order. */
const CASES: { name: string; V: number; p: TokenDistribution; q: TokenDistribution }[] = [
  { name: 'V=5, disjoint-ish tails', V: 5, p: fromWeights([0, 3, 1, 4, 2]), q: fromWeights([2, 1, 3, 0, 2]) },
  { name: 'V=6, best-first order', V: 6, p: fromWeights([5, 0.5, 2, 0, 1, 3], [0, 5, 2, 4, 1, 3]), q: fromWeights([1, 4, 0, 2, 3, 0.5], [1, 4, 3, 0, 5, 2]) },
  { name: 'V=8, random weights', V: 8, p: fromWeights(Array.from(normalArray(11, 8), (x, i) => (i === 6 ? 0 : Math.exp(x)))), q: fromWeights(Array.from(normalArray(12, 8), (x, i) => (i === 2 ? 0 : Math.exp(1.5 * x)))) },
];

test('greedy: point masses accept while the draft equals the target argmax, then the argmax; no random numbers', () => {
  const drafted = [3, 1, 4];
  const q = drafted.map(pointMass);
  assert.deepEqual(acceptDrafts(drafted, q, [3, 1, 4, 7].map(pointMass), noRandom), { accepted: 3, next: 7 });
  assert.deepEqual(acceptDrafts(drafted, q, [3, 1, 5, 7].map(pointMass), noRandom), { accepted: 2, next: 5 });
  assert.deepEqual(acceptDrafts(drafted, q, [3, 2, 4, 7].map(pointMass), noRandom), { accepted: 1, next: 2 });
  assert.deepEqual(acceptDrafts(drafted, q, [0, 1, 4, 7].map(pointMass), noRandom), { accepted: 0, next: 0 });
  assert.deepEqual(acceptDrafts([], [], [pointMass(9)], noRandom), { accepted: 0, next: 9 });
});

test('greedy through Sampler(temperature 0).distribution: matches the argmax loop on random rows', () => {
  const V = 50, gamma = 4, s = new Sampler(V, { temperature: 0, seed: 1 });
  for (let trial = 0; trial < 30; trial++) {
    const target = Array.from({ length: gamma + 1 }, (_, i) => normalArray(100 * trial + i, V));
    const argmaxes = target.map((row) => s.next(row, []));
    // The draft agrees with the target for the first `agree` positions, then differs.
    const agree = trial % (gamma + 1);
    const drafted = argmaxes.slice(0, gamma).map((a, i) => (i < agree ? a : (a + 1 + i) % V));
    const r = acceptDrafts(drafted, drafted.map(pointMass), target.map((row) => s.distribution(row, [])), noRandom);
    assert.deepEqual(r, { accepted: agree, next: argmaxes[agree] });
  }
});

test('greedy target with a sampled draft is deterministic too (no random numbers)', () => {
  const q = fromWeights([1, 2, 3, 4]);
  assert.deepEqual(acceptDrafts([2, 1], [q, q], [pointMass(2), pointMass(3), pointMass(0)], noRandom), { accepted: 1, next: 3 });
  assert.deepEqual(acceptDrafts([2, 1], [q, q], [pointMass(2), pointMass(1), pointMass(0)], noRandom), { accepted: 2, next: 0 });
});

test('residual is norm(max(0, p − q)) in p\'s order, and p when it has no mass', () => {
  const p = dist([2, 0, 1, 3], [0.4, 0.3, 0.2, 0.1]);
  const q = dist([0, 1, 4], [0.5, 0.1, 0.4]);
  const r = residual(p, q);
  // max(0, p − q): id 2 → 0.4, id 0 → 0, id 1 → 0.1, id 3 → 0.1; total 0.6.
  assert.deepEqual(Array.from(r.ids), [2, 1, 3]);
  const want = [0.4 / 0.6, 0.1 / 0.6, 0.1 / 0.6];
  r.probs.forEach((x, i) => assert.ok(Math.abs(x - want[i]) < 1e-12, `probs[${i}] = ${x}, want ${want[i]}`));
  assert.equal(residual(p, p), p);
});

test('drawFrom with uniformStream reproduces Sampler.next draws (same 48-bit rule)', () => {
  const V = 300, logits = normalArray(5, V);
  const s = new Sampler(V, { temperature: 0.8, seed: 77 });
  const d = s.distribution(logits, []);
  const uniform = uniformStream(77);
  for (let i = 0; i < 2000; i++) assert.equal(drawFrom(d, uniform), s.next(logits, []), `draw ${i}`);
});

test('Sampler.uniform continues the sampler\'s own stream', () => {
  const s = new Sampler(10, { seed: 42 });
  assert.equal(s.uniform(), uniformAt(42, 0));
  assert.equal(s.uniform(), uniformAt(42, 1));
  s.next(normalArray(1, 10), []); // takes two uniforms: 2 and 3
  assert.equal(s.uniform(), uniformAt(42, 4));
  // A sampler whose stream was advanced by uniform() draws what one advanced by next() draws.
  const a = new Sampler(10, { seed: 9 }), b = new Sampler(10, { seed: 9 }), row = normalArray(2, 10);
  a.uniform(); a.uniform(); b.next(row, []);
  for (let i = 0; i < 50; i++) assert.equal(a.next(row, []), b.next(row, []));
});

for (const c of CASES) {
  test(`lossless, γ = 1, ${c.name}: the first emitted token is distributed as p (chi-square, 40000 draws)`, () => {
    const pd = dense(c.p, c.V);
    const ok = chiSquare(firstTokenCounts(acceptDrafts, c.p, c.q, c.V, 40000, 1234), pd);
    assert.ok(ok.stat < chi2Quantile999(ok.df), `chi-square ${ok.stat.toFixed(2)} ≥ ${chi2Quantile999(ok.df)} (df ${ok.df})`);
    // Negative control: resampling rejections from p instead of the residual is caught.
    const bad = chiSquare(firstTokenCounts(acceptResampleFromP, c.p, c.q, c.V, 40000, 1234), pd);
    assert.ok(bad.stat > chi2Quantile999(bad.df), `wrong variant passed: chi-square ${bad.stat.toFixed(2)} (df ${bad.df})`);
  });
}

for (const gamma of [1, 3]) {
  test(`lossless, γ = ${gamma}: the joint of the first two emitted tokens is p_1 × p_2 (chi-square over V² cells)`, () => {
    const V = 5;
    // Position-indexed targets and drafts; p_2 differs from p_1 so that an off-by-one is caught.
    const P = [fromWeights([0, 3, 1, 4, 2]), fromWeights([4, 1, 0, 1, 3]), fromWeights([1, 1, 1, 1, 1]), fromWeights([2, 0, 1, 0, 3]), fromWeights([1, 2, 3, 4, 5])];
    const Q = [fromWeights([2, 1, 3, 0, 2]), fromWeights([1, 3, 1, 2, 0]), fromWeights([3, 1, 1, 1, 0]), fromWeights([1, 1, 1, 1, 1])];
    const p1 = dense(P[0], V), p2 = dense(P[1], V);
    const expected = p1.flatMap((a) => p2.map((b) => a * b));
    const uniform = uniformStream(99 + gamma);
    const counts = new Array<number>(V * V).fill(0);
    for (let t = 0; t < 40000; t++) {
      const [a, b] = generate(acceptDrafts, P, Q, gamma, 2, uniform);
      counts[a * V + b]++;
    }
    const { stat, df } = chiSquare(counts, expected);
    assert.equal(df, 15); // 4 × 4 positive cells
    assert.ok(stat < chi2Quantile999(df), `chi-square ${stat.toFixed(2)} ≥ ${chi2Quantile999(df)} (df ${df})`);
  });
}

test('sampled acceptance is fixed by the seed and uses the stream', () => {
  const c = CASES[2];
  const run = (seed: number) => { const u = uniformStream(seed); return Array.from({ length: 200 }, () => generate(acceptDrafts, [c.p, c.p, c.p], [c.q, c.q], 2, 2, u).join()); };
  assert.deepEqual(run(5), run(5));
  assert.notDeepEqual(run(5), run(6));
});

test('acceptDrafts: bad arguments are ArgumentErrors naming them', () => {
  const d = pointMass(1);
  assert.throws(() => acceptDrafts([1, 1], [d], [d, d, d], noRandom), { name: 'ArgumentError', message: 'acceptDrafts: q has 1 distributions for 2 drafted tokens, expected one per drafted token (2)' });
  assert.throws(() => acceptDrafts([1], [d], [d], noRandom), { name: 'ArgumentError', message: 'acceptDrafts: p has 1 distributions for 1 drafted tokens, expected γ + 1 = 2' });
  assert.throws(() => acceptDrafts([1.5], [d], [d, d], noRandom), { name: 'ArgumentError', message: 'acceptDrafts: drafted[0] = 1.5, expected a token id (an integer ≥ 0)' });
  assert.throws(() => acceptDrafts([2], [d], [d, d], noRandom), { name: 'ArgumentError', message: 'acceptDrafts: drafted[0] = 2 has probability 0 under q[0], expected > 0 (it must have been drawn from q[0])' });
  assert.throws(() => acceptDrafts([1], [dist([1], [])], [d, d], noRandom), { name: 'ArgumentError', message: 'acceptDrafts: q[0]: ids length 1 does not match probs length 0' });
  assert.throws(() => drawFrom(dist([0, 1], [0, 0]), noRandom), { name: 'ArgumentError', message: 'drawFrom: every probability is 0, expected positive total mass' });
  assert.throws(() => drawFrom(dist([0, 1], [0.5, NaN]), noRandom), ArgumentError);
});

test('GammaController: +2 when all drafts are accepted, −1 otherwise, clamped to [min, max]', () => {
  const g = new GammaController();
  assert.equal(g.gamma, 4);
  assert.deepEqual([g.min, g.max, g.fixed], [1, 8, false]);
  g.update(4, 4); assert.equal(g.gamma, 6);
  g.update(6, 6); assert.equal(g.gamma, 8);
  g.update(8, 8); assert.equal(g.gamma, 8); // clamped at max
  g.update(8, 7); assert.equal(g.gamma, 7);
  g.update(7, 0); assert.equal(g.gamma, 6);
  for (let i = 0; i < 10; i++) g.update(g.gamma, 0);
  assert.equal(g.gamma, 1); // clamped at min
  g.update(0, 0); assert.equal(g.gamma, 1); // nothing drafted: unchanged
  g.update(1, 1); assert.equal(g.gamma, 3);

  const h = new GammaController({ gamma: 3, min: 2, max: 4 });
  h.update(3, 3); assert.equal(h.gamma, 4);
  h.update(4, 1); h.update(3, 1); h.update(2, 1); assert.equal(h.gamma, 2);

  const f = new GammaController({ gamma: 5, fixed: true });
  f.update(5, 5); f.update(5, 0); assert.equal(f.gamma, 5);
  assert.equal(new GammaController({ gamma: 12, fixed: true }).max, 12); // max defaults to max(8, gamma)
});

test('GammaController: bad options and updates are ArgumentErrors with exact messages', () => {
  const bad = (f: () => unknown, message: string) => assert.throws(f, { name: 'ArgumentError', message });
  bad(() => new GammaController({ gamma: 0 }), 'GammaController: gamma 0: expected an integer ≥ 1');
  bad(() => new GammaController({ gamma: 2.5 }), 'GammaController: gamma 2.5: expected an integer ≥ 1');
  bad(() => new GammaController({ min: 0 }), 'GammaController: min 0: expected an integer ≥ 1');
  bad(() => new GammaController({ max: NaN }), 'GammaController: max NaN: expected an integer ≥ 1');
  bad(() => new GammaController({ gamma: 3, min: 5, max: 4 }), 'GammaController: min 5 > max 4: expected min ≤ max');
  bad(() => new GammaController({ gamma: 9, max: 8 }), 'GammaController: gamma 9: expected an integer in [min, max] = [1, 8]');
  bad(() => new GammaController({ gamma: 2, min: 3 }), 'GammaController: gamma 2: expected an integer in [min, max] = [3, 8]');
  const g = new GammaController();
  bad(() => g.update(3, 4), 'GammaController.update: accepted 4: expected an integer in [0, drafted] = [0, 3]');
  bad(() => g.update(-1, 0), 'GammaController.update: drafted -1: expected an integer ≥ 0');
  assert.equal(g.gamma, 4);
});

test('SpeculativeStats: counters, acceptance rate, tokens per pass (τ, counting the bonus token), JSON', () => {
  const s = new SpeculativeStats();
  assert.deepEqual(s.toJSON(), { passes: 0, drafted: 0, accepted: 0, emitted: 0, acceptanceRate: 0, meanAcceptedPerPass: 0 });
  s.record(4, 4);    // 4 accepted + bonus = 5
  s.record(4, 1);    // 1 accepted + correction = 2
  s.record(2, 0, 0); // generation stopped before the correction token
  assert.deepEqual([s.passes, s.drafted, s.accepted, s.emitted], [3, 10, 5, 7]);
  assert.equal(s.acceptanceRate, 0.5);
  assert.equal(s.meanAcceptedPerPass, 7 / 3);
  assert.deepEqual(JSON.parse(JSON.stringify(s)), { passes: 3, drafted: 10, accepted: 5, emitted: 7, acceptanceRate: 0.5, meanAcceptedPerPass: 7 / 3 });
  assert.throws(() => s.record(2, 3), { name: 'ArgumentError', message: 'SpeculativeStats.record: accepted 3: expected an integer in [0, drafted] = [0, 2]' });
  assert.throws(() => s.record(2, 1, 3), { name: 'ArgumentError', message: 'SpeculativeStats.record: emitted 3: expected an integer in [0, accepted + 1] = [0, 2]' });
  assert.equal(s.passes, 3); // a rejected record changes nothing
  s.record(3, 3);    // 4 emitted, of which generation used 1 (a stop token after the first)
  s.unused(3);
  assert.deepEqual([s.passes, s.accepted, s.emitted], [4, 8, 8]);
  assert.throws(() => s.unused(2), { name: 'ArgumentError', message: 'SpeculativeStats.unused: 2: expected an integer in [0, 1] (the last pass emitted 1)' });
  s.reset();
  assert.deepEqual([s.passes, s.emitted, s.acceptanceRate], [0, 0, 0]);
});
