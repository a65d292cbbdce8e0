/**
 * A Hugging Face config.json → FON's ModelConfig, per architecture (chosen by `model_type`, else by
 * `architectures`). Every key of the file is either mapped, or listed below as one that does not
 * change what the model computes (dropout rates, token ids, dtype, bookkeeping), or an error: an
 * unknown key is a ConfigError naming it and its value, a value FON cannot compute (rope_type
 * "yarn", hidden_act "gelu", GPT-2's scale_attn_by_inverse_layer_idx true, …) an
 * UnsupportedError naming the key, the value and what FON does. A key that is absent takes
 * transformers' default for that architecture; the sizes (hidden_size, num_hidden_layers, …) and
 * max_position_embeddings must be present.
 *
 * Semantics, checked against transformers' modeling code (5.x):
 *   gpt2     learned positions (wpe), LayerNorm with bias, biases everywhere, gelu_new (FON's tanh
 *            GELU), scores scaled by 1/√D, tied head; Conv1D weights are handled in weights.ts.
 *   llama    RMSNorm, SwiGLU, RoPE (rotate-half pairs), GQA; rope types default, linear, llama3.
 *   mistral  llama + sliding window W on every layer: key j is seen from query i iff
 *            0 ≤ i − j < W, which is FON's {type: 'local', window: W}.
 *   qwen2    llama + biases on q, k, v (not o); sliding layers per `layer_types`.
 *   qwen3    llama + QK-norm (RMSNorm over each head's D with its own weight, eps rms_norm_eps,
 *            before RoPE) and head_dim independent of hidden_size / heads.
 * contextLength is max_position_embeddings (n_positions for GPT-2).
 */
import { clip, showValue, UnsupportedError } from '../../errors.ts';
import { ConfigError, DEFAULT_CONFIG, parseModelConfig, type LayerAttention, type ModelConfig, type RopeScaling } from '../../model/config.ts';

/** The architectures FON reads: model_type → the transformers class of its causal LM. */
export const HF_ARCHITECTURES = {
  gpt2: 'GPT2LMHeadModel',
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
} as const;

export type HfArchitecture = keyof typeof HF_ARCHITECTURES;

export interface HfModelConfig {
  architecture: HfArchitecture;
  config: ModelConfig;
}

type Json = Record<string, unknown>;

const show = (v: unknown) => showValue(v);
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const SUPPORTED = Object.entries(HF_ARCHITECTURES).map(([t, c]) => `${t} (${c})`).join(', ');

/** Keys of every architecture that leave the computation unchanged: bookkeeping, dtype, token ids, caching. */
const COMMON_IGNORED = [
  'architectures', 'model_type', 'transformers_version', '_name_or_path', 'dtype', 'torch_dtype', 'use_cache',
  'initializer_range', 'bos_token_id', 'eos_token_id', 'pad_token_id', 'output_attentions', 'output_hidden_states',
  'return_dict', 'tokenizer_class',
  // Labels of a classification head, which a causal LM does not have.
  'id2label', 'label2id', '_num_labels',
];

/** Per-architecture keys that leave inference unchanged (dropout is off in inference; FON has none). */
const IGNORED: Record<HfArchitecture, readonly string[]> = {
  gpt2: [
    'attn_pdrop', 'embd_pdrop', 'resid_pdrop', 'n_ctx', 'task_specific_params', 'predict_special_tokens',
    'summary_activation', 'summary_first_dropout', 'summary_proj_to_labels', 'summary_type', 'summary_use_proj',
    // Computes the scores in f32 in another order: FON's attention accumulates in f32 anyway.
    'reorder_and_upcast_attn',
  ],
  // pretraining_tp > 1 only splits the matmuls into slices (the same sums, another order).
  llama: ['attention_dropout', 'pretraining_tp'],
  mistral: ['attention_dropout'],
  qwen2: ['attention_dropout'],
  qwen3: ['attention_dropout'],
};

/** Reads config.json keys, remembering which were read, with errors naming the file, key and value. */
class Keys {
  private readonly used = new Set<string>();

  constructor(private readonly json: Json, private readonly where: string, private readonly arch: HfArchitecture) {}

  /** Whether the file has the key at all (null included). */
  has(key: string): boolean {
    return Object.hasOwn(this.json, key);
  }

