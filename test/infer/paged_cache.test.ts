/**
 * The paged KV cache (infer/page_pool.ts, infer/kv_cache.ts): full and local layers keep k and v
 * in pages from a pool. A model decoded through 128-row pages gives the logits of the same model
 * decoded through one contiguous page, page boundaries crossed by the prefill and by single steps;
 * truncation gives pages back and a continued decode equals one that never saw the rejected
 * positions; several caches share one pool; draft–revise over pages is token-identical to plain
 * decoding over pages; bad page sizes and mismatched pools are errors naming the value.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { cachedStep, generate, generationCache, generationDtype } from '../../src/infer/generate.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { PagePool, defaultPageRows } from '../../src/infer/page_pool.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import type { Backend } from '../../src/index.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { loudModel, organsConfig } from './organs_fixtures.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const tok = byteTokenizer();
// full, local and fox layers: the fox layer stays contiguous beside the paged ones.
const cfg = organsConfig({ attention: [{ type: 'full' }, { type: 'local', window: 150 }, { type: 'fox' }] }, 257, 700);
const ids = (n: number, seed: number) => Array.from({ length: n }, (_, i) => (i * 37 + seed * 11) % 256);

function close(a: Float32Array, b: Float32Array, what: string): void {
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-4 * (1 + Math.abs(b[i])), `${what} [${i}]: ${a[i]} vs ${b[i]}`);
}

/** A prompt of `promptLength` (over two boundaries), single steps to 382, then 5 rows across 384 and 40 rows past it. */
async function pagedEqualsWhole(backend: Backend, promptLength: number): Promise<void> {
  const m = loudModel(cfg, backend);
  const paged = new KvCache(m.config, 1, 600, backend, 'f32', { pageRows: 128 });
  const whole = new KvCache(m.config, 1, 600, backend, 'f32');
  assert.equal(whole.pool.pageRows, 600, 'the default: the whole length in one page');
  assert.deepEqual(paged.layers.map((l) => l.pages !== undefined), [true, true, false], 'fox keeps a contiguous slot');
  const prompt = ids(promptLength, 1);
  close(await cachedStep(m, paged, prompt, 0), await cachedStep(m, whole, prompt, 0), `${backend.name}, prefill`);
  assert.equal(paged.layers[0].pages!.k.length, 3);
  for (let pos = promptLength; pos < 382; pos++) {
    const t = [(pos * 7) % 256];
    close(await cachedStep(m, paged, t, pos), await cachedStep(m, whole, t, pos), `${backend.name}, step at ${pos}`);
  }
  // A verify-sized call (5 rows) across the boundary at 384 … and a prefill-sized one (40 rows) past it.
  const at = 382;
  close(await cachedStep(m, paged, ids(5, 7), at), await cachedStep(m, whole, ids(5, 7), at), `${backend.name}, 5 rows at ${at}`);
  close(await cachedStep(m, paged, ids(40, 8), at + 5), await cachedStep(m, whole, ids(40, 8), at + 5), `${backend.name}, 40 rows at ${at + 5}`);
  assert.equal(paged.layers[1].pages!.k.length, 4);
  assert.equal(paged.bytes, whole.bytes - 2 * 2 * (600 - 512) * 8 * 4, 'paged layers hold their pages only');
  paged.dispose();
  whole.dispose();
  m.dispose();
}

test('decoding through 128-row pages gives the logits of one contiguous page: a prefill over two boundaries, then steps over a third', async () => {
  await pagedEqualsWhole(cpu, 300);
});

test('decoding through 128-row pages gives the logits of one contiguous page [webgpu]', { skip: webgpuSkipReason() }, async () => {
  await pagedEqualsWhole(gpu!, 370);
});

