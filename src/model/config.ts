/**
 * The model config: one typed defaults object (STYLE.md §9), overridden by a preset, a JSON file,
 * then flags. `parseModelConfig` validates a JSON object: an unknown key, a wrong type or an
 * impossible shape is a ConfigError naming the key and the value.
 */
import { layoutBytesPerToken, type ModelDims } from '../attention/mechanism.ts';
import { mechanismCache, parseLayerAttention, wantsNoPE, type LayerAttention } from '../attention/table.ts';
import { DEPTH_KEYS, DEPTH_MODES, type DepthSpec } from '../attention/depth.ts';
import { ConfigError, showValue } from '../errors.ts';
import type { RopeScaling } from '../nn/rope_tables.ts';
import { checkDraftLayers, parseOrgans, type OrgansSpec } from './organs.ts';

export type { DepthSpec, LayerAttention, OrgansSpec, RopeScaling };

export { ConfigError };

export interface ModelConfig {
  /** Token ids are 0 … vocabSize − 1 (the tokenizer's size, specials included). */
  vocabSize: number;
  /** Residual stream width C. */
  dModel: number;
  nLayers: number;
  /** Query heads H. */
  nHeads: number;
  /** Key/value heads (GQA); divides nHeads. Equal to nHeads is plain multi-head attention. */
  nKvHeads: number;
  /** Per-head width D (need not be dModel / nHeads). Even, for RoPE. */
  headDim: number;
  /** Feed-forward: SwiGLU (Llama) or GELU (GPT-2). */
  mlp: 'swiglu' | 'gelu';
  /** Hidden width of the feed-forward. */
  mlpHidden: number;
  norm: 'rmsnorm' | 'layernorm';
  normEps: number;
  /**
   * Rotary (with ropeTheta), learned absolute embeddings, or none. When a config (file, flags)
   * does not set it and some layer is "fox" or "fpa", it becomes "none" (NoPE, as FoX and the FPA
   * proposal run); a value the config sets explicitly wins.
   */
  positions: 'rope' | 'learned' | 'none';
  ropeTheta: number;
  /**
   * RoPE frequency scaling for contexts longer than pretraining (nn/rope_tables.ts), or null for
   * plain RoPE: {"type": "linear", "factor": f} divides every frequency by f (position
   * interpolation); {"type": "llama3", "factor", "lowFreqFactor", "highFreqFactor",
   * "originalContextLength"} is Llama 3.1's: wavelengths above originalContextLength / lowFreqFactor
   * are stretched by factor, those below originalContextLength / highFreqFactor kept, those between
   * blended. Needs positions 'rope'.
   */
  ropeScaling: RopeScaling | null;
  /** RMSNorm of each query and key head before RoPE (OLMo-2 / Qwen-3 style). */
  qkNorm: boolean;
  /** Biases in the linear layers (GPT-2 has them, Llama does not). */
  bias: boolean;
  /** Biases on the q, k and v projections only (Qwen2); with `bias` false. */
  qkvBias: boolean;
  /** The LM head reuses the token embedding matrix. */
  tieEmbeddings: boolean;
  /** Longest sequence the model is trained and run on (KV cache and learned positions). */
  contextLength: number;
  /**
   * One entry per layer, or one entry applied to every layer: {"type": name, …options}, a
   * mechanism of attention/table.ts with the options its folder's def parses — {"type": "full"},
   * {"type": "local", "window": n}, {"type": "fox", "outputGate"?, "tokenShift"?} (attention/fox),
   * {"type": "fpa", "walk"?, "outputGate"?, "tokenShift"?, "shared"?, "evict"?, "stack"?}
   * (attention/fpa). Omitted options take the mechanism's defaults.
   */
  attention: LayerAttention[];
  /**
   * Depth-Attention (attention/depth.ts, specs/fpa_depth.md §3): {"stride": s, "window"?: w}. Layer l's
   * query mixes, at each token, the values of candidate layers C(l) = {m < l : m mod s = 0} ∪
   * {m : l − w ≤ m < l} and its own; the mixed value replaces v for the layer's mechanism and in the
   * KV cache. No parameters, no extra cache. {"mode": "v0_mix"}: the fixed baseline ṽ = ½v⁽⁰⁾ + ½v
   * (§3.2). Absent (the default): every layer is vanilla.
   */
  depth?: DepthSpec;
  /**
   * The draft and revise organs (model/organs.ts): {"draftLayers": D, "exitLoss"?: λ_D (0.2),
   * "distill"?: λ_KL (0.5), "layerDropout"?: p (0)}. Layers 0 … D−1 and the exit head (the final
   * norm and LM head after layer D−1) draft, layers D … L−1 verify; training adds the exit head's
   * losses. Absent (the default): a plain model (it can still draft with --draft-layers, untrained for it).
   */
  organs?: OrgansSpec;
}

