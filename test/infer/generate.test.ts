import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { generate } from '../../src/infer/generate.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

const cpu = await fon.initBackend('cpu');
const tok = byteTokenizer();

function model(contextLength = 32): Decoder {
  const cfg = parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength });
  return new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 3 }));
}

/** Greedy decoding by recomputing the whole sequence each step (no cache): the reference. */
async function greedyNoCache(m: Decoder, prompt: number[], n: number, start: number[] = [tok.eosId]): Promise<number[]> {
  const seq = [...start, ...prompt];
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const logits = fon.noGrad(() => m.forward(fon.tensor(seq, [1, seq.length], { backend: cpu, dtype: 'i32' }), { lastOnly: true }));
    const row = (await logits.data()) as Float32Array;
    logits.dispose();
    let best = 0;
    for (let j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
    out.push(best);
    seq.push(best);
  }
  return out;
}

test('generate: greedy decoding through the KV cache equals recomputing the whole sequence', async () => {
  const m = model();
  const prompt = 'The ';
  const ref = await greedyNoCache(m, tok.encode(prompt), 12);
  const eos = ref.indexOf(tok.eosId);
  const r = await generate(m, tok, prompt, { maxTokens: 12, temperature: 0 });
  const expect = eos >= 0 ? ref.slice(0, eos) : ref;
  assert.deepEqual(r.ids, expect);
  assert.equal(r.stopReason, eos >= 0 ? 'eos' : 'maxTokens');
  assert.equal(r.promptTokens, 4);
  m.dispose();
});

test('generate: streams exactly the returned text; the cache is freed afterwards', async () => {
  const m = model();
  let streamed = '';
  const r = await generate(m, tok, 'ab', { maxTokens: 10, temperature: 1, seed: 7, onText: (s) => { streamed += s; } });
  assert.equal(streamed, r.text);
  const before = cpu.memory().liveBytes; // after the first generation: the model's RoPE tables are made on first use and kept
  const again = await generate(m, tok, 'ab', { maxTokens: 10, temperature: 1, seed: 7 });
  assert.equal(cpu.memory().liveBytes, before, 'every tensor of the generation is freed');
  assert.deepEqual(again.ids, r.ids, 'same seed, same tokens');
  m.dispose();
});

test('generate: a stop string ends the text before it', async () => {
  const m = model();
  const free = await generate(m, tok, 'x', { maxTokens: 20, temperature: 0 });
  assert.ok(free.text.length >= 3, 'the model generates some text');
  const stop = free.text.slice(2, 3);
  const r = await generate(m, tok, 'x', { maxTokens: 20, temperature: 0, stop: [stop] });
  assert.equal(r.stopReason, 'stop');
  assert.equal(r.text, free.text.slice(0, free.text.indexOf(stop)));
  m.dispose();
});

test('generate: a prompt longer than the context is an error, or truncated with a warning', async () => {
  const m = model(16);
  await assert.rejects(generate(m, tok, 'x'.repeat(20), { maxTokens: 2 }), /prompt of 20 tokens \(plus 1 start token\) leaves no room in the context of 16 tokens; shorten it or allow truncation/);
  const warnings: string[] = [];
  const r = await generate(m, tok, 'x'.repeat(20), { maxTokens: 5, temperature: 0, truncatePrompt: true, onWarning: (w) => warnings.push(w) });
  assert.match(warnings[0], /kept its last 14 tokens/);
  assert.equal(r.promptTokens, 14);
  // 15 positions hold the prompt; the 16th holds the first generated token, whose logits give the second.
  assert.deepEqual([r.ids.length, r.stopReason], [2, 'context']);
  await assert.rejects(generate(m, tok, 'a', { maxTokens: 0 }), /maxTokens 0 must be a positive integer/);
  m.dispose();
});

