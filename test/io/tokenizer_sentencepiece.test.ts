/**
 * SentencePiece-converted tokenizer.json files (Llama 2, TinyLlama, Mistral v0.x: BPE over
 * characters with byte_fallback; test/fixtures/tokenizer/sentencepiece_{legacy,metaspace}.json,
 * made by make_sentencepiece.ts): ids and decoded text against @huggingface/tokenizers on the same
 * files, over English, spaces at the ends and in runs, newlines, characters the vocabulary lacks
 * (byte fallback: accents, CJK, emoji), and special tokens in the text; streaming decode equals
 * decode; the post-processor's <s> is the prefix id.
 * Run: node --import tsx --test test/io/tokenizer_sentencepiece.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer as Oracle } from '@huggingface/tokenizers';
import { loadTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

const dir = join(import.meta.dirname, '../fixtures/tokenizer');
const TEXTS = [
  'Hello World', 'the cat and the hat', ' the cat', '  two leading spaces', 'trailing space ', 'a  b   c',
  'line one\nline two\n', 'I want Ellen\'s café, très bien.', '日本語のテキスト', 'Hé 😀 ok', 'WHERE THE HELL', '',
  ' ', '<s>Hello</s> World', 'x<s>y', 'naïve résumé 🎉🎉',
];

for (const name of ['sentencepiece_legacy', 'sentencepiece_metaspace']) {
  test(`${name}: ids and text equal @huggingface/tokenizers'`, () => {
    const json = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
    const fon = loadTokenizer(json, `${name}.json`);
    const oracle = new Oracle(json, {});
    assert.deepEqual(fon.prefixIds, [1]);
    for (const text of TEXTS) {
      const want = Array.from(oracle.encode(text, { add_special_tokens: false }).ids as ArrayLike<number>);
      const got = fon.encode(text, { allowSpecial: true });
      assert.deepEqual(got, want, `${name}: encode ${JSON.stringify(text)}`);
      const wantText = want.length ? oracle.decode(want, { skip_special_tokens: false }) : '';
      assert.equal(fon.decode(got), wantText, `${name}: decode ${JSON.stringify(text)}`);
      const s = fon.streamDecoder();
      assert.equal(got.map((id) => s.push(id)).join('') + s.flush(), wantText, `${name}: stream ${JSON.stringify(text)}`);
    }
    // A continuation (generated text after a prompt) keeps the space its first token begins with.
    const ids = fon.encode('the cat');
    const c = fon.streamDecoder({ continuation: true });
    assert.equal(ids.map((id) => c.push(id)).join('') + c.flush(), ' the cat');
  });
}
