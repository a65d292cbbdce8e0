/**
 * Parity with Hugging Face `tokenizers` on the issue-4 fixtures (test/fixtures/hf/<arch>/, made by
 * make_fixtures.py): three byte-level BPE styles trained there — GPT-2 (ByteLevel's own regex),
 * Llama 3 (Split on the Llama-3 regex, then ByteLevel), Qwen2 (the Qwen2 regex; non-special added
 * tokens <think> and </think>). tokenizer_reference.json holds `Tokenizer.encode(s,
 * add_special_tokens=False).ids` for hard strings, and reference.json the ids of eval.txt. The
 * `tokenizers` library cuts every added token, special or not, out of the text, which is FON's
 * `{ allowSpecial: true }`.
 *
 *   node --import tsx --test test/io/hf_tokenizer_fixtures.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tokenizerConfigOptions } from '../../src/io/tokenizer/hf_config.ts';
import { loadTokenizer, parseTokenizer, type Tokenizer } from '../../src/io/tokenizer/tokenizer.ts';

const ROOT = join(import.meta.dirname, '../fixtures/hf');
const read = (dir: string, file: string) => readFileSync(join(ROOT, dir, file), 'utf8');
const evalText = readFileSync(join(ROOT, 'eval.txt'), 'utf8');

interface Fixture {
  dir: string;
  /** The eos token tokenizer_config.json names. */
  eos: string;
  /** The special tokens of the style (added tokens marked special). */
  specials: string[];
  /** Non-special added tokens. */
  plainAdded: string[];
}

