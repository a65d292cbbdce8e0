/**
 * `fon export` as a user runs it (child processes): the Qwen3 fixture folder and a FON checkpoint
 * written as Hugging Face folders that load back to the same model, --dtype, --overwrite, and bad
 * input (exit code 2, one line naming the problem, nothing written).
 *
 *   node --import tsx --test test/cli/export_cli.test.ts
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { decodeSafetensors } from '../../src/io/safetensors.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { fon as fonRun } from './fon_process.ts';

const QWEN3 = join(import.meta.dirname, '../fixtures/hf/qwen3');
const FILES = 'config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json';
const dir = mkdtempSync(join(tmpdir(), 'fon-export-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const cpu = await fon.initBackend('cpu');


function assertCleanError(r: { code: number | null; out: string; err: string }, message: string) {
  assert.equal(r.code, 2, `exit code (stderr: ${r.err})`);
  assert.equal(r.err, `fon: ${message}\n`);
  assert.equal(r.out, '', 'nothing on stdout');
}

async function sameLogits(a: Decoder, b: Decoder, ids: number[]): Promise<void> {
  const x = fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' });
  const [ya, yb] = [a.forward(x), b.forward(x)];
  assert.deepEqual(await yb.data(), await ya.data());
  x.dispose(); ya.dispose(); yb.dispose();
}

/** A FON checkpoint of a tiny Llama-shaped model (seeded weights), or of `config` when given. */
async function fonCheckpoint(name: string, config: Record<string, unknown> = {}): Promise<string> {
  const c = parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 16, ...config });
  const m = new Decoder(c, new ParamFactory({ backend: cpu, seed: 5 }));
  const out = join(dir, name);
  await saveCheckpoint(out, 'step-000001', m, byteTokenizer());
  m.dispose();
  return out;
}

test('fon export of a Hugging Face folder: the same model back, its bos token and sampling defaults kept', async () => {
  const out = join(dir, 'qwen3-hf');
  const r = fonRun('export', '--model', QWEN3, '--out', out, '--format', 'hf');
  assert.equal(r.code, 0, r.err);
  const src = await loadModel(QWEN3, cpu);
  assert.equal(r.out, `wrote Qwen3ForCausalLM (${src.model.parameterCount().toLocaleString('en-US')} parameters, f32) to ${out}: ${FILES}\n`);
  const back = await loadModel(out, cpu);
  assert.deepEqual(back.config, src.config);
  await sameLogits(src.model, back.model, src.tokenizer.encode('The quick brown fox jumps over the lazy dog.'));
  const tc = JSON.parse(readFileSync(join(out, 'tokenizer_config.json'), 'utf8'));
  assert.deepEqual([tc.bos_token, tc.eos_token], ['<|endoftext|>', '<|im_end|>']); // as the source's tokenizer_config.json
  const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
  assert.deepEqual([cfg.bos_token_id, cfg.eos_token_id], [src.tokenizer.tokenToId('<|endoftext|>'), src.tokenizer.tokenToId('<|im_end|>')]);
  assert.equal(readFileSync(join(out, 'generation_config.json'), 'utf8'), readFileSync(join(QWEN3, 'generation_config.json'), 'utf8'));
  src.model.dispose(); back.model.dispose();
});

