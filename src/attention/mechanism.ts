/**
 * The attention interface every mechanism implements (DESIGN.md, "How the code is layered"): a
 * training/prefill forward over whole sequences, a cached step that writes the new keys and
 * values (and whatever per-position state the mechanism keeps) into the layer's slot of the KV
 * cache and attends over it, and the cache's size. Projections, QK-norm, RoPE and the output
 * projection stay in the block (model/attention_block.ts); a mechanism mixes the sequence and
 * may own parameters of its own (FoX's forget gate, FPA's walk), made through the ParamFactory
 * under the block's name, so that a checkpoint holds them beside q, k, v, o. A mechanism may also
 * transform the raw k and v projections before the block norms and rotates them (transformKv:
 * the FoX "Pro" token shift, attention/token_shift.ts).
 */
import type { ModelConfig } from '../model/config.ts';
import type { Module } from '../nn/module.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { FoxSpec } from './fox.ts';
import type { FpaSpec } from './fpa.ts';

export type { FoxSpec, FpaSpec };

/** The sequence mixing of one layer (DESIGN.md: every layer mixes with one mechanism). */
export type LayerAttention =
  | { type: 'full' }
  /** Causal sliding window: a query sees itself and the `window − 1` keys before it. */
  | { type: 'local'; window: number }
  /** Forgetting Transformer attention (attention/fox.ts). */
  | FoxSpec
  /** First Passage Attention (attention/fpa.ts). */
  | FpaSpec;

/** What a mechanism is built from. */
export interface MechanismContext {
  /** Makes the mechanism's own parameters, fresh or from a checkpoint. */
  f: ParamFactory;
  /** The attention sublayer's parameter prefix (e.g. "layers.3.attn"); a mechanism's parameters go under it. */
  name: string;
  config: ModelConfig;
}

/**
 * A narrower attention budget for a cached step than the layer's own (the draft organ's knob,
 * DESIGN.md "The FON model (organs)"): `window` = at most this many most recent keys per query.
 * Mechanisms that have no window (FoX, FPA) ignore it; their draft steps read what the layer reads.
 */
export interface MechanismBudget { window?: number }

/** What the block hands a mechanism besides q, k and v. */
export interface MechanismInput {
  /** The block's normed input (B, T, C) at the same positions as q: gates are computed from it. */
  x: Tensor;
  /** Cached steps only: a narrower budget than the layer's (see MechanismBudget); absent = the layer's own. */
  budget?: MechanismBudget;
}

/**
 * Per-position state a mechanism keeps in the cache besides k and v: name → heads per position.
 * Each entry is allocated f32 (B, heads, Tmax, 1) whatever the k/v dtype (gates and walks are
 * kept in f32, specs/fpa_depth.md §4.1), written in place like k and v.
 */
export type CacheStateLayout = Record<string, number>;

/**
 * State a mechanism keeps once per sequence rather than per position (the token shift's last
 * pre-shift k and v): name → [heads, width], allocated f32 (B, heads, 1, width), written in place.
 */
export type CacheRowLayout = Record<string, readonly [heads: number, width: number]>;

/**
 * One layer's slot of the KV cache: k and v (B, Hkv, Tmax, D), allocated once per sequence, and
 * the mechanism's state by name: per-position entries (B, heads, Tmax, 1) (CacheStateLayout) and
 * per-sequence rows (B, heads, 1, width) (CacheRowLayout); none for full and local attention.
 */
export interface LayerKv { k: Tensor; v: Tensor; state?: Record<string, Tensor> }

export interface AttentionMechanism extends Module {
  /** The config name, e.g. "full", "local(window=128)" or "fpa(walk=fox)". */
  readonly name: string;
  /** q (B, H, T, D), k and v (B, Hkv, T, D), positions 0 … T−1 → (B, H, T, D). Differentiable. */
  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor;
  /**
   * q (B, H, n, D), k and v (B, Hkv, n, D) at positions pos … pos+n−1: writes k, v (and the
   * mechanism's state) into the cache at those rows, then attends over cache rows 0 … pos+n−1
   * → (B, H, n, D). Rows before pos must have been written by earlier calls. No gradient.
   */
  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor;
  /**
   * Optional: the raw k and v projections (B, T, Hkv, D) → the k and v the block norms, rotates
   * and hands to forward / forwardCached, same shapes. Without `cache`, positions 0 … T−1 of whole
   * sequences (differentiable); with it, positions pos … pos+T−1 of a cached step, which may read
   * and write the mechanism's state in the slot. Absent (full, local): k and v go to the block's
   * norms unchanged, as they do from fox and fpa layers without the token shift.
   */
  transformKv?(k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv | undefined, pos: number): [Tensor, Tensor];
  /** Bytes of KV cache per token of context for one layer (k and v at bytesPerElement, state in f32). */
  cacheBytesPerToken(nKvHeads: number, headDim: number, bytesPerElement: number): number;
}
