/**
 * `fon train` and `fon eval` with organs ("organs" in the config file), as a user runs them (child
 * processes): a few steps of a tiny 3-layer model with layer dropout log the exit head's CE and the
 * KL, the final evaluation prints the exit head's line after the unchanged validation line, a run
 * stopped and resumed follows the same curve (the layer-dropout masks too), `fon eval` prints and
 * --json's the exit figures, and --draft-layers out of [1, L−1] exits 2 naming the value and range.
 * Run: node --import tsx --test test/cli/organs_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fon, writeSentenceCorpus } from './fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-organs-cli-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.'], 200, 5);
const config = join(dir, 'model.json');
writeFileSync(config, JSON.stringify({ dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 32, organs: { draftLayers: 1, layerDropout: 0.5 } }));
const TRAIN = ['train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '4', '--batch', '2', '--backend', 'cpu',
  '--eval-every', '2', '--eval-windows', '2', '--checkpoint-every', '0', '--final-eval-windows', '2'];
const run = join(dir, 'run');

function logOf(out: string): Record<string, number>[] {
  return readFileSync(join(out, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
}

test('fon train with organs: the log has the exit CE and the KL per step; the exit head\'s validation line follows the usual one', () => {
  const t = fon(...TRAIN, '--out', run);
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /^validation: perplexity \d+\.\d+, bits per byte \d+\.\d+ \(\d+ tokens, \d+ bytes\)\n/m);
  assert.match(t.out, /^validation: perplexity .*\nvalidation, exit head after 1 of 3 layers: perplexity \d+\.\d+, bits per byte \d+\.\d+$/m);
  const log = logOf(run);
  const steps = log.filter((e) => 'loss' in e);
  assert.deepEqual(steps.map((e) => e.step), [1, 2, 3, 4]);
  for (const e of steps) {
    assert.ok(Number.isFinite(e.exitLoss) && e.exitLoss > 0, `step ${e.step}: exitLoss ${e.exitLoss}`);
    assert.ok(Number.isFinite(e.distill) && e.distill >= 0, `step ${e.step}: distill ${e.distill}`);
    assert.notEqual(e.exitLoss, e.loss);
  }
  const val = log.filter((e) => 'valLoss' in e);
  assert.deepEqual(val.map((e) => e.step), [2, 4]);
  for (const e of val) assert.ok(Number.isFinite(e.valExitLoss) && Number.isFinite(e.valExitBpb), JSON.stringify(e));
  const latest = JSON.parse(readFileSync(join(run, 'latest.json'), 'utf8')).checkpoint;
  assert.equal(JSON.parse(readFileSync(join(run, latest, 'config.json'), 'utf8')).organs.draftLayers, 1);
});

test('fon train with organs and layer dropout: a run stopped and resumed follows the uninterrupted one exactly', () => {
  const b = join(dir, 'resumed');
  const stopped = fon(...TRAIN, '--out', b, '--stop-after', '2');
  assert.equal(stopped.code, 130, stopped.err);
  const resumed = fon('train', '--out', b, '--resume', '--backend', 'cpu', '--final-eval-windows', '2');
  assert.equal(resumed.code, 0, resumed.err);
  assert.equal(readFileSync(join(b, 'log.jsonl'), 'utf8'), readFileSync(join(run, 'log.jsonl'), 'utf8'));
});

test('fon eval of a model with organs: both perplexities, --json with the exit figures, --draft-layers in [1, L−1]', () => {
  const text = fon('eval', '--model', run, '--file', corpus, '--backend', 'cpu');
  assert.equal(text.code, 0, text.err);
  assert.match(text.out, /: perplexity \d+\.\d+, bits per byte \d+\.\d+, loss \d+\.\d+ nats\/token over \d+ tokens/);
  assert.match(text.out, /: exit head after 1 of 3 layers: perplexity \d+\.\d+, bits per byte \d+\.\d+, loss \d+\.\d+ nats\/token$/m);
  const j = JSON.parse(fon('eval', '--model', run, '--file', corpus, '--backend', 'cpu', '--json').out);
  assert.equal(j.exit.draftLayers, 1);
  assert.ok(Math.abs(j.exit.perplexity - Math.exp(j.exit.loss)) < 1e-9 * j.exit.perplexity);
  assert.ok(Math.abs(j.exit.bitsPerByte - (j.exit.loss * j.tokens) / Math.LN2 / j.bytes) < 1e-9);
  assert.notEqual(j.exit.loss, j.loss);
  const d2 = JSON.parse(fon('eval', '--model', run, '--file', corpus, '--backend', 'cpu', '--json', '--draft-layers', '2').out);
  assert.equal(d2.exit.draftLayers, 2);
  assert.equal(d2.loss, j.loss, 'the full figures do not depend on where the exit head reads');
  assert.notEqual(d2.exit.loss, j.exit.loss);
  for (const bad of ['0', '3']) {
    const r = fon('eval', '--model', run, '--file', corpus, '--backend', 'cpu', '--draft-layers', bad);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, new RegExp(`eval: --draft-layers = ${bad}: expected an integer in \\[1, 2\\]`));
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
    assert.equal(r.out, '', 'nothing scored');
  }
  const nan = fon('eval', '--model', run, '--draft-layers', 'two');
  assert.equal(nan.code, 2);
  assert.match(nan.err, /eval: --draft-layers "two": expected an integer/);
});