  /** The value, or undefined when absent or null (transformers' "not set"). */
  get(key: string): unknown {
    this.used.add(key);
    const v = Object.hasOwn(this.json, key) ? this.json[key] : undefined;
    return v === null ? undefined : v;
  }

  private missing(key: string): never {
    throw new ConfigError(`${this.where}: '${key}' is missing; ${this.arch} needs it`);
  }

  int(key: string, fallback?: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback ?? this.missing(key);
    if (!Number.isInteger(v)) throw new ConfigError(`${this.where}: '${key}' = ${show(v)}: expected an integer`);
    return v as number;
  }

  number(key: string, fallback?: number): number {
    const v = this.get(key);
    if (v === undefined) return fallback ?? this.missing(key);
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ConfigError(`${this.where}: '${key}' = ${show(v)}: expected a number`);
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.get(key);
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean') throw new ConfigError(`${this.where}: '${key}' = ${show(v)}: expected true or false`);
    return v;
  }

  /** A key whose only values FON computes are `allowed`; another value is an UnsupportedError. */
  only<T>(key: string, fallback: T, allowed: readonly T[]): T {
    const v = this.get(key);
    if (v === undefined) return fallback;
    if (!allowed.includes(v as T)) throw this.unsupported(key, v, allowed.map(show).join(' or '));
    return v as T;
  }

  unsupported(key: string, value: unknown, does: string): UnsupportedError {
    return new UnsupportedError(`${this.where}: '${key}' = ${show(value)} is not supported for ${this.arch}; FON does ${does}`);
  }

  /** Every key not read and not known to leave the computation unchanged is an error. */
  finish(): void {
    const ignored = new Set([...COMMON_IGNORED, ...IGNORED[this.arch]]);
    for (const [k, v] of Object.entries(this.json)) {
      if (this.used.has(k) || ignored.has(k)) continue;
      throw new ConfigError(`${this.where}: unknown key '${k}' (value ${show(v)}) for ${this.arch}: FON neither maps it nor knows it to leave the computation unchanged`);
    }
  }
}

/** The architecture of a config.json object: by model_type, else by architectures[0]. */
export function hfArchitecture(json: unknown, where = 'config.json'): HfArchitecture {
  if (!isObject(json)) throw new ConfigError(`${where}: expected a JSON object, got ${show(json)?.slice(0, 80)}`);
  const type = json.model_type;
  const classes = json.architectures;
  if (classes !== undefined && classes !== null && !(Array.isArray(classes) && classes.every((c) => typeof c === 'string'))) {
    throw new ConfigError(`${where}: 'architectures' = ${show(classes)}: expected a list of class names`);
  }
  const listed = (classes ?? []) as string[];
  if (type !== undefined && type !== null) {
    if (typeof type !== 'string') throw new ConfigError(`${where}: 'model_type' = ${show(type)}: expected a string`);
    if (!Object.hasOwn(HF_ARCHITECTURES, type)) throw new UnsupportedError(`${where}: architecture '${clip(String(type), 80)}'${listed.length ? ` (${clip(listed.join(', '), 200)})` : ''} is not supported; FON reads ${SUPPORTED}`);
    const arch = type as HfArchitecture;
    const other = listed.find((c) => c !== HF_ARCHITECTURES[arch]);
    if (other !== undefined) throw new UnsupportedError(`${where}: architecture '${clip(String(other), 80)}' is not supported; FON reads ${SUPPORTED}`);
    return arch;
  }
  if (listed.length === 0) throw new ConfigError(`${where}: neither 'model_type' nor 'architectures' says which architecture this is; FON reads ${SUPPORTED}`);
  const found = Object.entries(HF_ARCHITECTURES).find(([, c]) => c === listed[0]);
  if (!found) throw new UnsupportedError(`${where}: architecture '${clip(String(listed[0]), 80)}' is not supported; FON reads ${SUPPORTED}`);
  return found[0] as HfArchitecture;
}

