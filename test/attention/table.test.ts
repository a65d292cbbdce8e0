/**
 * The mechanism table (attention/table.ts, DESIGN.md "a mechanism is one self-describing unit"):
 * every entry filed under its own type, its options parsed and refused by its own def, config,
 * cache, `fon info` and `fon export` reading it; and the layering it is for — nothing in
 * src/attention imports model/, infer/, io/ or cli/, and nothing outside it switches on a
 * mechanism's name.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { buildMechanism, describeMechanism, MECHANISMS, mechanismCache, mechanismHfExport, parseLayerAttention } from '../../src/attention/table.ts';
import { layoutBytesPerToken } from '../../src/attention/mechanism.ts';
import { kvBytesPerToken, modelDims, parseModelConfig } from '../../src/model/config.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';

const cpu = await fon.initBackend('cpu');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => { const p = join(dir, f); return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : []; });
}

test('every table entry is filed under its own type and parses its bare entry', () => {
  for (const [key, def] of Object.entries(MECHANISMS)) {
    assert.equal(def.type, key);
    assert.ok(def.summary.length > 10, `${key} has a summary`);
    if (key !== 'local') assert.equal(parseLayerAttention({ type: key }, 'at').type, key);
  }
  assert.deepEqual(parseLayerAttention('full', 'at'), { type: 'full' });
});

test('options are checked by their mechanism: unknown keys, bad values, the list of types', () => {
  assert.throws(() => parseLayerAttention({ type: 'mamba' }, 'config: attention[1]'), new RegExp(`config: attention\\[1\\]: 'type' = "mamba": expected one of ${Object.keys(MECHANISMS).map((k) => `"${k}"`).join(', ')}`));
  assert.throws(() => parseLayerAttention({ type: 'full', window: 3 }, 'c'), /c: unknown key 'window' for attention type "full"$/);
  assert.throws(() => parseLayerAttention({ type: 'local', window: 0 }, 'c'), /c: 'window' = 0: expected a positive integer/);
  assert.throws(() => parseLayerAttention({ type: 'fox', outputGate: 1 }, 'c'), /c: 'outputGate' = 1: expected true or false/);
  assert.throws(() => parseLayerAttention({ type: 'fpa', walk: 'up' }, 'c'), /c: 'walk' = "up": expected one of "fox", "linear", "tanh"/);
  assert.throws(() => parseLayerAttention({ type: 'fpa', evict: { tau: 1, colour: 2 } }, 'c'), /c: unknown key 'evict\.colour'; expected tau, every, deadFraction/);
  assert.throws(() => parseModelConfig({ attention: { type: 'fpa', stack: true } }), fon.ConfigError);
});

test('config, cache and fon info read the table: NoPE default, cache layout and bytes, labels', () => {
  const cfg = parseModelConfig({ dModel: 16, nLayers: 4, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, attention: [{ type: 'full' }, { type: 'local', window: 4 }, { type: 'fox', tokenShift: true }, { type: 'fpa', evict: true }] });
  assert.equal(cfg.positions, 'none', 'a fox or fpa layer makes positions NoPE by default');
  assert.equal(parseModelConfig({ attention: { type: 'local', window: 4 } }).positions, 'rope');
  const dims = modelDims(cfg);
  const sum = cfg.attention.reduce((n, a) => n + layoutBytesPerToken(mechanismCache(a, dims), dims, 2), 0);
  assert.equal(kvBytesPerToken(cfg, 2), sum);
  assert.equal(sum, 4 * 2 * 8 * 2 + 4 * (2 + 3));
  const cache = new KvCache(cfg, 1, 8, cpu);
  assert.deepEqual(cache.layers.map((l) => Object.keys(l.state ?? {})), [[], [], ['c'], ['phi', 'level', 'walk']]);
  assert.deepEqual(cache.layers.map((l) => Object.keys(l.side ?? {})), [[], [], ['shift'], ['fpa']]);
  cache.dispose();
  assert.deepEqual(cfg.attention.map((a) => describeMechanism(a).label), ['full', 'local(window=4)', 'fox(tokenShift)', 'fpa(walk=fox, evict τ=16)']);
  assert.deepEqual(cfg.attention.map((a) => mechanismHfExport(a)), [{ kind: 'full' }, { kind: 'sliding', window: 4 }, { unsupported: '"fox" layers (forget-gate attention) have no Hugging Face counterpart' }, { unsupported: '"fpa" layers (First Passage Attention) have no Hugging Face counterpart' }]);
});

test('buildMechanism: a local layer from the table attends as the dense reference with its window; full sees every earlier key', async () => {
  const cfg = parseModelConfig({ dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32 });
  const ctx = { f: new fon.ParamFactory({ backend: cpu, seed: 1 }), name: 'layers.0.attn', dims: modelDims(cfg) };
  const q = fon.randn([1, 2, 7, 8], { seed: 3 });
  const k = fon.randn([1, 1, 7, 8], { seed: 4 });
  const v = fon.randn([1, 1, 7, 8], { seed: 5 });
  const x = fon.randn([1, 7, 16], { seed: 6 });
  for (const [entry, window] of [[{ type: 'local', window: 3 }, 3], [{ type: 'full' }, undefined]] as const) {
    const m = buildMechanism(parseLayerAttention(entry, 'c'), ctx);
    assert.equal(m.name, entry.type === 'local' ? 'local(window=3)' : 'full');
    const got = (await m.forward(q, k, v, { x }).data()) as Float32Array;
    const want = (await fon.denseAttention(q, k, v, { causal: true, window }).data()) as Float32Array;
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) < 1e-5, `${m.name} [${i}]: ${got[i]} vs ${want[i]}`);
  }
  const local = (await buildMechanism(parseLayerAttention({ type: 'local', window: 3 }, 'c'), ctx).forward(q, k, v, { x }).data()) as Float32Array;
  const full = (await buildMechanism(parseLayerAttention({ type: 'full' }, 'c'), ctx).forward(q, k, v, { x }).data()) as Float32Array;
  const row = 8 * 6;
  assert.ok(local.slice(row, row + 8).some((a, i) => Math.abs(a - full[row + i]) > 1e-4), 'the window changes the last query');
});

test('layering: src/attention imports nothing from model, infer, io or cli, and asks no backend how it reads', () => {
  for (const f of files('src/attention')) {
    const src = readFileSync(f, 'utf8');
    for (const m of src.matchAll(/from '([^']+)'/g)) assert.ok(!/\/(model|infer|io|cli|serve)\//.test(m[1]), `${f} imports ${m[1]}`);
  }
});

test('no file outside src/attention switches on a mechanism name', () => {
  const names = Object.keys(MECHANISMS).join('|');
  const re = new RegExp(`\\.type === '(${names})'|case '(${names})'`);
  for (const f of files('src')) {
    if (f.startsWith(join('src', 'attention'))) continue;
    assert.ok(!re.test(readFileSync(f, 'utf8')), `${f} switches on a mechanism name`);
  }
});