test('generate: a model with more rows than the tokenizer has ids never samples those ids', async () => {
  const cfg = parseModelConfig({ vocabSize: 2000, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 64 });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 5 }));
  // Uniform sampling over 2000 rows would pick an id ≥ 257 almost every step.
  const r = await generate(m, tok, 'a', { maxTokens: 40, temperature: 5, seed: 1 });
  assert.ok(r.ids.length > 0 && r.ids.every((id) => id < tok.vocabSize), `ids ${r.ids}`);
  m.dispose();
});

test('generate: bad sampling options are refused before the KV cache is allocated', async () => {
  const m = model();
  const before = cpu.memory().liveBytes;
  await assert.rejects(generate(m, tok, 'a', { stop: [''] }), /stop/);
  await assert.rejects(generate(m, tok, 'a', { topP: 0 }), /topP/);
  assert.equal(cpu.memory().liveBytes, before);
  m.dispose();
});

test('KV cache: written in place through decoding, never re-allocated', async () => {
  const m = model();
  const cache = new KvCache(m.config, 1, 12, cpu);
  const handles = cache.layers.map((l) => [l.k.handle, l.v.handle]);
  const ids = [3, 1, 4, 1, 5, 9, 2, 6];
  fon.noGrad(() => m.forward(fon.tensor([ids.slice(0, 4)], undefined, { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: 0 }));
  for (let p = 4; p < ids.length; p++) fon.noGrad(() => m.forward(fon.tensor([[ids[p]]], undefined, { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: p }));
  cache.layers.forEach((l, i) => {
    assert.equal(l.k.handle, handles[i][0]);
    assert.equal(l.v.handle, handles[i][1]);
  });
  const k0 = (await cache.layers[0].k.data()) as Float32Array; // (1, 1, 12, 8)
  assert.ok(k0.slice(7 * 8, 8 * 8).some((x) => x !== 0), 'row 7 written');
  assert.ok(k0.slice(8 * 8).every((x) => x === 0), 'rows past the last position untouched');
  cache.dispose();
  m.dispose();
});

test('generate: start ids (none, or a Hugging Face BOS), extra stop ids and special tokens in the prompt', async () => {
  const m = model();
  // No start token (GPT-2 and Qwen folders): the prompt alone, as recomputing it says.
  const ref = await greedyNoCache(m, tok.encode('The '), 6, []);
  const r = await generate(m, tok, 'The ', { maxTokens: 6, temperature: 0, startIds: [], stopIds: [] });
  const eos = ref.indexOf(tok.eosId);
  assert.deepEqual(r.ids, eos >= 0 ? ref.slice(0, eos) : ref);
  assert.equal(r.promptTokens, 4);
  const bos = await greedyNoCache(m, tok.encode('The '), 6, [65, 66]);
  const rb = await generate(m, tok, 'The ', { maxTokens: 6, temperature: 0, startIds: [65, 66] });
  assert.deepEqual(rb.ids, bos.indexOf(tok.eosId) >= 0 ? bos.slice(0, bos.indexOf(tok.eosId)) : bos);
  await assert.rejects(generate(m, tok, '', { startIds: [] }), /an empty prompt with no start token gives the model nothing to continue/);
  // A stop id ends generation as the end-of-text id does.
  const free = await generate(m, tok, 'x', { maxTokens: 8, temperature: 0 });
  assert.ok(free.ids.length >= 3, 'the model generates a few tokens');
  const stop = free.ids[2];
  const cut = await generate(m, tok, 'x', { maxTokens: 8, temperature: 0, stopIds: [stop] });
  assert.deepEqual(cut.ids, free.ids.slice(0, free.ids.indexOf(stop)));
  assert.equal(cut.stopReason, 'eos');
  // Chat markup: a special token written in the prompt is one id only when asked.
  assert.equal((await generate(m, tok, '<|endoftext|>a', { maxTokens: 1, temperature: 0 })).promptTokens, 14);
  assert.equal((await generate(m, tok, '<|endoftext|>a', { maxTokens: 1, temperature: 0, specialInPrompt: true })).promptTokens, 2);
  m.dispose();
});
