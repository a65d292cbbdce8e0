/**
 * `fon tokenize` as a user runs it (child processes): ids of the Qwen3 fixture folder against the
 * `tokenizers` reference ids, --json and --no-special, a FON checkpoint (output directory and step
 * directory), and bad input (exit code 2, one line naming the problem, no stack trace).
 *
 *   node --import tsx --test test/cli/tokenize_cli.test.ts
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeCheckpointDir } from '../../src/io/checkpoint_dir.ts';
import { parseTokenizer, trainBpe } from '../../src/io/tokenizer/tokenizer.ts';
import { fon } from './fon_process.ts';

const QWEN3 = join(import.meta.dirname, '../fixtures/hf/qwen3');
const dir = mkdtempSync(join(tmpdir(), 'fon-tokenize-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const reference = JSON.parse(readFileSync(join(QWEN3, 'tokenizer_reference.json'), 'utf8')) as { strings: string[]; ids: number[][] };
const qwen3 = parseTokenizer(readFileSync(join(QWEN3, 'tokenizer.json'), 'utf8'));


function assertCleanError(r: { code: number | null; out: string; err: string }, re: RegExp) {
  assert.equal(r.code, 2, `exit code (stderr: ${r.err})`);
  assert.match(r.err, re);
  assert.equal(r.err.trim().split('\n').length, 1, `one line: ${r.err}`);
  assert.equal(r.out, '', 'nothing on stdout');
}

const refIds = (s: string) => {
  const i = reference.strings.indexOf(s);
  assert.ok(i >= 0, `${JSON.stringify(s)} is a reference string`);
  return reference.ids[i];
};

test('fon tokenize on a Hugging Face folder prints the ids of tokenizers.encode(text, add_special_tokens=False)', () => {
  for (const s of ['<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n', '<think>reasoning</think> answer',
    'emoji 🙂🚀👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽', '  two  spaces   three\t\ttabs\n\n\nnewlines']) {
    const r = fon('tokenize', '--model', QWEN3, '--text', s);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, refIds(s).join(' ') + '\n', JSON.stringify(s));
  }
});

test('fon tokenize --json: ids and their tokens; --no-special: special spellings are plain text', () => {
  const s = '<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n';
  const r = fon('tokenize', '--model', QWEN3, '--text', s, '--json');
  assert.equal(r.code, 0, r.err);
  const j = JSON.parse(r.out) as { ids: number[]; tokens: string[] };
  assert.deepEqual(Object.keys(j), ['ids', 'tokens']);
  assert.deepEqual(j.ids, refIds(s));
  assert.equal(j.tokens[0], '<|im_start|>');
  assert.deepEqual(j.tokens, j.ids.map((id) => qwen3.idToToken(id)));
  assert.ok(j.tokens.includes('Ċ'), 'byte-level spelling: a newline is Ċ');

  const plain = fon('tokenize', '--model', QWEN3, '--text', s, '--no-special');
  assert.equal(plain.code, 0, plain.err);
  const ids = plain.out.trim().split(' ').map(Number);
  assert.deepEqual(ids, qwen3.encode(s));
  assert.ok(!ids.includes(qwen3.tokenToId('<|im_start|>')!) && !ids.includes(qwen3.tokenToId('<|im_end|>')!), `${ids}`);
  assert.equal(qwen3.decode(ids), s);
  // <think> is an added token but not a special one: it stays one id.
  assert.deepEqual(fon('tokenize', '--model', QWEN3, '--text', '<think>', '--no-special').out, `${qwen3.tokenToId('<think>')}\n`);

  const empty = fon('tokenize', '--model', QWEN3, '--text', '', '--json');
  assert.equal(empty.code, 0, empty.err);
  assert.deepEqual(JSON.parse(empty.out), { ids: [], tokens: [] });
});

test('fon tokenize on a FON checkpoint: the output directory (latest.json) and the step directory', async () => {
  const tok = trainBpe(['The cat sat on the mat. The dog sat on the log. ', 'Cats and dogs, 1234 of them: émigré café.'], 300);
  const out = join(dir, 'run');
  await writeCheckpointDir(out, 'step-000002', { 'config.json': '{}\n', 'tokenizer.json': JSON.stringify(tok.toJSON()) });
  const text = 'The cat sat<|endoftext|> on 1234 cafés';
  const expected = tok.encode(text, { allowSpecial: true });
  assert.ok(expected.includes(tok.eosId));
  for (const model of [out, join(out, 'step-000002')]) {
    const r = fon('tokenize', '--model', model, '--text', text);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, expected.join(' ') + '\n', model);
  }
  assert.equal(fon('tokenize', '--model', out, '--text', text, '--no-special').out, tok.encode(text).join(' ') + '\n');
  writeFileSync(join(out, 'latest.json'), JSON.stringify({ checkpoint: 'step-000009' }));
  assertCleanError(fon('tokenize', '--model', out, '--text', 'x'), /names checkpoint 'step-000009', but .*step-000009 is not a directory/);
});

test('fon tokenize: missing flags, a folder without tokenizer.json, corrupt files: one line, exit 2', () => {
  assertCleanError(fon('tokenize', '--text', 'x'), /^fon: tokenize: --model is required/);
  assertCleanError(fon('tokenize', '--model', QWEN3), /^fon: tokenize: --text is required/);
  assertCleanError(fon('tokenize', '--model', join(dir, 'nowhere'), '--text', 'x'), /--model .*nowhere: no such directory/);
  const bare = join(dir, 'bare');
  mkdirSync(bare);
  assertCleanError(fon('tokenize', '--model', bare, '--text', 'x'), new RegExp(`^fon: no tokenizer\\.json in ${bare} \\(looked for ${bare}/tokenizer\\.json\\)$`, 'm'));

  const corrupt = join(dir, 'corrupt');
  mkdirSync(corrupt);
  writeFileSync(join(corrupt, 'tokenizer.json'), readFileSync(join(QWEN3, 'tokenizer.json'), 'utf8').slice(0, 5000));
  assertCleanError(fon('tokenize', '--model', corrupt, '--text', 'x'), /^fon: .*corrupt\/tokenizer\.json: not valid JSON/);
  writeFileSync(join(corrupt, 'tokenizer.json'), JSON.stringify({ model: { type: 'WordPiece' } }));
  assertCleanError(fon('tokenize', '--model', corrupt, '--text', 'x'), /corrupt\/tokenizer\.json: model type "WordPiece" is not supported; FON reads BPE/);

  const badConfig = join(dir, 'bad-config');
  cpSync(QWEN3, badConfig, { recursive: true });
  writeFileSync(join(badConfig, 'tokenizer_config.json'), '{"eos_token": ');
  assertCleanError(fon('tokenize', '--model', badConfig, '--text', 'x'), /bad-config\/tokenizer_config\.json: not valid JSON/);
  writeFileSync(join(badConfig, 'tokenizer_config.json'), '{"eos_token": 7}');
  assertCleanError(fon('tokenize', '--model', badConfig, '--text', 'x'), /bad-config\/tokenizer_config\.json: field "eos_token" is 7; expected a string/);
  // An eos the tokenizer lacks is ignored (as loading the model ignores it): the ids do not depend on it.
  writeFileSync(join(badConfig, 'tokenizer_config.json'), '{"eos_token": "<|eot|>"}');
  const r = fon('tokenize', '--model', badConfig, '--text', 'Hello world');
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out.trim(), fon('tokenize', '--model', QWEN3, '--text', 'Hello world').out.trim());
});

test('fon tokenize --help, and fon --help lists it', () => {
  const h = fon('tokenize', '--help');
  assert.equal(h.code, 0);
  assert.match(h.out, /^usage: fon tokenize --model DIR --text TEXT \[--json\] \[--no-special\]/);
  assert.match(fon('--help').out, /^ {2}tokenize {3}/m);
});
