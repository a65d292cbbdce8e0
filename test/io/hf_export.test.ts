/**
 * FON → Hugging Face folders (io/hf/export.ts), checked by reading them back with FON's loader and
 * against what transformers 5.17 wrote for the fixtures of test/fixtures/hf: each fixture loaded,
 * exported and loaded again gives bit-identical logits and the same config; config.json matches
 * the fixture's key for key and byte for byte (but the token ids and dtype); the tensor names and
 * shapes are the fixture's. FON-made models of every architecture (random weights, so a swapped
 * tensor shows), bf16 / f16 exports, shards, the errors for configs no architecture expresses, and
 * writes that fail part-way. CPU backend.
 *
 *   node --import tsx --test test/io/hf_export.test.ts
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { exportHf, hfArchitectureFor, hfConfigText, pythonFloat } from '../../src/io/hf/export.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { generate } from '../../src/infer/generate.ts';
import { decodeSafetensors } from '../../src/io/safetensors.ts';
import { openSafetensorsDir } from '../../src/platform/node_folder.ts';
import { trainBpe, type Tokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { roundTo } from '../../src/tensor/dtype.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';

const cpu = await fon.initBackend('cpu');
const ROOT = 'test/fixtures/hf';
const ARCHS = ['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3'] as const;
const CLASSES = { gpt2: 'GPT2LMHeadModel', llama: 'LlamaForCausalLM', mistral: 'MistralForCausalLM', qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM' };
const EVAL_TEXT = readFileSync(join(ROOT, 'eval.txt'), 'utf8');
const tmp = mkdtempSync(join(tmpdir(), 'fon-hf-export-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

async function logits(model: Decoder, ids: number[]): Promise<Float32Array> {
  const x = fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' });
  const y = model.forward(x);
  const out = (await y.data()) as Float32Array;
  x.dispose(); y.dispose();
  return out;
}

/** Both models' logits on `ids`, bit for bit. */
async function assertSameLogits(a: Decoder, b: Decoder, ids: number[], what: string): Promise<void> {
  const [x, y] = [await logits(a, ids), await logits(b, ids)];
  assert.equal(x.length, y.length);
  for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) assert.fail(`${what}: logit ${i} is ${y[i]}, expected ${x[i]}`);
}

