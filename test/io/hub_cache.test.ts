/**
 * Models named org/name from the local Hugging Face cache (io/hf/hub_cache.ts): HF_HUB_CACHE, else
 * HF_HOME/hub; refs/main's snapshot, or the only one; a name the cache lacks, or a broken ref, is a
 * CheckpointError saying where it looked (nothing is downloaded); `fon generate --model org/name`
 * loads it; a real folder of that name wins.
 * Run: node --import tsx --test test/io/hub_cache.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { hubCacheDir, isHubName, resolveHubModel } from '../../src/io/hf/hub_cache.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { CheckpointError } from '../../src/io/checkpoint_dir.ts';
import { spawnSync } from 'node:child_process';
import { FON, fon as fonCli } from '../cli/fon_process.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');
const cpu = await fon.initBackend('cpu');

/** A cache holding acme/tiny (the qwen3 fixture) at commit c0ffee, refs/main pointing at it. */
function cache(root: string, withRef = true): string {
  const snap = join(root, 'models--acme--tiny', 'snapshots', 'c0ffee');
  mkdirSync(snap, { recursive: true });
  for (const f of readdirSync(FIXTURE)) symlinkSync(join(FIXTURE, f), join(snap, f));
  if (withRef) { mkdirSync(join(root, 'models--acme--tiny', 'refs')); writeFileSync(join(root, 'models--acme--tiny', 'refs', 'main'), 'c0ffee\n'); }
  return snap;
}

test('the cache folder: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub; names', () => {
  assert.equal(hubCacheDir({ HF_HUB_CACHE: '/a', HF_HOME: '/b' }), '/a');
  assert.equal(hubCacheDir({ HF_HOME: '/b' }), join('/b', 'hub'));
  assert.ok(hubCacheDir({}).endsWith(join('.cache', 'huggingface', 'hub')));
  for (const ok of ['Qwen/Qwen3-0.6B', 'meta-llama/Llama-3.2-1B', 'a/b.c']) assert.ok(isHubName(ok), ok);
  for (const bad of ['runs/tiny/step-3', '/abs/path', './x/y', '../x', 'x', 'a/..']) assert.ok(!isHubName(bad), bad);
});

test('resolveHubModel: refs/main\'s snapshot, the only snapshot without a ref; missing names and broken refs named', async () => {
  const root = mkdtempSync(join(tmpdir(), 'fon-hub-'));
  try {
    const snap = cache(join(root, 'hub'));
    assert.equal(await resolveHubModel('acme/tiny', { HF_HOME: root }), snap);
    const snap2 = cache(join(root, 'noref'), false);
    assert.equal(await resolveHubModel('acme/tiny', { HF_HUB_CACHE: join(root, 'noref') }), snap2);
    await assert.rejects(resolveHubModel('acme/huge', { HF_HOME: root }), (e) => e instanceof CheckpointError
      && e.message === `no folder acme/huge, and the Hugging Face cache has no acme/huge (looked for ${join(root, 'hub', 'models--acme--huge')}); FON never downloads: fetch it first (huggingface-cli download acme/huge) or give a folder`);
    writeFileSync(join(root, 'hub', 'models--acme--tiny', 'refs', 'main'), 'deadbeef');
    await assert.rejects(resolveHubModel('acme/tiny', { HF_HOME: root }), /refs\/main names commit "deadbeef", but .*snapshots\/deadbeef is not a folder/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('loadModel and fon generate take org/name from the cache', async () => {
  const root = mkdtempSync(join(tmpdir(), 'fon-hub-'));
  const saved = process.env.HF_HUB_CACHE;
  try {
    cache(root);
    process.env.HF_HUB_CACHE = root;
    const m = await loadModel('acme/tiny', cpu);
    assert.equal(m.architecture, 'qwen3');
    m.model.dispose();
    const viaCache = spawnSync(process.execPath, [FON, 'generate', '--model', 'acme/tiny', '--prompt', 'The', '--max-tokens', '4', '--temperature', '0', '--backend', 'cpu'], { encoding: 'utf8', env: { ...process.env, HF_HUB_CACHE: root } });
    const direct = fonCli('generate', '--model', FIXTURE, '--prompt', 'The', '--max-tokens', '4', '--temperature', '0', '--backend', 'cpu');
    assert.equal(viaCache.status, 0, viaCache.stderr);
    assert.equal(viaCache.stdout, direct.out);
    const missing = spawnSync(process.execPath, [FON, 'generate', '--model', 'acme/none', '--prompt', 'x', '--backend', 'cpu'], { encoding: 'utf8', env: { ...process.env, HF_HUB_CACHE: root } });
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /^fon: no folder acme\/none, and the Hugging Face cache has no acme\/none/m);
  } finally {
    if (saved === undefined) delete process.env.HF_HUB_CACHE; else process.env.HF_HUB_CACHE = saved;
    rmSync(root, { recursive: true, force: true });
  }
});
