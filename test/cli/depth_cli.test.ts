/**
 * `fon train`, `info`, `generate`, `eval` and `export` with Depth-Attention ("depth" in the config
 * file), as a user runs them (child processes): a few training steps of a tiny 3-layer model, the
 * saved config, `fon info`'s KV-cache bytes with and without depth (equal), greedy generation through
 * the cache, evaluation, a bad depth entry's error, and the Hugging Face export's refusal.
 * Run: node --import tsx --test test/cli/depth_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fon, writeSentenceCorpus } from './fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-depth-cli-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.'], 300, 5);


const MODEL = { dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 32 };

test('fon train → info → generate → eval with "depth": {"stride": 1}; export refuses it', () => {
  const config = join(dir, 'depth.json');
  writeFileSync(config, JSON.stringify({ ...MODEL, attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa' }], depth: { stride: 1 } }));
  const out = join(dir, 'depth');
  const t = fon('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '4', '--batch', '2', '--backend', 'cpu',
    '--eval-every', '0', '--checkpoint-every', '0', '--final-eval-windows', '2', '--out', out);
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /^validation: perplexity \d+\.\d+/m);
  const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint;
  assert.deepEqual(JSON.parse(readFileSync(join(out, latest, 'config.json'), 'utf8')).depth, { stride: 1, window: 0 });

  const info = fon('info', '--model', out, '--json');
  assert.equal(info.code, 0, info.err);
  const i = JSON.parse(info.out);
  assert.deepEqual(i.depth.candidates, [[], [0], [0, 1]]);
  assert.deepEqual(i.depth.kvCacheBytesPerTokenWithout, i.kvCacheBytesPerToken);
  const text = fon('info', '--model', out);
  assert.match(text.out, /^Depth-Attention: stride 1, window 0; candidates 0:\{\} 1:\{0\} 2:\{0,1\}$/m);
  assert.match(text.out, new RegExp(`^KV cache per token without Depth-Attention: ${i.kvCacheBytesPerToken.f32} bytes \\(f32\\), ${i.kvCacheBytesPerToken.f16} bytes \\(f16\\): the same$`, 'm'));

  const g = fon('generate', '--model', out, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '8', '--backend', 'cpu');
  assert.equal(g.code, 0, g.err);
  const e = fon('eval', '--model', out, '--file', corpus, '--json', '--backend', 'cpu');
  assert.equal(e.code, 0, e.err);
  const r = JSON.parse(e.out);
  assert.ok(Number.isFinite(r.loss) && r.loss > 0 && r.loss < Math.log(257) + 1, `loss ${r.loss}`);

  const x = fon('export', '--model', out, '--format', 'hf', '--out', join(dir, 'hf'));
  assert.equal(x.code, 2, x.err);
  assert.match(x.err, /'depth' = \{"stride":1,"window":0\}/);
  assert.ok(!existsSync(join(dir, 'hf', 'model.safetensors')), 'nothing written');
});

test('fon train with a bad depth entry exits non-zero naming the key, without a stack trace', () => {
  const config = join(dir, 'bad.json');
  writeFileSync(config, JSON.stringify({ ...MODEL, depth: { stride: 0 } }));
  const t = fon('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '1', '--backend', 'cpu', '--out', join(dir, 'bad'));
  assert.notEqual(t.code, 0);
  assert.match(t.err, /'depth': 'stride' = 0: expected an integer ≥ 1/);
  assert.doesNotMatch(t.err, /\n\s+at /, 'no stack trace');
});