/** RoPE θ and scaling from `rope_parameters` (transformers 5) or `rope_theta` + `rope_scaling` (older files). */
function readRope(k: Keys, where: string, contextLength: number): { ropeTheta: number; ropeScaling: RopeScaling | null } {
  const scaling = k.get('rope_scaling');
  const params = k.get('rope_parameters');
  // transformers takes rope_scaling over rope_parameters when both are set.
  const p = scaling ?? params ?? {};
  const key = scaling !== undefined ? 'rope_scaling' : 'rope_parameters';
  if (!isObject(p)) throw new ConfigError(`${where}: '${key}' = ${show(p)}: expected an object`);
  if (Object.keys(p).some((x) => x === 'full_attention' || x === 'sliding_attention')) {
    throw new UnsupportedError(`${where}: '${key}' gives each layer type its own RoPE (${Object.keys(p).join(', ')}); FON does one RoPE for every layer`);
  }
  const topTheta = k.number('rope_theta', 10000);
  const topPartial = k.get('partial_rotary_factor');
  const topOriginal = k.get('original_max_position_embeddings');
  const type = p.rope_type ?? p.type ?? 'default';
  const known: Record<string, readonly string[]> = {
    default: [],
    linear: ['factor'],
    llama3: ['factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'],
  };
  if (typeof type !== 'string' || !Object.hasOwn(known, type)) throw k.unsupported(`${key}.rope_type`, type, Object.keys(known).map(show).join(', '));
  for (const x of Object.keys(p)) {
    if (!['rope_type', 'type', 'rope_theta', 'partial_rotary_factor', ...known[type]].includes(x)) {
      throw new ConfigError(`${where}: unknown key '${key}.${x}' (value ${show(p[x])}) for rope_type ${show(type)}`);
    }
  }
  const partial = p.partial_rotary_factor ?? topPartial;
  if (partial !== undefined && partial !== null && partial !== 1) throw k.unsupported('partial_rotary_factor', partial, 'RoPE over the whole head (1.0)');
  const theta = p.rope_theta ?? topTheta;
  if (typeof theta !== 'number' || !Number.isFinite(theta)) throw new ConfigError(`${where}: '${key}.rope_theta' = ${show(theta)}: expected a number`);
  const num = (name: string, fallback?: unknown): number => {
    const v = p[name] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new ConfigError(`${where}: '${key}.${name}' = ${show(v)}: expected a number`);
    return v;
  };
  if (type === 'default') return { ropeTheta: theta, ropeScaling: null };
  if (type === 'linear') return { ropeTheta: theta, ropeScaling: { type: 'linear', factor: num('factor') } };
  return {
    ropeTheta: theta,
    ropeScaling: {
      type: 'llama3',
      factor: num('factor'),
      lowFreqFactor: num('low_freq_factor'),
      highFreqFactor: num('high_freq_factor'),
      originalContextLength: num('original_max_position_embeddings', topOriginal ?? contextLength),
    },
  };
}

/** sliding_window: absent is transformers' default 4096, null is none, else a positive integer. */
function slidingWindow(k: Keys, where: string): number | undefined {
  if (!k.has('sliding_window')) return 4096;
  const w = k.get('sliding_window');
  if (w === undefined) return undefined;
  if (!Number.isInteger(w) || (w as number) < 1) throw new ConfigError(`${where}: 'sliding_window' = ${show(w)}: expected a positive integer or null`);
  return w as number;
}

/**
 * Per-layer attention of Qwen2 / Qwen3: `layer_types` when given, else transformers' rule (with
 * use_sliding_window, layers from max_window_layers on slide); sliding_window counts only when
 * use_sliding_window is true.
 */
function qwenAttention(k: Keys, where: string, nLayers: number): LayerAttention[] {
  const useWindow = k.bool('use_sliding_window', false);
  const window = slidingWindow(k, where);
  const maxWindowLayers = k.int('max_window_layers', 28);
  const given = k.get('layer_types');
  let types: string[];
  if (given === undefined) {
    types = Array.from({ length: nLayers }, (_, i) => (useWindow && window !== undefined && i >= maxWindowLayers ? 'sliding_attention' : 'full_attention'));
  } else {
    if (!Array.isArray(given) || given.length !== nLayers) throw new ConfigError(`${where}: 'layer_types' = ${show(given)}: expected a list of ${nLayers} entries (one per layer)`);
    types = given as string[];
  }
  const out = types.map((t, i): LayerAttention => {
    if (t === 'full_attention') return { type: 'full' };
    if (t !== 'sliding_attention') throw k.unsupported(`layer_types[${i}]`, t, '"full_attention" or "sliding_attention"');
    if (!useWindow || window === undefined) throw new ConfigError(`${where}: 'layer_types[${i}]' = "sliding_attention" but ${useWindow ? 'sliding_window is null' : 'use_sliding_window is false'}, so there is no window`);
    return { type: 'local', window };
  });
  return out.every((a) => a.type === out[0].type && show(a) === show(out[0])) ? [out[0]] : out;
}

