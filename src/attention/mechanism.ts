/**
 * What a mechanism is (DESIGN.md "How the code is layered"): one self-describing unit, a folder
 * under attention/ whose MechanismDef parses and validates its own options, declares its
 * position-encoding default and its cache layout (k and v plus named side state), builds the layer,
 * says what `fon info` prints and whether `fon export` can write it. attention/table.ts lists the
 * defs; config, cache, CLI and export read the table and never switch on a mechanism's name. This
 * file imports no mechanism and nothing from model/: a mechanism sees the model only through
 * ModelDims.
 *
 * The layer a def builds (AttentionMechanism) mixes the sequence: a training/prefill forward over
 * whole sequences, and a cached step that writes the new keys and values (and whatever
 * per-position state it keeps) into the layer's slot of the KV cache and attends over it.
 * Projections, QK-norm, RoPE and the output projection stay in the block
 * (model/attention_block.ts); a mechanism may own parameters of its own (FoX's forget gate, FPA's
 * walk), made through the ParamFactory under the block's name so that a checkpoint holds them
 * beside q, k, v, o, and may transform the raw k and v projections before the block norms and
 * rotates them (transformKv: the FoX "Pro" token shift, attention/common/token_shift.ts).
 */
import type { Module } from '../nn/module.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { KvPageList } from '../ops/paged_attention.ts';

/** The model dimensions a mechanism may read (not the whole model config). */
export interface ModelDims {
  /** Residual stream width C. */
  dModel: number;
  nLayers: number;
  /** Query heads H. */
  nHeads: number;
  /** Key/value heads Hkv (divides H). */
  nKvHeads: number;
  /** Per-head width D. */
  headDim: number;
  /** Epsilon of the model's norms (the output gate's per-head RMSNorm uses it). */
  normEps: number;
}

/** A layer's config entry: the mechanism's name and its parsed options. */
export interface MechanismSpec { type: string }

/** What a mechanism is built from. */
export interface MechanismContext {
  /** Makes the mechanism's own parameters, fresh or from a checkpoint. */
  f: ParamFactory;
  /** The attention sublayer's parameter prefix (e.g. "layers.3.attn"); a mechanism's parameters go under it. */
  name: string;
  dims: ModelDims;
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
 * Named state a mechanism keeps in a layer's cache slot beyond k, v and the per-position tensors
 * (FPA's running minima and eviction; the token shift's recent rows). It follows the cache's
 * protocol: positions are appended by the layer's cached steps, `truncate` forgets the positions
 * from `length` on (rejected drafts), `settle` is the generation loop's one asynchronous point,
 * where the cache lets a state commit what it has seen and compact (the cache, not the mechanism,
 * decides when: a state never compacts inside a step).
 */
export interface CacheSideState {
  /** Forgets positions ≥ length: the next cached step starts at `length`. ArgumentError where the state cannot rewind that far. */
  truncate(length: number): void;
  /** Commits every position seen so far (no later truncate goes below it) and compacts when due. */
  settle(slot: LayerKv): Promise<void>;
  /** Per KV head, the fraction of the positions seen whose keys are kept (absent: every key is kept). */
  kept?(): number[];
  /** The most positions one truncate may forget, counted back from the newest (absent: any number back to the committed length). */
  readonly maxRewind?: number;
  /** Bytes this state holds on its device. */
  readonly bytes: number;
  dispose(): void;
}

/**
 * One layer's cache layout besides k and v (B, Hkv, Tmax, D), declared by its mechanism:
 * per-position f32 state (B, heads, Tmax, 1) by name, and side states made for each slot.
 */
export interface CacheLayout {
  /** name → heads per position (gates and walks are kept in f32, specs/fpa_depth.md §4.1). */
  perPosition: Record<string, number>;
  /** name → a factory of the side state for a freshly allocated slot (k, v and `state` already there). */
  side: Record<string, (slot: LayerKv) => CacheSideState>;
  /**
   * K and V may live in pages (LayerKv.pages): the mechanism's cached step reads and writes them
   * through ops/paged_attention.ts. Absent: one contiguous k and v of the cache's length (FoX and
   * FPA, whose kernels read per-position state beside K and V).
   */
  paged?: boolean;
}

/**
 * A paged layer's keys and values (infer/page_pool.ts PagedKv): pages k[i], v[i] (B, Hkv, P, D)
 * for positions i·P … i·P + P − 1, taken from the cache's pool. The cache protocol on pages: a
 * step appends after `reserve(rows)` has made them cover rows 0 … rows − 1; the cache's truncate
 * calls `release(rows)`, giving back the pages past them; `dispose` gives back every page.
 */
export interface KvPages extends KvPageList {
  reserve(rows: number): void;
  release(rows: number): void;
  dispose(): void;
}

/** k and v only, in pages (full and local attention). */
export const PAGED_KV: CacheLayout = { perPosition: {}, side: {}, paged: true };

/**
 * One layer's slot of the KV cache: k and v (B, Hkv, Tmax, D), allocated once per sequence, the
 * mechanism's per-position tensors by name (`state`) and its side states by name (`side`), as its
 * CacheLayout declares.
 */
export interface LayerKv {
  /** k and v (B, Hkv, Tmax, D); in a paged slot, its first page's (B, Hkv, P, D). */
  k: Tensor;
  v: Tensor;
  state?: Record<string, Tensor>;
  side?: Record<string, CacheSideState>;
  /** A paged slot's page table (layouts with `paged`). */
  pages?: KvPages;
}

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
   * norms unchanged.
   */
  transformKv?(k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv | undefined, pos: number): [Tensor, Tensor];
}