/** Every tensor name → shape and dtype across a folder's safetensors files (one or sharded). */
async function tensorsOf(dir: string): Promise<Record<string, string>> {
  const shards = await openSafetensorsDir(dir);
  const out: Record<string, string> = {};
  for (const n of shards.names().sort()) { const i = shards.info(n)!; out[n] = `${i.dtype} [${i.shape}]`; }
  await shards.close();
  return out;
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
/** A config text with the lines that legitimately differ from the fixture's (token ids, dtype) blanked. */
const blankIds = (text: string) => text.replace(/^ {2}"(bos_token_id|eos_token_id|dtype)": .*$/gm, '  "$1": …');

for (const arch of ARCHS) {
  test(`${arch} fixture → export → load: bit-identical logits, the same config, transformers' files`, async () => {
    const dir = join(ROOT, arch);
    const src = await loadModel(dir, cpu);
    const out = join(tmp, `fixture-${arch}`);
    const r = await exportHf(src.model, src.tokenizer, out, { generation: src.generation, startIds: src.tokenizer.prefixIds });
    assert.deepEqual([r.architecture, r.className, r.dir], [arch, CLASSES[arch], out]);
    assert.deepEqual(r.files, ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    assert.equal(r.parameters, src.model.parameterCount());
    const back = await loadModel(out, cpu);
    assert.equal(back.architecture, arch);
    assert.deepEqual(back.config, src.config);
    const ids = src.tokenizer.encode(EVAL_TEXT).slice(0, 48);
    await assertSameLogits(src.model, back.model, ids, arch);
    assert.deepEqual(back.tokenizer.encode(EVAL_TEXT), src.tokenizer.encode(EVAL_TEXT));
    assert.equal(back.tokenizer.eosId, src.tokenizer.eosId);

    // config.json: transformers' text, but the token ids (the tokenizer's here) and the dtype (f32 here).
    const text = readFileSync(join(out, 'config.json'), 'utf8');
    assert.equal(blankIds(text), blankIds(readFileSync(join(dir, 'config.json'), 'utf8')));
    const cfg = readJson(join(out, 'config.json'));
    assert.deepEqual([cfg.dtype, cfg.bos_token_id, cfg.eos_token_id], ['float32', src.tokenizer.eosId, src.tokenizer.eosId]);
    // The tensors transformers wrote (all shards together), under the same names and shapes, in f32.
    const want = Object.fromEntries(Object.entries(await tensorsOf(dir)).map(([n, s]) => [n, s.replace(/^\w+/, 'F32')]));
    assert.deepEqual(await tensorsOf(out), want);
    assert.deepEqual(decodeSafetensors(new Uint8Array(readFileSync(join(out, 'model.safetensors')))).metadata, { format: 'pt' });
    // generation_config.json: Qwen3's own sampling defaults come through as transformers wrote them.
    const gen = readFileSync(join(out, 'generation_config.json'), 'utf8');
    if (arch === 'qwen3') {
      assert.equal(gen, readFileSync(join(dir, 'generation_config.json'), 'utf8'));
      assert.deepEqual(back.generation, src.generation);
    } else {
      assert.deepEqual(readJson(join(out, 'generation_config.json')), {
        _from_model_config: true, bos_token_id: src.tokenizer.eosId, eos_token_id: src.tokenizer.eosId, output_attentions: false,
        output_hidden_states: false, transformers_version: '5.17.0', use_cache: true,
      });
      assert.deepEqual(back.generation, { eosTokenIds: [src.tokenizer.eosId] });
    }
    const eos = src.tokenizer.idToToken(src.tokenizer.eosId);
    assert.deepEqual(back.tokenizer.prefixIds, src.tokenizer.prefixIds, 'the tokenizer\'s own prefix, unchanged');
    assert.deepEqual(readJson(join(out, 'tokenizer_config.json')), {
      add_bos_token: src.tokenizer.prefixIds.length > 0, add_eos_token: false, bos_token: eos, clean_up_tokenization_spaces: false, eos_token: eos,
      model_max_length: src.config.contextLength, tokenizer_class: 'PreTrainedTokenizerFast',
    });
    src.model.dispose(); back.model.dispose();
  });
}

test('config.json is written as Python writes it: sorted keys, Python floats, exact fixture text', async () => {
  assert.deepEqual(
    [1e-5, 1e-6, 500000, 0.02, 0.1, 1e16, 1e15, 123.456, 0.0001, 1.5e-7, 2.5e22, -3e-5, 0.7, 1.05, 1 / 3, 0, -0].map(pythonFloat),
    // repr() of each in Python 3
    ['1e-05', '1e-06', '500000.0', '0.02', '0.1', '1e+16', '1000000000000000.0', '123.456', '0.0001', '1.5e-07', '2.5e+22', '-3e-05', '0.7', '1.05', '0.3333333333333333', '0.0', '-0.0'],
  );
  // With the fixture's own token ids and dtype the text is transformers' byte for byte.
  const llama = (await loadModel(join(ROOT, 'llama'), cpu));
  const text = hfConfigText(llama.config, { bos: 1, eos: 2 }, 'bf16');
  assert.equal(text, readFileSync(join(ROOT, 'llama', 'config.json'), 'utf8'));
  llama.model.dispose();
});

// ---- FON-made models ----

const tokenizer = trainBpe(['The cat sat on the mat. The dog sat on the log. ', 'Cats and dogs, 1234 of them: émigré café.'], 300);
const IDS = tokenizer.encode('The cat sat on the log; 1234 dogs and émigré cats.').slice(0, 20);

/** A seeded stream of numbers in about N(0, 1) (sum of uniforms). */
function noise(seed: number): () => number {
  let s = seed >>> 0;
  const u = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s / 2 ** 32; };
  return () => (u() + u() + u() + u() - 2) * Math.sqrt(3);
}

/** A Decoder of config `c` with every parameter random (norm weights near 1), so any tensor put in the wrong place changes the logits. */
function randomModel(c: Partial<ModelConfig>, seed = 7): Decoder {
  const config = parseModelConfig(c);
  const shape = new Decoder(config, new ParamFactory({ backend: cpu, seed }));
  const r = noise(seed);
  const weights: Record<string, Tensor> = {};
  for (const [name, t] of shape.namedParameters()) {
    const v = new Float32Array(t.size);
    const isNorm = /norm\.weight$/.test(name);
    for (let i = 0; i < v.length; i++) v[i] = isNorm ? 1 + 0.1 * r() : 0.1 * r();
    weights[name] = fon.tensor(v, t.shape, { backend: cpu });
  }
  shape.dispose();
  const model = new Decoder(config, new ParamFactory({ backend: cpu, weights, source: 'random' }));
  for (const t of Object.values(weights)) t.dispose();
  return model;
}

const SMALL = { vocabSize: 300, dModel: 32, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 48, contextLength: 32 };
const FON_MODELS: [string, Partial<ModelConfig>][] = [
  // Llama: untied head, head_dim ≠ dModel / nHeads, GQA, linear RoPE scaling.
  ['llama', { ...SMALL, headDim: 12, tieEmbeddings: false, ropeTheta: 5000, ropeScaling: { type: 'linear', factor: 2 }, normEps: 1e-5 }],
  // Qwen3: QK-norm, tied, a mix of full and sliding layers, Llama 3 RoPE scaling.
  ['qwen3', { ...SMALL, nLayers: 3, headDim: 16, qkNorm: true, attention: [{ type: 'full' }, { type: 'local', window: 5 }, { type: 'local', window: 5 }], ropeScaling: { type: 'llama3', factor: 4, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 16 } }],
  // Mistral: one window on every layer.
  ['mistral', { ...SMALL, attention: [{ type: 'local', window: 6 }], tieEmbeddings: false }],
  // Qwen2: q, k, v biases, a sliding layer before a full one (layer_types only).
  ['qwen2', { ...SMALL, qkvBias: true, attention: [{ type: 'local', window: 4 }, { type: 'full' }] }],
  // GPT-2: LayerNorm, GELU, learned positions, biases (Conv1D transposes, fused c_attn), n_inner ≠ 4 × n_embd.
  ['gpt2', { ...SMALL, nKvHeads: 4, norm: 'layernorm', mlp: 'gelu', positions: 'learned', bias: true, mlpHidden: 64, tieEmbeddings: false }],
];

for (const [arch, c] of FON_MODELS) {
  test(`a FON ${arch}-shaped model exports as ${CLASSES[arch as keyof typeof CLASSES]} and loads back identical`, async () => {
    const model = randomModel(c);
    const out = join(tmp, `fon-${arch}`);
    const r = await exportHf(model, tokenizer, out);
    assert.equal(r.architecture, arch);
    const back = await loadModel(out, cpu);
    assert.deepEqual(back.config, model.config);
    await assertSameLogits(model, back.model, IDS, arch);
    assert.deepEqual(back.tokenizer.encode(EVAL_TEXT.slice(0, 2000)), tokenizer.encode(EVAL_TEXT.slice(0, 2000)));
    model.dispose(); back.model.dispose();
  });
}

test('a FON model\'s export puts the end-of-text token before a prompt as fon generate does: same prompt ids, same greedy text', async () => {
  const model = randomModel(FON_MODELS[0][1]);
  const out = join(tmp, 'fon-start');
  await exportHf(model, tokenizer, out);
  const json = readJson(join(out, 'tokenizer.json'));
  const eos = tokenizer.idToToken(tokenizer.eosId)!;
  const template = { type: 'TemplateProcessing', single: [{ SpecialToken: { id: eos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }] };
  const post = json.post_processor.type === 'Sequence' ? json.post_processor.processors.at(-1) : json.post_processor;
  assert.deepEqual({ type: post.type, single: post.single }, template);
  assert.deepEqual(post.special_tokens[eos].ids, [tokenizer.eosId]);
  assert.equal(readJson(join(out, 'tokenizer_config.json')).add_bos_token, true);
  const back = await loadModel(out, cpu);
  assert.deepEqual(back.tokenizer.prefixIds, [tokenizer.eosId], 'the export, read as Hugging Face, prepends what FON prepends');
  const prompt = 'The cat sat';
  const native = await generate(model, tokenizer, prompt, { temperature: 0, maxTokens: 8 });
  const exported = await generate(back.model, back.tokenizer, prompt, { temperature: 0, maxTokens: 8, startIds: back.tokenizer.prefixIds });
  assert.deepEqual(exported.ids, native.ids);
  await assert.rejects(exportHf(model, back.tokenizer, join(tmp, 'fon-start-2'), { startIds: [] }), (e: unknown) => e instanceof fon.ArgumentError
    && e.message === `exportHf: startIds [], but the tokenizer already puts [${tokenizer.eosId}] before a text: expected its own prefix`);
  model.dispose(); back.model.dispose();
});

test('the keys written for a sliding Qwen layout, and a tied model has no lm_head.weight', async () => {
  const model = randomModel(FON_MODELS[1][1]);
  const out = join(tmp, 'qwen3-keys');
  await exportHf(model, tokenizer, out);
  const cfg = readJson(join(out, 'config.json'));
  assert.deepEqual([cfg.layer_types, cfg.sliding_window, cfg.use_sliding_window, cfg.max_window_layers], [['full_attention', 'sliding_attention', 'sliding_attention'], 5, true, 1]);
  assert.deepEqual(cfg.rope_parameters, { factor: 4, high_freq_factor: 4, low_freq_factor: 1, original_max_position_embeddings: 16, rope_theta: 10000, rope_type: 'llama3' });
  assert.match(readFileSync(join(out, 'config.json'), 'utf8'), /"factor": 4\.0,\n {4}"high_freq_factor": 4\.0,\n {4}"low_freq_factor": 1\.0,\n {4}"original_max_position_embeddings": 16,\n {4}"rope_theta": 10000\.0,/);
  assert.ok(!('lm_head.weight' in (await tensorsOf(out))));
  model.dispose();
});

test('bf16 and f16 exports hold each weight rounded to the dtype, and load back within that rounding', async () => {
  for (const [dtype, arch, safe, torch] of [['bf16', 0, 'BF16', 'bfloat16'], ['f16', 4, 'F16', 'float16']] as const) {
    const model = randomModel(FON_MODELS[arch][1]);
    const out = join(tmp, `half-${dtype}`);
    await exportHf(model, tokenizer, out, { dtype });
    assert.equal(readJson(join(out, 'config.json')).dtype, torch);
    assert.ok(Object.values(await tensorsOf(out)).every((s) => s.startsWith(`${safe} `)));
    const back = await loadModel(out, cpu);
    const params = new Map(back.model.namedParameters());
    let moved = 0;
    for (const [name, t] of model.namedParameters()) {
      const want = (await t.data()) as Float32Array;
      const got = (await params.get(name)!.data()) as Float32Array;
      for (let i = 0; i < want.length; i++) {
        if (got[i] !== roundTo(dtype, want[i])) assert.fail(`${dtype} ${name}[${i}] = ${got[i]}, expected ${roundTo(dtype, want[i])}`);
        if (got[i] !== want[i]) moved++;
      }
    }
    assert.ok(moved > 0, 'rounding changed some weights');
    const [a, b] = [await logits(model, IDS), await logits(back.model, IDS)];
    const worst = a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
    assert.ok(worst > 0 && worst < 0.05, `${dtype}: max |Δlogit| ${worst}`);
    model.dispose(); back.model.dispose();
  }
});

test('past maxShardBytes the weights are sharded with an index, as transformers names them', async () => {
  const model = randomModel(FON_MODELS[1][1]);
  const out = join(tmp, 'sharded');
  const r = await exportHf(model, tokenizer, out, { maxShardBytes: 20_000 });
  const shards = r.files.filter((f) => f.endsWith('.safetensors'));
  assert.ok(shards.length > 2, `${shards}`);
  assert.deepEqual(shards, shards.map((_, i) => `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`));
  assert.ok(!r.files.includes('model.safetensors'));
  const index = readJson(join(out, 'model.safetensors.index.json'));
  const tensors = await tensorsOf(out);
  assert.deepEqual(Object.keys(index.weight_map), Object.keys(tensors).sort());
  assert.deepEqual(index.metadata, { total_parameters: model.parameterCount(), total_size: 4 * model.parameterCount() });
  const back = await loadModel(out, cpu);
  await assertSameLogits(model, back.model, IDS, 'sharded');
  model.dispose(); back.model.dispose();
});

// ---- configs no architecture expresses ----

test('a config no Hugging Face architecture computes is an UnsupportedError naming the key, the value and what is supported', async () => {
  const llama = 'LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM';
  const gpt2 = 'GPT2LMHeadModel (the Hugging Face architecture FON writes for LayerNorm models)';
  const G = { ...SMALL, nKvHeads: 4, norm: 'layernorm', mlp: 'gelu', positions: 'learned', bias: true } as const;
  const cases: [Partial<ModelConfig>, string][] = [
    [{ ...SMALL, positions: 'none' }, `'positions' = "none"; ${llama} (the RMSNorm architectures) use RoPE; learned positions go with norm "layernorm" (GPT2LMHeadModel)`],
    [{ ...SMALL, mlp: 'gelu' }, `'mlp' = "gelu"; ${llama} (the RMSNorm architectures) have a SwiGLU MLP; GELU goes with norm "layernorm" (GPT2LMHeadModel)`],
    [{ ...SMALL, bias: true }, `'bias' = true; ${llama} (the RMSNorm architectures) have no biases but Qwen2's on q, k and v (qkvBias)`],
    [{ ...SMALL, qkNorm: true, qkvBias: true }, `'qkvBias' = true; Qwen3ForCausalLM (QK-norm) has no q, k, v biases and Qwen2ForCausalLM (q, k, v biases) no QK-norm`],
    [{ ...SMALL, attention: [{ type: 'full' }, { type: 'local', window: 8 }] }, `'attention' = [{"type":"full"},{"type":"local","window":8}]; LlamaForCausalLM has full attention in every layer and MistralForCausalLM one sliding window in every layer; a mix of full and sliding layers needs Qwen2ForCausalLM (qkvBias) or Qwen3ForCausalLM (qkNorm)`],
    [{ ...SMALL, qkNorm: true, attention: [{ type: 'local', window: 4 }, { type: 'local', window: 8 }] }, `'attention' = [{"type":"local","window":4},{"type":"local","window":8}]; Qwen3ForCausalLM has one sliding_window for all its sliding layers`],
    [{ ...SMALL, attention: [{ type: 'local', window: 4 }, { type: 'local', window: 8 }] }, `'attention' = [{"type":"local","window":4},{"type":"local","window":8}]; LlamaForCausalLM has full attention in every layer and MistralForCausalLM one sliding window in every layer; a mix of full and sliding layers needs Qwen2ForCausalLM (qkvBias) or Qwen3ForCausalLM (qkNorm)`],
    [{ ...SMALL, qkvBias: true, headDim: 16 }, `'headDim' = 16; Qwen2ForCausalLM has no head_dim key: its heads are hidden_size / num_attention_heads = 8 wide (Llama, Mistral and Qwen3 take any head_dim)`],
    [{ ...SMALL, dModel: 30 }, `'dModel' = 30; LlamaForCausalLM requires hidden_size to be a multiple of num_attention_heads (nHeads = 4), whatever head_dim is`],
    [{ ...G, mlp: 'swiglu' }, `'mlp' = "swiglu"; ${gpt2} has a GELU MLP; SwiGLU goes with norm "rmsnorm" (${llama})`],
    [{ ...G, positions: 'rope' }, `'positions' = "rope"; ${gpt2} has learned positions; RoPE goes with norm "rmsnorm" (${llama})`],
    [{ ...G, positions: 'none' }, `'positions' = "none"; ${gpt2} has learned positions; RoPE goes with norm "rmsnorm" (${llama})`],
    [{ ...G, bias: false }, `'bias' = false; ${gpt2} has biases in every linear layer`],
    [{ ...G, qkNorm: true }, `'qkNorm' = true; ${gpt2} has no QK-norm (Qwen3ForCausalLM has, with norm "rmsnorm")`],
    [{ ...G, nKvHeads: 2 }, `'nKvHeads' = 2; ${gpt2} has as many key/value heads as query heads (nHeads = 4)`],
    [{ ...G, headDim: 16 }, `'headDim' = 16; ${gpt2}'s heads are dModel / nHeads = 8 wide`],
    [{ ...G, attention: [{ type: 'local', window: 8 }] }, `'attention' = [{"type":"local","window":8}]; ${gpt2} has full attention in every layer`],
  ];
  for (const [c, message] of cases) {
    assert.throws(() => hfArchitectureFor(parseModelConfig(c)), (e: Error) => {
      assert.ok(e instanceof fon.UnsupportedError, String(e));
      assert.equal(e.message, `cannot export as a Hugging Face model: ${message}`);
      return true;
    });
  }
  // exportHf refuses before writing anything.
  const model = randomModel({ ...SMALL, positions: 'none' });
  const out = join(tmp, 'unsupported');
  await assert.rejects(exportHf(model, tokenizer, out), fon.UnsupportedError);
  assert.equal(existsSync(out), false);
  model.dispose();
});

// ---- the output folder ----

/** The entries of `dir` left by an interrupted write (`<name>.tmp-…`). */
const temps = (dir: string) => readdirSync(dir).filter((n) => n.includes('.tmp-'));

/** `t` with toJSON failing: the write fails after config.json and the weights are in the temporary folder. */
function failingTokenizer(t: Tokenizer): Tokenizer {
  return Object.assign(Object.create(t) as Tokenizer, { toJSON: () => { throw new Error('disk full (simulated)'); } });
}

test('an existing folder: empty is fine, non-empty needs overwrite, a file is refused; a trailing / is the same folder', async () => {
  const model = randomModel(SMALL);
  const parent = join(tmp, 'targets');
  mkdirSync(join(parent, 'empty'), { recursive: true });
  await exportHf(model, tokenizer, join(parent, 'empty'));
  assert.ok(existsSync(join(parent, 'empty', 'config.json')));

  const full = join(parent, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'notes.txt'), 'mine');
  await assert.rejects(exportHf(model, tokenizer, full), (e: Error) => e instanceof fon.ArgumentError && e.message === `${full} exists and is not empty; choose another folder or pass overwrite (--overwrite) to replace it`);
  assert.deepEqual(readdirSync(full), ['notes.txt']);
  await exportHf(model, tokenizer, `${full}/`, { overwrite: true });
  assert.deepEqual(readdirSync(full).sort(), ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);

  const file = join(parent, 'file');
  writeFileSync(file, 'x');
  await assert.rejects(exportHf(model, tokenizer, file, { overwrite: true }), (e: Error) => e instanceof fon.ArgumentError && e.message === `${file} exists and is not a folder; the export writes a folder there`);
  await assert.rejects(exportHf(model, tokenizer, join(parent, 'new'), { bosToken: '<s>' }), (e: Error) => e instanceof fon.ArgumentError && e.message === `exportHf: bos token "<s>" is not a token of the tokenizer`);
  assert.deepEqual(temps(parent), []);
  model.dispose();
});

test('a write that fails part-way leaves no --out (or the old one untouched) and no temporary folder', async () => {
  const model = randomModel(SMALL);
  const parent = join(tmp, 'interrupted');
  mkdirSync(parent);
  const out = join(parent, 'out');
  await assert.rejects(exportHf(model, failingTokenizer(tokenizer), out), /disk full \(simulated\)/);
  assert.equal(existsSync(out), false);
  assert.deepEqual(readdirSync(parent), []);

  // Replacing a folder: the old one stays as it was.
  mkdirSync(out);
  writeFileSync(join(out, 'config.json'), 'old');
  await assert.rejects(exportHf(model, failingTokenizer(tokenizer), out, { overwrite: true }), /disk full/);
  assert.deepEqual(readdirSync(out), ['config.json']);
  assert.equal(readFileSync(join(out, 'config.json'), 'utf8'), 'old');
  assert.deepEqual(readdirSync(parent), ['out']);

  // A parameter that cannot be read while the weights are written (a disposed tensor).
  const [, last] = model.namedParameters().at(-1)!;
  last.dispose();
  await assert.rejects(exportHf(model, tokenizer, join(parent, 'out2')), fon.DisposedError);
  assert.deepEqual(readdirSync(parent), ['out']);
  model.dispose();
});
