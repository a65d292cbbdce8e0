/**
 * Draft–revise decoding (infer/draft_revise.ts) on the CPU: greedy output token-identical to plain
 * greedy decoding over 50 prompts for every mechanism (FPA eviction with rejections after
 * compactions included), the cache after a truncation equal bit for bit to one that never saw the
 * rejected tokens, sampled tokens distributed as the full model's (chi-square against the exact
 * distribution), and the errors. wasm and webgpu: test/infer/draft_revise_backends.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { generate } from '../../src/infer/generate.ts';
import { DraftRevise } from '../../src/infer/draft_revise.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { Sampler } from '../../src/infer/sampler.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { loudModel, ORGAN_CASES, organsConfig } from './organs_fixtures.ts';

const cpu = await fon.initBackend('cpu');
const tok = byteTokenizer();
const PROMPTS = Array.from({ length: 50 }, (_, i) => `${'the cat sat on a mat '.slice(i % 7, 7 + (i % 11))}${i}`);

for (const [name, extra] of Object.entries(ORGAN_CASES)) {
  test(`draft–revise greedy equals plain greedy over 50 prompts: ${name}`, async () => {
    const m = loudModel(organsConfig(extra), cpu);
    let drafted = 0, accepted = 0, compacted = 0;
    for (const prompt of PROMPTS) {
      const plain = await generate(m, tok, prompt, { temperature: 0, maxTokens: 14, draftRevise: false });
      const dr = await generate(m, tok, prompt, { temperature: 0, maxTokens: 14, draftRevise: { draftLayers: 1, gamma: 3 } });
      assert.deepEqual(dr.ids, plain.ids, `prompt ${JSON.stringify(prompt)}`);
      // Drafting on the host instead of the device: the same drafts, the same output.
      const host = await generate(m, tok, prompt, { temperature: 0, maxTokens: 14, draftRevise: { draftLayers: 1, gamma: 3, deviceDraft: false } });
      assert.deepEqual(host.ids, plain.ids, `host drafts, prompt ${JSON.stringify(prompt)}`);
      assert.deepEqual(host.speculative, dr.speculative, 'the same drafts were accepted');
      const s = dr.speculative!;
      drafted += s.drafted;
      accepted += s.accepted;
      if (dr.cacheKept.some((h) => h.some((f) => f < 1))) compacted++;
    }
    // The test means something only if drafts were both kept and thrown away.
    assert.ok(accepted > 0 && accepted < drafted, `${name}: accepted ${accepted} of ${drafted} drafted`);
    if (name === 'fpa evict') assert.ok(compacted > 10, `eviction dropped keys in ${compacted} of 50 generations`);
    m.dispose();
  });
}

test('draft–revise: a model with organs drafts by default, greedy as plain; the exit head of D = L − 1 and of D = 1', async () => {
  const m = loudModel(organsConfig({ organs: { draftLayers: 2 } }), cpu);
  const plain = await generate(m, tok, 'The jury', { temperature: 0, maxTokens: 20, draftRevise: false });
  const dflt = await generate(m, tok, 'The jury', { temperature: 0, maxTokens: 20 });
  assert.equal(dflt.speculative?.draftLayers, 2);
  assert.deepEqual(dflt.ids, plain.ids);
  const d1 = await generate(m, tok, 'The jury', { temperature: 0, maxTokens: 20, draftRevise: { draftLayers: 1, gamma: 1, fixedGamma: true } });
  assert.deepEqual(d1.ids, plain.ids);
  assert.equal(d1.speculative!.drafted, d1.speculative!.passes, 'γ fixed at 1: one draft per pass');
  m.dispose();
});

test('draft–revise: a narrower draft window (layers < D recomputed in verify) still gives plain greedy output', async () => {
  const m = loudModel(organsConfig({ attention: [{ type: 'full' }, { type: 'local', window: 6 }, { type: 'full' }] }), cpu);
  for (const prompt of PROMPTS.slice(0, 10)) {
    const plain = await generate(m, tok, prompt, { temperature: 0, maxTokens: 12, draftRevise: false });
    const dr = await generate(m, tok, prompt, { temperature: 0, maxTokens: 12, draftRevise: { draftLayers: 2, gamma: 4, draftWindow: 2 } });
    assert.deepEqual(dr.ids, plain.ids, prompt);
  }
  m.dispose();
});

/** Logits rows (1, n, V) of ids at positions pos … through the cache, read back. */
async function stepLogits(m: Decoder, cache: KvCache, ids: number[], pos: number): Promise<Float32Array> {
  const y = fon.noGrad(() => m.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos }));
  const host = (await y.data()) as Float32Array;
  y.dispose();
  await cache.settle();
  cache.length = pos + ids.length;
  return host;
}

