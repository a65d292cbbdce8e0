/**
 * Loading Hugging Face tokenizer.json files: known ids for the GPT-2 and Llama-3 style fixtures
 * (test/fixtures/tokenizer/, worked out by hand in the comments), the Oniguruma → JavaScript
 * regex rewrite, Split behaviours, added-token flags, NFC, and the merge order against a plain
 * reference. Set FON_GPT2_TOKENIZER_JSON to a real GPT-2 tokenizer.json to also check GPT-2's own ids.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { uniformStream } from '../../src/ops/random.ts';
import { ArgumentError } from '../../src/errors.ts';
import { BYTE_CHARS } from '../../src/io/tokenizer/byte_level.ts';
import { compileOnigPattern, escapeRegExp, splitByPattern, type SplitBehavior } from '../../src/io/tokenizer/pretokenize.ts';
import { loadTokenizer, parseTokenizer, trainBpe } from '../../src/io/tokenizer/tokenizer.ts';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/tokenizer/${name}`, import.meta.url), 'utf8')) as Record<string, unknown>;
const gpt2Json = fixture('gpt2_style.json');
const llamaJson = fixture('llama3_style.json');
const gpt2 = loadTokenizer(gpt2Json, 'gpt2_style.json');
const llama = loadTokenizer(llamaJson, 'llama3_style.json');

/** In GPT-2's byte order the printable byte p ('!'..'~') has id p − 0x21, and the space (the 33rd other byte) id 188 + 32. */
const id = (c: string) => c.charCodeAt(0) - 0x21;
const SPACE = 220;

test('GPT-2 style: ByteLevel regex, "a b" merges, merge ranks (ids worked out by hand)', () => {
  // Vocab: 256 bytes, then one token per merge in order: Ġt 256, he 257, Ġthe 258, ll 259, He 260, Hell 261, Hello 262,
  // Ġw 263, or 264, Ġwor 265, ld 266, Ġworld 267, aa 268, ĠĠ 269; <|endoftext|> 270.
  assert.equal(gpt2.vocabSize, 271);
  assert.equal(gpt2.eosId, 270);
  // "Hello": (l,l) rank 3 before (H,e) rank 4, then He+ll, Hell+o. " world": Ġw, or, Ġw+or, ld, Ġwor+ld.
  assert.deepEqual(gpt2.encode('Hello world'), [262, 267]);
  assert.deepEqual(gpt2.encode(' the'), [258]);
  assert.deepEqual(gpt2.encode('the'), [id('t'), 257]);
  // Leftmost first among equal ranks: "aaa" → aa a, "aaaa" → aa aa.
  assert.deepEqual(gpt2.encode('aaa'), [268, id('a')]);
  assert.deepEqual(gpt2.encode('aaaa'), [268, 268]);
  // GPT-2's pattern: a space run keeps its last space for the next word, so "ĠĠ" (rank 13) never forms here.
  assert.deepEqual(gpt2.encode('  Hello'), [SPACE, SPACE, 262]);
  assert.deepEqual(gpt2.encode('x   '), [id('x'), 269, SPACE], 'a final space run is one piece: ĠĠ Ġ');
  assert.deepEqual(gpt2.encode('<|endoftext|>').slice(0, 2), [id('<'), id('|')]);
  assert.deepEqual(gpt2.encode('Hello<|endoftext|>', { allowSpecial: true }), [262, 270]);
  assert.equal(gpt2.decode([262, 267, 270]), 'Hello world<|endoftext|>');
});

test('GPT-2 style: add_prefix_space puts a space before every piece between added tokens', () => {
  const json = structuredClone(gpt2Json);
  (json.pre_tokenizer as Record<string, unknown>).add_prefix_space = true;
  const tok = loadTokenizer(json);
  assert.deepEqual(tok.encode('the'), [258]);
  assert.deepEqual(tok.encode(' the'), [258], 'no second space when the text starts with one');
  assert.deepEqual(tok.encode('the<|endoftext|>the', { allowSpecial: true }), [258, 270, 258]);
  assert.deepEqual(tok.encode(''), []);
});