export const DEFAULT_CONFIG: ModelConfig = {
  vocabSize: 257,
  dModel: 128,
  nLayers: 4,
  nHeads: 4,
  nKvHeads: 4,
  headDim: 32,
  mlp: 'swiglu',
  mlpHidden: 384,
  norm: 'rmsnorm',
  normEps: 1e-5,
  positions: 'rope',
  ropeTheta: 10000,
  ropeScaling: null,
  qkNorm: false,
  bias: false,
  qkvBias: false,
  tieEmbeddings: true,
  contextLength: 256,
  attention: [{ type: 'full' }],
};

type Kind = 'int' | 'number' | 'bool' | readonly string[] | 'attention' | 'ropeScaling' | 'depth' | 'organs';

const SCHEMA: Record<keyof ModelConfig, Kind> = {
  depth: 'depth', organs: 'organs',
  vocabSize: 'int', dModel: 'int', nLayers: 'int', nHeads: 'int', nKvHeads: 'int', headDim: 'int',
  mlp: ['swiglu', 'gelu'], mlpHidden: 'int', norm: ['rmsnorm', 'layernorm'], normEps: 'number',
  positions: ['rope', 'learned', 'none'], ropeTheta: 'number', ropeScaling: 'ropeScaling', qkNorm: 'bool', bias: 'bool',
  qkvBias: 'bool', tieEmbeddings: 'bool', contextLength: 'int', attention: 'attention',
};

const show = (v: unknown) => showValue(v);

function checkAttention(v: unknown, where: string): LayerAttention[] {
  const list = Array.isArray(v) ? v : [v];
  if (list.length === 0) throw new ConfigError(`${where}: 'attention' is an empty list; expected one entry per layer or a single entry`);
  return list.map((a, i) => parseLayerAttention(a, `${where}: attention[${i}]`));
}

const ROPE_SCALING_KEYS = {
  linear: ['factor'],
  llama3: ['factor', 'lowFreqFactor', 'highFreqFactor', 'originalContextLength'],
} as const;

