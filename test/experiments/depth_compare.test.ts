/**
 * experiments/depth_compare.ts: the arms' configs (equal parameters, the depth entry of each), the
 * analytic overhead count against a hand count, and the script end to end with tiny settings on
 * the cpu backend, writing the JSON it documents.
 * Run: node --import tsx --test test/experiments/depth_compare.test.ts
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { ArgumentError } from '../../src/errors.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { armConfig, parseArms } from '../../experiments/depth_compare.ts';
import { depthOverhead, modelMacsPerToken } from '../../experiments/lib/depth_flops.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-depth-compare-'));
after(() => rmSync(dir, { recursive: true, force: true }));

it('arms: vanilla has no depth, depth the stride and window, v0_mix its mode; a bad arm is named', () => {
  const base = parseModelConfig({ vocabSize: 257, nLayers: 4, nHeads: 4, nKvHeads: 2 });
  assert.ok(!('depth' in armConfig('vanilla', base, 2, 0)));
  assert.deepEqual(armConfig('depth', base, 2, 1).depth, { stride: 2, window: 1 });
  assert.deepEqual(armConfig('v0_mix', base, 2, 1).depth, { mode: 'v0_mix' });
  assert.throws(() => parseArms('vanilla,dense'), (e: Error) => e instanceof ArgumentError && /'dense' is not one of vanilla, depth, v0_mix/.test(e.message));
});

it('overhead: the mix and the model counted by hand for a 2-layer GQA model', () => {
  // C = 16, H = 4, Hkv = 2, D = 8, F = 24, V = 50, T = 9 (mean causal length 5), SwiGLU, full attention.
  const c = parseModelConfig({ vocabSize: 50, dModel: 16, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16, depth: { stride: 1 } });
  const perLayer = 16 * (32 + 2 * 16) + 32 * 16 + 2 * 32 * 5 + 3 * 16 * 24;
  assert.equal(modelMacsPerToken(c, 9), 16 * 50 + 2 * perLayer);
  // Layer 1 only (C(1) = {0}): per KV head (1 + 1)·8·2 + 2·8.
  const o = depthOverhead(c, 9);
  assert.equal(o.mixMacs, 2 * (2 * 8 * 2 + 2 * 8));
  assert.equal(o.fraction, o.mixMacs / o.modelMacs);
});

it('depth_compare runs end to end on the cpu and writes its JSON', () => {
  const json = join(dir, 'depth_compare.json');
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/depth_compare.ts', '--backend', 'cpu', '--seeds', '1', '--steps', '2', '--batch', '2',
    '--context', '32', '--layers', '3', '--d-model', '32', '--heads', '2', '--kv-heads', '1', '--head-dim', '8', '--mlp-hidden', '32', '--eval-windows', '2', '--json', json],
  { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /depth \/ vanilla perplexity: seed 1: \d+\.\d+/);
  const j = JSON.parse(readFileSync(json, 'utf8'));
  assert.equal(j.experiment, 'depth_compare');
  assert.deepEqual(j.results.map((x: { arm: string }) => x.arm), ['vanilla', 'depth', 'v0_mix']);
  const params = new Set(j.results.map((x: { parameters: number }) => x.parameters));
  assert.equal(params.size, 1, 'equal parameters in every arm');
  for (const x of j.results) {
    assert.equal(x.tokens, 64, 'two windows of 32');
    assert.ok(x.perplexity > 1 && Number.isFinite(x.perplexity) && x.trainTokensPerSecond > 0, JSON.stringify(x));
  }
  assert.ok(Math.abs(j.depthOverVanilla[0].ratio - j.results[1].perplexity / j.results[0].perplexity) < 1e-12);
  assert.equal(j.overhead[0].mixMacs, 0);
  assert.ok(j.overhead[1].mixMacs > j.overhead[2].mixMacs && j.overhead[2].mixMacs > 0);
});
