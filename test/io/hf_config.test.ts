/** Hugging Face config.json → FON config: older key spellings, transformers' defaults, per-layer sliding windows, errors. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UnsupportedError } from '../../src/errors.ts';
import { hfArchitecture, hfConfigToModelConfig } from '../../src/io/hf/config.ts';
import { parseGenerationConfig } from '../../src/io/hf/generation.ts';
import { hfEosToken } from '../../src/io/hf/tokenizer.ts';
import { ConfigError } from '../../src/model/config.ts';

const LLAMA = {
  architectures: ['LlamaForCausalLM'], model_type: 'llama', vocab_size: 100, hidden_size: 32, intermediate_size: 64,
  num_hidden_layers: 3, num_attention_heads: 4, max_position_embeddings: 128,
};
const QWEN2 = { ...LLAMA, architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', num_key_value_heads: 2 };

const config = (json: object) => hfConfigToModelConfig(json, 'c.json').config;

test('llama: transformers defaults for absent keys (kv heads = heads, head_dim = width / heads, eps 1e-6, θ 10000, untied)', () => {
  const c = config(LLAMA);
  assert.deepEqual([c.nKvHeads, c.headDim, c.normEps, c.ropeTheta, c.ropeScaling, c.tieEmbeddings, c.contextLength], [4, 8, 1e-6, 10000, null, false, 128]);
  assert.deepEqual(config({ ...LLAMA, head_dim: null, rope_scaling: null }).headDim, 8);
});

test('rope: rope_parameters (transformers 5) and rope_theta + rope_scaling (older files) give the same config', () => {
  const scaling = { factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 };
  const v5 = config({ ...LLAMA, rope_parameters: { rope_type: 'llama3', rope_theta: 500000, ...scaling } });
  const old = config({ ...LLAMA, rope_theta: 500000, rope_scaling: { type: 'llama3', ...scaling } });
  assert.deepEqual(v5, old);
  assert.deepEqual(v5.ropeScaling, { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 64 });
  // original_max_position_embeddings falls back to max_position_embeddings, as in transformers.
  const noOriginal = config({ ...LLAMA, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4 } });
  assert.equal(noOriginal.ropeScaling?.type === 'llama3' && noOriginal.ropeScaling.originalContextLength, 128);
  assert.deepEqual(config({ ...LLAMA, rope_scaling: { rope_type: 'linear', factor: 2 } }).ropeScaling, { type: 'linear', factor: 2 });
  assert.throws(() => config({ ...LLAMA, rope_scaling: { rope_type: 'dynamic', factor: 2 } }), (e: Error) => e instanceof UnsupportedError && e.message === `c.json: 'rope_scaling.rope_type' = "dynamic" is not supported for llama; FON does "default", "linear", "llama3"`);
  assert.throws(() => config({ ...LLAMA, rope_scaling: { rope_type: 'linear', factor: 2, beta_fast: 3 } }), /c\.json: unknown key 'rope_scaling\.beta_fast' \(value 3\) for rope_type "linear"/);
  assert.throws(() => config({ ...LLAMA, rope_parameters: { full_attention: { rope_type: 'default' }, sliding_attention: { rope_type: 'default' } } }), /gives each layer type its own RoPE/);
});

test('mistral: sliding_window on every layer; null is full attention; absent is transformers\' 4096', () => {
  const m = { ...LLAMA, architectures: ['MistralForCausalLM'], model_type: 'mistral', num_key_value_heads: 2 };
  assert.deepEqual(config({ ...m, sliding_window: 16 }).attention, [{ type: 'local', window: 16 }]);
  assert.deepEqual(config({ ...m, sliding_window: null }).attention, [{ type: 'full' }]);
  assert.deepEqual(config(m).attention, [{ type: 'local', window: 4096 }]);
  assert.equal(config({ ...LLAMA, architectures: ['MistralForCausalLM'], model_type: 'mistral', num_attention_heads: 8 }).nKvHeads, 8);
  assert.throws(() => config({ ...m, sliding_window: 0 }), /c\.json: 'sliding_window' = 0: expected a positive integer or null/);
});

test('qwen2: q/k/v biases; sliding layers from layer_types, or from use_sliding_window and max_window_layers', () => {
  const c = config(QWEN2);
  assert.deepEqual([c.qkvBias, c.bias, c.attention], [true, false, [{ type: 'full' }]]);
  // Without use_sliding_window the window is ignored (transformers sets it to None).
  assert.deepEqual(config({ ...QWEN2, sliding_window: 32, max_window_layers: 1 }).attention, [{ type: 'full' }]);
  assert.deepEqual(config({ ...QWEN2, use_sliding_window: true, sliding_window: 32, max_window_layers: 1 }).attention, [{ type: 'full' }, { type: 'local', window: 32 }, { type: 'local', window: 32 }]);
  assert.deepEqual(config({ ...QWEN2, use_sliding_window: true, sliding_window: 32, layer_types: ['sliding_attention', 'full_attention', 'sliding_attention'] }).attention, [{ type: 'local', window: 32 }, { type: 'full' }, { type: 'local', window: 32 }]);
  assert.throws(() => config({ ...QWEN2, layer_types: ['full_attention', 'sliding_attention', 'full_attention'] }), /c\.json: 'layer_types\[1\]' = "sliding_attention" but use_sliding_window is false, so there is no window/);
  assert.throws(() => config({ ...QWEN2, layer_types: ['full_attention'] }), /'layer_types' = \["full_attention"\]: expected a list of 3 entries/);
  assert.throws(() => config({ ...QWEN2, layer_types: ['full_attention', 'chunked_attention', 'full_attention'] }), /'layer_types\[1\]' = "chunked_attention" is not supported for qwen2/);
});

test('qwen3: QK-norm, head_dim independent of the width (default 128), attention_bias refused', () => {
  const q = { ...QWEN2, architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3' };
  const c = config({ ...q, head_dim: 16 });
  assert.deepEqual([c.qkNorm, c.qkvBias, c.headDim], [true, false, 16]);
  assert.equal(config(q).headDim, 128);
  assert.throws(() => config({ ...q, attention_bias: true }), /'attention_bias' = true is not supported for qwen3; FON does false/);
});

test('gpt2: n_inner null is 4 × width, Conv1D model with biases and learned positions', () => {
  const g = { model_type: 'gpt2', vocab_size: 50, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64, n_ctx: 64, n_inner: null, summary_type: 'cls_index', attn_pdrop: 0.1 };
  const c = config(g);
  assert.deepEqual([c.mlpHidden, c.headDim, c.contextLength, c.tieEmbeddings, c.normEps], [128, 8, 64, true, 1e-5]);
  assert.throws(() => config({ ...g, n_head: 5 }), /'n_embd' = 32 is not a multiple of 'n_head' = 5/);
  assert.throws(() => config({ ...g, add_cross_attention: true }), /'add_cross_attention' = true is not supported for gpt2/);
});

test('architecture: model_type first, else architectures; neither is an error', () => {
  assert.equal(hfArchitecture({ architectures: ['Qwen3ForCausalLM'] }), 'qwen3');
  assert.throws(() => hfArchitecture({ hidden_size: 3 }, 'c.json'), (e: Error) => e instanceof ConfigError && /c\.json: neither 'model_type' nor 'architectures'/.test(e.message));
  assert.throws(() => hfArchitecture({ model_type: 'qwen3_moe' }, 'c.json'), (e: Error) => e instanceof UnsupportedError && e.message.startsWith("c.json: architecture 'qwen3_moe' is not supported; FON reads gpt2 (GPT2LMHeadModel)"));
});

test('generation_config.json: the sampling knobs, stop ids inside the vocabulary, wrong types named', () => {
  assert.deepEqual(parseGenerationConfig({ do_sample: false, temperature: 0.6, top_p: 0.9, top_k: 0, max_new_tokens: 30, eos_token_id: [5, 9, 5, 5000], num_beams: 1 }, 100),
    { doSample: false, temperature: 0.6, topP: 0.9, topK: 0, maxNewTokens: 30, eosTokenIds: [5, 9] });
  assert.deepEqual(parseGenerationConfig({ eos_token_id: 7, temperature: null }, 100), { eosTokenIds: [7] });
  assert.throws(() => parseGenerationConfig({ top_p: 2 }, 100, 'g.json'), (e: Error) => e instanceof ConfigError && e.message === "g.json: 'top_p' = 2: expected a number in (0, 1]");
  assert.throws(() => parseGenerationConfig({ eos_token_id: 'x' }, 100, 'g.json'), /'eos_token_id' = "x": expected a token id or a list of them/);
});

test('tokenizer_config.json eos_token: a string or {content}, used only when the tokenizer has it', () => {
  const tok = { model: { vocab: { a: 0, '</s>': 1 } }, added_tokens: [{ id: 2, content: '<|im_end|>' }] };
  assert.equal(hfEosToken(tok, { eos_token: '<|im_end|>' }), '<|im_end|>');
  assert.equal(hfEosToken(tok, { eos_token: { content: '</s>', lstrip: false } }), '</s>');
  assert.equal(hfEosToken(tok, { eos_token: '<eos>' }), undefined);
  assert.equal(hfEosToken(tok, { eos_token: null }), undefined);
  assert.equal(hfEosToken(tok, undefined), undefined);
});