test('Llama-3 style: Split (Isolated) + ByteLevel without regex, merges as pairs, ignore_merges', () => {
  // Vocab: 256 bytes, then 34 256, 12 257, 123 258, 45 259, 'M 260, 's 261, He 262, ll 263, Hell 264, Hello 265, Ġw 266,
  // or 267, Ġwor 268, ld 269, Ġworld 270, Âħ 271, ÂħÂħ 272, ï» 273, ï»¿ 274, ï»¿ï»¿ 275, Ġzebra 276; added 277..279.
  assert.equal(llama.vocabSize, 280);
  assert.equal(llama.eosId, 278, '<|end_of_text|>');
  assert.deepEqual(llama.encode('Hello world'), [265, 270]);
  // Digits are cut in threes ("123", "45"); uncut, rank-0 "3 4" would have given 12 34 5.
  assert.deepEqual(llama.encode('12345'), [258, 259]);
  // Contractions are case-insensitive: "I'M" → "I", "'M".
  assert.deepEqual(llama.encode("I'M"), [id('I'), 260]);
  assert.deepEqual(llama.encode("it's"), [id('i'), id('t'), 261]);
  // ignore_merges: "Ġzebra" is in the vocab though no merge builds it; "zebra" without the space is bytes.
  assert.deepEqual(llama.encode(' zebra'), [276]);
  assert.deepEqual(llama.encode('zebra'), [...'zebra'].map(id));
  assert.deepEqual(llama.encode('<|begin_of_text|>Hi', { allowSpecial: true }), [277, id('H'), id('i')]);
  assert.equal(llama.decode([277, 265, 270, 279]), '<|begin_of_text|>Hello world<|eot_id|>');
});

test('Llama-3 style: \\s means Unicode White_Space as in Oniguruma (NEL is space, BOM is not)', () => {
  // "a NEL NEL b": \s+(?!\S) takes the first NEL, and [^\r\n\p{L}\p{N}]?\p{L}+ takes "NEL b": a | Âħ | Âħ b.
  // (With JavaScript's \s, " ?[^\s\p{L}\p{N}]+" would take both NELs together → ÂħÂħ 272.)
  assert.deepEqual(llama.encode('a\u0085\u0085b'), [id('a'), 271, 271, id('b')]);
  // "a BOM BOM b": BOM is not White_Space, so " ?[^\s\p{L}\p{N}]+" takes both → ï»¿ï»¿ 275.
  assert.deepEqual(llama.encode('a\ufeff\ufeffb'), [id('a'), 275, id('b')]);
  assert.equal(llama.decode(llama.encode('a\ufeff\ufeffb')), 'a\ufeff\ufeffb');
});

test('regex rewrite: (?i:…) groups, case-insensitive classes, Ruby line anchors', () => {
  const cuts = (pattern: string, text: string) => { const out: string[] = []; splitByPattern(text, compileOnigPattern(pattern, 'test'), 'Isolated', false, (p) => out.push(p)); return out; };
  assert.deepEqual(cuts("(?i:'s|'ll)|\\p{L}+", "HE'S SHE'LL"), ['HE', "'S", ' ', 'SHE', "'LL"]);
  assert.deepEqual(cuts('(?i:[a-c]+)', 'xAbCy'), ['x', 'AbC', 'y']);
  assert.deepEqual(cuts('(?i:a)b', 'AbAB'), ['Ab', 'AB'], 'the b outside the group stays case-sensitive');
  assert.deepEqual(cuts('^x', 'x\nx\rx'), ['x', '\n', 'x', '\rx'], '^ matches after \\n only');
  assert.deepEqual(cuts('\\s+', 'a\u0085b\ufeffc'), ['a', '\u0085', 'b\ufeffc']);
});

test('Split behaviours follow Hugging Face (pattern \\w+|[^\\w\\s]+ inverted, so the spaces are the matches)', () => {
  const re = compileOnigPattern('\\w+|[^\\w\\s]+', 'test');
  const cut = (behavior: SplitBehavior, invert = true) => { const out: string[] = []; splitByPattern('one, two three', re, behavior, invert, (p) => out.push(p)); return out; };
  assert.deepEqual(cut('Removed'), ['one', ',', 'two', 'three']);
  assert.deepEqual(cut('Isolated'), ['one', ',', ' ', 'two', ' ', 'three']);
  assert.deepEqual(cut('MergedWithPrevious'), ['one', ', ', 'two ', 'three']);
  assert.deepEqual(cut('MergedWithNext'), ['one', ',', ' two', ' three']);
  assert.deepEqual(cut('Contiguous'), ['one,', ' ', 'two', ' ', 'three']);
  assert.deepEqual(cut('Removed', false), [' ', ' '], 'not inverted: the words are removed');
});

