/**
 * `evaluate` scoring the exit head in the same pass (eval/perplexity.ts): the exit figures against a
 * direct computation (logits() after layer D−1), the full figures unchanged, the default for a model
 * with organs, and a draftLayers out of range. Run: node --import tsx --test test/eval/organs_eval.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initBackend } from '../../src/backend/registry.ts';
import { ArgumentError } from '../../src/errors.ts';
import { evaluate } from '../../src/eval/perplexity.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { tensor } from '../../src/ops/creation.ts';
import { crossEntropy } from '../../src/ops/fused.ts';
import { noGrad } from '../../src/tensor/scope.ts';
import { evalWindows, MemoryTokenStore } from '../../src/train/data/index.ts';

const cpu = await initBackend('cpu');
const V = 20;
const BASE: Partial<ModelConfig> = { vocabSize: V, dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 8 };
const model = (extra: Record<string, unknown> = {}) => new Decoder(parseModelConfig({ ...BASE, ...extra }), new ParamFactory({ backend: cpu, seed: 6 }));
const ids = Int32Array.from({ length: 30 }, (_, i) => (i * 13 + 5) % V);
const store = new MemoryTokenStore(ids);
const byteLengths = Array.from({ length: V }, (_, i) => 1 + (i % 3));

/** Σ NLL of every scored target of the stride-4 windows, of the exit head at layer d (0: the full model), computed directly. */
async function directNll(m: Decoder, d: number): Promise<number> {
  let nll = 0;
  for (const w of evalWindows(store, 8, 4)) {
    const x = tensor(w.inputs, [1, w.inputs.length], { backend: cpu, dtype: 'i32' });
    const y = tensor(w.targets, [1, w.inputs.length], { backend: cpu, dtype: 'i32' });
    const logits = noGrad(() => (d === 0 ? m.forward(x) : m.logits(m.runLayers(m.embedTokens(x), 0, d, { pos: 0 }).x)));
    const row = (await crossEntropy(logits, y, { reduction: 'none' }).data()) as Float32Array;
    for (let j = w.scoredFrom; j < row.length; j++) nll += row[j];
  }
  return nll;
}

test('evaluate: draftLayers scores the exit head of any model in the same pass; the full figures stay those of a plain forward', async () => {
  const m = model();
  const plain = await evaluate(m, evalWindows(store, 8, 4), { byteLengths, batch: 3 });
  assert.equal(plain.exit, undefined, 'no organs, no draftLayers: no exit figures');
  const bytes = Array.from(ids.slice(1)).reduce((a, id) => a + byteLengths[id], 0);
  for (const d of [1, 2]) {
    const r = await evaluate(m, evalWindows(store, 8, 4), { byteLengths, batch: 3, draftLayers: d });
    assert.equal(r.loss, plain.loss, 'full loss unchanged');
    assert.equal(r.tokens, 29);
    const nll = await directNll(m, d);
    assert.ok(r.exit, 'exit figures');
    assert.equal(r.exit.draftLayers, d);
    assert.ok(Math.abs(r.exit.loss - nll / 29) < 1e-5, `D=${d}: ${r.exit.loss} vs ${nll / 29}`);
    assert.ok(Math.abs(r.exit.bitsPerByte - nll / Math.LN2 / bytes) < 1e-5);
    assert.ok(Math.abs(r.exit.perplexity - Math.exp(r.exit.loss)) < 1e-9 * r.exit.perplexity);
    assert.ok(Math.abs(r.exit.loss - r.loss) > 1e-6, 'the exit head is not the full model');
  }
  assert.ok(Math.abs(plain.loss - (await directNll(m, 0)) / 29) < 1e-5);
  m.dispose();
});

test('evaluate: a model with organs scores its exit head by default; null turns it off; D out of range is an ArgumentError', async () => {
  const m = model({ organs: { draftLayers: 2 } });
  const r = await evaluate(m, evalWindows(store, 8), { byteLengths });
  assert.equal(r.exit?.draftLayers, 2);
  assert.ok(Math.abs(r.exit!.loss - (await evaluate(m, evalWindows(store, 8), { byteLengths, draftLayers: 2 })).exit!.loss) < 1e-12);
  assert.equal((await evaluate(m, evalWindows(store, 8), { byteLengths, draftLayers: null })).exit, undefined);
  assert.equal((await evaluate(m, evalWindows(store, 8), { byteLengths, draftLayers: 1 })).exit?.draftLayers, 1, 'an explicit D overrides the organs\'');
  for (const d of [0, 3, 1.5]) {
    await assert.rejects(evaluate(m, evalWindows(store, 8), { byteLengths, draftLayers: d }), (e: Error) => e instanceof ArgumentError && /evaluate: draftLayers = [\d.]+: expected an integer in \[1, 2\]/.test(e.message));
  }
  m.dispose();
});
