/**
 * A FON model → a Hugging Face folder that transformers loads with `from_pretrained` (Node only),
 * written as transformers 5's `save_pretrained` writes one:
 *
 *   config.json                  the architecture's keys, sorted, two-space indent, floats written
 *                                as Python writes them (1e-05, 500000.0): transformers 5 configs are
 *                                strict dataclasses, where a float key read as an int may not pass
 *   model.safetensors            the weights under Hugging Face names (weights.ts: the loader's table
 *                                run backwards), `__metadata__` {"format": "pt"}, f32 unless told
 *                                otherwise; tied models have no lm_head.weight, as transformers saves
 *                                them. Past `maxShardBytes`: model-0000i-of-0000n.safetensors and
 *                                model.safetensors.index.json
 *   tokenizer.json               the tokenizer's own JSON
 *   tokenizer_config.json        PreTrainedTokenizerFast, bos / eos tokens, model_max_length
 *   generation_config.json       bos / eos ids (and the sampling defaults, when given)
 *
 * The architecture follows from the FON config:
 *
 *   layernorm + gelu + learned positions + biases, GPT-2 shaped    GPT2LMHeadModel (gpt2)
 *   rmsnorm + swiglu + rope, no biases, QK-norm                    Qwen3ForCausalLM (qwen3)
 *   the same with q, k, v biases (qkvBias) instead of QK-norm       Qwen2ForCausalLM (qwen2)
 *   the same with neither, every layer local with one window        MistralForCausalLM (mistral)
 *   the same with neither, every layer full                         LlamaForCausalLM (llama)
 *
 * Qwen2 and Qwen3 also take a mix of full and sliding layers (`layer_types`, one window). What no
 * architecture expresses is an UnsupportedError naming the FON config key, its value and what the
 * Hugging Face architectures support. Every key written is one io/hf/config.ts reads back to the
 * same FON config, so `loadModel` of the folder gives the same model.
 *
 * The folder is written atomically: into `<out>.tmp-<pid>-<n>` beside it, each file fsynced, then
 * renamed to `<out>`; a failure part-way removes the temporary folder and leaves `<out>` as it was.
 */
import { ArgumentError, showValue, UnsupportedError } from '../../errors.ts';
import { layerAttention, type ModelConfig, type RopeScaling } from '../../model/config.ts';
import { mechanismHfExport } from '../../attention/table.ts';
import type { HfAttentionKind } from '../../attention/mechanism.ts';
import type { Decoder } from '../../model/decoder.ts';
import {
  fsyncDir, listDir, makeDir, makeNewDir, parentDir, pathKind, removePath, renamePath, tempPathFor, writeNewFileSynced, joinPath,
} from '../../platform/files.ts';
import { f32ToHost, hostToF32 } from '../../tensor/dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { encodeSafetensors, SAFE_DTYPE_BYTES, type SafeDType, type SafeTensorInput } from '../safetensors.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { HF_ARCHITECTURES, type HfArchitecture } from './config.ts';
import type { HfGenerationDefaults } from './generation.ts';
import { hfWeightPlan, placeValues, type HfParamSource } from './weights.ts';

/** Storage dtypes of the exported weights. */
export type HfExportDType = 'f32' | 'bf16' | 'f16';

export const HF_EXPORT_DTYPES: readonly HfExportDType[] = ['f32', 'bf16', 'f16'];

export interface HfExportOptions {
  /** Weight dtype in model.safetensors (default f32: the exact values). */
  dtype?: HfExportDType;
  /** Replace an existing non-empty output folder (default: refuse). */
  overwrite?: boolean;
  /** tokenizer_config.json's bos_token, a token of the tokenizer; default the eos token (GPT-2's convention). */
  bosToken?: string;
  /** Sampling defaults for generation_config.json (those of a Hugging Face source folder). */
  generation?: HfGenerationDefaults | null;
  /** Largest model.safetensors file before the weights are split into shards (default 2 GiB, built in memory). */
  maxShardBytes?: number;
  /**
   * The ids FON puts before a prompt of this model: default [the eos id], as `generate` does for
   * a FON model (the separator its training puts before every document); a model loaded from a
   * Hugging Face folder passes its tokenizer's prefixIds. When the tokenizer does not already
   * prepend them, tokenizer.json gets a TemplateProcessing post-processor that does (after the
   * tokenizer's own, in a Sequence), so transformers encodes a prompt as FON does.
   */
  startIds?: readonly number[];
}

