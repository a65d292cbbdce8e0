/** A pre-norm transformer block: x + attn(norm(x)), then + mlp(norm(x)). */
import type { LayerKv, MechanismBudget } from '../attention/mechanism.ts';
import type { LayerAttention } from '../attention/table.ts';
import type { DepthInput, LayerRecord } from '../attention/depth.ts';
import { add } from '../ops/elementwise.ts';
import { tidy } from '../tensor/scope.ts';
import { Mlp } from '../nn/mlp.ts';
import { Module } from '../nn/module.ts';
import { Norm } from '../nn/norm.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { AttentionBlock, type PositionContext, type RowStep } from './attention_block.ts';
import type { ModelConfig } from './config.ts';

/** What one block computed: its output (B, T, C) and the k̂, ṽ its mechanism saw (its record). */
export interface BlockOutput { y: Tensor; record: LayerRecord }

export class Block extends Module {
  readonly attnNorm: Norm;
  readonly attn: AttentionBlock;
  readonly mlpNorm: Norm;
  readonly mlp: Mlp;

  constructor(f: ParamFactory, name: string, cfg: ModelConfig, attention: LayerAttention) {
    super();
    this.attnNorm = this.child(new Norm(f, `${name}.attn_norm`, cfg.norm, cfg.dModel, cfg.normEps));
    this.attn = this.child(new AttentionBlock(f, `${name}.attn`, cfg, attention));
    this.mlpNorm = this.child(new Norm(f, `${name}.mlp_norm`, cfg.norm, cfg.dModel, cfg.normEps));
    this.mlp = this.child(new Mlp(f, `${name}.mlp`, cfg.mlp, cfg.dModel, cfg.mlpHidden, { bias: cfg.bias, outStd: 0.02 / Math.sqrt(2 * cfg.nLayers) }));
  }

  /**
   * x (B, T, C) → y (B, T, C) and the layer's record; the block's other intermediates are freed on
   * return (autograd keeps what it saved). With `cache`, positions ctx.pos … are written to it.
   */
  forward(x: Tensor, ctx: PositionContext, cache?: LayerKv, depth?: DepthInput, budget?: MechanismBudget): BlockOutput {
    return this.residual(x, (h) => this.attn.forward(h, ctx, cache, depth, budget));
  }

  /** A ragged decoding step (AttentionBlock.forwardRows): x (N, 1, C), row i at rows[i] → y (N, 1, C) and the record (N, Hkv, 1, D). */
  forwardRows(x: Tensor, rows: readonly RowStep[], rot?: { cos: Tensor; sin: Tensor }, depth?: DepthInput): BlockOutput {
    return this.residual(x, (h) => this.attn.forwardRows(h, rows, rot, depth));
  }

  /** x + attn(norm(x)), then + mlp(norm(x)), the attention half given; its record passes through. */
  private residual(x: Tensor, attend: (h: Tensor) => { out: Tensor; record: LayerRecord }): BlockOutput {
    return tidy(() => {
      const a = attend(this.attnNorm.forward(x));
      const x1 = add(x, a.out);
      return { y: add(x1, this.mlp.forward(this.mlpNorm.forward(x1))), record: a.record };
    });
  }
}
