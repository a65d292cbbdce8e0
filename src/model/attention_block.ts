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

/** One sequence's row of a ragged decoding step (forwardRows): its position and its cache slot of this layer. */
export interface RowStep { pos: number; cache: LayerKv }

/** RoPE tables and the axis of y they index (AttentionBlock.heads). */
interface Rotation { cos: Tensor; sin: Tensor; seqAxis: number }

export class AttentionBlock extends Module {
  readonly q: Linear;
  readonly k: Linear;
  readonly v: Linear;
  readonly o: Linear;
  readonly qNorm?: Norm;
  readonly kNorm?: Norm;
  readonly mechanism: AttentionMechanism;
  /**
   * A parameter-free mechanism that takes the layer's place for a while (train/attention_schedule.ts:
   * Lighthouse for the first part of training, then the layer's own mechanism again); the own
   * mechanism's parameters, where it has any, are idle meanwhile. Null: the layer's own.
   */
  standIn: AttentionMechanism | null = null;

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

  /**
   * A raw projection (B, T, heads, D) → (B, heads, T, D), normed and rotated as configured: RoPE's
   * tables index axis `seqAxis` of y (1, the positions of one sequence; 0 in a ragged step, where
   * row i of the tables is row i's position).
   */
  private heads(y: Tensor, norm: Norm | undefined, rot: Rotation | undefined): Tensor {
    if (norm) y = norm.forward(y);
    if (rot) y = rope(y, rot.cos, rot.sin, { seqAxis: rot.seqAxis });
    return permute(y, [0, 2, 1, 3]); // (B, heads, T, D)
  }

  /**
   * The attention between the projections and the output projection, the same for one sequence
   * (forward) and for a ragged step (forwardRows); only the two per-sequence parts come from the
   * caller: `shiftKv`, the mechanism's hook on the raw k and v (FoX Pro token shift, before QK-norm
   * and RoPE), and `mechanism`, the sequence mixing over q̂, k̂, ṽ (B, ·, T, D) → (B, H, T, D).
   * QK-norm, RoPE and the Depth-Attention mix act on each row alone, so they run over all rows at
   * once. Returns the attention a (B, H, T, D) and the layer's record.
   */
  private attend(raw: { q: Tensor; k: Tensor; v: Tensor }, rot: Rotation | undefined, depth: DepthInput | undefined, shiftKv: ((k: Tensor, v: Tensor) => [Tensor, Tensor]) | undefined, mechanism: (q: Tensor, k: Tensor, v: Tensor) => Tensor): { a: Tensor; record: LayerRecord } {
    const q = this.heads(raw.q, this.qNorm, rot);
    const [kRaw, vRaw] = shiftKv ? shiftKv(raw.k, raw.v) : [raw.k, raw.v]; // (B, T, Hkv, D)
    const k = this.heads(kRaw, this.kNorm, rot);
    let v = this.heads(vRaw, undefined, undefined);
    if (depth) v = mixDepth(depth.spec, q, k, v, depth.candidates); // (B, Hkv, T, D): ṽ takes v's place, in the mechanism and its cache
    return { a: mechanism(q, k, v), record: { k, v } };
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
    const m = this.standIn ?? this.mechanism;
    const shiftKv = m.transformKv ? (k: Tensor, v: Tensor) => m.transformKv!(k, v, { x }, cache, ctx.pos) : undefined;
    const { a, record } = this.attend(this.projectQkv(x), ctx.cos ? { cos: ctx.cos, sin: ctx.sin!, seqAxis: 1 } : undefined, depth, shiftKv,
      (q, k, v) => (cache ? m.forwardCached(q, k, v, { x, budget }, cache, ctx.pos) : m.forward(q, k, v, { x })));
    return { out: this.output(a), record };
  }

  /**
   * A ragged decoding step: x (N, 1, C), row i one token of sequence i at position rows[i].pos
   * with its own cache slot rows[i].cache → out (N, 1, C) and the record (N, Hkv, 1, D), row i
   * sequence i's. `rot` holds each row's RoPE tables (N, D/2); `depth` the candidates' records
   * (N, Hkv, 1, D). The projections, QK-norm, RoPE and the Depth-Attention mix run once over the
   * N rows; the mechanism's k/v hook and its cached attention run per row, each through its own
   * cache at its own position. Intermediates belong to the caller's tidy scope.
   */
  forwardRows(x: Tensor, rows: readonly RowStep[], rot?: { cos: Tensor; sin: Tensor }, depth?: DepthInput): { out: Tensor; record: LayerRecord } {
    const m = this.standIn ?? this.mechanism, n = rows.length;
    const row = (t: Tensor, i: number) => (n === 1 ? t : narrow(t, 0, i, 1));
    const xs: Tensor[] = [];
    const xRow = (i: number) => (xs[i] ??= row(x, i)); // (1, 1, C): only mechanisms with gates read it
    const perRow = (fn: (i: number) => Tensor) => (n === 1 ? fn(0) : concat(rows.map((_, i) => fn(i)), 0));
    const shiftKv = m.transformKv ? (k: Tensor, v: Tensor): [Tensor, Tensor] => {
      const kv = rows.map((r, i) => m.transformKv!(row(k, i), row(v, i), { x: xRow(i) }, r.cache, r.pos));
      return n === 1 ? kv[0] : [concat(kv.map((p) => p[0]), 0), concat(kv.map((p) => p[1]), 0)];
    } : undefined;
    const { a, record } = this.attend(this.projectQkv(x), rot && { ...rot, seqAxis: 0 }, depth, shiftKv,
      (q, k, v) => perRow((i) => m.forwardCached(row(q, i), row(k, i), row(v, i), { x: xRow(i) }, rows[i].cache, rows[i].pos))); // (N, H, 1, D)
    return { out: this.output(a), record };
  }
}