test('added tokens: lstrip, rstrip, single_word; non-special ones are always recognised', () => {
  const json = structuredClone(llamaJson);
  const flags = { single_word: false, lstrip: false, rstrip: false, normalized: false, special: false };
  (json.added_tokens as object[]).push(
    { ...flags, id: 280, content: '<mask>', lstrip: true, special: true },
    { ...flags, id: 281, content: '[R]', rstrip: true },
    { ...flags, id: 282, content: 'cat', single_word: true },
  );
  const tok = loadTokenizer(json);
  assert.deepEqual(tok.encode('a <mask> b', { allowSpecial: true }), [id('a'), 280, SPACE, id('b')]);
  assert.deepEqual(tok.encode('a <mask> b').includes(280), false);
  assert.deepEqual(tok.encode('a [R]  b'), [id('a'), SPACE, 281, id('b')]);
  assert.deepEqual(tok.encode('cat concat cat.'), [282, ...tok.encode(' concat '), 282, id('.')]);
});

test('added tokens and Split string patterns with -, |, [, ], \\ and / load under the u flag and match literally', () => {
  const tricky = ['<|im-start|>', 'a-b', 'x|y', '[R]', 'c\\d', '/s/', '-', '(?:', '^$', '{2}'];
  for (const t of tricky) {
    const re = new RegExp(escapeRegExp(t), 'gu');
    assert.deepEqual(`..${t}..${t}`.match(re), [t, t], t);
  }
  const json = structuredClone(llamaJson);
  const flags = { single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  const added = tricky.filter((t) => t.length > 1); // '-' alone is in the byte vocabulary: an added token of it keeps the vocabulary's id
  added.forEach((content, i) => (json.added_tokens as object[]).push({ ...flags, id: 280 + i, content }));
  const tok = loadTokenizer(json);
  for (const [i, t] of added.entries()) assert.deepEqual(tok.encode(`a${t}a`, { allowSpecial: true }), [id('a'), 280 + i, id('a')], t);
  const split = structuredClone(llamaJson);
  split.pre_tokenizer = { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { String: 'a-b' }, behavior: 'Isolated', invert: false }, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] };
  const st = loadTokenizer(split, 'split.json');
  assert.equal(st.decode(st.encode('xa-by')), 'xa-by');
});

test('normalizer NFC: composed and decomposed spellings give the same ids', () => {
  const json = structuredClone(llamaJson);
  json.normalizer = { type: 'NFC' };
  const tok = loadTokenizer(json);
  assert.deepEqual(tok.encode('caf\u0065\u0301'), tok.encode('caf\u00e9'));
  assert.notDeepEqual(llama.encode('caf\u0065\u0301'), llama.encode('caf\u00e9'));
  json.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFD' }] };
  assert.deepEqual(loadTokenizer(json).encode('\u00e9'), llama.encode('e\u0301'));
});

test('merge order: the heap equals "merge the lowest-rank pair, leftmost first, until none" on random words', () => {
  const rand = uniformStream(77);
  const alphabet = 'abcde ';
  const docs = Array.from({ length: 300 }, () => Array.from({ length: 40 }, () => alphabet[Math.floor(rand() * alphabet.length)]).join(''));
  const tok = trainBpe(docs, 256 + 120);
  const merges = (tok.toJSON() as { model: { merges: string[] } }).model.merges;
  const rank = new Map(merges.map((m, r) => [m, r]));
  for (let trial = 0; trial < 300; trial++) {
    const word = Array.from({ length: 1 + Math.floor(rand() * 30) }, () => 'abcde'[Math.floor(rand() * 5)]).join('');
    const parts = [...word].map((c) => BYTE_CHARS[c.charCodeAt(0)]);
    for (;;) {
      let best = -1;
      for (let i = 0; i + 1 < parts.length; i++) {
        const r = rank.get(`${parts[i]} ${parts[i + 1]}`);
        if (r !== undefined && (best < 0 || r < rank.get(`${parts[best]} ${parts[best + 1]}`)!)) best = i;
      }
      if (best < 0) break;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
    }
    assert.deepEqual(tok.encode(word), parts.map((p) => tok.tokenToId(p)!), word);
  }
});

