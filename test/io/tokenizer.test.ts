/** Tokenizers: byte tokenizer layout, round trips on any text, streaming decode, toJSON → load, errors. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError, UnsupportedError } from '../../src/errors.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { byteTokenizer, loadTokenizer, parseTokenizer, trainBpe, type Tokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { englishText } from '../fixtures/tokenizer/english_text.ts';

/** Random well-formed strings mixing the hard cases: whitespace runs, emoji, CJK, combining marks, BOM, NEL, special-token text. */
function randomText(rand: () => number, maxPieces: number): string {
  const pool: Array<() => string> = [
    () => 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'[Math.floor(rand() * 52)],
    () => ' \t\n\r\u00a0\u3000'[Math.floor(rand() * 6)].repeat(1 + Math.floor(rand() * 5)),
    () => String.fromCodePoint(0x1f300 + Math.floor(rand() * 0x300)), // emoji (surrogate pairs)
    () => String.fromCodePoint(0x4e00 + Math.floor(rand() * 0x5000)), // CJK
    () => 'e\u0301', // combining acute
    () => ['\ufeff', '\u0085', '\u200d', '\u2028', '\u0000', '\u007f'][Math.floor(rand() * 6)],
    () => ["'s", "'LL", '<|endoftext|>', '123456', '...', '!?'][Math.floor(rand() * 6)],
    () => { // any scalar value (no lone surrogates)
      let cp = Math.floor(rand() * 0x110000);
      if (cp >= 0xd800 && cp <= 0xdfff) cp -= 0x800;
      return String.fromCodePoint(cp);
    },
  ];
  let s = '';
  const n = Math.floor(rand() * maxPieces);
  for (let i = 0; i < n; i++) s += pool[Math.floor(rand() * pool.length)]();
  return s;
}

const EDGE_CASES = ['', ' ', '  ', '\t\t', '\n', '\n\n\n', ' \n \n', '\r\n', '<|endoftext|>', 'a<|endoftext|>b', '\ufeffstart',
  'x\u0085\u0085y', '😀', '👩‍👩‍👧', '🇯🇵', '日本語のテキスト', 'e\u0301\u0301', "it's", "IT'S", '   leading', 'trailing   ', '\u0000'];

const english = englishText(200_000, 3);
const trained = trainBpe(english.split('\n\n'), 600, { specialTokens: ['<|pad|>'] });

function assertRoundTrips(tok: Tokenizer, name: string, seed: number): void {
  for (const s of EDGE_CASES) assert.equal(tok.decode(tok.encode(s)), s, `${name}: ${JSON.stringify(s)}`);
  const rand = uniformStream(seed);
  for (let i = 0; i < 400; i++) {
    const s = randomText(rand, 40);
    assert.equal(tok.decode(tok.encode(s)), s, `${name}: ${JSON.stringify(s)}`);
    assert.equal(tok.decode(tok.encode(s, { allowSpecial: true })), s, `${name} allowSpecial: ${JSON.stringify(s)}`);
  }
}

test('byteTokenizer: ids are the UTF-8 bytes, 256 is <|endoftext|>', () => {
  const tok = byteTokenizer();
  assert.equal(tok.vocabSize, 257);
  assert.equal(tok.eosId, 256);
  assert.deepEqual(tok.encode('hé 🎉'), [...Buffer.from('hé 🎉', 'utf8')]);
  assert.deepEqual(tok.encode('<|endoftext|>'), [...Buffer.from('<|endoftext|>')], 'special text is plain bytes by default');
  assert.deepEqual(tok.encode('a<|endoftext|>b', { allowSpecial: true }), [97, 256, 98]);
  assert.equal(tok.decode([256]), '<|endoftext|>');
  assert.equal(tok.idToToken(32), 'Ġ');
  assert.equal(tok.tokenToId('<|endoftext|>'), 256);
});

test('round trip decode(encode(s)) === s: byte tokenizer and a trained BPE, edge cases and 400 random strings each', () => {
  assertRoundTrips(byteTokenizer(), 'byteTokenizer', 11);
  assertRoundTrips(trained, 'trainBpe', 12);
});

test('a lone surrogate cannot be written in UTF-8 and comes back as U+FFFD', () => {
  assert.equal(byteTokenizer().decode(byteTokenizer().encode('a\ud800b')), 'a\ufffdb');
});

test('special tokens: recognised only with allowSpecial', () => {
  const pad = trained.tokenToId('<|pad|>')!;
  assert.equal(trained.eosId, trained.vocabSize - 2, 'specials come last, <|endoftext|> first');
  assert.equal(pad, trained.vocabSize - 1);
  const plain = trained.encode('x<|endoftext|><|pad|>');
  assert.ok(!plain.includes(trained.eosId) && !plain.includes(pad), `${plain}`);
  const allowed = trained.encode('x<|endoftext|><|pad|>', { allowSpecial: true });
  assert.deepEqual(allowed.slice(-2), [trained.eosId, pad]);
  assert.equal(trained.decode(allowed), 'x<|endoftext|><|pad|>');
});

