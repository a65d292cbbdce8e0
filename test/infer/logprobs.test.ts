/**
 * Token log-probabilities (infer/logprobs.ts, GenerateOptions.logprobs): the softmax of the raw
 * logits in log space against a float64 reference, −∞ entries skipped, the top tokens best first
 * with ties by the lower id; generate reports one entry a generated token, greedy picks its step's
 * best, and bad requests are refused by name.
 * Run: node --import tsx --test test/infer/logprobs.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { generate } from '../../src/infer/generate.ts';
import { tokenLogprob } from '../../src/infer/logprobs.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

test('tokenLogprob: log-softmax against float64, −∞ skipped, top best first with ties by the lower id', () => {
  const row = Float32Array.from([1.5, -2, 3, 3, -Infinity, 0.25, 3]);
  const lse = Math.log([1.5, -2, 3, 3, 0.25, 3].reduce((a, x) => a + Math.exp(x), 0));
  const r = tokenLogprob(row, 1, 3);
  assert.ok(Math.abs(r.logprob - (-2 - lse)) < 1e-6);
  assert.deepEqual(r.top.map((t) => t.token), [2, 3, 6]);
  for (const t of r.top) assert.ok(Math.abs(t.logprob - (3 - lse)) < 1e-6);
  assert.deepEqual(tokenLogprob(row, 0, 0).top, []);
  assert.equal(tokenLogprob(row, 4, 2).logprob, -Infinity);
});

test('generate with logprobs: one entry a token, greedy takes its step\'s best; bad requests refused', async () => {
  const cpu = await fon.initBackend('cpu');
  const tok = byteTokenizer();
  const m = new Decoder(parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 64 }), new ParamFactory({ backend: cpu, seed: 7 }));
  try {
    const r = await generate(m, tok, 'The ', { maxTokens: 10, temperature: 0, stopIds: [], logprobs: 4 });
    const plain = await generate(m, tok, 'The ', { maxTokens: 10, temperature: 0, stopIds: [] });
    assert.deepEqual(r.ids, plain.ids);
    assert.equal(r.logprobs!.length, r.ids.length);
    r.logprobs!.forEach((l, i) => {
      assert.equal(l.token, r.ids[i]);
      assert.equal(l.top.length, 4);
      assert.equal(l.top[0].token, l.token, `step ${i}: greedy takes the best`);
      assert.equal(l.top[0].logprob, l.logprob);
      assert.ok(l.top.every((t, j) => j === 0 || t.logprob <= l.top[j - 1].logprob));
      assert.ok(l.top.reduce((a, t) => a + Math.exp(t.logprob), 0) <= 1 + 1e-6 && l.logprob <= 0);
    });
    await assert.rejects(generate(m, tok, 'x', { logprobs: 21 }), /generate: logprobs 21 must be an integer in \[0, 20\]/);
    await assert.rejects(generate(m, tok, 'x', { logprobs: 1, draftRevise: true }), /generate: logprobs needs plain decoding/);
  } finally {
    m.dispose();
  }
});
