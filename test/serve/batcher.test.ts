/**
 * `fon serve`'s scheduler (serve/batcher.ts), on tiny random models on the CPU: requests that join
 * while others decode and leave at their own lengths give what `generate` gives each alone —
 * greedy and sampled (each its own seed, temperature, top-k, top-p, repetition penalty, stop
 * strings, logprobs), past a page boundary too — while the steps really run several rows at once;
 * a cancelled request (waiting or decoding) ends at once and its pages go back to the pool; one
 * that fails on its own fails alone; the limits on waiting requests and queued tokens give 429s; a
 * model with organs runs its draft–revise requests beside plain ones with generate's output.
 * Seconds in all.
 * Run: node --import tsx --test test/serve/batcher.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { Batcher } from '../../src/serve/batcher.ts';
import { RequestError } from '../../src/serve/openai_requests.ts';
import { LanguageModel } from '../../src/infer/language_model.ts';
import type { GenerateOptions, GenerateResult } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { loudModel, organsConfig } from '../infer/organs_fixtures.ts';

const cpu = await fon.initBackend('cpu');
const tok = byteTokenizer();

function languageModel(extra: object, contextLength = 64): LanguageModel {
  return new LanguageModel({ model: loudModel(organsConfig(extra, 257, contextLength), cpu), tokenizer: tok });
}

/** What a request's result is compared on (tokensPerSecond and cacheKept aside). */
const same = (r: GenerateResult) => ({ text: r.text, ids: r.ids, stopReason: r.stopReason, promptTokens: r.promptTokens, logprobs: r.logprobs });

/** Resolves once `n` pieces of text have come through the returned onText. */
function pieces(n: number): { onText: (s: string) => void; reached: Promise<void> } {
  let seen = 0, done!: () => void;
  const reached = new Promise<void>((r) => { done = r; });
  return { onText: () => { if (++seen === n) done(); }, reached };
}

const REQUESTS: [string, GenerateOptions][] = [
  ['the cat', { temperature: 0, maxTokens: 30 }],
  ['a mat', { temperature: 0, maxTokens: 3 }],
  ['on the', { temperature: 0.9, seed: 7, maxTokens: 12 }],
  ['sat', { temperature: 1, topK: 5, seed: 11, maxTokens: 9 }],
  ['x', { temperature: 0.7, topP: 0.8, seed: 3, maxTokens: 15, repetitionPenalty: 1.3 }],
  ['the cat sat on', { temperature: 0, maxTokens: 20, stop: ['F['] }],
  ['logprobs', { temperature: 0, maxTokens: 6, logprobs: 3 }],
];

test('requests joining mid-decode and leaving at their own lengths each give what generate gives alone; the steps run several rows', async () => {
  const lm = languageModel({ attention: [{ type: 'full' }, { type: 'local', window: 4 }, { type: 'fox', tokenShift: true }] });
  const b = new Batcher(lm, { maxBatch: 4 });
  const first = pieces(4);
  const long = b.submit(REQUESTS[0][0], { ...REQUESTS[0][1], onText: first.onText });
  await first.reached; // the first request is decoding: the others join it
  const rest = REQUESTS.slice(1).map(([p, o]) => b.submit(p, o));
  assert.ok(b.activeCount <= 4 && b.waitingCount >= 2, `${b.activeCount} active, ${b.waitingCount} waiting`);
  const got = await Promise.all([long, ...rest]);
  for (const [i, [p, o]] of REQUESTS.entries()) assert.deepEqual(same(got[i]), same(await lm.generate(p, o)), `request ${i} (${JSON.stringify(p)})`);
  assert.equal(got[5].stopReason, 'stop');
  assert.ok(b.stats.largestBatch >= 3 && b.stats.rows > b.stats.steps, JSON.stringify(b.stats));
  assert.equal(b.stats.finished, REQUESTS.length);
  await b.idle();
  assert.equal(b.pool.pagesInUse, 0, 'every page back in the pool');
  assert.ok(b.pool.pagesFree >= 2 && b.pool.pagesFree <= 4 * 2, `${b.pool.pagesFree} pages kept for reuse: at most the batch's`);
  b.dispose();
  lm.dispose();
});

