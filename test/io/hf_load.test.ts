/**
 * Hugging Face folders → FON's Decoder, against transformers: the committed tiny GPT-2, Llama (Llama 3
 * RoPE scaling, bf16, 6 shards), Mistral (sliding window 16, f16), Qwen2 (QKV bias, MLP in bf16) and
 * Qwen3 (QK-norm, head_dim 32 ≠ 64 / 4, 6 shards) of test/fixtures/hf (make_fixtures.py), then each
 * kind of bad folder → its error. CPU backend, f32.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { CheckpointError } from '../../src/io/checkpoint_dir.ts';
import { hfConfigToModelConfig } from '../../src/io/hf/config.ts';
import { isHfModelDir, loadHfModel } from '../../src/io/hf/load_dir.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { decodeSafetensors, encodeSafetensors, SafetensorsError, type SafeTensorInput } from '../../src/io/safetensors.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { evaluate } from '../../src/eval/perplexity.ts';
import { tokenByteLengths } from '../../src/eval/token_bytes.ts';
import { ConfigError, parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { evalWindows } from '../../src/train/data/batches.ts';
import { MemoryTokenStore } from '../../src/train/data/token_store.ts';

const cpu = await fon.initBackend('cpu');
const ROOT = 'test/fixtures/hf';
const ARCHS = ['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3'] as const;
const EVAL_TEXT = readFileSync(join(ROOT, 'eval.txt'), 'utf8');

interface Reference { eval_ids: number[]; logit_positions: number; perplexity: number; nll_sum: number; scored_tokens: number; context: number }

const reference = (dir: string): Reference => JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8'));

function referenceLogits(dir: string): Float32Array {
  const t = decodeSafetensors(new Uint8Array(readFileSync(join(dir, 'reference_logits.safetensors')))).tensors.logits;
  return new Float32Array(t.data.slice().buffer);
}

/** Max |Δ| between the model's logits of eval_ids[:P] and transformers'. */
async function logitError(model: Decoder, dir: string): Promise<number> {
  const ref = reference(dir);
  const want = referenceLogits(dir);
  const ids = ref.eval_ids.slice(0, ref.logit_positions);
  const x = fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' });
  const y = model.forward(x);
  const got = await y.data();
  x.dispose(); y.dispose();
  assert.equal(got.length, want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  return worst;
}

for (const arch of ARCHS) {
  test(`${arch}: logits within 1e-4 and perplexity within 1e-5 (relative) of transformers`, async (t) => {
    const dir = join(ROOT, arch);
    const ref = reference(dir);
    const { model, tokenizer, config, architecture } = await loadHfModel(dir, cpu);
    assert.equal(architecture, arch);
    assert.deepEqual(tokenizer.encode(EVAL_TEXT), ref.eval_ids, 'the tokenizer gives transformers\' ids of eval.txt');
    const worst = await logitError(model, dir);
    const store = new MemoryTokenStore(Int32Array.from(ref.eval_ids));
    const r = await evaluate(model, evalWindows(store, ref.context), { byteLengths: tokenByteLengths(tokenizer, config.vocabSize) });
    const rel = (r.perplexity - ref.perplexity) / ref.perplexity;
    t.diagnostic(`${arch}: max |Δlogit| ${worst.toExponential(2)}; perplexity ${r.perplexity.toFixed(4)} vs ${ref.perplexity.toFixed(4)} (relative ${rel.toExponential(2)}); ${r.tokens} scored tokens`);
    assert.ok(worst <= 1e-4, `${arch}: max |Δlogit| ${worst} > 1e-4`);
    assert.equal(r.tokens, ref.scored_tokens);
    assert.ok(Math.abs(rel) <= 1e-5, `${arch}: perplexity ${r.perplexity} vs ${ref.perplexity}`);
    assert.ok(Math.abs(r.loss * r.tokens - ref.nll_sum) / ref.nll_sum <= 1e-3);
    model.dispose();
  });
}

test('configs map onto FON: the fields each architecture sets', () => {
  const cfg = (arch: string) => hfConfigToModelConfig(JSON.parse(readFileSync(join(ROOT, arch, 'config.json'), 'utf8'))).config;
  const gpt2 = cfg('gpt2');
  assert.deepEqual([gpt2.positions, gpt2.norm, gpt2.mlp, gpt2.bias, gpt2.qkvBias, gpt2.tieEmbeddings], ['learned', 'layernorm', 'gelu', true, false, true]);
  assert.deepEqual([gpt2.contextLength, gpt2.mlpHidden, gpt2.headDim, gpt2.normEps], [256, 256, 16, 1e-5]);
  const llama = cfg('llama');
  assert.deepEqual(llama.ropeScaling, { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 64 });
  assert.deepEqual([llama.ropeTheta, llama.nKvHeads, llama.tieEmbeddings, llama.normEps, llama.contextLength], [500000, 2, false, 1e-5, 512]);
  const mistral = cfg('mistral');
  assert.deepEqual(mistral.attention, [{ type: 'local', window: 16 }]);
  assert.deepEqual([mistral.headDim, mistral.normEps, mistral.ropeScaling], [16, 1e-6, null]);
  const qwen2 = cfg('qwen2');
  assert.deepEqual([qwen2.qkvBias, qwen2.bias, qwen2.tieEmbeddings, qwen2.vocabSize, qwen2.ropeTheta], [true, false, true, 1002, 1e6]);
  assert.deepEqual(qwen2.attention, [{ type: 'full' }]);
  const qwen3 = cfg('qwen3');
  assert.deepEqual([qwen3.headDim, qwen3.dModel, qwen3.nHeads, qwen3.nKvHeads, qwen3.qkNorm, qwen3.qkvBias, qwen3.tieEmbeddings, qwen3.normEps], [32, 64, 4, 2, true, false, true, 1e-6]);
});

test('tokenizer eos from tokenizer_config.json, sampling defaults from generation_config.json', async () => {
  const qwen3 = await loadHfModel(join(ROOT, 'qwen3'), cpu);
  assert.deepEqual(qwen3.generation, { doSample: true, temperature: 0.7, topK: 20, topP: 0.8, repetitionPenalty: 1.05, eosTokenIds: [1001] });
  // tokenizer_config.json names <|im_end|>; the loader's own default would be <|endoftext|>.
  assert.equal(qwen3.tokenizer.eosId, qwen3.tokenizer.tokenToId('<|im_end|>'));
  assert.notEqual(qwen3.tokenizer.eosId, qwen3.tokenizer.tokenToId('<|endoftext|>'));
  qwen3.model.dispose();
  const gpt2 = await loadHfModel(join(ROOT, 'gpt2'), cpu);
  // GPT-2's eos id 50256 lies beyond this model's 1000 tokens: left out.
  assert.deepEqual(gpt2.generation, {});
  assert.equal(gpt2.tokenizer.idToToken(gpt2.tokenizer.eosId), '<|endoftext|>');
  gpt2.model.dispose();
});

/** A temporary copy of a fixture folder. */
function copyFixture(arch: string): string {
  const dir = mkdtempSync(join(tmpdir(), `fon-hf-${arch}-`));
  cpSync(join(ROOT, arch), dir, { recursive: true });
  return dir;
}

function editJson(path: string, edit: (o: Record<string, unknown>) => void): void {
  const o = JSON.parse(readFileSync(path, 'utf8'));
  edit(o);
  writeFileSync(path, JSON.stringify(o));
}

/** Rewrites a safetensors file's tensors (bytes kept as read unless `edit` changes them). */
function editTensors(path: string, edit: (t: Record<string, SafeTensorInput>) => void): void {
  const d = decodeSafetensors(new Uint8Array(readFileSync(path)));
  const tensors: Record<string, SafeTensorInput> = {};
  for (const [n, t] of Object.entries(d.tensors)) tensors[n] = { dtype: t.dtype, shape: t.shape, data: t.data };
  edit(tensors);
  writeFileSync(path, encodeSafetensors(tensors, d.metadata));
}

/** Rewrites a safetensors file's header JSON, the data section unchanged (so it may no longer fit). */
function editHeader(path: string, edit: (h: Record<string, { dtype: string; shape: number[]; data_offsets: number[] }>) => void): void {
  const bytes = new Uint8Array(readFileSync(path));
  const n = new DataView(bytes.buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  edit(header);
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + bytes.length - 8 - n);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 8);
  out.set(bytes.subarray(8 + n), 8 + json.length);
  writeFileSync(path, out);
}