test('a tokenizer.json with unk_token and fuse_unk: bytes missing from the vocab become unk', () => {
  const json = structuredClone(gpt2Json);
  const model = json.model as { vocab: Record<string, number>; unk_token: string | null; fuse_unk: boolean };
  delete model.vocab[BYTE_CHARS[0xc3]]; // the lead byte of 'é'
  delete model.vocab[BYTE_CHARS[0xa9]];
  model.vocab['<unk>'] = 271;
  model.unk_token = '<unk>';
  assert.deepEqual(loadTokenizer(json).encode('é'), [271, 271]);
  model.fuse_unk = true;
  assert.deepEqual(loadTokenizer(json).encode('aé'), [id('a'), 271]);
  model.unk_token = null;
  assert.deepEqual(loadTokenizer(json).encode('aé'), [id('a')], 'no unk: the bytes are dropped, as in Hugging Face');
});

const realGpt2 = process.env.FON_GPT2_TOKENIZER_JSON;
test('real GPT-2 tokenizer.json: known ids', { skip: realGpt2 ? false : 'set FON_GPT2_TOKENIZER_JSON to a GPT-2 tokenizer.json' }, () => {
  const tok = parseTokenizer(readFileSync(realGpt2!, 'utf8'), realGpt2);
  assert.equal(tok.vocabSize, 50257);
  assert.equal(tok.eosId, 50256);
  assert.deepEqual(tok.encode('Hello world'), [15496, 995]);
  assert.deepEqual(tok.encode(' Hello world'), [18435, 995]);
  assert.deepEqual(tok.encode('<|endoftext|>'), [27, 91, 437, 1659, 5239, 91, 29]);
  assert.deepEqual(tok.encode('<|endoftext|>', { allowSpecial: true }), [50256]);
});

test('post-processors: the ids a text is given in front (TemplateProcessing, Roberta, ByteLevel, Sequence); encode never adds them', () => {
  const withPost = (post: unknown) => loadTokenizer({ ...llamaJson, post_processor: post }, 'post.json');
  const eos = llama.eosId;
  const eosName = llama.idToToken(eos)!;
  assert.deepEqual(llama.prefixIds, [277], 'the fixture\'s own template: <|begin_of_text|> A');
  assert.deepEqual(withPost(null).prefixIds, []);
  assert.deepEqual(gpt2.prefixIds, []);
  assert.deepEqual(trainBpe(['some text for a tiny tokenizer'], 260).prefixIds, [], 'FON\'s own tokenizers add nothing');
  const template = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: eosName, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: eosName, type_id: 0 } }],
    pair: [], special_tokens: { [eosName]: { id: eosName, ids: [eos], tokens: [eosName] } },
  };
  const t = withPost({ type: 'Sequence', processors: [{ type: 'ByteLevel', trim_offsets: false }, template] });
  assert.deepEqual(t.prefixIds, [eos], 'only the pieces before the sequence');
  assert.deepEqual(t.encode('hello'), llama.encode('hello'));
  assert.deepEqual(withPost({ type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 0] }).prefixIds, [0]);
  assert.throws(() => withPost({ ...template, single: [{ SpecialToken: { id: '<nope>', type_id: 0 } }] }),
    /post\.json: field "post_processor\.single\[0\]\.SpecialToken\.id" is string "<nope>"; expected a token of the vocabulary or of special_tokens/);
  assert.throws(() => withPost({ type: 'TemplateProcessing', single: 'A' }), /post_processor\.single.*expected an array of template pieces/);
});

test('a vocabulary that cannot back its own references is refused at load: an empty model.vocab, merges of missing tokens, prefix ids no token has', () => {
  const load = (json: object) => () => loadTokenizer(json, 'bad.json');
  const model = llamaJson.model as Record<string, unknown>;
  assert.throws(load({ ...llamaJson, model: { ...model, vocab: {} } }), (e: unknown) =>
    e instanceof ArgumentError && /^bad\.json: field "model\.vocab" is .*; expected at least one token/.test(e.message));
  assert.throws(load({ ...llamaJson, model: { ...model, vocab: { a: 0 }, merges: ['a b'] } }), (e: unknown) =>
    e instanceof ArgumentError && e.message === 'bad.json: model.merges[0] ("a", "b") needs the token "b", which is not in model.vocab');
  const post = llamaJson.post_processor as { special_tokens: Record<string, { ids: number[] }> };
  const listed = structuredClone(post);
  listed.special_tokens['<|begin_of_text|>'].ids = [9999];
  assert.throws(load({ ...llamaJson, post_processor: listed }), (e: unknown) =>
    e instanceof ArgumentError && /^bad\.json: post_processor puts the id 9999 before every text, but no token of model\.vocab or added_tokens has that id \(the vocabulary holds 280 ids\)$/.test(e.message));
  assert.throws(load({ ...llamaJson, post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', -1] } }), /post_processor puts the id -1 before every text/);
});