export interface HfExportResult {
  /** The folder written. */
  dir: string;
  architecture: HfArchitecture;
  /** The transformers class in config.json's `architectures`. */
  className: string;
  /** The files of the folder, sorted. */
  files: string[];
  /** Scalar parameters written. */
  parameters: number;
}

/** The transformers release whose `save_pretrained` output this mirrors (the fixtures' of test/fixtures/hf). */
export const TRANSFORMERS_FORMAT_VERSION = '5.17.0';

const DEFAULT_MAX_SHARD_BYTES = 2 * 1024 ** 3;

const TORCH_DTYPE: Record<HfExportDType, string> = { f32: 'float32', bf16: 'bfloat16', f16: 'float16' };
const SAFE_DTYPE: Record<HfExportDType, SafeDType> = { f32: 'F32', bf16: 'BF16', f16: 'F16' };

// ---- config.json ----

/** A number Python wrote as a float (`0.0`, `1e-05`), whatever its value. */
class PyFloat {
  constructor(readonly value: number) {}
}
const float = (x: number) => new PyFloat(x);

/** `repr(float)` of Python: the shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
export function pythonFloat(x: number): string {
  if (!Number.isFinite(x)) throw new ArgumentError(`pythonFloat: ${x} has no JSON form`);
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mantissa, expText] = x.toExponential().split('e');
  const exp = Number(expText);
  const sign = mantissa.startsWith('-') ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
  return `${sign}${whole}.${digits.slice(exp + 1) || '0'}`;
}

/**
 * JSON as Python's `json.dumps(v, indent=2, sort_keys=…, ensure_ascii=…)` writes it: PyFloat and
 * non-integers as Python floats, keys sorted by code point when asked, one item a line.
 */
function pythonJson(v: unknown, opts: { sortKeys: boolean; ensureAscii: boolean }, indent = ''): string {
  if (v instanceof PyFloat) return pythonFloat(v.value);
  if (v === null) return 'null';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') return Number.isSafeInteger(v) ? String(v) : pythonFloat(v);
  if (typeof v === 'string') {
    const s = JSON.stringify(v);
    return opts.ensureAscii ? s.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : s;
  }
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    return `[\n${v.map((x) => inner + pythonJson(x, opts, inner)).join(',\n')}\n${indent}]`;
  }
  if (typeof v === 'object') {
    const keys = Object.keys(v as object);
    if (keys.length === 0) return '{}';
    if (opts.sortKeys) keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const o = v as Record<string, unknown>;
    return `{\n${keys.map((k) => `${inner}${pythonJson(k, opts)}: ${pythonJson(o[k], opts, inner)}`).join(',\n')}\n${indent}}`;
  }
  throw new ArgumentError(`pythonJson: ${typeof v} has no JSON form`);
}

/** How transformers writes config.json and generation_config.json. */
const configText = (o: object) => `${pythonJson(o, { sortKeys: true, ensureAscii: true })}\n`;

const LLAMA_LIKE = 'LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM';

function cannot(key: string, value: unknown, supports: string): UnsupportedError {
  return new UnsupportedError(`cannot export as a Hugging Face model: '${key}' = ${showValue(value)}; ${supports}`);
}

/**
 * Each layer's Hugging Face attention as its mechanism's def says (attention/table.ts), the
 * distinct windows of the sliding layers and whether any layer is full; UnsupportedError naming the
 * first layer whose mechanism has no counterpart.
 */
function attentionLayout(c: ModelConfig): { full: boolean; windows: number[]; types: HfAttentionKind[] } {
  const types = Array.from({ length: c.nLayers }, (_, i) => {
    const kind = mechanismHfExport(layerAttention(c, i));
    if ('unsupported' in kind) throw cannot('attention', c.attention, `the Hugging Face architectures FON writes have full or sliding-window softmax attention only; ${kind.unsupported}`);
    return kind;
  });
  const windows = [...new Set(types.flatMap((a) => (a.kind === 'sliding' ? [a.window] : [])))];
  return { full: types.some((a) => a.kind === 'full'), windows, types };
}