test('streamDecoder: for every prefix of the ids, pushed text + flush equals decode(prefix)', () => {
  const rand = uniformStream(21);
  for (const tok of [byteTokenizer(), trained]) {
    for (let trial = 0; trial < 30; trial++) {
      const ids = tok.encode(randomText(rand, 25), { allowSpecial: true });
      const stream = tok.streamDecoder();
      let soFar = '';
      for (let k = 0; k <= ids.length; k++) {
        const check = tok.streamDecoder();
        let text = '';
        for (const id of ids.slice(0, k)) text += check.push(id);
        assert.equal(text + check.flush(), tok.decode(ids.slice(0, k)), `prefix ${k} of ${ids}`);
        assert.ok(tok.decode(ids.slice(0, k)).startsWith(soFar), 'pushed text is never taken back');
        if (k < ids.length) soFar += stream.push(ids[k]);
      }
      assert.equal(soFar + stream.flush(), tok.decode(ids));
    }
  }
});

test('streamDecoder holds back an incomplete character and ends it as U+FFFD', () => {
  const tok = byteTokenizer();
  const s = tok.streamDecoder();
  assert.equal(s.push(0xe6), '');
  assert.equal(s.push(0x97), '');
  assert.equal(s.push(0xa5), '日');
  assert.equal(s.push(0xf0), '');
  assert.equal(s.flush(), '\ufffd');
  assert.equal(s.push(0x41), 'A', 'usable again after flush');
});

test('toJSON → loadTokenizer (also through JSON text) gives identical encodings', () => {
  const rand = uniformStream(31);
  const texts = [english.slice(0, 20000), ...EDGE_CASES, ...Array.from({ length: 50 }, () => randomText(rand, 30))];
  for (const tok of [byteTokenizer(), trained]) {
    const json = tok.toJSON();
    const again = loadTokenizer(json);
    const viaText = parseTokenizer(JSON.stringify(tok));
    assert.deepEqual(again.toJSON(), json);
    assert.equal(again.vocabSize, tok.vocabSize);
    assert.equal(again.eosId, tok.eosId);
    for (const t of texts) {
      const ids = tok.encode(t, { allowSpecial: true });
      assert.deepEqual(again.encode(t, { allowSpecial: true }), ids);
      assert.deepEqual(viaText.encode(t, { allowSpecial: true }), ids);
    }
  }
});

test('toJSON returns a copy: changing it does not change the tokenizer', () => {
  const tok = byteTokenizer();
  const json = tok.toJSON() as { model: { vocab: Record<string, number> } };
  json.model.vocab.a = 5;
  assert.equal((tok.toJSON() as typeof json).model.vocab.a, 97);
});

test('errors: decode of an unknown id, bad JSON, bad trainBpe arguments', () => {
  const tok = byteTokenizer();
  assert.throws(() => tok.decode([1, 257]), (e) => e instanceof ArgumentError && /id 257 at position 1 .*vocabulary size 257/.test(e.message));
  assert.throws(() => tok.decode([-1]), ArgumentError);
  assert.throws(() => tok.streamDecoder().push(1.5), ArgumentError);
  assert.throws(() => parseTokenizer('{"model": ', 'models/x/tokenizer.json'), (e) => e instanceof ArgumentError && e.message.startsWith('models/x/tokenizer.json: not valid JSON'));
  assert.throws(() => trainBpe(['abc'], 256), (e) => e instanceof ArgumentError && /vocabSize 256 must be an integer of at least 257/.test(e.message));
  assert.throws(() => trainBpe(['abc'], 300, { specialTokens: ['<a>', '<a>'] }), /holds a token twice/);
  assert.throws(() => trainBpe(['abc'], 300, { specialTokens: ['a'] }), (e) => e instanceof ArgumentError && /special token "a" is also a token/.test(e.message));
});