for (const name of ['full', 'local', 'fox+tokenShift', 'fpa', 'mixed + depth']) {
  test(`KvCache.truncate: after rejected tokens the cache is the one that never saw them (later logits bit-identical): ${name}`, async () => {
    const m = loudModel(organsConfig(ORGAN_CASES[name]), cpu);
    const prompt = [5, 80, 99, 102, 7], spec = [11, 12, 13], after = [40, 41, 42, 43];
    const a = new KvCache(m.config, 1, 32, cpu), b = new KvCache(m.config, 1, 32, cpu);
    await stepLogits(m, a, prompt, 0);
    await stepLogits(m, b, prompt, 0);
    // a sees three speculative tokens in one call, keeps the first; b only ever sees the first.
    const pos = prompt.length;
    await stepLogits(m, a, spec, pos);
    a.truncate(pos + 1);
    await stepLogits(m, b, spec.slice(0, 1), pos);
    for (let i = 0; i < after.length; i++) {
      const la = await stepLogits(m, a, [after[i]], pos + 1 + i), lb = await stepLogits(m, b, [after[i]], pos + 1 + i);
      assert.deepEqual(Array.from(la), Array.from(lb), `step ${i}`);
    }
    a.dispose();
    b.dispose();
    m.dispose();
  });
}

test('KvCache.truncate refuses a length outside [0, written]', () => {
  const m = loudModel(organsConfig({}), cpu);
  const c = new KvCache(m.config, 1, 8, cpu);
  c.length = 3;
  assert.throws(() => c.truncate(4), /KvCache\.truncate: length 4 must be an integer in \[0, 3\] \(the positions written\)/);
  assert.throws(() => c.truncate(-1), fon.ArgumentError);
  c.dispose();
  m.dispose();
});