/** GPT2LMHeadModel, when the config is GPT-2's shape; else the first key that is not. */
function checkGpt2(c: ModelConfig): void {
  const gpt2 = 'GPT2LMHeadModel (the Hugging Face architecture FON writes for LayerNorm models)';
  if (c.mlp !== 'gelu') throw cannot('mlp', c.mlp, `${gpt2} has a GELU MLP; SwiGLU goes with norm "rmsnorm" (${LLAMA_LIKE})`);
  if (c.positions !== 'learned') throw cannot('positions', c.positions, `${gpt2} has learned positions; RoPE goes with norm "rmsnorm" (${LLAMA_LIKE})`);
  if (!c.bias) throw cannot('bias', c.bias, `${gpt2} has biases in every linear layer`);
  if (c.qkNorm) throw cannot('qkNorm', c.qkNorm, `${gpt2} has no QK-norm (Qwen3ForCausalLM has, with norm "rmsnorm")`);
  if (c.nKvHeads !== c.nHeads) throw cannot('nKvHeads', c.nKvHeads, `${gpt2} has as many key/value heads as query heads (nHeads = ${c.nHeads})`);
  if (c.headDim * c.nHeads !== c.dModel) throw cannot('headDim', c.headDim, `${gpt2}'s heads are dModel / nHeads = ${c.dModel / c.nHeads} wide`);
  const { windows } = attentionLayout(c);
  if (windows.length) throw cannot('attention', c.attention, `${gpt2} has full attention in every layer`);
}

/** Which of Llama, Mistral, Qwen2, Qwen3 expresses an RMSNorm config; else the first key none does. */
function llamaLikeArchitecture(c: ModelConfig): Exclude<HfArchitecture, 'gpt2'> {
  if (c.mlp !== 'swiglu') throw cannot('mlp', c.mlp, `${LLAMA_LIKE} (the RMSNorm architectures) have a SwiGLU MLP; GELU goes with norm "layernorm" (GPT2LMHeadModel)`);
  if (c.positions !== 'rope') throw cannot('positions', c.positions, `${LLAMA_LIKE} (the RMSNorm architectures) use RoPE; learned positions go with norm "layernorm" (GPT2LMHeadModel)`);
  if (c.bias) throw cannot('bias', c.bias, `${LLAMA_LIKE} (the RMSNorm architectures) have no biases but Qwen2's on q, k and v (qkvBias)`);
  if (c.qkNorm && c.qkvBias) throw cannot('qkvBias', c.qkvBias, 'Qwen3ForCausalLM (QK-norm) has no q, k, v biases and Qwen2ForCausalLM (q, k, v biases) no QK-norm');
  const { full, windows } = attentionLayout(c);
  const arch = c.qkNorm ? 'qwen3' : c.qkvBias ? 'qwen2' : windows.length === 0 ? 'llama' : !full && windows.length === 1 ? 'mistral' : null;
  if (arch === null) {
    throw cannot('attention', c.attention, 'LlamaForCausalLM has full attention in every layer and MistralForCausalLM one sliding window in every layer; a mix of full and sliding layers needs Qwen2ForCausalLM (qkvBias) or Qwen3ForCausalLM (qkNorm)');
  }
  if (windows.length > 1) throw cannot('attention', c.attention, `${HF_ARCHITECTURES[arch]} has one sliding_window for all its sliding layers`);
  if (arch === 'qwen2' && c.headDim * c.nHeads !== c.dModel) {
    throw cannot('headDim', c.headDim, `Qwen2ForCausalLM has no head_dim key: its heads are hidden_size / num_attention_heads = ${c.dModel / c.nHeads} wide (Llama, Mistral and Qwen3 take any head_dim)`);
  }
  if (arch === 'llama' && c.dModel % c.nHeads !== 0) {
    throw cannot('dModel', c.dModel, `LlamaForCausalLM requires hidden_size to be a multiple of num_attention_heads (nHeads = ${c.nHeads}), whatever head_dim is`);
  }
  return arch;
}

/**
 * The Hugging Face architecture that computes exactly what FON config `c` does; UnsupportedError
 * when none does. Organs add no weights (the exit head is the model's own norm and LM head), so a
 * model with organs exports as its full network.
 */