/** What `fon info` shows of one layer's mechanism. */
export interface MechanismInfo {
  /** A short label, e.g. "fpa(walk=fox, evict τ=16)". */
  label: string;
  /** Lines `fon info` prints for this layer beyond the label (e.g. FPA's eviction rule). */
  notes: string[];
  /** Facts `fon info --json` reports under the layer (e.g. {"evict": {...}}). */
  facts: Record<string, unknown>;
}

/** The Hugging Face attention a layer maps to in `fon export`: full or sliding-window softmax. */
export type HfAttentionKind = { kind: 'full' } | { kind: 'sliding'; window: number };

/**
 * A mechanism, described once. `S` is its config entry. A def missing any member fails to compile
 * (attention/table.ts checks every entry against this interface).
 */
export interface MechanismDef<S extends MechanismSpec> {
  readonly type: S['type'];
  /** One line for the config's documentation and errors. */
  readonly summary: string;
  /** The option keys an entry may have besides 'type'. */
  readonly keys: readonly string[];
  /**
   * The entry from its JSON object (type already checked, unknown keys already refused): every
   * option validated and defaulted. Errors are ConfigError naming `at` (e.g. "config: attention[2]"),
   * the key and the value.
   */
  parse(o: Record<string, unknown>, at: string): S;
  /**
   * The positional encoding a model gets when its config names this mechanism and not `positions`:
   * 'none' for mechanisms that run without positions by design (FoX, FPA: NoPE), undefined to keep
   * the model's default.
   */
  readonly positions?: 'none';
  /** The cache layout of a layer with entry `spec`. */
  cache(spec: S, dims: ModelDims): CacheLayout;
  /** Builds the layer; its parameters go through ctx.f under ctx.name. */
  build(spec: S, ctx: MechanismContext): AttentionMechanism;
  /** What `fon info` shows of a layer with entry `spec`. */
  describe(spec: S): MechanismInfo;
  /**
   * The Hugging Face attention `fon export` writes for the layer, or a sentence saying why none
   * computes it (the export names it in its UnsupportedError).
   */
  hfExport(spec: S): HfAttentionKind | { unsupported: string };
  /** How the mechanism composes onto a trained model's layers (`fon train --add`, `--train-only`); absent: it does not. */
  readonly compose?: MechanismComposition;
}

/**
 * A mechanism that composes onto the layers of a trained model (Focus, Spot): `fon train --add
 * NAME[:OPTS]` turns each layer of a type in `onto` into one of this mechanism, its options over
 * the defaults, the stored tensors kept and the new ones made fresh; `--train-only NAME` then trains
 * the new tensors alone.
 */
export interface MechanismComposition {
  /** The layer types it turns into its own (e.g. ['full']). */
  readonly onto: readonly string[];
  /** `--add NAME:short=value,…`: short option name → config key. */
  readonly shortNames: Readonly<Record<string, string>>;
  /** Config keys whose values are words (the others are numbers). */
  readonly words: readonly string[];
  /** Whether a parameter (its full name, e.g. "layers.3.attn.focus.centroids") is one the composition adds. */
  isParameter(name: string): boolean;
  /** The mechanism's name in prose, e.g. "Focus". */
  readonly label: string;
  /** What `--train-only NAME` trains, for messages (e.g. "W_g and C"). */
  readonly trains: string;
  /** The options' defaults by config key (messages name them). */
  readonly defaults: Readonly<Record<string, unknown>>;
}

/** Bytes of KV cache per token of context of a layout (f32 state) with k and v at `bytesPerElement`. */
export function layoutBytesPerToken(layout: CacheLayout, dims: ModelDims, bytesPerElement: number): number {
  let stateFloats = 0;
  for (const heads of Object.values(layout.perPosition)) stateFloats += heads;
  return 2 * dims.nKvHeads * dims.headDim * bytesPerElement + 4 * stateFloats;
}
