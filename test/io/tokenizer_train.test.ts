/** BPE training: hand-checked merges, tie-breaking, agreement with a recount-everything reference, determinism, compression. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { uniformStream } from '../../src/ops/random.ts';
import { BYTE_CHARS } from '../../src/io/tokenizer/byte_level.ts';
import { countWords, learnBpe } from '../../src/io/tokenizer/bpe_train.ts';
import { byteTokenizer, trainBpe, type Tokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { englishText } from '../fixtures/tokenizer/english_text.ts';

const mergesOf = (tok: Tokenizer) => (tok.toJSON() as { model: { merges: string[] } }).model.merges;

/** The plain algorithm: recount every pair of every word before each merge; most frequent, then smallest (left, right) id. */
function referenceMerges(wordCounts: Map<string, number>, numTokens: number): string[] {
  const tokens = [...BYTE_CHARS];
  const words = [...wordCounts].map(([w, c]) => ({ sym: [...Buffer.from(w, 'utf8')], c }));
  const merges: string[] = [];
  while (tokens.length < numTokens) {
    const counts = new Map<string, number>();
    for (const { sym, c } of words) for (let i = 0; i + 1 < sym.length; i++) counts.set(`${sym[i]},${sym[i + 1]}`, (counts.get(`${sym[i]},${sym[i + 1]}`) ?? 0) + c);
    let best: [number, number] | null = null;
    let bestCount = 0;
    for (const [key, c] of counts) {
      const [a, b] = key.split(',').map(Number);
      if (c > bestCount || (c === bestCount && best !== null && (a < best[0] || (a === best[0] && b < best[1])))) { best = [a, b]; bestCount = c; }
    }
    if (best === null) break;
    const [a, b] = best;
    const merged = tokens[a] + tokens[b];
    let id = tokens.indexOf(merged);
    if (id < 0) { id = tokens.length; tokens.push(merged); }
    merges.push(`${tokens[a]} ${tokens[b]}`);
    for (const word of words) {
      const out: number[] = [];
      for (let i = 0; i < word.sym.length;) {
        if (i + 1 < word.sym.length && word.sym[i] === a && word.sym[i + 1] === b) { out.push(id); i += 2; } else out.push(word.sym[i++]);
      }
      word.sym = out;
    }
  }
  return merges;
}

test('hand-checked merges: "ab ab ab abc" learns "a b", then "Ġ ab", then "Ġab c"', () => {
  // Words: "ab" ×1, " ab" ×2, " abc" ×1. Pairs: (a,b) 4, (Ġ,a) 3, (b,c) 1 → "a b"; then (Ġ,ab) 3, (ab,c) 1 → "Ġ ab"; then (Ġab,c) 1.
  const tok = trainBpe(['ab ab ab abc'], 256 + 3 + 1);
  assert.deepEqual(mergesOf(tok), ['a b', 'Ġ ab', 'Ġab c']);
  assert.equal(tok.vocabSize, 260);
  assert.deepEqual(tok.encode('ab abc'), [256, 258]);
  assert.deepEqual(tok.encode('<|endoftext|>', { allowSpecial: true }), [259]);
});

test('ties go to the smaller left id, then the smaller right id', () => {
  // "xy yx": (x,y), (Ġ,y), (y,x) all once; Ġ is byte 32 < x (120) < y (121).
  assert.deepEqual(mergesOf(trainBpe(['xy yx'], 256 + 3 + 1)), ['Ġ y', 'x y', 'Ġy x']);
});

test('the incremental trainer learns exactly the merges of the recount-everything reference', () => {
  const rand = uniformStream(5);
  const text = englishText(30_000, 9) + Array.from({ length: 300 }, () => String.fromCodePoint(0x4e00 + Math.floor(rand() * 40))).join('');
  const words = countWords(text.split('\n'));
  const learned = learnBpe(words, 256 + 300);
  assert.deepEqual(learned.merges.map(([a, b]) => `${a} ${b}`), referenceMerges(words, 256 + 300));
});

test('training is deterministic and does not depend on document order', () => {
  const docs = englishText(100_000, 4).split('\n\n');
  const a = trainBpe(docs, 800).toJSON();
  assert.deepEqual(trainBpe(docs, 800).toJSON(), a);
  assert.deepEqual(trainBpe([...docs].reverse(), 800).toJSON(), a);
  assert.deepEqual(trainBpe((function* () { yield* docs; })(), 800).toJSON(), a, 'a generator works as well as an array');
});

test('layout: bytes 0..255, learned tokens, then specials; vocabSize honoured', () => {
  const tok = trainBpe(englishText(50_000, 2).split('\n\n'), 700, { specialTokens: ['<|pad|>', '<|endoftext|>'] });
  assert.equal(tok.vocabSize, 700);
  for (let b = 0; b < 256; b++) assert.equal(tok.idToToken(b), BYTE_CHARS[b]);
  assert.equal(tok.eosId, 698);
  assert.equal(tok.idToToken(698), '<|endoftext|>');
  assert.equal(tok.idToToken(699), '<|pad|>');
  assert.equal(mergesOf(tok).length >= 700 - 258, true);
});

test('training stops early when no pair is left', () => {
  const tok = trainBpe(['ab'], 1000);
  assert.deepEqual(mergesOf(tok), ['a b']);
  assert.equal(tok.vocabSize, 258);
});

test('onProgress reports rising counts ending at the total', () => {
  const calls: Array<[number, number]> = [];
  trainBpe(englishText(50_000, 6).split('\n\n'), 600, { onProgress: (d, t) => calls.push([d, t]) });
  assert.ok(calls.length >= 5);
  assert.deepEqual(calls.at(-1), [600 - 257, 600 - 257]);
  for (let i = 1; i < calls.length; i++) assert.ok(calls[i][0] >= calls[i - 1][0]);
});

test('merges compress held-out English: fewer than 0.4 tokens per byte at 2048 tokens (bytes: 1.0)', () => {
  const tok = trainBpe(englishText(1_000_000, 1).split('\n\n'), 2048);
  const heldOut = englishText(200_000, 99);
  const bytes = Buffer.byteLength(heldOut);
  const ratio = tok.encode(heldOut).length / bytes;
  assert.equal(byteTokenizer().encode(heldOut).length, bytes);
  assert.ok(ratio < 0.4, `tokens per byte ${ratio.toFixed(3)}`);
  assert.equal(tok.decode(tok.encode(heldOut)), heldOut);
});