export function hfArchitectureFor(c: ModelConfig): HfArchitecture {
  if (c.depth) throw cannot('depth', c.depth, 'the Hugging Face architectures FON writes have no Depth-Attention (values mixed across layers at the same token)');
  attentionLayout(c); // refuses a mechanism without a counterpart before the architecture's own checks
  if (c.norm === 'layernorm') {
    checkGpt2(c);
    return 'gpt2';
  }
  return llamaLikeArchitecture(c);
}

/** transformers 5's `rope_parameters` for FON's RoPE θ and scaling. */
function ropeParameters(theta: number, s: RopeScaling | null): Record<string, unknown> {
  if (s === null) return { rope_theta: float(theta), rope_type: 'default' };
  switch (s.type) {
    case 'linear': return { factor: float(s.factor), rope_theta: float(theta), rope_type: 'linear' };
    case 'llama3': return {
      factor: float(s.factor), high_freq_factor: float(s.highFreqFactor), low_freq_factor: float(s.lowFreqFactor),
      original_max_position_embeddings: s.originalContextLength, rope_theta: float(theta), rope_type: 'llama3',
    };
    default: throw cannot('ropeScaling', s, 'Hugging Face rope_parameters here are "default", "linear" and "llama3"');
  }
}

/** Token ids config.json and generation_config.json name. */
export interface HfTokenIds {
  bos: number;
  eos: number;
}

function gpt2Config(c: ModelConfig, ids: HfTokenIds, dtype: string): Record<string, unknown> {
  return {
    activation_function: 'gelu_new', add_cross_attention: false, architectures: [HF_ARCHITECTURES.gpt2], attn_pdrop: float(0),
    bos_token_id: ids.bos, dtype, embd_pdrop: float(0), eos_token_id: ids.eos, initializer_range: float(0.02),
    layer_norm_epsilon: float(c.normEps), model_type: 'gpt2', n_embd: c.dModel, n_head: c.nHeads,
    n_inner: c.mlpHidden === 4 * c.dModel ? null : c.mlpHidden, n_layer: c.nLayers, n_positions: c.contextLength,
    pad_token_id: null, reorder_and_upcast_attn: false, resid_pdrop: float(0), scale_attn_by_inverse_layer_idx: false,
    scale_attn_weights: true, summary_activation: null, summary_first_dropout: float(0.1), summary_proj_to_labels: true,
    summary_type: 'cls_index', summary_use_proj: true, tie_word_embeddings: c.tieEmbeddings,
    transformers_version: TRANSFORMERS_FORMAT_VERSION, use_cache: true, vocab_size: c.vocabSize,
  };
}

function llamaLikeConfig(arch: Exclude<HfArchitecture, 'gpt2'>, c: ModelConfig, ids: HfTokenIds, dtype: string): Record<string, unknown> {
  const o: Record<string, unknown> = {
    architectures: [HF_ARCHITECTURES[arch]], attention_dropout: float(0), bos_token_id: ids.bos, dtype, eos_token_id: ids.eos,
    hidden_act: 'silu', hidden_size: c.dModel, initializer_range: float(0.02), intermediate_size: c.mlpHidden,
    max_position_embeddings: c.contextLength, model_type: arch, num_attention_heads: c.nHeads, num_hidden_layers: c.nLayers,
    num_key_value_heads: c.nKvHeads, pad_token_id: null, rms_norm_eps: float(c.normEps),
    rope_parameters: ropeParameters(c.ropeTheta, c.ropeScaling), tie_word_embeddings: c.tieEmbeddings,
    transformers_version: TRANSFORMERS_FORMAT_VERSION, use_cache: true, vocab_size: c.vocabSize,
  };
  if (arch !== 'qwen2') o.head_dim = c.headDim;
  if (arch === 'llama') Object.assign(o, { attention_bias: false, mlp_bias: false, pretraining_tp: 1 });
  const { types, windows } = attentionLayout(c);
  if (arch === 'mistral') o.sliding_window = windows[0];
  if (arch === 'qwen2' || arch === 'qwen3') {
    if (arch === 'qwen3') o.attention_bias = false;
    const sliding = types.map((a) => a.kind === 'sliding');
    const firstSliding = sliding.indexOf(true);
    // layer_types rules; max_window_layers agrees with it for readers that predate layer_types
    // when the sliding layers are the last ones, and is transformers' default otherwise.
    const suffix = firstSliding >= 0 && sliding.slice(firstSliding).every(Boolean);
    Object.assign(o, {
      layer_types: sliding.map((s) => (s ? 'sliding_attention' : 'full_attention')),
      max_window_layers: suffix ? firstSliding : 28,
      sliding_window: windows.length ? windows[0] : null,
      use_sliding_window: windows.length > 0,
    });
  }
  return o;
}

