/**
 * `fon generate` with the organs, as a user runs it (child processes): a model trained with organs
 * decodes draft–revise by default and `--stats` prints the acceptance, tokens per verify pass and
 * the plain-decoding speed of the same model (outputs identical under greedy); `--no-draft-revise`
 * turns it off; `--draft-layers D` drafts with any model; bad values exit 2 naming them.
 * Run: node --import tsx --test test/cli/draft_revise_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fon, writeSentenceCorpus } from './fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-draft-revise-cli-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.'], 200, 5);
const train = (name: string, model: object) => {
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 48, ...model }));
  const out = join(dir, name);
  const t = fon('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '6', '--batch', '4', '--backend', 'cpu',
    '--eval-every', '0', '--checkpoint-every', '0', '--final-eval-windows', '1', '--out', out);
  assert.equal(t.code, 0, t.err);
  return out;
};
const organs = train('organs', { organs: { draftLayers: 1 }, attention: [{ type: 'local', window: 8 }, { type: 'fpa', evict: true }, { type: 'full' }] });
const plain = train('plain', {});
const GEN = ['--prompt', 'The cat', '--temperature', '0', '--max-tokens', '16', '--backend', 'cpu'];

test('fon generate: a model with organs drafts by default; --stats prints acceptance, tokens per pass, plain decoding and identical outputs', () => {
  const r = fon('generate', '--model', organs, ...GEN, '--stats');
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /^draft–revise \(draft layers 0 … 0 of 3\): acceptance \d+\.\d% \(\d+ of \d+ drafted\), \d+\.\d\d tokens per verify pass over \d+ passes$/m);
  assert.match(r.err, /^plain decoding of the same model: \d+\.\d tokens\/s; draft–revise \d+\.\d tokens\/s \(\d+\.\d\d×\); outputs identical$/m);
  const off = fon('generate', '--model', organs, ...GEN, '--stats', '--no-draft-revise');
  assert.equal(off.code, 0, off.err);
  assert.doesNotMatch(off.err, /draft–revise/);
  assert.equal(off.out, r.out, 'the same text either way');
});

test('fon generate --draft-layers D drafts with a model without organs; --gamma and --fixed-gamma', () => {
  const r = fon('generate', '--model', plain, ...GEN, '--stats', '--draft-layers', '2', '--gamma', '2', '--fixed-gamma');
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /draft–revise \(draft layers 0 … 1 of 3\)/);
  assert.match(r.err, /outputs identical/);
  assert.equal(r.out, fon('generate', '--model', plain, ...GEN).out);
  assert.equal(fon('generate', '--model', plain, ...GEN, '--page-rows', '256').out, r.out, '--page-rows: the same text');
});

test('fon generate: bad draft–revise flags exit 2 naming the value', () => {
  const cases: [string[], RegExp][] = [
    [['--draft-revise'], /--draft-revise needs a model with organs or --draft-layers D \(an integer in \[1, 2\]/],
    [['--draft-layers', '3'], /--draft-layers = 3: expected an integer in \[1, 2\]/],
    [['--draft-layers', '0'], /--draft-layers = 0: expected an integer in \[1, 2\]/],
    [['--draft-layers', '1', '--gamma', '0'], /--gamma "0": expected an integer ≥ 1/],
    [['--draft-layers', '1', '--draft-window', '0'], /--draft-window "0": expected an integer ≥ 1/],
    [['--draft-revise', '--no-draft-revise'], /--draft-revise and --no-draft-revise exclude each other/],
    [['--page-rows', '100'], /^fon: generate: --page-rows 100: expected a positive multiple of 128 \(the decode kernels' key block; a page holds whole blocks\)\n$/],
    [['--page-rows', 'x'], /--page-rows "x"/],
    [['--gamma', '3'], /^fon: generate: --gamma tunes draft–revise decoding, which is off here \(the model has no organs\); add --draft-layers D or drop it\n$/],
    [['--no-draft-revise', '--fixed-gamma'], /--fixed-gamma tunes draft–revise decoding, which is off here \(--no-draft-revise\); drop it/],
  ];
  for (const [flags, msg] of cases) {
    const r = fon('generate', '--model', plain, ...GEN, ...flags);
    assert.equal(r.code, 2, `${flags.join(' ')}: ${r.err}`);
    assert.match(r.err, msg);
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
  }
});