test('truncate gives pages back; the continued decode equals one that never saw the rejected positions', async () => {
  const m = loudModel(cfg, cpu);
  const pool = new PagePool(cpu, { batch: 1, kvHeads: 1, headDim: 8, dtype: 'f32' }, 128);
  const a = new KvCache(m.config, 1, 600, cpu, 'f32', { pool });
  const b = new KvCache(m.config, 1, 600, cpu, 'f32', { pool });
  assert.equal(pool.pagesInUse, 4, 'two paged layers of two caches, a page each');
  const prompt = ids(250, 2);
  await cachedStep(m, a, prompt, 0);
  await cachedStep(m, a, ids(20, 3), 250); // rejected: rows 250 … 269 take page 2 (256 …)
  assert.equal(a.layers[0].pages!.k.length, 3);
  a.truncate(250);
  assert.equal(a.layers[0].pages!.k.length, 2, 'the page past the length went back');
  assert.equal(pool.pagesFree, 2);
  await cachedStep(m, b, prompt, 0);
  const next = ids(12, 4);
  const la = await cachedStep(m, a, next, 250);
  const lb = await cachedStep(m, b, next, 250);
  assert.deepEqual(la, lb, 'bit for bit: the same pages, the same rows');
  assert.equal(pool.pagesFree, 0, 'freed pages are reused by whichever cache asks');
  assert.equal(pool.pagesInUse, 12, '262 rows: three pages in each of two paged layers of two caches');
  a.dispose();
  assert.equal(pool.pagesInUse, 6, 'a disposed cache gives its pages back');
  b.dispose();
  assert.equal(pool.pagesInUse, 0);
  assert.ok(pool.bytes > 0);
  pool.dispose();
  assert.equal(pool.bytes, 0);
  m.dispose();
});

test('draft–revise over 128-row pages is token-identical to plain decoding over them, crossing page boundaries', async () => {
  const m = loudModel(organsConfig({ attention: [{ type: 'full' }, { type: 'local', window: 130 }, { type: 'full' }] }, 257, 400), cpu);
  for (const [i, prompt] of ['the cat sat on the mat. '.repeat(5), 'a jury of twelve '.repeat(7)].entries()) {
    const plain = await generate(m, tok, prompt, { temperature: 0, maxTokens: 60, draftRevise: false, pageRows: 128 });
    const dr = await generate(m, tok, prompt, { temperature: 0, maxTokens: 60, draftRevise: { draftLayers: 1, gamma: 5 }, pageRows: 128 });
    assert.deepEqual(dr.ids, plain.ids, `prompt ${i}`);
    assert.ok(dr.speculative!.accepted < dr.speculative!.drafted, 'drafts were rejected, so truncation ran');
  }
  m.dispose();
});

test('a paged layer takes no step past the cache\'s length; a cache\'s own pool serves others until its last user goes; one-page pools are not stretched', async () => {
  const m = loudModel(cfg, cpu);
  const short = new KvCache(m.config, 1, 100, cpu, 'f32');
  await assert.rejects(cachedStep(m, short, ids(150, 5), 0), (e: unknown) => e instanceof fon.ArgumentError && /KV cache: rows up to 150 pass the cache's 100 positions \(its maxLength\)/.test(e.message));
  assert.throws(() => new KvCache(m.config, 1, 300, cpu, 'f32', { pool: short.pool }), /PagePool: a cache of 300 positions on a pool of one-page caches of 100 rows: expected at most 100/);
  short.dispose();
  const a = new KvCache(m.config, 1, 600, cpu, 'f32', { pageRows: 128 });
  const b = new KvCache(m.config, 1, 600, cpu, 'f32', { pool: a.pool });
  a.dispose();
  await cachedStep(m, b, ids(100, 6), 0);
  await cachedStep(m, b, ids(100, 7), 100); // a new page from a's pool, after a is gone
  assert.equal(b.layers[0].pages!.k.length, 2);
  b.dispose();
  assert.equal(b.pool.bytes, 0, 'the pool went with its last user');
  assert.throws(() => new KvCache(m.config, 1, 600, cpu, 'f32', { pool: b.pool }), /PagePool: used after dispose\(\)/);
  m.dispose();
});

test('a layer kept unpaged past the binding limit: a DeviceError naming the layer, and what the layers before took is given back [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const g = gpu!;
  const binding = (g as unknown as { caps: { maxBinding: number } }).caps.maxBinding;
  const rows = Math.floor(binding / (4 * 128 * 4)) + 128; // 4 kv heads of 128 f32 values a position: one buffer past the limit
  const big = organsConfig({ nHeads: 4, nKvHeads: 4, headDim: 128, attention: [{ type: 'full' }, { type: 'fox' }, { type: 'full' }] }, 257, rows);
  const m = loudModel(big, g);
  const before = g.memory().liveBytes;
  assert.throws(() => new KvCache(m.config, 1, rows, g, 'f32', { pageRows: 1024 }), (e: unknown) => e instanceof fon.DeviceError
    && e.message.startsWith(`KvCache: ${rows} positions: layer 1 (fox) could not take its cache (only full and local layers keep k and v in pages; this one needs one buffer of the whole length): webgpu: `)
    && e.message.includes("above this device's maxStorageBufferBindingSize"));
  assert.equal(g.memory().liveBytes, before, 'layer 0\'s pages were given back');
  const fine = new KvCache(m.config, 1, 4096, g, 'f32', { pageRows: 1024 });
  assert.equal(fine.layers[0].pages!.pageRows, 1024);
  fine.dispose();
  m.dispose();
});

