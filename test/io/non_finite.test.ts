/**
 * Weights holding NaN or ±Inf (issue 18): refused at load with the file, the tensor, how many
 * values and the first, in f32, f16 and bf16 alike (checked on the stored bits), for FON
 * checkpoints and Hugging Face folders, in the library and through the CLI (exit 2, one line);
 * `allowNonFinite` / `--allow-non-finite` loads them anyway.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { decodeSafetensors, encodeSafetensors, safetensorsToTensors, SafetensorsError, type SafeTensorInput } from '../../src/io/safetensors.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { f32ToBf16Bits, f32ToF16Bits } from '../../src/tensor/dtype.ts';
import { fon as fonCli, writeSentenceCorpus } from '../cli/fon_process.ts';

const cpu = await fon.initBackend('cpu');
const dir = mkdtempSync(join(tmpdir(), 'fon-nonfinite-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** The safetensors file at `path` with `edit` applied to a copy of tensor `name`'s bytes. */
function rewrite(path: string, name: string, edit: (bytes: Uint8Array, dtype: string) => void): void {
  const d = decodeSafetensors(new Uint8Array(readFileSync(path)), path);
  assert.ok(Object.hasOwn(d.tensors, name), `${path} has no tensor ${name}`);
  const out: Record<string, SafeTensorInput> = {};
  for (const [n, t] of Object.entries(d.tensors)) {
    const data = new Uint8Array(t.data);
    if (n === name) edit(data, t.dtype);
    out[n] = { dtype: t.dtype, shape: t.shape, data };
  }
  writeFileSync(path, encodeSafetensors(out, d.metadata));
}

test('safetensorsToTensors with finite: NaN and ±Inf found in f32, f16 and bf16 bits, named with the count and the first', () => {
  const values = [1, NaN, 2, Infinity, -Infinity, 3];
  const f32 = Float32Array.from(values);
  const f16 = Uint16Array.from(values, (x) => f32ToF16Bits(x));
  const bf16 = Uint16Array.from(values, (x) => f32ToBf16Bits(x));
  for (const [dtype, data] of [['F32', f32], ['F16', f16], ['BF16', bf16]] as const) {
    const bytes = encodeSafetensors({ w: { dtype, shape: [6], data }, ok: { dtype: 'F32', shape: [1], data: Float32Array.of(65504) } });
    assert.throws(() => safetensorsToTensors(decodeSafetensors(bytes, 'm.safetensors'), { backend: cpu, source: 'm.safetensors', finite: true }), (e: unknown) => e instanceof SafetensorsError
      && e.message === "m.safetensors: tensor 'w' holds 3 non-finite values of 6 (the first, at index 1, is NaN); pass allowNonFinite (--allow-non-finite) to load it anyway", dtype);
    const loaded = safetensorsToTensors(decodeSafetensors(bytes, 'm.safetensors'), { backend: cpu });
    assert.equal(loaded.w.size, 6, `${dtype}: loads without the check`);
    for (const t of Object.values(loaded)) t.dispose();
  }
  const big = encodeSafetensors({ w: { dtype: 'F16', shape: [2], data: Uint16Array.of(f32ToF16Bits(65504), f32ToF16Bits(-65504)) } });
  const kept = safetensorsToTensors(decodeSafetensors(big, 'b'), { backend: cpu, finite: true });
  assert.equal(kept.w.size, 2, 'the largest finite f16 values pass');
  kept.w.dispose();
});

test('a FON checkpoint with a NaN weight: loadModel and fon info name it; --allow-non-finite loads it', async () => {
  const corpus = join(dir, 'corpus.txt');
  writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.'], 200, 3);
  const config = join(dir, 'cfg.json');
  writeFileSync(config, JSON.stringify({ dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 32 }));
  const out = join(dir, 'run');
  const t = fonCli('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '1', '--batch', '2', '--backend', 'cpu', '--out', out, '--eval-every', '0', '--final-eval-windows', '1');
  assert.equal(t.code, 0, t.err);
  const step = join(out, 'step-000001');
  const file = join(step, 'model.safetensors');
  const name = 'layers.0.mlp.up.weight';
  rewrite(file, name, (b) => { new Float32Array(b.buffer, b.byteOffset, 4)[2] = NaN; });
  const want = `${file}: tensor '${name}' holds 1 non-finite value of ${16 * 32} (the first, at index 2, is NaN); pass allowNonFinite (--allow-non-finite) to load it anyway`;
  await assert.rejects(loadModel(out, cpu), (e: unknown) => e instanceof SafetensorsError && e.message === want);
  const r = fonCli('info', '--model', out);
  assert.equal(r.code, 2, r.err);
  assert.equal(r.err.trim(), `fon: ${want}`);
  const ok = fonCli('info', '--model', out, '--allow-non-finite');
  assert.equal(ok.code, 0, ok.err);
  const m = await loadModel(out, cpu, { allowNonFinite: true });
  m.model.dispose();
});

test('a Hugging Face folder with an Inf in a shard: the shard and the tensor are named', async () => {
  const d = join(dir, 'qwen3');
  cpSync(join(import.meta.dirname, '../fixtures/hf/qwen3'), d, { recursive: true });
  const index = JSON.parse(readFileSync(join(d, 'model.safetensors.index.json'), 'utf8')).weight_map as Record<string, string>;
  const [name, shard] = Object.entries(index).find(([n]) => n.endsWith('mlp.down_proj.weight'))!;
  const file = join(d, shard);
  rewrite(file, name, (b, dtype) => {
    if (dtype === 'F32') new Float32Array(b.buffer, b.byteOffset, 2)[1] = Infinity;
    else new Uint16Array(b.buffer, b.byteOffset, 2)[1] = dtype === 'BF16' ? f32ToBf16Bits(Infinity) : f32ToF16Bits(Infinity);
  });
  const r = fonCli('info', '--model', d);
  assert.equal(r.code, 2, r.err);
  assert.match(r.err.trim(), new RegExp(`^fon: ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: tensor '${name.replace(/\./g, '\\.')}' holds 1 non-finite value of \\d+ \\(the first, at index 1, is Infinity\\)`));
  assert.equal(fonCli('info', '--model', d, '--allow-non-finite').code, 0);
});
