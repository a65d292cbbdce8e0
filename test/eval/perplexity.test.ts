import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { evaluate } from '../../src/eval/perplexity.ts';
import { evalWindows, MemoryTokenStore } from '../../src/train/data/index.ts';

const cpu = await fon.initBackend('cpu');
const m = new Decoder(parseModelConfig({ vocabSize: 20, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 8 }), new ParamFactory({ backend: cpu, seed: 4 }));
const ids = Int32Array.from({ length: 30 }, (_, i) => (i * 13 + 5) % 20);
const store = new MemoryTokenStore(ids);
const byteLengths = Array.from({ length: 20 }, (_, i) => 1 + (i % 3));

/** Where a window's inputs start in the stream. */
function findStart(inputs: Int32Array): number {
  for (let s = 0; s + inputs.length <= ids.length; s++) if (inputs.every((v, j) => ids[s + j] === v)) return s;
  throw new Error('window not found');
}

/** −log p(ids[j+1] | ids[s … j]) for the window starting at s, position j. */
async function nllAt(start: number, len: number): Promise<number[]> {
  const x = fon.tensor(ids.slice(start, start + len), [1, len], { backend: cpu, dtype: 'i32' });
  const y = fon.tensor(ids.slice(start + 1, start + len + 1), [1, len], { backend: cpu, dtype: 'i32' });
  const l = fon.crossEntropy(m.forward(x), y, { reduction: 'none' });
  return Array.from((await l.data()) as Float32Array);
}

test('evaluate: non-overlapping windows score every token after the first once; bits per byte by token bytes', async () => {
  const r = await evaluate(m, evalWindows(store, 8), { byteLengths, batch: 2 });
  assert.equal(r.tokens, 29);
  let nll = 0;
  for (const s of [0, 8, 16]) nll += (await nllAt(s, 8)).reduce((a, b) => a + b, 0);
  nll += (await nllAt(24, 5)).reduce((a, b) => a + b, 0); // the last window is shorter: inputs 24 … 28, ending at the store's end
  const bytes = Array.from(ids.slice(1)).reduce((a, id) => a + byteLengths[id], 0);
  assert.equal(r.bytes, bytes);
  assert.ok(Math.abs(r.loss - nll / 29) < 1e-5, `${r.loss} vs ${nll / 29}`);
  assert.ok(Math.abs(r.bitsPerByte - nll / Math.LN2 / bytes) < 1e-5);
  assert.ok(Math.abs(r.perplexity - Math.exp(r.loss)) < 1e-9 * r.perplexity);
});

test('evaluate: a smaller stride scores each token once with more context, and the batch size does not matter', async () => {
  const a = await evaluate(m, evalWindows(store, 8, 4), { byteLengths, batch: 1 });
  const b = await evaluate(m, evalWindows(store, 8, 4), { byteLengths, batch: 5 });
  assert.equal(a.tokens, 29);
  assert.ok(Math.abs(a.loss - b.loss) < 1e-6);
  // Reference: each window's scored targets, summed. Windows start at 0, 4, …, 20, the last shorter
  // (ending at the store's end); the first scores all 8 targets, the rest the targets no window scored yet.
  let nll = 0, scored = 0;
  for (const w of evalWindows(store, 8, 4)) {
    const start = findStart(w.inputs);
    const row = await nllAt(start, w.inputs.length);
    nll += row.slice(w.scoredFrom).reduce((x, y) => x + y, 0);
    scored += w.inputs.length - w.scoredFrom;
    if (start > 0) assert.ok(w.scoredFrom >= 4, `window at ${start} scores only its tail (scoredFrom ${w.scoredFrom})`);
  }
  assert.equal(scored, 29);
  assert.ok(Math.abs(a.loss - nll / 29) < 1e-5, `${a.loss} vs ${nll / 29}`);
  const full = await evaluate(m, evalWindows(store, 8), { byteLengths });
  assert.notEqual(+a.loss.toFixed(6), +full.loss.toFixed(6), 'more context changes the score');
  await assert.rejects(evaluate(m, [], { byteLengths }), /nothing to score/);
});
