/**
 * Model folders as a browser reads them (io/model_folder.ts, io/load_folder.ts): the committed
 * Hugging Face fixtures (sharded llama, qwen3 with its chat template) and a saved FON checkpoint,
 * served from memory, from Blobs, and over HTTP by a stand-in fetch with and without range requests,
 * load into the same model as from disk (logits equal, greedy text equal); range requests read a
 * tensor at a time, never a whole shard; missing and failing files give errors naming them; and the
 * browser core (src/index.ts) imports no Node module.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import * as fon from '../../src/index.ts';
import { load } from '../../src/io/load.ts';
import { saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { blobFolder, memoryFolder, urlFolder, type FetchLike, type ModelFolder } from '../../src/io/model_folder.ts';
import { loadFolder } from '../../src/io/load_folder.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

const cpu = await fon.initBackend('cpu');

/** Every file of directory `dir`, by name. */
const filesOf = (dir: string) => Object.fromEntries(readdirSync(dir).filter((n) => statSync(join(dir, n)).isFile()).map((n) => [n, new Uint8Array(readFileSync(join(dir, n)))]));

/** A stand-in for fetch serving `files` at BASE/NAME: ranges answered with 206 unless `ranges` is false; `log` records each request. */
function fakeFetch(files: Record<string, Uint8Array>, opts: { ranges: boolean; log: { name: string; range?: string; bytes: number }[]; fail?: string }): FetchLike {
  return async (url, init) => {
    const name = decodeURIComponent(url.slice(url.lastIndexOf('/') + 1));
    const range = init?.headers?.Range;
    const headers = (h: Record<string, string>) => ({ get: (k: string) => h[k.toLowerCase()] ?? null });
    if (name === opts.fail) return { status: 500, ok: false, headers: headers({}), arrayBuffer: async () => new ArrayBuffer(0) };
    const body = files[name];
    if (!body) return { status: 404, ok: false, headers: headers({}), arrayBuffer: async () => new ArrayBuffer(0) };
    const m = range && opts.ranges ? /^bytes=(\d+)-(\d+)$/.exec(range) : null;
    const part = m ? body.slice(Number(m[1]), Number(m[2]) + 1) : body;
    opts.log.push({ name, range, bytes: part.length });
    return m
      ? { status: 206, ok: true, headers: headers({ 'content-range': `bytes ${m[1]}-${m[2]}/${body.length}` }), arrayBuffer: async () => part.slice().buffer }
      : { status: 200, ok: true, headers: headers({}), arrayBuffer: async () => part.slice().buffer };
  };
}

async function lastLogits(lm: fon.LanguageModel, ids: number[]): Promise<Float32Array> {
  const y = fon.tidy(() => lm.model.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { dtype: 'i32', backend: cpu }), { lastOnly: true }));
  const d = (await y.data()) as Float32Array;
  y.dispose();
  return d;
}

for (const arch of ['llama', 'qwen3'] as const) {
  test(`${arch} (Hugging Face) from memory, Blobs and HTTP with and without ranges: the model from disk's logits and greedy text`, async () => {
    const dir = join('test/fixtures/hf', arch);
    const files = filesOf(dir);
    const disk = await load(dir, { backend: cpu });
    const ids = [1, 5, 9, 13];
    const want = await lastLogits(disk, ids);
    const text = (await disk.generate('The', { maxTokens: 6, temperature: 0 })).text;
    const log: { name: string; range?: string; bytes: number }[] = [];
    const folders: [string, ModelFolder][] = [
      ['memory', memoryFolder(`mem:${arch}`, files)],
      ['blobs', blobFolder(`files:${arch}`, Object.entries(files).map(([n, b]) => [n, new Blob([b])] as const))],
      ['http ranges', urlFolder(`https://models.test/${arch}`, fakeFetch(files, { ranges: true, log }))],
      ['http whole', urlFolder(`https://models.test/${arch}/`, fakeFetch(files, { ranges: false, log: [] }))],
    ];
    for (const [how, folder] of folders) {
      const lm = await loadFolder(folder, { backend: cpu });
      assert.deepEqual(await lastLogits(lm, ids), want, `${arch} ${how}: logits`);
      assert.equal((await lm.generate('The', { maxTokens: 6, temperature: 0 })).text, text, `${arch} ${how}: greedy text`);
      lm.model.dispose();
    }
    // With ranges, no weights file was fetched whole: each read is a header or one tensor.
    const weights = Object.keys(files).filter((n) => n.endsWith('.safetensors') && !n.startsWith('reference'));
    for (const w of weights) {
      const reads = log.filter((r) => r.name === w);
      assert.ok(reads.length > 1 && reads.every((r) => r.range !== undefined && r.bytes < files[w].length), `${w}: ${reads.length} range reads`);
    }
    disk.model.dispose();
  });
}

test('a FON checkpoint folder from Blobs equals loading it from disk; a folder lacking a file names it; a failing server is a FileError naming the URL', async () => {
  const out = mkdtempSync(join(tmpdir(), 'fon-folder-'));
  try {
    const cfg = parseModelConfig({ vocabSize: 260, contextLength: 32, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, positions: 'rope' });
    const model = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 7 }));
    const dir = await saveCheckpoint(out, 'step-1', model, byteTokenizer());
    const files = filesOf(dir);
    const disk = await load(dir, { backend: cpu });
    const lm = await loadFolder(blobFolder('picked', Object.entries(files).map(([n, b]) => [n, new Blob([b])] as const)), { backend: cpu });
    assert.deepEqual(await lastLogits(lm, [3, 1, 4]), await lastLogits(disk, [3, 1, 4]));
    const { ['tokenizer.json']: _gone, ...rest } = files;
    await assert.rejects(loadFolder(memoryFolder('mem:ckpt', rest), { backend: cpu }), (e) => e instanceof fon.CheckpointError && e.message === 'checkpoint mem:ckpt has no tokenizer.json (looked for mem:ckpt/tokenizer.json)');
    await assert.rejects(loadFolder(urlFolder('https://models.test/ckpt', fakeFetch(files, { ranges: true, log: [], fail: 'model.safetensors' })), { backend: cpu }),
      (e) => e instanceof fon.FileError && e.message === 'https://models.test/ckpt/model.safetensors: cannot read: the server answered 500');
    for (const m of [model, disk.model, lm.model]) m.dispose();
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('the browser core (src/index.ts) reaches no Node module through its imports', () => {
  const seen = new Set<string>(), outside: string[] = [];
  const stack = [resolve('src/index.ts')];
  while (stack.length) {
    const f = stack.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of readFileSync(f, 'utf8').matchAll(/^\s*(?:import|export)\s+(?!type\b)[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm)) {
      const spec = m[1] ?? m[2];
      if (spec.startsWith('.')) stack.push(resolve(dirname(f), spec));
      else outside.push(spec);
    }
  }
  assert.ok(seen.has(resolve('src/io/load_folder.ts')), 'loadFolder is in the core');
  assert.deepEqual([...new Set(outside)], ['@huggingface/jinja'], 'the only package the core imports');
});