test('page sizes and pools: errors name the value', () => {
  const m = loudModel(cfg, cpu);
  assert.throws(() => new KvCache(m.config, 1, 300, cpu, 'f32', { pageRows: 100 }), (e: unknown) => e instanceof fon.ArgumentError && e.message === "KvCache: pageRows 100: expected a positive multiple of 128 (the decode kernels' key block; a page holds whole blocks)");
  assert.throws(() => new KvCache(m.config, 1, 300, cpu, 'f32', { pageRows: 0 }), /pageRows 0: expected a positive multiple of 128/);
  const pool = new PagePool(cpu, { batch: 1, kvHeads: 1, headDim: 8, dtype: 'f16' }, 256);
  assert.throws(() => new KvCache(m.config, 1, 300, cpu, 'f32', { pool }), /KvCache: the pool's pages are \(1, 1, P, 8\) f16 on 'cpu': expected \(1, 1, P, 8\) f32 on 'cpu' for this cache/);
  assert.throws(() => new KvCache(m.config, 1, 300, cpu, 'f16', { pool, pageRows: 128 }), /KvCache: pageRows 128 with a pool of 256-row pages: give one/);
  pool.dispose();
  assert.throws(() => pool.take(), /PagePool: taken from after dispose\(\)/);
  assert.equal(generationDtype(m), 'f32', 'f32 weights: an f32 cache');
  const shared = new PagePool(cpu, { batch: 1, kvHeads: 1, headDim: 8, dtype: generationDtype(m) }, 128);
  const g = generationCache(m, 300, { pool: shared });
  assert.equal(g.pool, shared);
  assert.equal(shared.pagesInUse, 2);
  g.dispose();
  assert.equal(shared.pagesInUse, 0);
  shared.dispose();
  assert.equal(defaultPageRows(100, { batch: 1, kvHeads: 8, headDim: 128, dtype: 'f16' }), 100, 'one page of the whole length');
  assert.equal(defaultPageRows(1 << 20, { batch: 1, kvHeads: 8, headDim: 128, dtype: 'f16' }), 65536);
  assert.equal(defaultPageRows(1 << 20, { batch: 4, kvHeads: 32, headDim: 128, dtype: 'f32' }), 4096, '256 MiB a page tensor at most');
  m.dispose();
});

test('a cache whose allocation fails at any point gives back everything it took (pages, k, v, per-position states)', () => {
  const be = new CpuBackend();
  const m = loudModel(organsConfig({ attention: [{ type: 'full' }, { type: 'fpa' }, { type: 'full' }] }, 257, 64), be);
  const before = be.memory().liveBytes;
  const fill = be.fill.bind(be);
  // The cache's allocations in order: layer 0's first page (k, v), layer 1 (fpa) k, v, φ, ℓ and walk, layer 2's page (k, v).
  const layerOf = [0, 0, 1, 1, 1, 1, 1, 2, 2];
  for (const [i, layer] of layerOf.entries()) {
    let calls = 0;
    be.fill = (...args: Parameters<typeof be.fill>) => {
      if (++calls === i + 1) throw new fon.DeviceError('webgpu: out of memory (injected)');
      return fill(...args);
    };
    assert.throws(() => new KvCache(m.config, 1, 64, be, 'f32'), (e: unknown) => e instanceof fon.DeviceError && e.message.includes(`layer ${layer} (`) && e.message.includes('could not take its cache'), `allocation ${i + 1}`);
    be.fill = fill;
    assert.equal(be.memory().liveBytes, before, `allocation ${i + 1} failing: everything taken before it was given back`);
  }
  const fine = new KvCache(m.config, 1, 64, be, 'f32');
  fine.dispose();
  assert.equal(be.memory().liveBytes, before);
  m.dispose();
});
