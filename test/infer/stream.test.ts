/**
 * streamText (infer/stream.ts) and GenerateOptions.signal: the pieces, joined, are generate's text
 * and the iterator returns generate's result; breaking out of the loop, or aborting the signal
 * before or during generation, ends it with stopReason 'aborted' (or at once, for a break) and
 * nothing more is produced; an error inside generation comes out of the loop.
 * Run: node --import tsx --test test/infer/stream.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { generate, type GenerateResult } from '../../src/infer/generate.ts';
import { streamText } from '../../src/infer/stream.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

const cpu = await fon.initBackend('cpu');
const tok = byteTokenizer();
const cfg = parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 64 });
const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 5 }));
// Greedy, never stopping at the end-of-text id, so every run makes its 24 tokens.
const noEos = { maxTokens: 24, temperature: 0, stopIds: [] as number[], startIds: [] as number[] };

async function drain(it: AsyncGenerator<string, GenerateResult>): Promise<{ pieces: string[]; result: GenerateResult }> {
  const pieces: string[] = [];
  for (;;) {
    const r = await it.next();
    if (r.done) return { pieces, result: r.value };
    pieces.push(r.value);
  }
}

test('streamText yields generate\'s text piece by piece and returns its result', async () => {
  const want = await generate(m, tok, 'The ', noEos);
  const heard: string[] = [];
  const { pieces, result } = await drain(streamText(m, tok, 'The ', { ...noEos, onText: (s) => heard.push(s) }));
  assert.ok(pieces.length > 1, `${pieces.length} pieces`);
  assert.equal(pieces.join(''), want.text);
  assert.deepEqual(heard, pieces, 'the caller\'s onText hears the same pieces');
  assert.deepEqual(result.ids, want.ids);
  assert.equal(result.stopReason, want.stopReason);
});

test('breaking out of the loop ends the generation: no more text is produced after the break', async () => {
  let produced = 0;
  const got: string[] = [];
  for await (const piece of streamText(m, tok, 'The ', { ...noEos, onText: () => { produced++; } })) {
    got.push(piece);
    if (got.length === 3) break;
  }
  const atBreak = produced;
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(produced, atBreak, 'nothing more after the loop ended');
  assert.ok(produced <= 4, `produced ${produced} pieces for 3 taken`);
});

test('an AbortSignal ends generation: before it starts (nothing produced) and during it (stopReason aborted, fewer tokens)', async () => {
  const before = new AbortController();
  before.abort();
  const r0 = await generate(m, tok, 'The ', { ...noEos, signal: before.signal });
  assert.equal(r0.stopReason, 'aborted');
  assert.deepEqual(r0.ids, []);
  const during = new AbortController();
  const { pieces, result } = await drain(streamText(m, tok, 'The ', { ...noEos, signal: during.signal, onText: () => { if (!during.signal.aborted) during.abort(); } }));
  assert.equal(result.stopReason, 'aborted');
  assert.ok(result.ids.length >= 1 && result.ids.length <= 2, `${result.ids.length} tokens after the abort`);
  assert.equal(pieces.join(''), result.text);
});

test('generation keeps pace with the reader, and an abort while the reader is away ends it', async () => {
  let produced = 0;
  const ac = new AbortController();
  const it = streamText(m, tok, 'The ', { ...noEos, signal: ac.signal, onText: () => { produced++; } });
  await it.next();
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(produced <= 3, `${produced} pieces made while the reader took 1`);
  ac.abort();
  const rest = await drain(it);
  assert.equal(rest.result.stopReason, 'aborted');
  assert.ok(rest.result.ids.length <= 4, `${rest.result.ids.length} tokens`);
});

test('an error inside generation comes out of the loop', async () => {
  await assert.rejects(async () => { for await (const _ of streamText(m, tok, 'x', { maxTokens: 0 })) { /* nothing */ } }, (e) => e instanceof fon.ArgumentError && /maxTokens 0 must be a positive integer/.test(e.message));
});
