/**
 * The attention half of a block: projections, optional QK-norm, RoPE, the layer's mechanism
 * (built here from the layer's config entry, its parameters under this block's name), output
 * projection. The mechanism sees q, k, v and the block's normed input x (for gates), and may
 * transform the raw k and v projections before QK-norm and RoPE (AttentionMechanism.transformKv).
 * With Depth-Attention (attention/depth.ts) the value is mixed with earlier layers' values at the
 * same token right before the mechanism, which then sees (and caches) the mixed ṽ as v.
 * forwardRows is the same layer over N sequences at once, one token each (a ragged decoding step).
 * Shapes: B batch, T positions in this call, C = dModel, H query heads, Hkv key/value heads, D head width.
 */
import type { AttentionMechanism, LayerKv, MechanismBudget } from '../attention/mechanism.ts';
import { buildMechanism, type LayerAttention } from '../attention/table.ts';
import { mixDepth, type DepthInput, type LayerRecord } from '../attention/depth.ts';
import { rope } from '../ops/fused.ts';
import { concat, narrow, permute, reshape } from '../ops/layout.ts';
import { Linear } from '../nn/linear.ts';
import { Module } from '../nn/module.ts';
import { Norm } from '../nn/norm.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { modelDims, type ModelConfig } from './config.ts';

/** What every layer of one forward shares: the first position and, with RoPE, its tables (T, D/2). */
export interface PositionContext { pos: number; cos?: Tensor; sin?: Tensor }

/** One sequence's row of a ragged decoding step (forwardRows): its position, its cache slot of this layer, its Depth-Attention input. */
export interface RowStep { ctx: PositionContext; cache: LayerKv; depth?: DepthInput }

export class AttentionBlock extends Module {
  readonly q: Linear;
  readonly k: Linear;
  readonly v: Linear;
  readonly o: Linear;
  readonly qNorm?: Norm;
  readonly kNorm?: Norm;
  readonly mechanism: AttentionMechanism;

  constructor(f: ParamFactory, name: string, private readonly cfg: ModelConfig, spec: LayerAttention) {
    super();
    const { dModel: c, nHeads: h, nKvHeads: hkv, headDim: d, bias } = cfg;
    const qkvBias = bias || cfg.qkvBias; // Qwen2: biases on q, k and v but not on o
    this.q = this.child(new Linear(f, `${name}.q`, c, h * d, { bias: qkvBias }));
    this.k = this.child(new Linear(f, `${name}.k`, c, hkv * d, { bias: qkvBias }));
    this.v = this.child(new Linear(f, `${name}.v`, c, hkv * d, { bias: qkvBias }));
    this.o = this.child(new Linear(f, `${name}.o`, h * d, c, { bias, std: 0.02 / Math.sqrt(2 * cfg.nLayers) }));
    if (cfg.qkNorm) {
      this.qNorm = this.child(new Norm(f, `${name}.q_norm`, 'rmsnorm', d, cfg.normEps));
      this.kNorm = this.child(new Norm(f, `${name}.k_norm`, 'rmsnorm', d, cfg.normEps));
    }
    // Made last, so full and local layers keep the parameter order (and optimizer state) they had.
    this.mechanism = this.child(buildMechanism(spec, { f, name, dims: modelDims(cfg) }));
  }

  /** One projection to heads: x (B, T, C) → (B, T, heads, D), raw (before any norm or rotation). */
  private project(lin: Linear, x: Tensor, heads: number): Tensor {
    const [b, t] = x.shape;
    return reshape(lin.forward(x), [b, t, heads, this.cfg.headDim]); // (B, T, heads·D) → (B, T, heads, D)
  }

  /** The q, k, v projections of x (B, T, C): (B, T, H, D), (B, T, Hkv, D), (B, T, Hkv, D), raw. */
  private projectQkv(x: Tensor): { q: Tensor; k: Tensor; v: Tensor } {
    const { nHeads: h, nKvHeads: hkv } = this.cfg;
    return { q: this.project(this.q, x, h), k: this.project(this.k, x, hkv), v: this.project(this.v, x, hkv) };
  }