test('a request that joins while the others prefill waits for the next iteration\'s prefill, then decodes as generate gives it', async () => {
  const lm = languageModel({ attention: { type: 'full' } });
  const b = new Batcher(lm);
  let late: Promise<GenerateResult> | undefined;
  // The first piece of text comes out of the first request's prefill: the second joins right then.
  const first = b.submit('the cat', { temperature: 0, maxTokens: 6, onText: () => { late ??= b.submit('a mat', { temperature: 0, maxTokens: 6 }); } });
  assert.deepEqual(same(await first), same(await lm.generate('the cat', { temperature: 0, maxTokens: 6 })));
  assert.ok(late);
  assert.deepEqual(same(await late), same(await lm.generate('a mat', { temperature: 0, maxTokens: 6 })));
  b.dispose();
  lm.dispose();
});

test('sequences past a page boundary: greedy equals generate over pages of the same size', async () => {
  const lm = languageModel({ attention: [{ type: 'full' }, { type: 'local', window: 20 }, { type: 'full' }] }, 300);
  const b = new Batcher(lm, { pageRows: 128 });
  const prompts = ['a'.repeat(120), 'the cat sat', 'b'.repeat(126)];
  const got = await Promise.all(prompts.map((p) => b.submit(p, { temperature: 0, maxTokens: 16 })));
  for (const [i, p] of prompts.entries()) assert.deepEqual(same(got[i]), same(await lm.generate(p, { temperature: 0, maxTokens: 16, pageRows: 128 })), `prompt ${i}`);
  assert.equal(b.pool.pageRows, 128);
  b.dispose();
  lm.dispose();
});

test('cancellation: a decoding request ends before the next step and gives its pages back; a waiting one leaves the queue at once', async () => {
  const lm = languageModel({ attention: { type: 'full' } });
  const b = new Batcher(lm, { maxBatch: 1, maxQueue: 2 });
  const stop = new AbortController(), gone = new AbortController();
  const seen = pieces(3);
  const running = b.submit('the cat', { temperature: 0, maxTokens: 40, signal: stop.signal, onText: seen.onText });
  const waiting = b.submit('a mat', { temperature: 0, maxTokens: 40, signal: gone.signal });
  const after = b.submit('on', { temperature: 0, maxTokens: 4 });
  assert.equal(b.waitingCount, 2);
  const tokens = b.waitingTokens;
  gone.abort();
  assert.equal(b.waitingCount, 1, 'the waiting request left at once');
  assert.ok(b.waitingTokens < tokens);
  const w = await waiting;
  assert.equal(w.stopReason, 'aborted');
  assert.deepEqual(w.ids, []);
  await seen.reached;
  const inUse = b.pool.pagesInUse;
  assert.ok(inUse >= 1, 'the running request holds pages');
  stop.abort();
  const r = await running;
  assert.equal(r.stopReason, 'aborted');
  assert.ok(r.ids.length >= 3 && r.ids.length < 40, `${r.ids.length} tokens`);
  assert.deepEqual(same(await after), same(await lm.generate('on', { temperature: 0, maxTokens: 4 })));
  await b.idle();
  assert.equal(b.pool.pagesInUse, 0);
  assert.deepEqual({ aborted: b.stats.aborted, finished: b.stats.finished }, { aborted: 2, finished: 1 });
  b.dispose();
  lm.dispose();
});

test('a request that fails on its own (its text listener throws) fails alone; the others in its steps finish as generate gives them', async () => {
  const lm = languageModel({ attention: { type: 'full' } });
  const b = new Batcher(lm);
  let n = 0;
  const bad = b.submit('the cat', { temperature: 0, maxTokens: 10, onText: () => { if (++n === 3) throw new Error('listener broke'); } });
  const good = ['a mat', 'on'].map((p) => b.submit(p, { temperature: 0, maxTokens: 10 }));
  await assert.rejects(bad, /listener broke/);
  for (const [i, p] of ['a mat', 'on'].entries()) assert.deepEqual(same(await good[i]), same(await lm.generate(p, { temperature: 0, maxTokens: 10 })));
  await b.idle();
  assert.deepEqual({ failed: b.stats.failed, finished: b.stats.finished, inUse: b.pool.pagesInUse }, { failed: 1, finished: 2, inUse: 0 });
  b.dispose();
  lm.dispose();
});