function checkRopeScaling(v: unknown, where: string): RopeScaling | null {
  if (v === null) return null;
  const at = `${where}: 'ropeScaling'`;
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${at} = ${show(v)}: expected null, {"type": "linear", "factor": …} or {"type": "llama3", "factor": …, "lowFreqFactor": …, "highFreqFactor": …, "originalContextLength": …}`);
  const o = v as Record<string, unknown>;
  if (!Object.hasOwn(ROPE_SCALING_KEYS, o.type as string)) throw new ConfigError(`${at}: 'type' = ${show(o.type)}: expected one of "linear", "llama3"`);
  const keys: readonly string[] = ROPE_SCALING_KEYS[o.type as keyof typeof ROPE_SCALING_KEYS];
  for (const k of Object.keys(o)) {
    if (k !== 'type' && !keys.includes(k)) throw new ConfigError(`${at}: unknown key '${k}' for type ${show(o.type)}; expected ${keys.join(', ')}`);
  }
  for (const k of keys) {
    const x = o[k];
    const ok = k === 'originalContextLength' ? Number.isInteger(x) && (x as number) >= 1 : typeof x === 'number' && Number.isFinite(x) && x > 0;
    if (!ok) throw new ConfigError(`${at}: '${k}' = ${show(x)}: expected ${k === 'originalContextLength' ? 'a positive integer' : 'a positive number'}`);
  }
  if (o.type === 'llama3' && !((o.highFreqFactor as number) > (o.lowFreqFactor as number))) {
    throw new ConfigError(`${at}: 'highFreqFactor' = ${show(o.highFreqFactor)} must be greater than 'lowFreqFactor' = ${show(o.lowFreqFactor)}`);
  }
  return o.type === 'linear'
    ? { type: 'linear', factor: o.factor as number }
    : { type: 'llama3', factor: o.factor as number, lowFreqFactor: o.lowFreqFactor as number, highFreqFactor: o.highFreqFactor as number, originalContextLength: o.originalContextLength as number };
}

/**
 * 'depth': null (off), {"stride": integer ≥ 1, "window"?: integer ≥ 0 (default 0)} (the softmax mix;
 * "mode": "softmax" may be spelled out) or {"mode": "v0_mix"} (the fixed ½v⁽⁰⁾ + ½v baseline).
 */
function checkDepth(v: unknown, where: string): DepthSpec | null {
  if (v === null) return null;
  const at = `${where}: 'depth'`;
  const expected = 'expected null, {"stride": integer ≥ 1, "window"?: integer ≥ 0} or {"mode": "v0_mix"}';
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${at} = ${show(v)}: ${expected}`);
  const o = v as Record<string, unknown>;
  const mode = o.mode ?? 'softmax';
  if (!DEPTH_MODES.includes(mode as never)) throw new ConfigError(`${at}: 'mode' = ${show(o.mode)}: expected one of ${DEPTH_MODES.map(show).join(', ')}`);
  const keys = DEPTH_KEYS[mode as (typeof DEPTH_MODES)[number]];
  for (const k of Object.keys(o)) if (!keys.includes(k)) throw new ConfigError(`${at}: unknown key '${k}' for mode ${show(mode)}; expected ${keys.join(', ')}`);
  if (mode === 'v0_mix') return { mode: 'v0_mix' };
  if (!Number.isInteger(o.stride) || (o.stride as number) < 1) throw new ConfigError(`${at}: 'stride' = ${show(o.stride)}: expected an integer ≥ 1`);
  const window = o.window ?? 0;
  if (!Number.isInteger(window) || (window as number) < 0) throw new ConfigError(`${at}: 'window' = ${show(o.window)}: expected an integer ≥ 0`);
  return { stride: o.stride as number, window: window as number };
}

/**
 * Merges `overrides` (parsed JSON) over `base` and validates the result. `where` names the source
 * (a file, a preset) in messages.
 */
export function parseModelConfig(overrides: unknown, base: ModelConfig = DEFAULT_CONFIG, where = 'config'): ModelConfig {
  if (overrides === null || typeof overrides !== 'object' || Array.isArray(overrides)) throw new ConfigError(`${where}: expected a JSON object, got ${show(overrides)}`);
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(overrides)) {
    const kind = Object.hasOwn(SCHEMA, k) ? SCHEMA[k as keyof ModelConfig] : undefined;
    if (!kind) throw new ConfigError(`${where}: unknown key '${k}' (value ${show(v)}); known keys: ${Object.keys(SCHEMA).join(', ')}`);
    if (kind === 'int' && !Number.isInteger(v)) throw new ConfigError(`${where}: '${k}' = ${show(v)}: expected an integer`);
    if (kind === 'number' && (typeof v !== 'number' || !Number.isFinite(v))) throw new ConfigError(`${where}: '${k}' = ${show(v)}: expected a number`);
    if (kind === 'bool' && typeof v !== 'boolean') throw new ConfigError(`${where}: '${k}' = ${show(v)}: expected true or false`);
    if (Array.isArray(kind) && !kind.includes(v as string)) throw new ConfigError(`${where}: '${k}' = ${show(v)}: expected one of ${kind.map(show).join(', ')}`);
    out[k] = kind === 'attention' ? checkAttention(v, where) : kind === 'ropeScaling' ? checkRopeScaling(v, where) : kind === 'depth' ? checkDepth(v, where) : kind === 'organs' ? parseOrgans(v, where) : v;
  }
  // Off is absent, so a config without Depth-Attention or organs reads (and is written) as before.
  if (out.depth === null || out.depth === undefined) delete out.depth;
  if (out.organs === null || out.organs === undefined) delete out.organs;
  // NoPE by default for FoX / FPA models: only when this config sets the attention and not the positions.
  if (Object.hasOwn(overrides, 'attention') && !Object.hasOwn(overrides, 'positions') && wantsNoPE(out.attention as LayerAttention[])) out.positions = 'none';
  const c = out as unknown as ModelConfig;
  validateShapes(c, where);
  return c;
}

