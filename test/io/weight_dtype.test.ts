/**
 * Weights kept in a checkpoint's own dtype (io/weight_dtype.ts, LoadModelOptions.dtype, --dtype): the
 * auto rule on backends whose fastest precision is 16-bit or f32, the committed Hugging Face fixtures
 * (test/fixtures/hf: llama stored in bf16, mistral in f16, qwen2 mostly bf16 with f32 norms) loaded
 * in their stored dtype on the CPU with logits near transformers' and a generation cache of that
 * dtype, an f32 weight past f16's range refused by name, and the CLI flag checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/backend/backend.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { decodeSafetensors, encodeSafetensors, type SafeTensorInput } from '../../src/io/safetensors.ts';
import { storedDtype, weightDtype } from '../../src/io/weight_dtype.ts';
import { generationCache } from '../../src/infer/generate.ts';

const cpu = await fon.initBackend('cpu');
const ROOT = 'test/fixtures/hf';

/** A stand-in backend that only answers precisions(): what weightDtype reads. */
const withPrecisions = (fastest: 'f32' | 'f16', offered: ('f32' | 'f16' | 'bf16')[]) =>
  ({ name: `gpu-${fastest}`, precisions: () => ({ offered, fastest, ...(offered.includes('f16') ? {} : { missing: 'no shader-f16' }) }) }) as unknown as Backend;

test('the auto rule: a 16-bit checkpoint stays 16-bit where the fastest precision is 16-bit, f32 elsewhere; an explicit dtype the backend lacks is refused', () => {
  const tc = withPrecisions('f16', ['f32', 'bf16', 'f16']), alu = withPrecisions('f32', ['f32', 'bf16']);
  assert.equal(weightDtype('auto', 'bf16', tc), 'bf16');
  assert.equal(weightDtype('auto', 'f16', tc), 'f16');
  assert.equal(weightDtype('auto', 'f32', tc), 'f32');
  assert.equal(weightDtype('auto', 'f16', alu), 'f32');
  assert.equal(weightDtype('auto', 'bf16', cpu), 'f32', 'the CPU computes in f32');
  assert.equal(weightDtype('bf16', 'f32', cpu), 'bf16');
  assert.throws(() => weightDtype('f16', 'bf16', alu), (e) => e instanceof fon.UnsupportedError && e.message === 'load: dtype f16 is not offered by the gpu-f32 backend (no shader-f16); it offers f32, bf16');
  // Most bytes decide: qwen2's bf16 matrices outweigh its f32 norms.
  assert.equal(storedDtype([{ dtype: 'F32', shape: [64] }, { dtype: 'BF16', shape: [64, 64] }]), 'bf16');
  assert.equal(storedDtype([{ dtype: 'F32', shape: [64, 64] }, { dtype: 'F16', shape: [64] }]), 'f32');
  assert.equal(storedDtype([]), 'f32');
});

/** Max |Δ| between the model's logits of the fixture's first positions and transformers'. */
async function logitError(model: fon.Decoder, dir: string): Promise<number> {
  const ref = JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as { eval_ids: number[]; logit_positions: number };
  const t = decodeSafetensors(new Uint8Array(readFileSync(join(dir, 'reference_logits.safetensors')))).tensors.logits;
  const want = new Float32Array(t.data.slice().buffer);
  const ids = ref.eval_ids.slice(0, ref.logit_positions);
  const y = fon.tidy(() => model.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' })));
  assert.equal(y.dtype, 'f32', 'a 16-bit model\'s logits come back f32');
  const got = (await y.data()) as Float32Array;
  y.dispose();
  return Math.max(...Array.from(want, (w, i) => Math.abs(w - got[i])));
}

for (const [arch, dtype, tol] of [['llama', 'bf16', 0.05], ['mistral', 'f16', 0.01], ['qwen2', 'bf16', 0.05], ['llama', 'f16', 0.01]] as const) {
  test(`${arch} kept in ${dtype}: every parameter ${dtype}, logits within ${tol} of transformers', generation's cache ${dtype}`, async (t) => {
    const dir = join(ROOT, arch);
    const { model } = await loadModel(dir, cpu, { dtype });
    for (const [name, p] of model.namedParameters()) assert.equal(p.dtype, dtype, name);
    const worst = await logitError(model, dir);
    t.diagnostic(`${arch} in ${dtype}: max |Δlogit| ${worst.toExponential(2)}`);
    assert.ok(worst <= tol, `max |Δlogit| ${worst}`);
    const cache = generationCache(model, 8);
    assert.equal(cache.dtype, dtype);
    cache.dispose();
    model.dispose();
  });
}

test('a weight past f16\'s range, loaded in f16, is a DTypeError naming the tensor, the value and the way out; in f32 it loads', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-dtype-'));
  try {
    cpSync(join(ROOT, 'gpt2'), dir, { recursive: true });
    const file = join(dir, 'model.safetensors');
    const decoded = decodeSafetensors(new Uint8Array(readFileSync(file)));
    const inputs: Record<string, SafeTensorInput> = {};
    for (const [name, v] of Object.entries(decoded.tensors)) inputs[name] = { dtype: v.dtype, shape: v.shape, data: v.data.slice() };
    const name = 'h.0.mlp.c_fc.weight' in inputs ? 'h.0.mlp.c_fc.weight' : 'transformer.h.0.mlp.c_fc.weight';
    new Float32Array(inputs[name].data.buffer as ArrayBuffer)[3] = 1e5;
    writeFileSync(file, encodeSafetensors(inputs));
    await assert.rejects(loadModel(dir, cpu, { dtype: 'f16' }), (e) => e instanceof fon.DTypeError && e.message === `${file}: tensor '${name}' holds 100000 at element 3, past f16's range (±65504); load it in f32 (dtype f32)`);
    const { model } = await loadModel(dir, cpu, { dtype: 'f32' });
    model.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('fon generate --dtype: a bad value is a usage error (exit 2) naming it', () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'generate', '--model', join(ROOT, 'gpt2'), '--prompt', 'a', '--dtype', 'f8', '--backend', 'cpu'], { encoding: 'utf8' });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /generate: --dtype "f8": expected one of auto, f32, f16, bf16/);
});
