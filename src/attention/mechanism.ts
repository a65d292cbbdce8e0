/**
 * The attention interface every mechanism implements (DESIGN.md, "How the code is layered"): a
 * training/prefill forward over whole sequences, a cached step that writes the new keys and
 * values into the layer's slot of the KV cache and attends over it, and the cache's size.
 * Projections, norms and RoPE stay in the block (model/attention_block.ts); a mechanism only
 * mixes the sequence.
 */
import type { Tensor } from '../tensor/tensor.ts';

/** The sequence mixing of one layer (DESIGN.md: every layer mixes with one mechanism). */
export type LayerAttention =
  | { type: 'full' }
  /** Causal sliding window: a query sees itself and the `window − 1` keys before it. */
  | { type: 'local'; window: number };

/** One layer's slot of the KV cache: k and v (B, Hkv, Tmax, D), allocated once per sequence. */
export interface LayerKv { k: Tensor; v: Tensor }

export interface AttentionMechanism {
  /** The config name, e.g. "full" or "local(window=128)". */
  readonly name: string;
  /** q (B, H, T, D), k and v (B, Hkv, T, D), positions 0 … T−1 → (B, H, T, D). Differentiable. */
  forward(q: Tensor, k: Tensor, v: Tensor): Tensor;
  /**
   * q (B, H, n, D), k and v (B, Hkv, n, D) at positions pos … pos+n−1: writes k and v into the
   * cache at those rows, then attends over cache rows 0 … pos+n−1 → (B, H, n, D). No gradient.
   */
  forwardCached(q: Tensor, k: Tensor, v: Tensor, cache: LayerKv, pos: number): Tensor;
  /** Bytes of KV cache per token of context for one layer. */
  cacheBytesPerToken(nKvHeads: number, headDim: number, bytesPerElement: number): number;
}
