/**
 * Depth-Attention (specs/fpa_depth.md §3, the paper's `depth_softmax` mode): before a layer attends
 * over the sequence, its query attends over the keys of earlier layers at the same token and mixes
 * their values (ops/depth_mix.ts); the mixed value ṽ replaces v for the layer's mechanism (full,
 * local, FoX, FPA all see ṽ as v) and is what the KV cache stores. Candidates of layer l:
 *
 *   C(l) = {m < l : m mod stride = 0} ∪ {m : l − window ≤ m < l}
 *
 * read as the candidates' k̂ (after k-norm and RoPE, as each block hands k to its mechanism) and
 * their MIXED ṽ (recursive mixing, §3.1), the layer's own k̂ and v last. C(l) empty (always for
 * layer 0) ⇒ the layer is exactly vanilla (the op is not called). No parameters, no cache of its own.
 * Note: §5 item 6 reads "s > L (no candidates)", but by the formula 0 mod s = 0, so layer 0 stays a
 * candidate of every later layer whatever the stride (as in the paper's 410M config, C = {0, 16});
 * the formula is what is implemented.
 *
 * k̂ here is what FON's block hands its mechanism: k-norm, then RoPE. The spec's reading of the
 * paper's SDPA path normalises after RoPE (§3.1); both are the key the layer attends with.
 *
 * Semantics (§3.1, "implement that"): each token is mixed once, with its own query, and the mixed
 * value is cached, never recomputed. In a cached step the candidates for the new tokens are the rows
 * the earlier layers computed in the same step (the same tensors those layers wrote to their cache
 * slots), so decoding needs nothing beyond the standard KV cache.
 *
 * This file holds the candidate bookkeeping the decoder and the blocks share, the "v0_mix" baseline
 * (§3.2), and the arithmetic count of the mix (experiments/depth_compare.ts reports it).
 */
import { depthMix } from '../ops/depth_mix.ts';
import { add, mul } from '../ops/elementwise.ts';
import type { Tensor } from '../tensor/tensor.ts';

/**
 * The model config's `depth` entry: the paper's softmax mix (no `mode`, or "softmax"), or the
 * "v0_mix" baseline of its code (§3.2; ResFormer-like fixed value residual): ṽ⁽ˡ⁾ = ½v⁽⁰⁾ + ½v⁽ˡ⁾
 * for every layer l ≥ 1, no query, no softmax, no stride.
 */
export type DepthSpec =
  | {
    mode?: 'softmax';
    /** Layers 0, stride, 2·stride, … are candidates of every later layer (≥ 1; above nLayers − 1: layer 0 only). */
    stride: number;
    /** The `window` layers right below are candidates too (0, the paper's released value, when absent). */
    window?: number;
  }
  | { mode: 'v0_mix' };

export const DEPTH_MODES = ['softmax', 'v0_mix'] as const;

/** The keys a `depth` entry may have, per mode (model/config.ts validates them). */
export const DEPTH_KEYS: Readonly<Record<(typeof DEPTH_MODES)[number], readonly string[]>> = { softmax: ['mode', 'stride', 'window'], v0_mix: ['mode'] };

/**
 * One layer's record at the positions of a call: the k̂ and the (mixed) ṽ its mechanism saw and
 * cached, (B, Hkv, T, D) each. The decoder returns them per layer (model/decoder.ts runLayers);
 * Depth-Attention reads its candidates from them.
 */
export interface LayerRecord { k: Tensor; v: Tensor }

/** What the decoder hands a block with Depth-Attention: the spec and the records of C(l), in layer order, at the block's positions. */
export interface DepthInput {
  readonly spec: DepthSpec;
  readonly candidates: readonly LayerRecord[];
}

/** C(l) in ascending order ({0} for every layer l ≥ 1 in "v0_mix"). */
export function depthCandidates(spec: DepthSpec, layer: number): number[] {
  if (spec.mode === 'v0_mix') return layer > 0 ? [0] : [];
  const w = spec.window ?? 0;
  const out: number[] = [];
  for (let m = 0; m < layer; m++) if (m % spec.stride === 0 || m >= layer - w) out.push(m);
  return out;
}

/** Per layer: whether some later layer has it as a candidate (its k̂, ṽ must outlive its block). */
export function depthSources(spec: DepthSpec, nLayers: number): boolean[] {
  const read = new Array<boolean>(nLayers).fill(false);
  for (let l = 0; l < nLayers; l++) for (const m of depthCandidates(spec, l)) read[m] = true;
  return read;
}

/**
 * The layer's value after Depth-Attention: v itself when there are no candidates (vanilla), else
 * depthMix(q, [k̂_m…, k], [ṽ_m…, v]), or ½·v⁽⁰⁾ + ½·v in "v0_mix". q (B, H, T, D); k, v (B, Hkv, T, D).
 */
export function mixDepth(spec: DepthSpec, q: Tensor, k: Tensor, v: Tensor, candidates: readonly LayerRecord[]): Tensor {
  if (candidates.length === 0) return v;
  if (spec.mode === 'v0_mix') return mul(add(candidates[0].v, v), 0.5);
  return depthMix(q, [...candidates.map((c) => c.k), k], [...candidates.map((c) => c.v), v]);
}

/**
 * Multiply-adds per token of the mix over the whole model (§3.1): per layer with candidates and per
 * KV head, (|C| + 1)·d for the scores, (|C| + 1)·d for the weighted sum and r·d for the group mean.
 * Layers without candidates cost nothing.
 */
export function depthMixMacsPerToken(spec: DepthSpec, nLayers: number, nHeads: number, nKvHeads: number, headDim: number): number {
  const r = nHeads / nKvHeads;
  let macs = 0;
  for (let l = 0; l < nLayers; l++) {
    const c = depthCandidates(spec, l).length;
    if (c === 0) continue;
    macs += spec.mode === 'v0_mix' ? nKvHeads * headDim : nKvHeads * ((c + 1) * headDim * 2 + r * headDim);
  }
  return macs;
}