/**
 * The config as a checkpoint writes it: every key, Depth-Attention and organs as null when off, so
 * that a reader can tell a key that was removed from one left at its default (`requireEveryKey`).
 */
export function checkpointConfigJson(c: ModelConfig): Record<string, unknown> {
  return Object.fromEntries(Object.keys(SCHEMA).map((k) => [k, (c as unknown as Record<string, unknown>)[k] ?? null]));
}

/**
 * A checkpoint's config.json must hold every key `checkpointConfigJson` writes: a missing one
 * would load as the default (a local layer read as full, another normEps or context), a
 * different model without a word. ConfigError naming the file and the keys.
 */
export function requireEveryKey(json: unknown, where: string): void {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return; // parseModelConfig names it
  const missing = Object.keys(SCHEMA).filter((k) => !Object.hasOwn(json, k));
  if (missing.length) throw new ConfigError(`${where}: missing ${missing.map((k) => `'${k}'`).join(', ')}: a checkpoint's config holds every key (one left out would load as its default, another model)`);
}

/** Upper bounds far above any real model, so a typo (1e9) fails here instead of allocating. */
const MAX = {
  vocabSize: 1 << 24, dModel: 1 << 16, nLayers: 1024, nHeads: 1024, nKvHeads: 1024, headDim: 1024, mlpHidden: 1 << 18, contextLength: 1 << 21,
} as const;

function validateShapes(c: ModelConfig, where: string): void {
  for (const [k, max] of Object.entries(MAX) as [keyof typeof MAX, number][]) {
    if (c[k] < 1 || c[k] > max) throw new ConfigError(`${where}: '${k}' = ${c[k]}: expected a positive integer ≤ ${max}`);
  }
  if (c.nHeads % c.nKvHeads !== 0) throw new ConfigError(`${where}: 'nKvHeads' = ${c.nKvHeads} must divide 'nHeads' = ${c.nHeads} (grouped-query attention)`);
  if (c.positions === 'rope' && c.headDim % 2 !== 0) throw new ConfigError(`${where}: 'headDim' = ${c.headDim} must be even for RoPE`);
  if (!(c.normEps > 0)) throw new ConfigError(`${where}: 'normEps' = ${c.normEps}: expected a positive number`);
  if (c.positions === 'rope' && !(c.ropeTheta > 1)) throw new ConfigError(`${where}: 'ropeTheta' = ${c.ropeTheta}: expected a number > 1`);
  if (c.ropeScaling !== null && c.positions !== 'rope') throw new ConfigError(`${where}: 'ropeScaling' = ${show(c.ropeScaling)} needs positions "rope", not ${show(c.positions)}`);
  if (c.qkvBias && c.bias) throw new ConfigError(`${where}: 'qkvBias' = true with 'bias' = true: 'bias' already puts biases on q, k and v; set one of them`);
  if (c.attention.length !== 1 && c.attention.length !== c.nLayers) {
    throw new ConfigError(`${where}: 'attention' has ${c.attention.length} entries; expected 1 or nLayers = ${c.nLayers}`);
  }
  if (c.organs) checkDraftLayers(c.organs.draftLayers, c.nLayers, `${where}: 'organs.draftLayers'`);
}

/** The attention of layer `i`. */
export function layerAttention(c: ModelConfig, i: number): LayerAttention {
  return c.attention.length === 1 ? c.attention[0] : c.attention[i];
}

/** The dimensions a mechanism sees (attention/mechanism.ts ModelDims). */
export function modelDims(c: ModelConfig): ModelDims {
  return { dModel: c.dModel, nLayers: c.nLayers, nHeads: c.nHeads, nKvHeads: c.nKvHeads, headDim: c.headDim, normEps: c.normEps };
}

/**
 * KV-cache bytes per token of context, over every layer: k and v at the given bytes per element,
 * plus each mechanism's per-position state in f32 (its CacheLayout: FoX's c per query head, FPA's
 * φ, ℓ and walk per KV head). Depth-Attention adds nothing: the mixed value takes v's slot.
 */
export function kvBytesPerToken(c: ModelConfig, bytesPerElement = 4): number {
  const dims = modelDims(c);
  let n = 0;
  for (let i = 0; i < c.nLayers; i++) n += layoutBytesPerToken(mechanismCache(layerAttention(c, i), dims), dims, bytesPerElement);
  return n;
}