async function rejectsWith(p: Promise<unknown>, type: new (...a: never[]) => Error, fragment: string | RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof type, `expected ${type.name}, got ${String(e)}`);
    if (typeof fragment === 'string') assert.ok(e.message.includes(fragment), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(fragment)}`);
    else assert.match(e.message, fragment);
    return true;
  });
}

test('each mapped feature changes the logits, so the parity tests would catch it being dropped', async () => {
  const cases: [string, (c: Record<string, unknown>) => void][] = [
    ['llama', (c) => { c.rope_parameters = { rope_theta: 500000, rope_type: 'default' }; }], // no Llama 3 scaling
    ['mistral', (c) => { c.sliding_window = 17; }],
    ['qwen3', (c) => { c.rms_norm_eps = 1e-5; }], // QK-norm and block norms share this eps
  ];
  for (const [arch, edit] of cases) {
    const dir = copyFixture(arch);
    editJson(join(dir, 'config.json'), edit);
    const { model } = await loadHfModel(dir, cpu);
    const err = await logitError(model, dir);
    assert.ok(err > 1e-3, `${arch}: logits moved by only ${err}`);
    model.dispose();
    rmSync(dir, { recursive: true });
  }
  // Older Hub files write rope_theta and rope_scaling (with "type") instead of rope_parameters: same model.
  const dir = copyFixture('llama');
  editJson(join(dir, 'config.json'), (c) => {
    delete c.rope_parameters;
    c.rope_theta = 500000;
    c.rope_scaling = { type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 };
  });
  const { model } = await loadHfModel(dir, cpu);
  assert.ok((await logitError(model, dir)) <= 1e-4);
  model.dispose();
  rmSync(dir, { recursive: true });
});

test('loadModel reads a Hugging Face folder as well as FON checkpoints', async () => {
  const dir = join(ROOT, 'llama');
  assert.equal(await isHfModelDir(dir), true);
  const loaded = await loadModel(dir, cpu);
  assert.equal(loaded.dir, dir);
  assert.equal(loaded.architecture, 'llama');
  assert.deepEqual(loaded.generation, { eosTokenIds: [2] });
  assert.ok((await logitError(loaded.model, dir)) <= 1e-4);
  loaded.model.dispose();

  const out = mkdtempSync(join(tmpdir(), 'fon-ckpt-'));
  const m = new Decoder(parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 16 }), new ParamFactory({ backend: cpu, seed: 3 }));
  const ckpt = await saveCheckpoint(out, 'step-1', m, byteTokenizer());
  assert.equal(await isHfModelDir(out), false);
  assert.equal(await isHfModelDir(ckpt), false);
  assert.equal(await isHfModelDir(join(out, 'absent')), false);
  assert.equal(await isHfModelDir(join(dir, 'config.json')), false);
  const fonLoaded = await loadModel(out, cpu);
  assert.equal(fonLoaded.architecture, undefined);
  assert.deepEqual(fonLoaded.config, m.config);
  m.dispose(); fonLoaded.model.dispose();
});

test('missing files name the file', async () => {
  const noConfig = copyFixture('gpt2');
  rmSync(join(noConfig, 'config.json'));
  await rejectsWith(loadHfModel(noConfig, cpu), CheckpointError, `has no config.json (looked for ${join(noConfig, 'config.json')})`);
  await rejectsWith(loadModel(noConfig, cpu), CheckpointError, `no checkpoint in ${noConfig}: expected latest.json or config.json`);

  const noTokenizer = copyFixture('gpt2');
  rmSync(join(noTokenizer, 'tokenizer.json'));
  await rejectsWith(loadModel(noTokenizer, cpu), CheckpointError, `has no tokenizer.json (looked for ${join(noTokenizer, 'tokenizer.json')})`);

  const noShard = copyFixture('llama');
  rmSync(join(noShard, 'model-00003-of-00006.safetensors'));
  await rejectsWith(loadModel(noShard, cpu), CheckpointError, `${join(noShard, 'model.safetensors.index.json')} lists shard model-00003-of-00006.safetensors, which is missing (looked for ${join(noShard, 'model-00003-of-00006.safetensors')})`);

  const noWeights = copyFixture('gpt2');
  rmSync(join(noWeights, 'model.safetensors'));
  await rejectsWith(loadModel(noWeights, cpu), CheckpointError, `${noWeights} has no weights: expected model.safetensors or model.safetensors.index.json`);
  for (const d of [noConfig, noTokenizer, noShard, noWeights]) rmSync(d, { recursive: true });
});

test('config.json: an unsupported architecture, an unknown key, a value FON cannot compute', async () => {
  const dir = copyFixture('llama');
  const cfgPath = join(dir, 'config.json');
  const original = readFileSync(cfgPath, 'utf8');
  const supported = 'FON reads gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), mistral (MistralForCausalLM), qwen2 (Qwen2ForCausalLM), qwen3 (Qwen3ForCausalLM)';
  const cases: [(c: Record<string, unknown>) => void, new (...a: never[]) => Error, string][] = [
    [(c) => { c.model_type = 'gemma'; c.architectures = ['GemmaForCausalLM']; }, fon.UnsupportedError, `${cfgPath}: architecture 'gemma' (GemmaForCausalLM) is not supported; ${supported}`],
    [(c) => { delete c.model_type; c.architectures = ['Phi3ForCausalLM']; }, fon.UnsupportedError, `${cfgPath}: architecture 'Phi3ForCausalLM' is not supported; ${supported}`],
    [(c) => { c.architectures = ['LlamaForSequenceClassification']; }, fon.UnsupportedError, `${cfgPath}: architecture 'LlamaForSequenceClassification' is not supported; ${supported}`],
    [(c) => { c.foo_bar = 3; }, ConfigError, `${cfgPath}: unknown key 'foo_bar' (value 3) for llama: FON neither maps it nor knows it to leave the computation unchanged`],
    [(c) => { c.quantization_config = { bits: 4 }; }, ConfigError, `${cfgPath}: unknown key 'quantization_config' (value {"bits":4}) for llama`],
    [(c) => { (c.rope_parameters as Record<string, unknown>).rope_type = 'yarn'; }, fon.UnsupportedError, `${cfgPath}: 'rope_parameters.rope_type' = "yarn" is not supported for llama; FON does "default", "linear", "llama3"`],
    [(c) => { c.hidden_act = 'gelu'; }, fon.UnsupportedError, `${cfgPath}: 'hidden_act' = "gelu" is not supported for llama; FON does "silu"`],
    [(c) => { c.attention_bias = true; }, fon.UnsupportedError, `${cfgPath}: 'attention_bias' = true is not supported for llama; FON does false`],
    [(c) => { c.partial_rotary_factor = 0.5; }, fon.UnsupportedError, `${cfgPath}: 'partial_rotary_factor' = 0.5 is not supported for llama`],
    [(c) => { delete c.hidden_size; }, ConfigError, `${cfgPath}: 'hidden_size' is missing; llama needs it`],
    [(c) => { c.num_hidden_layers = 'two'; }, ConfigError, `${cfgPath}: 'num_hidden_layers' = "two": expected an integer`],
    [(c) => { c.num_key_value_heads = 3; }, ConfigError, `${cfgPath}: 'nKvHeads' = 3 must divide 'nHeads' = 4`],
    [(c) => { c.vocab_size = 500; }, CheckpointError, `${join(dir, 'tokenizer.json')} has 1000 tokens but ${cfgPath} says vocab_size 500`],
  ];
  for (const [edit, type, message] of cases) {
    const c = JSON.parse(original);
    edit(c);
    writeFileSync(cfgPath, JSON.stringify(c));
    await rejectsWith(loadHfModel(dir, cpu), type, message);
  }
  const gpt2 = JSON.parse(readFileSync(join(ROOT, 'gpt2', 'config.json'), 'utf8'));
  assert.throws(() => hfConfigToModelConfig({ ...gpt2, scale_attn_by_inverse_layer_idx: true }, 'g.json'), (e: Error) => e instanceof fon.UnsupportedError && e.message === `g.json: 'scale_attn_by_inverse_layer_idx' = true is not supported for gpt2; FON does false`);
  assert.throws(() => hfConfigToModelConfig({ ...gpt2, activation_function: 'relu' }, 'g.json'), /'activation_function' = "relu" is not supported for gpt2; FON does "gelu_new" or "gelu_pytorch_tanh"/);
  rmSync(dir, { recursive: true });
});

test('weights: a tensor missing, of the wrong shape or dtype, or left over is named', async () => {
  const dir = copyFixture('mistral');
  const file = join(dir, 'model.safetensors');
  const original = readFileSync(file);
  const cases: [(t: Record<string, SafeTensorInput>) => void, new (...a: never[]) => Error, string][] = [
    [(t) => { delete t['model.layers.1.mlp.up_proj.weight']; }, fon.ShapeError, `${file}: tensor 'model.layers.1.mlp.up_proj.weight' is missing (expected shape [160, 64])`],
    [(t) => { t['model.norm.weight'].shape = [2, 32]; }, fon.ShapeError, `${file}: tensor 'model.norm.weight' has shape [2, 32], expected [64] from ${join(dir, 'config.json')}`],
    [(t) => { t['model.norm.weight'].dtype = 'I16'; }, fon.DTypeError, `${file}: tensor 'model.norm.weight' has dtype I16, expected F32, F16 or BF16`],
    [(t) => { t['model.layers.0.self_attn.q_proj.bias'] = { dtype: 'F16', shape: [64], data: new Uint16Array(64) }; }, CheckpointError, `${file} has tensors the config does not use: model.layers.0.self_attn.q_proj.bias`],
  ];
  for (const [edit, type, message] of cases) {
    writeFileSync(file, original);
    editTensors(file, edit);
    await rejectsWith(loadHfModel(dir, cpu), type, message);
  }
  // Sharded: a tensor the index does not list is missing from the index's point of view.
  const sharded = copyFixture('qwen3');
  const index = join(sharded, 'model.safetensors.index.json');
  editJson(index, (o) => { delete (o.weight_map as Record<string, string>)['model.layers.1.self_attn.k_norm.weight']; });
  await rejectsWith(loadHfModel(sharded, cpu), fon.ShapeError, `${index}: tensor 'model.layers.1.self_attn.k_norm.weight' is missing (expected shape [32])`);
  rmSync(dir, { recursive: true });
  rmSync(sharded, { recursive: true });
});

test('a truncated or corrupt safetensors file is a SafetensorsError naming it', async () => {
  const dir = copyFixture('mistral');
  const file = join(dir, 'model.safetensors');
  const original = readFileSync(file);
  const reset = () => writeFileSync(file, original);

  truncateSync(file, original.length - 1000);
  await rejectsWith(loadHfModel(dir, cpu), SafetensorsError, `${file}: tensor 'model.layers.1.self_attn.v_proj.weight': data_offsets [424448, 428544] reach past the end of the data section (427672 bytes): the file is truncated or the offsets are wrong`);

  reset();
  const bytes = new Uint8Array(readFileSync(file));
  new DataView(bytes.buffer).setUint32(0, bytes.length, true);
  writeFileSync(file, bytes);
  await rejectsWith(loadHfModel(dir, cpu), SafetensorsError, `${file}: header length ${bytes.length} exceeds the file (${bytes.length - 8} bytes after the 8-byte length field)`);

  reset();
  editHeader(file, (h) => { h['model.norm.weight'].data_offsets = [500000, 500128]; });
  await rejectsWith(loadHfModel(dir, cpu), SafetensorsError, `${file}: tensor 'model.norm.weight': data_offsets [500000, 500128] reach past the end of the data section (428672 bytes)`);

  reset();
  editHeader(file, (h) => { h['model.norm.weight'].data_offsets = [428416, 428544]; });
  await rejectsWith(loadHfModel(dir, cpu), SafetensorsError, `${file}: tensors 'model.layers.1.self_attn.v_proj.weight' and 'model.norm.weight' overlap: 'model.norm.weight' begins at byte 428416, before 428544 where 'model.layers.1.self_attn.v_proj.weight' ends`);

  reset();
  editHeader(file, (h) => { h['model.norm.weight'].dtype = 'F8_E4M3'; });
  await rejectsWith(loadHfModel(dir, cpu), SafetensorsError, `${file}: tensor 'model.norm.weight': unknown dtype "F8_E4M3", FON reads F64, I64, F32, I32, F16, BF16, I16, U8, I8, BOOL`);
  rmSync(dir, { recursive: true });
});