  /** A raw projection (B, T, heads, D) → (B, heads, T, D), normed and rotated as configured. */
  private heads(y: Tensor, norm: Norm | undefined, ctx: PositionContext, rotate: boolean): Tensor {
    if (norm) y = norm.forward(y);
    if (rotate && ctx.cos) y = rope(y, ctx.cos, ctx.sin!, { seqAxis: 1 });
    return permute(y, [0, 2, 1, 3]); // (B, heads, T, D)
  }

  /**
   * What one sequence's raw projections become at its positions: the mechanism's k/v hook,
   * QK-norm, RoPE, the Depth-Attention mix and the mechanism itself (over `cache` when given) →
   * the attention a (B, H, T, D) and the layer's record. The part of a layer that cannot be shared
   * between sequences at different positions or with different caches (forwardRows runs it per row).
   */
  private attend(raw: { q: Tensor; k: Tensor; v: Tensor }, x: Tensor, ctx: PositionContext, cache?: LayerKv, depth?: DepthInput, budget?: MechanismBudget): { a: Tensor; record: LayerRecord } {
    const q = this.heads(raw.q, this.qNorm, ctx, true);
    let kRaw = raw.k, vRaw = raw.v; // (B, T, Hkv, D)
    // The mechanism's hook on the raw projections (FoX Pro token shift), before QK-norm and RoPE.
    if (this.mechanism.transformKv) [kRaw, vRaw] = this.mechanism.transformKv(kRaw, vRaw, { x }, cache, ctx.pos);
    const k = this.heads(kRaw, this.kNorm, ctx, true);
    let v = this.heads(vRaw, undefined, ctx, false);
    if (depth) v = mixDepth(depth.spec, q, k, v, depth.candidates); // (B, Hkv, T, D): ṽ takes v's place, in the mechanism and its cache
    const a = cache ? this.mechanism.forwardCached(q, k, v, { x, budget }, cache, ctx.pos) : this.mechanism.forward(q, k, v, { x }); // (B, H, T, D)
    return { a, record: { k, v } };
  }

  /** The output projection: a (B, H, T, D) → (B, T, C). */
  private output(a: Tensor): Tensor {
    const [b, h, t, d] = a.shape;
    return this.o.forward(reshape(permute(a, [0, 2, 1, 3]), [b, t, h * d])); // (B, T, H·D) → (B, T, C)
  }

  /**
   * x (B, T, C) → out (B, T, C) and the layer's record, the k̂ and ṽ (B, Hkv, T, D) its mechanism
   * saw (what it caches); with `cache`, positions ctx.pos … are written to and read from it. With
   * `depth`, v is mixed with the candidates' (Depth-Attention). `budget` narrows a cached step's
   * attention (the draft organ's knob; attention/mechanism.ts). Intermediates belong to the
   * caller's tidy scope.
   */
  forward(x: Tensor, ctx: PositionContext, cache?: LayerKv, depth?: DepthInput, budget?: MechanismBudget): { out: Tensor; record: LayerRecord } {
    const { a, record } = this.attend(this.projectQkv(x), x, ctx, cache, depth, budget);
    return { out: this.output(a), record };
  }

  /**
   * A ragged decoding step: x (N, 1, C), row i one token of sequence i at its own position with
   * its own cache slot (rows[i]) → out (N, 1, C) and each row's record (1, Hkv, 1, D). The q, k,
   * v and o projections run once over the N rows; the rest (attend) runs per row, exactly as
   * forward runs it for that sequence alone. Intermediates belong to the caller's tidy scope.
   */
  forwardRows(x: Tensor, rows: readonly RowStep[]): { out: Tensor; records: LayerRecord[] } {
    const raw = this.projectQkv(x);
    const row = (t: Tensor, i: number) => (rows.length === 1 ? t : narrow(t, 0, i, 1));
    const parts = rows.map((r, i) => this.attend({ q: row(raw.q, i), k: row(raw.k, i), v: row(raw.v, i) }, row(x, i), r.ctx, r.cache, r.depth));
    const a = parts.length === 1 ? parts[0].a : concat(parts.map((p) => p.a), 0); // (N, H, 1, D)
    return { out: this.output(a), records: parts.map((p) => p.record) };
  }
}