/** Llama, Mistral, Qwen2 and Qwen3: the shared keys, then each one's own. */
function llamaLike(k: Keys, arch: Exclude<HfArchitecture, 'gpt2'>, where: string): Partial<ModelConfig> {
  const dModel = k.int('hidden_size');
  const nHeads = k.int('num_attention_heads');
  const nLayers = k.int('num_hidden_layers');
  const kvDefault = { llama: nHeads, mistral: 8, qwen2: 32, qwen3: 32 }[arch];
  const headDefault = arch === 'qwen3' ? 128 : Number.isInteger(dModel / nHeads) ? dModel / nHeads : undefined;
  const contextLength = k.int('max_position_embeddings');
  const c: Partial<ModelConfig> = {
    vocabSize: k.int('vocab_size'),
    dModel,
    nLayers,
    nHeads,
    nKvHeads: k.int('num_key_value_heads', kvDefault),
    headDim: k.int('head_dim', headDefault),
    mlp: 'swiglu',
    mlpHidden: k.int('intermediate_size'),
    norm: 'rmsnorm',
    normEps: k.number('rms_norm_eps', 1e-6),
    positions: 'rope',
    ...readRope(k, where, contextLength),
    qkNorm: arch === 'qwen3',
    bias: false,
    qkvBias: arch === 'qwen2',
    tieEmbeddings: k.bool('tie_word_embeddings', false),
    contextLength,
    attention: [{ type: 'full' }],
  };
  k.only('hidden_act', 'silu', ['silu']);
  if (arch === 'llama') k.only('mlp_bias', false, [false]);
  if (arch === 'llama' || arch === 'qwen3') k.only('attention_bias', false, [false]);
  if (arch === 'mistral') {
    const w = slidingWindow(k, where);
    if (w !== undefined) c.attention = [{ type: 'local', window: w }];
  }
  if (arch === 'qwen2' || arch === 'qwen3') c.attention = qwenAttention(k, where, nLayers);
  return c;
}

function gpt2(k: Keys, where: string): Partial<ModelConfig> {
  const dModel = k.int('n_embd');
  const nHeads = k.int('n_head');
  if (dModel % nHeads !== 0) throw new ConfigError(`${where}: 'n_embd' = ${dModel} is not a multiple of 'n_head' = ${nHeads}`);
  k.only('activation_function', 'gelu_new', ['gelu_new', 'gelu_pytorch_tanh']);
  k.only('scale_attn_weights', true, [true]);
  k.only('scale_attn_by_inverse_layer_idx', false, [false]);
  k.only('add_cross_attention', false, [false]);
  k.only('n_special', 0, [0]); // OpenAI GPT's extra special-token rows
  return {
    vocabSize: k.int('vocab_size'),
    dModel,
    nLayers: k.int('n_layer'),
    nHeads,
    nKvHeads: nHeads,
    headDim: dModel / nHeads,
    mlp: 'gelu',
    mlpHidden: k.int('n_inner', 4 * dModel),
    norm: 'layernorm',
    normEps: k.number('layer_norm_epsilon', 1e-5),
    positions: 'learned',
    ropeScaling: null,
    qkNorm: false,
    bias: true,
    qkvBias: false,
    tieEmbeddings: k.bool('tie_word_embeddings', true),
    contextLength: k.int('n_positions'),
    attention: [{ type: 'full' }],
  };
}

/**
 * FON's config for a parsed config.json. `where` (the file's path) starts every message; the
 * result is validated by parseModelConfig like any FON config.
 */
export function hfConfigToModelConfig(json: unknown, where = 'config.json'): HfModelConfig {
  const architecture = hfArchitecture(json, where);
  const k = new Keys(json as Json, where, architecture);
  const mapped = architecture === 'gpt2' ? gpt2(k, where) : llamaLike(k, architecture, where);
  k.finish();
  return { architecture, config: parseModelConfig(mapped, DEFAULT_CONFIG, where) };
}
