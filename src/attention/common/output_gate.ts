/**
 * The "Pro" output norm and output gate of FoX (specs/fpa_depth.md §1.2 [V]), applied to a
 * mechanism's output before the block's output projection:
 *
 *   y = W_o( RMSNorm_perhead(o) ⊙ σ(W_g x) )      W_g (H·D × C), no bias
 *
 * The per-head RMSNorm normalises each head's D values and scales them by its own weights, kept
 * as one (H·D) vector as the FoX code's GroupRMSNorm does (rank 1: no weight decay, like every
 * norm weight). Parameters: `<name>.out_norm.weight` (H·D), `<name>.out_gate.weight` (H·D, C).
 */
import { add, mul, rsqrt, sigmoid, square } from '../../ops/elementwise.ts';
import { permute, reshape } from '../../ops/layout.ts';
import { mean } from '../../ops/reduce.ts';
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import type { ParamFactory } from '../../nn/params.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { ModelDims } from '../mechanism.ts';

export class OutputGate extends Module {
  readonly normWeight: Tensor;
  readonly gate: Linear;
  private readonly heads: number;
  private readonly headDim: number;
  private readonly eps: number;

  constructor(f: ParamFactory, name: string, cfg: ModelDims) {
    super();
    this.heads = cfg.nHeads;
    this.headDim = cfg.headDim;
    this.eps = cfg.normEps;
    this.normWeight = this.param(f, `${name}.out_norm.weight`, [cfg.nHeads * cfg.headDim], { kind: 'ones' });
    this.gate = this.child(new Linear(f, `${name}.out_gate`, cfg.dModel, cfg.nHeads * cfg.headDim));
  }

  /** o (B, H, T, D), x (B, T, C) → (B, H, T, D). */
  forward(o: Tensor, x: Tensor): Tensor {
    const [b, h, t, d] = o.shape;
    const normed = mul(o, rsqrt(add(mean(square(o), -1, { keepDims: true }), this.eps))); // (B, H, T, D)
    const scaled = mul(normed, reshape(this.normWeight, [1, this.heads, 1, this.headDim]));
    const g = permute(reshape(sigmoid(this.gate.forward(x)), [b, t, h, d]), [0, 2, 1, 3]); // (B, T, H·D) → (B, H, T, D)
    return mul(scaled, g);
  }
}