test('draft–revise: γ is capped by how far the cache can rewind (the token shift keeps 16 rows); a cycle starts where the cache ends', async () => {
  const m = loudModel(organsConfig({ attention: { type: 'fox', tokenShift: true } }), cpu);
  const c = new KvCache(m.config, 1, 64, cpu);
  assert.equal(c.maxRewind, 15);
  const s = new Sampler(m.config.vocabSize, { temperature: 0 });
  assert.throws(() => new DraftRevise(m, c, s, { draftLayers: 1, gamma: 16 }), (e: unknown) => e instanceof fon.ArgumentError && e.message === "draft–revise decoding: gamma 16: expected an integer in [1, 15] (this model's cache can rewind at most 15 positions: the token shift keeps only the last pre-shift rows)");
  assert.throws(() => new DraftRevise(m, c, s, { draftLayers: 1, gamma: 15, draftWindow: 4 }), /gamma 15: expected an integer in \[1, 14\] \(this model's cache can rewind at most 15 positions, and a draft window re-runs one more/);
  assert.throws(() => new DraftRevise(m, c, s, { draftLayers: 1, gamma: 4, maxGamma: 20 }), /maxGamma 20: expected an integer in \[1, 15\]/);
  const dr = new DraftRevise(m, c, s, { draftLayers: 1, gamma: 12 });
  assert.equal(dr.gammas.max, 12, 'max(8, γ), within the cap');
  await stepLogits(m, c, [1, 2, 3], 0);
  await assert.rejects(dr.next(3, 2, [1, 2, 3]), /draft–revise decoding: a cycle at position 2, but the cache holds 3 positions/);
  // γ = 15 with every draft rejected rewinds 15 positions: within the ring.
  const out = await new DraftRevise(m, c, s, { draftLayers: 1, gamma: 15, fixedGamma: true }).next(3, 3, [1, 2, 3]);
  assert.ok(out.length >= 1 && c.length === 3 + out.length);
  c.dispose();
  const plain = new KvCache(loudModel(organsConfig({}), cpu).config, 1, 8, cpu);
  assert.equal(plain.maxRewind, Infinity);
  plain.dispose();
  m.dispose();
});

test('draft–revise stats count only the tokens generation used (a stop inside a cycle, the token limit)', async () => {
  const m = loudModel(organsConfig({ organs: { draftLayers: 2 } }), cpu);
  for (const maxTokens of [1, 2, 3, 5, 9]) {
    const r = await generate(m, tok, 'The jury', { temperature: 0, maxTokens, draftRevise: { gamma: 4, fixedGamma: true } });
    const s = r.speculative!;
    assert.equal(r.ids.length, maxTokens);
    assert.equal(s.emitted, maxTokens - 1, `maxTokens ${maxTokens}: the first token comes from the prompt's step, the rest from cycles`);
  }
  m.dispose();
});

/** χ² quantile at 0.999 by Wilson–Hilferty (df ≥ 3 here: within 1% of the exact value). */
function chi2Quantile999(df: number): number {
  const z = 3.0902323;
  return df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}

function softmax(row: Float32Array): number[] {
  const max = Math.max(...row);
  const e = Array.from(row, (x) => Math.exp(x - max));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

test('draft–revise sampling: the first two emitted tokens are distributed as the full model\'s (χ² over 30000 draws, exact reference)', async () => {
  const V = 5;
  const m = loudModel(organsConfig({ attention: [{ type: 'full' }, { type: 'fox' }, { type: 'local', window: 3 }] }, V, 16), cpu, 7, 0.5);
  const prompt = [0, 1, 2, 3], last = 4, pos = prompt.length;
  // Exact: p(y1 | prompt, last) and p(y2 | prompt, last, y1) from whole-sequence forwards.
  const dist = async (ids: number[]) => {
    const y = fon.noGrad(() => m.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' }), { lastOnly: true }));
    const p = softmax((await y.data()) as Float32Array);
    y.dispose();
    return p;
  };
  const p1 = await dist([...prompt, last]);
  const p2 = await Promise.all(p1.map((_, y1) => dist([...prompt, last, y1])));
  const cache = new KvCache(m.config, 1, 16, cpu);
  await stepLogits(m, cache, prompt, 0);
  const sampler = new Sampler(V, { temperature: 1, seed: 11 });
  const organs = new DraftRevise(m, cache, sampler, { draftLayers: 1, gamma: 2, fixedGamma: true });
  const N = 30000;
  const counts = new Float64Array(V * V);
  for (let n = 0; n < N; n++) {
    const out = await organs.next(last, pos, [...prompt, last]);
    if (out.length === 1) out.push(...await organs.next(out[0], pos + 1, [...prompt, last, out[0]]));
    counts[out[0] * V + out[1]]++;
    cache.truncate(pos);
  }
  let chi = 0, df = -1;
  for (let a = 0; a < V; a++) for (let b = 0; b < V; b++) {
    const e = N * p1[a] * p2[a][b];
    if (e < 5) continue; // merge-free: cells this rare carry no power at this N
    chi += (counts[a * V + b] - e) ** 2 / e;
    df++;
  }
  assert.ok(df >= 3, `only ${df + 1} cells with an expected count ≥ 5`);
  assert.ok(chi < chi2Quantile999(df), `χ² = ${chi.toFixed(2)} with ${df} degrees of freedom, 0.999 quantile ${chi2Quantile999(df).toFixed(2)}`);
  const s = organs.stats;
  assert.ok(s.accepted > 0 && s.accepted < s.drafted, `drafts both accepted and rejected: ${s.accepted} of ${s.drafted}`);
  cache.dispose();
  m.dispose();
});

test('draft–revise: bad options are errors naming the value', async () => {
  const m = loudModel(organsConfig({}), cpu);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: true }), /the model has no organs; give the draft layer count D \(the draftLayers option, an integer in \[1, 2\]; --draft-layers in fon generate\)/);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: { draftLayers: 3 } }), /draftLayers = 3: expected an integer in \[1, 2\]/);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: { draftLayers: 0 } }), /draftLayers = 0: expected an integer in \[1, 2\]/);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: { draftLayers: 1, gamma: 0 } }), /^ArgumentError: draft–revise decoding: gamma 0: expected an integer ≥ 1$/);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: { draftLayers: 1, gamma: 6, maxGamma: 5 } }), /gamma 6 above maxGamma 5: expected gamma ≤ maxGamma/);
  await assert.rejects(generate(m, tok, 'x', { temperature: 0.7, draftRevise: { draftLayers: 1, deviceDraft: true } }), /deviceDraft needs greedy sampling without a repetition penalty \(temperature 0\.7, repetitionPenalty 1\)/);
  await assert.rejects(generate(m, tok, 'x', { draftRevise: { draftLayers: 1, draftWindow: 0 } }), /draftWindow 0: expected a positive integer/);
  assert.throws(() => organsConfig({ organs: { draftLayers: 3 } }), /'organs\.draftLayers' = 3: expected an integer in \[1, 2\]/);
  assert.throws(() => organsConfig({ organs: { draftLayers: 1, colour: 1 } }), /'organs': unknown key 'colour'/);
  m.dispose();
});