/**
 * config.json's object for FON config `c` (values that Python writes as floats are PyFloat; write
 * it with `hfConfigText`), and the architecture; UnsupportedError when no architecture fits.
 */
export function hfConfigFor(c: ModelConfig, ids: HfTokenIds, dtype: HfExportDType = 'f32'): { architecture: HfArchitecture; json: Record<string, unknown> } {
  const architecture = hfArchitectureFor(c);
  const json = architecture === 'gpt2' ? gpt2Config(c, ids, TORCH_DTYPE[dtype]) : llamaLikeConfig(architecture, c, ids, TORCH_DTYPE[dtype]);
  return { architecture, json };
}

/** config.json's text for FON config `c`, as transformers writes it. */
export function hfConfigText(c: ModelConfig, ids: HfTokenIds, dtype: HfExportDType = 'f32'): string {
  return configText(hfConfigFor(c, ids, dtype).json);
}

// ---- generation_config.json, tokenizer_config.json ----

function generationConfig(ids: HfTokenIds, g: HfGenerationDefaults | null | undefined): Record<string, unknown> {
  const sampling = g && [g.doSample, g.temperature, g.topK, g.topP, g.repetitionPenalty, g.maxNewTokens].some((x) => x !== undefined);
  if (!g || !sampling) {
    // What save_pretrained derives from the model config.
    return {
      _from_model_config: true, bos_token_id: ids.bos, eos_token_id: ids.eos, output_attentions: false,
      output_hidden_states: false, transformers_version: TRANSFORMERS_FORMAT_VERSION, use_cache: true,
    };
  }
  // A GenerationConfig of its own: transformers writes the values that differ from its defaults.
  const o: Record<string, unknown> = { eos_token_id: g.eosTokenIds?.length ? g.eosTokenIds : [ids.eos], transformers_version: TRANSFORMERS_FORMAT_VERSION };
  if (g.doSample !== undefined) o.do_sample = g.doSample;
  if (g.temperature !== undefined) o.temperature = float(g.temperature);
  if (g.topK !== undefined) o.top_k = g.topK;
  if (g.topP !== undefined) o.top_p = float(g.topP);
  if (g.repetitionPenalty !== undefined) o.repetition_penalty = float(g.repetitionPenalty);
  if (g.maxNewTokens !== undefined) o.max_new_tokens = g.maxNewTokens;
  return o;
}

function tokenizerConfig(bos: string, eos: string, contextLength: number, addsBos: boolean): Record<string, unknown> {
  return {
    add_bos_token: addsBos, add_eos_token: false, bos_token: bos, clean_up_tokenization_spaces: false, eos_token: eos,
    model_max_length: contextLength, tokenizer_class: 'PreTrainedTokenizerFast',
  };
}

/**
 * The tokenizer's JSON with a post-processor that puts `start` before a text when its own does not
 * (Hugging Face's TemplateProcessing: the single template is the start tokens, then the text);
 * ArgumentError when it already prepends other ids.
 */
