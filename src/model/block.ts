/** A pre-norm transformer block: x + attn(norm(x)), then + mlp(norm(x)). */
import type { LayerDepth } from '../attention/depth.ts';
import type { LayerAttention, LayerKv } from '../attention/mechanism.ts';
import { add } from '../ops/elementwise.ts';
import { tidy } from '../tensor/scope.ts';
import { Mlp } from '../nn/mlp.ts';
import { Module } from '../nn/module.ts';
import { Norm } from '../nn/norm.ts';
import type { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { AttentionBlock, type PositionContext } from './attention_block.ts';
import type { ModelConfig } from './config.ts';

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
   * x (B, T, C) → (B, T, C); the block's intermediates are freed on return (autograd keeps what it
   * saved), but for the k̂, ṽ it leaves in `depth.own` (Depth-Attention), which move to the caller's scope.
   */
  forward(x: Tensor, ctx: PositionContext, cache?: LayerKv, depth?: LayerDepth): Tensor {
    return tidy(() => {
      const x1 = add(x, this.attn.forward(this.attnNorm.forward(x), ctx, cache, depth));
      return { y: add(x1, this.mlp.forward(this.mlpNorm.forward(x1))), own: depth?.own };
    }).y;
  }
}