test('fon export of a FON checkpoint with --dtype bf16, then --overwrite', async () => {
  const ckpt = await fonCheckpoint('run');
  const out = join(dir, 'run-hf');
  const r = fonRun('export', '--model', ckpt, '--out', out, '--format', 'hf', '--dtype', 'bf16');
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`^wrote LlamaForCausalLM \\([\\d,]+ parameters, bf16\\) to ${out}: ${FILES}\\n$`));
  const cfg = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
  assert.deepEqual([cfg.architectures, cfg.model_type, cfg.dtype, cfg.bos_token_id, cfg.eos_token_id, cfg.tie_word_embeddings], [['LlamaForCausalLM'], 'llama', 'bfloat16', 256, 256, true]);
  const st = decodeSafetensors(new Uint8Array(readFileSync(join(out, 'model.safetensors'))));
  assert.ok(Object.values(st.tensors).every((t) => t.dtype === 'BF16'));
  assert.ok('model.layers.1.mlp.down_proj.weight' in st.tensors && !('lm_head.weight' in st.tensors));

  // A second export into the now non-empty folder needs --overwrite; f32 is then exact.
  assertCleanError(fonRun('export', '--model', ckpt, '--out', out, '--format', 'hf'), `${out} exists and is not empty; choose another folder or pass overwrite (--overwrite) to replace it`);
  const again = fonRun('export', '--model', ckpt, '--out', out, '--format', 'hf', '--overwrite');
  assert.equal(again.code, 0, again.err);
  const [src, back] = [await loadModel(ckpt, cpu), await loadModel(out, cpu)];
  assert.deepEqual(back.config, src.config);
  await sameLogits(src.model, back.model, [72, 101, 108, 108, 111, 256, 32]);
  src.model.dispose(); back.model.dispose();
  assert.deepEqual(readdirSync(dir).filter((n) => n.includes('.tmp-')), []);
});

test('fon export: missing flags, an unknown format or dtype, a model HF cannot express: one line, exit 2, nothing written', async () => {
  const out = join(dir, 'never');
  assertCleanError(fonRun('export', '--out', out, '--format', 'hf'), 'export: --model is required (fon export --help)');
  assertCleanError(fonRun('export', '--model', QWEN3, '--format', 'hf'), 'export: --out is required (fon export --help)');
  assertCleanError(fonRun('export', '--model', QWEN3, '--out', out), 'export: --format is required (fon export --help)');
  assertCleanError(fonRun('export', '--model', QWEN3, '--out', out, '--format', 'onnx'), 'export: --format "onnx": expected hf (a Hugging Face folder)');
  assertCleanError(fonRun('export', '--model', QWEN3, '--out', out, '--format', 'hf', '--dtype', 'f64'), 'export: --dtype "f64": expected one of f32, bf16, f16');
  const noRope = await fonCheckpoint('no-positions', { positions: 'none' });
  assertCleanError(fonRun('export', '--model', noRope, '--out', out, '--format', 'hf'),
    `cannot export as a Hugging Face model: 'positions' = "none"; LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (the RMSNorm architectures) use RoPE; learned positions go with norm "layernorm" (GPT2LMHeadModel)`);
  assertCleanError(fonRun('export', '--model', join(dir, 'nowhere'), '--out', out, '--format', 'hf'), `no checkpoint at ${join(dir, 'nowhere')}: the path does not exist`);
  const file = join(dir, 'a-file');
  writeFileSync(file, 'x');
  assertCleanError(fonRun('export', '--model', QWEN3, '--out', file, '--format', 'hf'), `${file} exists and is not a folder; the export writes a folder there`);
  const r = fonRun('export', '--model', QWEN3, '--out', out, '--format', 'hf', '--bogus');
  assert.equal(r.code, 2);
  assert.match(r.err, /^fon: export: Unknown option '--bogus'.* \(fon export --help lists the options\)\n$/);
  assert.equal(existsSync(out), false);
  mkdirSync(join(dir, 'empty'));
  assert.equal(fonRun('export', '--model', noRope, '--out', join(dir, 'empty'), '--format', 'hf').code, 2);
  assert.deepEqual(readdirSync(join(dir, 'empty')), [], 'an empty --out stays empty after a refused export');
});

test('fon export --help, and fon --help lists it', () => {
  const h = fonRun('export', '--help');
  assert.equal(h.code, 0);
  assert.match(h.out, /^usage: fon export --model DIR --out DIR --format hf \[--dtype f32\|bf16\|f16\] \[--overwrite\]\n/);
  assert.match(h.out, /--overwrite {8}replace --out when it exists and is not empty/);
  assert.match(fonRun('--help').out, /^ {2}export {5}write a checkpoint as a Hugging Face folder/m);
});
