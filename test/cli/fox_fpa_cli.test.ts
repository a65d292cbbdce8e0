/**
 * `fon train`, `info`, `generate`, `eval` and `export` with FPA and FoX layers, as a user runs them
 * (child processes): a few training steps on a small text with a config whose attention is "fpa"
 * (and a mix with fox and full layers), the KV-cache bytes `fon info` reports (state included),
 * greedy generation through the cache, evaluation, and the Hugging Face export's refusal.
 * Run: node --import tsx --test test/cli/fox_fpa_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fon, writeSentenceCorpus } from './fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-foxfpa-cli-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.'], 300, 5);


function train(name: string, attention: unknown): string {
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 32, attention }));
  const out = join(dir, name);
  const t = fon('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '4', '--batch', '2', '--backend', 'cpu',
    '--eval-every', '0', '--checkpoint-every', '0', '--final-eval-windows', '2', '--out', out);
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /^validation: perplexity \d+\.\d+/m);
  return out;
}

test('fon train → info → generate → eval with "attention": "fpa"', () => {
  const out = train('fpa', 'fpa');
  const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint;
  const saved = JSON.parse(readFileSync(join(out, latest, 'config.json'), 'utf8'));
  assert.deepEqual(saved.attention, [{ type: 'fpa', walk: 'fox', outputGate: false }]);
  assert.equal(saved.positions, 'none', 'NoPE by default');

  const info = fon('info', '--model', out, '--json');
  assert.equal(info.code, 0, info.err);
  const i = JSON.parse(info.out);
  // Per layer: k and v (1 KV head × 8) at the element size, plus φ, ℓ and W per KV head in f32.
  assert.deepEqual(i.kvCacheBytesPerToken, { f32: 2 * (2 * 8 * 4 + 3 * 4), f16: 2 * (2 * 8 * 2 + 3 * 4) });

  const g1 = fon('generate', '--model', out, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '10', '--backend', 'cpu');
  const g2 = fon('generate', '--model', out, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '10', '--backend', 'cpu');
  assert.equal(g1.code, 0, g1.err);
  assert.equal(g1.out, g2.out, 'greedy is deterministic');

  const e = fon('eval', '--model', out, '--file', corpus, '--json', '--backend', 'cpu');
  assert.equal(e.code, 0, e.err);
  const r = JSON.parse(e.out);
  assert.ok(Number.isFinite(r.loss) && r.loss > 0 && r.loss < Math.log(257) + 1, `loss ${r.loss}`);

  const x = fon('export', '--model', out, '--format', 'hf', '--out', join(dir, 'hf'));
  assert.equal(x.code, 2, x.err);
  assert.match(x.err, /"fpa" layers \(First Passage Attention\) have no Hugging Face counterpart/);
  assert.doesNotMatch(x.err, /\n\s+at /, 'no stack trace');
  assert.ok(!existsSync(join(dir, 'hf', 'model.safetensors')), 'nothing written');
});

test('fon train → generate with a fox layer (output gate) and an fpa layer (tanh walk)', () => {
  const out = train('mix', [{ type: 'fox', outputGate: true }, { type: 'fpa', walk: 'tanh' }]);
  const g = fon('generate', '--model', out, '--prompt', 'A dog', '--temperature', '0', '--max-tokens', '6', '--backend', 'cpu');
  assert.equal(g.code, 0, g.err);
});