test('limits: past maxQueue waiting requests or maxQueuedTokens waiting tokens a request gets a 429; bad options are errors at once', async () => {
  const lm = languageModel({ attention: { type: 'full' } });
  const tooMany = (e: unknown) => e instanceof RequestError && e.status === 429 && e.type === 'rate_limit_error';
  const b = new Batcher(lm, { maxBatch: 1, maxQueue: 1 });
  const runs = [b.submit('a', { temperature: 0, maxTokens: 5 }), b.submit('b', { temperature: 0, maxTokens: 5 })];
  assert.throws(() => b.submit('c', { temperature: 0, maxTokens: 5 }), (e) => tooMany(e) && /1 requests are already waiting; try again later/.test((e as Error).message));
  await Promise.all(runs);
  // Tokens: each waiting request counts its prompt (with the start token) and max_tokens.
  const t = new Batcher(lm, { maxBatch: 1, maxQueuedTokens: 30 });
  const held = [t.submit('abc', { temperature: 0, maxTokens: 10 }), t.submit('abcd', { temperature: 0, maxTokens: 20 })]; // waits with 25
  assert.equal(t.waitingTokens, 25);
  assert.throws(() => t.submit('ab', { temperature: 0, maxTokens: 3 }), (e) => tooMany(e) && /the waiting requests hold 25 tokens, and this one's 6 \(prompt and max_tokens\) would pass the server's 30/.test((e as Error).message));
  held.push(t.submit('ab', { temperature: 0, maxTokens: 2 })); // 25 + 5 = 30 fits
  await Promise.all(held);
  assert.throws(() => t.submit('x'.repeat(70), { temperature: 0 }), (e) => e instanceof fon.ArgumentError && /leaves no room in the context of 64 tokens/.test((e as Error).message));
  assert.throws(() => t.submit('x', { temperature: -1 }), (e) => e instanceof fon.ArgumentError && /temperature must be a finite number ≥ 0/.test((e as Error).message));
  assert.throws(() => new Batcher(lm, { maxBatch: 0 }), (e) => e instanceof fon.ArgumentError && /maxBatch 0 must be a positive integer/.test((e as Error).message));
  for (const x of [b, t]) x.dispose();
  lm.dispose();
});

test('a model with organs: draft–revise requests run their cycles beside plain ones (logprobs), each as generate gives it', async () => {
  const lm = languageModel({ attention: { type: 'full' }, organs: { draftLayers: 1 } });
  const b = new Batcher(lm);
  const asks: [string, GenerateOptions][] = [['the cat', { temperature: 0, maxTokens: 12 }], ['a mat', { temperature: 0, maxTokens: 8, logprobs: 2 }], ['sat', { temperature: 0, maxTokens: 8, logprobs: 1 }], ['on', { temperature: 0.8, seed: 5, maxTokens: 10 }]];
  const got = await Promise.all(asks.map(([p, o]) => b.submit(p, o)));
  for (const [i, [p, o]] of asks.entries()) {
    const want = await lm.generate(p, o);
    assert.deepEqual(same(got[i]), same(want), `request ${i}`);
    assert.equal(got[i].speculative !== undefined, o.logprobs === undefined, 'draft–revise unless logprobs');
  }
  assert.ok(b.stats.cycles > 0 && b.stats.largestBatch === 2, JSON.stringify(b.stats));
  b.dispose();
  lm.dispose();
});

test('backpressure: a request whose client is behind sits the steps out while another finishes, then resumes and gives generate\'s text', async () => {
  const lm = languageModel({ attention: [{ type: 'full' }] });
  const b = new Batcher(lm, { maxBatch: 4 });
  let behind = false, piecesWhileBehind = 0;
  const slowFirst = pieces(3);
  const slow = b.submit('the cat', { temperature: 0, maxTokens: 20, onText: (s) => { slowFirst.onText(s); if (behind) piecesWhileBehind++; }, behind: () => behind });
  await slowFirst.reached;
  behind = true; // its client stops reading
  const stepsBefore = b.stats.steps;
  const fast = await b.submit('a mat', { temperature: 0, maxTokens: 10 });
  assert.equal(piecesWhileBehind, 0, 'no text for a client that is behind');
  assert.ok(b.stats.steps > stepsBefore, 'the other request stepped meanwhile');
  assert.deepEqual(same(fast), same(await lm.generate('a mat', { temperature: 0, maxTokens: 10 })));
  // Held with nothing else to run: the batcher waits (no spin), then goes on once the client catches up.
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(piecesWhileBehind, 0);
  behind = false;
  assert.deepEqual(same(await slow), same(await lm.generate('the cat', { temperature: 0, maxTokens: 20 })));
  await b.idle();
  b.dispose();
  lm.model.dispose();
});