test('errors: unsupported components are named with the file', () => {
  const base = byteTokenizer().toJSON() as Record<string, unknown>;
  const withField = (patch: Record<string, unknown>) => ({ ...structuredClone(base), ...patch });
  const model = base.model as Record<string, unknown>;
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [withField({ model: { ...model, type: 'WordPiece' } }), /^m\.json: model type "WordPiece" is not supported; FON reads BPE$/],
    [withField({ pre_tokenizer: { type: 'Metaspace', replacement: '▁' } }), /^m\.json: pre_tokenizer type "Metaspace" is not supported/],
    [withField({ pre_tokenizer: null }), /^m\.json: pre_tokenizer null is not supported/],
    [withField({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: 'a' }, behavior: 'Isolated', invert: false }] } }), /^m\.json: pre_tokenizer ends with a Split step, not ByteLevel/],
    [withField({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: 'a' }, behavior: 'Shuffle', invert: false }, base.pre_tokenizer] } }), /pre_tokenizer\.pretokenizers\[0\]\.behavior "Shuffle" is not supported/],
    [withField({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: '\\p{L}++' }, behavior: 'Isolated', invert: false }, base.pre_tokenizer] } }), /regex "\\\\p\{L\}\+\+" uses syntax JavaScript rejects/],
    [withField({ pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: '(?x)a' }, behavior: 'Isolated', invert: false }, base.pre_tokenizer] } }), /uses the inline option group "\(\?x\)"/],
    [withField({ normalizer: { type: 'Lowercase' } }), /^m\.json: normalizer type "Lowercase" is not supported/],
    [withField({ decoder: { type: 'Metaspace' } }), /^m\.json: decoder\.replacement undefined is not supported; FON reads "▁"/],
    [withField({ decoder: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first' } }), /^m\.json: pre_tokenizer type "ByteLevel" is not supported; FON reads null or Metaspace with a SentencePiece-style decoder/],
    [withField({ decoder: { type: 'CTC' } }), /^m\.json: decoder type "CTC" is not supported; FON reads ByteLevel, or a Sequence of Replace/],
    [withField({ decoder: null }), /^m\.json: decoder null is not supported/],
    [withField({ post_processor: { type: 'Mystery' } }), /post_processor type "Mystery" is not supported/],
    [withField({ model: { ...model, dropout: 0.1 } }), /model\.dropout 0\.1 is not supported/],
    [withField({ model: { ...model, byte_fallback: true } }), /model\.byte_fallback true is not supported; FON reads false with a ByteLevel decoder/],
    [withField({ model: { ...model, continuing_subword_prefix: '##' } }), /model\.continuing_subword_prefix "##" is not supported/],
  ];
  for (const [json, message] of cases) assert.throws(() => loadTokenizer(json, 'm.json'), (e) => e instanceof UnsupportedError && message.test(e.message), `${message}`);
});

test('errors: missing or ill-typed fields are named', () => {
  const base = byteTokenizer().toJSON() as Record<string, unknown>;
  const model = base.model as Record<string, unknown>;
  const withModel = (patch: Record<string, unknown>) => ({ ...structuredClone(base), model: { ...model, ...patch } });
  const cases: Array<[unknown, RegExp]> = [
    [[1, 2], /^t\.json: a tokenizer\.json must hold a JSON object, got an array \[1,2\]$/],
    [{ ...base, model: undefined }, /^t\.json: field "model" is missing; expected an object$/],
    [withModel({ vocab: undefined }), /^t\.json: field "model\.vocab" is missing; expected an object$/],
    [withModel({ vocab: { a: -1 } }), /field "model\.vocab\["a"\]" is number -1; expected a non-negative integer id/],
    [withModel({ merges: 'a b' }), /field "model\.merges" is string "a b"; expected an array/],
    [withModel({ merges: ['a b c'] }), /field "model\.merges\[0\]" is string "a b c"; expected a string "a b" with one space/],
    [withModel({ merges: [['a', 'b']] }), /model\.merges\[0\] \("a", "b"\) needs the token "ab", which is not in model\.vocab/],
    [withModel({ merges: ['a Q'], vocab: { a: 0 } }), /model\.merges\[0\] \("a", "Q"\) needs the token "Q"/],
    [withModel({ unk_token: '<unk>' }), /model\.unk_token "<unk>" is not in model\.vocab/],
    [{ ...base, added_tokens: [{ content: 'x' }] }, /field "added_tokens\[0\]\.id" is missing; expected a non-negative integer/],
    [{ ...base, added_tokens: [{ id: 300 }] }, /field "added_tokens\[0\]\.content" is missing; expected a string/],
    [{ ...base, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: {}, behavior: 'Isolated' }, base.pre_tokenizer] } },
      /field "pre_tokenizer\.pretokenizers\[0\]\.pattern" is object \{\}; expected \{"Regex": string\}/],
    [{ ...base, added_tokens: [] }, /^t\.json: no end-of-text token found \(looked for <\|endoftext\|>.*\); pass \{ eosToken \} to name it$/],
  ];
  for (const [json, message] of cases) assert.throws(() => loadTokenizer(json, 't.json'), (e) => e instanceof ArgumentError && message.test(e.message), `${message}`);
  assert.throws(() => loadTokenizer(base, 't.json', { eosToken: '<eos>' }), /eosToken "<eos>" is neither an added token nor in model\.vocab/);
  assert.equal(loadTokenizer({ ...base, added_tokens: [] }, 't.json', { eosToken: 'Ġ' }).eosId, 32);
});