const FIXTURES: Fixture[] = [
  { dir: 'gpt2', eos: '<|endoftext|>', specials: ['<|endoftext|>'], plainAdded: [] },
  { dir: 'llama', eos: '<|end_of_text|>', specials: ['<|begin_of_text|>', '<|end_of_text|>'], plainAdded: [] },
  { dir: 'mistral', eos: '<|end_of_text|>', specials: ['<|begin_of_text|>', '<|end_of_text|>'], plainAdded: [] },
  { dir: 'qwen2', eos: '<|im_end|>', specials: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'], plainAdded: ['<think>', '</think>'] },
  { dir: 'qwen3', eos: '<|im_end|>', specials: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'], plainAdded: ['<think>', '</think>'] },
];

function load(dir: string): Tokenizer {
  const opts = tokenizerConfigOptions(JSON.parse(read(dir, 'tokenizer_config.json')), `${dir}/tokenizer_config.json`);
  return parseTokenizer(read(dir, 'tokenizer.json'), `${dir}/tokenizer.json`, opts);
}

for (const fx of FIXTURES) {
  const tok = load(fx.dir);
  const ref = JSON.parse(read(fx.dir, 'tokenizer_reference.json')) as { strings: string[]; ids: number[][] };

  test(`${fx.dir}: encode equals tokenizers' ids on all ${ref.strings.length} hard strings, decode gives the strings back`, () => {
    assert.equal(ref.strings.length, ref.ids.length);
    assert.ok(ref.strings.length >= 20, 'the reference covers the hard cases');
    ref.strings.forEach((s, i) => {
      assert.deepEqual(tok.encode(s, { allowSpecial: true }), ref.ids[i], `encode ${JSON.stringify(s)}`);
      assert.equal(tok.decode(ref.ids[i]), s, `decode of ${JSON.stringify(s)}`);
    });
  });

  test(`${fx.dir}: eval.txt encodes to reference.json's eval_ids exactly`, () => {
    const expected = (JSON.parse(read(fx.dir, 'reference.json')) as { eval_ids: number[] }).eval_ids;
    assert.ok(expected.length > 2000);
    const got = tok.encode(evalText, { allowSpecial: true });
    const first = got.findIndex((id, i) => id !== expected[i]);
    assert.deepEqual(got, expected, `${got.length} ids for ${expected.length}; first difference at token ${first}`);
    assert.equal(tok.decode(got), evalText);
  });

  test(`${fx.dir}: eos is tokenizer_config.json's ${fx.eos}; ids and sizes agree with the model's config.json`, () => {
    assert.equal(tok.idToToken(tok.eosId), fx.eos);
    assert.equal(tok.eosId, tok.tokenToId(fx.eos));
    const modelConfig = JSON.parse(read(fx.dir, 'config.json')) as { vocab_size: number };
    assert.equal(tok.vocabSize, modelConfig.vocab_size, 'the embedding has one row per id');
    for (const s of [...fx.specials, ...fx.plainAdded]) {
      const id = tok.tokenToId(s);
      assert.ok(id !== undefined && id < tok.vocabSize, s);
      assert.deepEqual(tok.encode(s, { allowSpecial: true }), [id], `${s} is one id`);
    }
  });

  test(`${fx.dir}: without allowSpecial, special spellings are plain text and non-special added tokens still count`, () => {
    ref.strings.forEach((s, i) => {
      const ids = tok.encode(s);
      const hasSpecial = fx.specials.some((sp) => s.includes(sp));
      if (hasSpecial) assert.notDeepEqual(ids, ref.ids[i], JSON.stringify(s));
      else assert.deepEqual(ids, ref.ids[i], `${JSON.stringify(s)} holds no special token: the same ids`);
      for (const sp of fx.specials) assert.ok(!ids.includes(tok.tokenToId(sp)!), `${sp} never appears in ${JSON.stringify(s)}'s ids`);
      assert.equal(tok.decode(ids), s);
    });
  });

  test(`${fx.dir}: the stream decoder rebuilds every hard string id by id (emoji and CJK split across tokens)`, () => {
    ref.strings.forEach((s, i) => {
      const stream = tok.streamDecoder();
      let text = '';
      for (const id of ref.ids[i]) text += stream.push(id);
      assert.equal(text + stream.flush(), s, JSON.stringify(s));
    });
  });
}

test('the same-style fixtures hold the same tokenizer: llama = mistral, qwen2 = qwen3', () => {
  assert.equal(read('llama', 'tokenizer.json'), read('mistral', 'tokenizer.json'));
  assert.equal(read('qwen2', 'tokenizer.json'), read('qwen3', 'tokenizer.json'));
});

test('without tokenizer_config.json the first known end-of-text spelling is the eos (why the CLI reads the config)', () => {
  const bare = (dir: string) => parseTokenizer(read(dir, 'tokenizer.json'), `${dir}/tokenizer.json`);
  assert.equal(bare('gpt2').idToToken(bare('gpt2').eosId), '<|endoftext|>');
  assert.equal(bare('llama').idToToken(bare('llama').eosId), '<|end_of_text|>');
  assert.equal(bare('qwen3').idToToken(bare('qwen3').eosId), '<|endoftext|>', 'Qwen names <|im_end|> in its config');
});

test('tokenizer_config.json: eos_token as a string, as an AddedToken object, null or absent; other shapes are named', () => {
  assert.deepEqual(tokenizerConfigOptions({ eos_token: '<|im_end|>' }), { eosToken: '<|im_end|>' });
  assert.deepEqual(tokenizerConfigOptions({ eos_token: { __type: 'AddedToken', content: '</s>', lstrip: false } }), { eosToken: '</s>' });
  assert.deepEqual(tokenizerConfigOptions({ eos_token: null }), {});
  assert.deepEqual(tokenizerConfigOptions({}), {});
  assert.throws(() => tokenizerConfigOptions({ eos_token: 7 }, 'c.json'), /^ArgumentError: c\.json: field "eos_token" is 7; expected a string, an object with a string "content", or null$/);
  assert.throws(() => tokenizerConfigOptions([], 'c.json'), /c\.json: a tokenizer_config\.json must hold a JSON object, got an array/);
});

test('added tokens take the ids tokenizers gives them on load, not the ids written in the file', () => {
  const json = JSON.parse(read('qwen3', 'tokenizer.json')) as { added_tokens: Array<Record<string, unknown>> };
  const think = json.added_tokens.find((t) => t.content === '<think>')!;
  // A file whose ids disagree: tokenizers re-adds the tokens in order, new contents from the vocabulary size up,
  // contents already in model.vocab at their vocabulary id.
  think.id = 5000;
  json.added_tokens.find((t) => t.content === '<|im_end|>')!.id = 77;
  const tok = loadTokenizer(json, 'edited.json');
  assert.equal(tok.tokenToId('<think>'), 1000);
  assert.equal(tok.tokenToId('</think>'), 1001);
  assert.equal(tok.tokenToId('<|im_end|>'), 2);
  assert.equal(tok.vocabSize, 1002);
  // A content listed twice keeps its first id and takes the flags of its last entry (here rstrip).
  json.added_tokens.push({ ...think, id: 9, rstrip: true });
  const twice = loadTokenizer(json, 'twice.json');
  assert.equal(twice.tokenToId('<think>'), 1000);
  assert.deepEqual(twice.encode('<think>  x'), [1000, ...twice.encode('x')]);
  assert.deepEqual(tok.encode('<think>  x'), [1000, ...tok.encode('  x')]);
});