function tokenizerJsonStarting(tokenizer: Tokenizer, start: readonly number[]): Record<string, unknown> {
  const json = tokenizer.toJSON() as Record<string, unknown>;
  const have = tokenizer.prefixIds;
  if (have.length === start.length && have.every((id, i) => id === start[i])) return json;
  if (have.length > 0) throw new ArgumentError(`exportHf: startIds [${start.join(', ')}], but the tokenizer already puts [${have.join(', ')}] before a text: expected its own prefix`);
  const tokens = start.map((id) => {
    const t = tokenizer.idToToken(id);
    if (t === undefined) throw new ArgumentError(`exportHf: start id ${id} has no token in the tokenizer`);
    return t;
  });
  const special = (t: string) => ({ SpecialToken: { id: t, type_id: 0 } });
  const template = {
    type: 'TemplateProcessing',
    single: [...tokens.map(special), { Sequence: { id: 'A', type_id: 0 } }],
    pair: [...tokens.map(special), { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: Object.fromEntries(tokens.map((t, i) => [t, { id: t, ids: [start[i]], tokens: [t] }])),
  };
  const own = json.post_processor;
  json.post_processor = own === undefined || own === null ? template : { type: 'Sequence', processors: [own, template] };
  return json;
}

// ---- weights ----

/** One Hugging Face tensor and the FON parameters it is built from. */
interface TensorPlan {
  name: string;
  shape: number[];
  sources: HfParamSource[];
}

const fmt = (s: readonly number[]) => `[${s.join(', ')}]`;

/** The tensors to write, in the plan's order, each with its parameters; every parameter of the model used once. */
function tensorPlans(arch: HfArchitecture, model: Decoder): { tensors: TensorPlan[]; params: Map<string, Tensor> } {
  const params = new Map(model.namedParameters());
  const byName = new Map<string, TensorPlan>();
  for (const p of hfWeightPlan(arch, model.config).params) {
    const t = params.get(p.param);
    if (!t) throw new ArgumentError(`exportHf: the model has no parameter '${p.param}' (expected shape ${fmt(p.shape)} for ${p.tensor})`);
    if (fmt(t.shape) !== fmt(p.shape)) throw new ArgumentError(`exportHf: parameter '${p.param}' has shape ${fmt(t.shape)}, expected ${fmt(p.shape)} from its config`);
    const plan = byName.get(p.tensor) ?? { name: p.tensor, shape: p.tensorShape, sources: [] };
    plan.sources.push(p);
    byName.set(p.tensor, plan);
  }
  const used = new Set([...byName.values()].flatMap((t) => t.sources.map((s) => s.param)));
  const left = [...params.keys()].filter((n) => !used.has(n));
  if (left.length) throw new ArgumentError(`exportHf: parameters ${left.join(', ')} have no Hugging Face tensor for ${HF_ARCHITECTURES[arch]}`);
  return { tensors: [...byName.values()], params };
}

const elements = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/** Groups tensors into shards of at most `max` bytes each (a larger tensor alone), in order. */
function shardTensors(tensors: TensorPlan[], bytesPer: number, max: number): TensorPlan[][] {
  const shards: TensorPlan[][] = [];
  let size = 0;
  for (const t of tensors) {
    const bytes = elements(t.shape) * bytesPer;
    if (shards.length === 0 || (size + bytes > max && size > 0)) { shards.push([]); size = 0; }
    shards[shards.length - 1].push(t);
    size += bytes;
  }
  return shards;
}

/** One shard's safetensors bytes: each tensor assembled in f32 from its parameters, then stored in `dtype`. */
async function shardBytes(tensors: TensorPlan[], params: Map<string, Tensor>, dtype: HfExportDType): Promise<Uint8Array> {
  const inputs: Record<string, SafeTensorInput> = {};
  for (const t of tensors) {
    const values = new Float32Array(elements(t.shape));
    for (const s of t.sources) {
      const p = params.get(s.param)!;
      placeValues(values, hostToF32(await p.data(), p.dtype), t.shape, s.take);
    }
    inputs[t.name] = { dtype: SAFE_DTYPE[dtype], shape: t.shape, data: f32ToHost(values, dtype) };
  }
  return encodeSafetensors(inputs, { format: 'pt' });
}

// ---- the folder ----

/** `dir` without trailing separators (so a temporary sibling is not made inside it). */
function trimDir(dir: string): string {
  const trimmed = dir.replace(/[\\/]+$/, '');
  if (trimmed === '') throw new ArgumentError(`exportHf: output folder ${JSON.stringify(dir)} is not allowed`);
  return trimmed;
}

/**
 * Whether `outDir` may be written: absent, or an empty folder, or (with `overwrite`) any folder.
 * ArgumentError naming the path otherwise. Returns whether a folder is there now.
 */
export async function checkExportTarget(outDir: string, overwrite = false): Promise<boolean> {
  const dir = trimDir(outDir);
  const kind = await pathKind(dir);
  if (kind === null) return false;
  if (kind !== 'dir') throw new ArgumentError(`${dir} exists and is not a folder; the export writes a folder there`);
  if (!overwrite && (await listDir(dir)).length > 0) throw new ArgumentError(`${dir} exists and is not empty; choose another folder or pass overwrite (--overwrite) to replace it`);
  return true;
}

/**
 * Writes `model` and `tokenizer` to `outDir` as a Hugging Face folder of the architecture the
 * config implies (see the file comment). Errors: UnsupportedError for a config no Hugging Face
 * architecture expresses (its key, value and what is supported), ArgumentError for a non-empty
 * `outDir` without `overwrite`, an unknown bos token or dtype; a failure while writing leaves
 * `outDir` as it was.
 */
export async function exportHf(model: Decoder, tokenizer: Tokenizer, outDir: string, opts: HfExportOptions = {}): Promise<HfExportResult> {
  const dtype = opts.dtype ?? 'f32';
  if (!HF_EXPORT_DTYPES.includes(dtype)) throw new ArgumentError(`exportHf: dtype ${showValue(dtype)}: expected one of ${HF_EXPORT_DTYPES.join(', ')}`);
  const maxShard = opts.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES;
  if (!Number.isSafeInteger(maxShard) || maxShard < 1) throw new ArgumentError(`exportHf: maxShardBytes ${showValue(opts.maxShardBytes)}: expected a positive integer`);
  const c = model.config;
  const eosToken = tokenizer.idToToken(tokenizer.eosId);
  if (eosToken === undefined) throw new ArgumentError(`exportHf: the tokenizer's eos id ${tokenizer.eosId} has no token`);
  const bosToken = opts.bosToken ?? eosToken;
  const bosId = tokenizer.tokenToId(bosToken);
  if (bosId === undefined) throw new ArgumentError(`exportHf: bos token ${showValue(bosToken)} is not a token of the tokenizer`);
  const start = opts.startIds ?? [tokenizer.eosId];
  const tokenizerJson = tokenizerJsonStarting(tokenizer, start);
  if (tokenizer.vocabSize > c.vocabSize) throw new ArgumentError(`exportHf: the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocabSize is ${c.vocabSize}`);
  const ids = { bos: bosId, eos: tokenizer.eosId };
  const { architecture, json } = hfConfigFor(c, ids, dtype);
  const { tensors, params } = tensorPlans(architecture, model);

  const dir = trimDir(outDir);
  const existed = await checkExportTarget(dir, opts.overwrite);
  await makeDir(parentDir(dir));
  const tmp = tempPathFor(dir);
  let aside: string | null = null;
  const files: string[] = [];
  const write = async (name: string, data: Uint8Array | string) => {
    await writeNewFileSynced(joinPath(tmp, name), data);
    files.push(name);
  };
  try {
    await makeNewDir(tmp);
    await write('config.json', configText(json));
    const bytesPer = SAFE_DTYPE_BYTES[SAFE_DTYPE[dtype]];
    const shards = shardTensors(tensors, bytesPer, maxShard);
    if (shards.length === 1) {
      await write('model.safetensors', await shardBytes(shards[0], params, dtype));
    } else {
      const weightMap: Record<string, string> = {};
      const n = String(shards.length).padStart(5, '0');
      for (let i = 0; i < shards.length; i++) {
        const file = `model-${String(i + 1).padStart(5, '0')}-of-${n}.safetensors`;
        await write(file, await shardBytes(shards[i], params, dtype));
        for (const t of shards[i]) weightMap[t.name] = file;
      }
      const total = tensors.reduce((s, t) => s + elements(t.shape), 0);
      await write('model.safetensors.index.json', configText({ metadata: { total_parameters: total, total_size: total * bytesPer }, weight_map: weightMap }));
    }
    await write('tokenizer.json', JSON.stringify(tokenizerJson, null, 2));
    await write('tokenizer_config.json', `${pythonJson(tokenizerConfig(bosToken, eosToken, c.contextLength, start.length > 0), { sortKeys: true, ensureAscii: false })}\n`);
    await write('generation_config.json', configText(generationConfig(ids, opts.generation)));
    await fsyncDir(tmp);
    if (existed && (await pathKind(dir)) === 'dir') {
      aside = tempPathFor(dir);
      await renamePath(dir, aside);
    }
    await renamePath(tmp, dir);
    await fsyncDir(parentDir(dir));
  } catch (e) {
    await removePath(tmp).catch(() => undefined);
    if (aside !== null && (await pathKind(dir)) === null) await renamePath(aside, dir).catch(() => undefined);
    throw e;
  }
  if (aside !== null) await removePath(aside);
  return { dir, architecture, className: HF_ARCHITECTURES[architecture], files: files.sort(), parameters: model.parameterCount() };
}
