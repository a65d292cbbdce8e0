/**
 * FoX, the Forgetting Transformer's attention (specs/fpa_depth.md §1.1 [V]): a forget gate per
 * query head, f_t = σ(W_f x_t + b_f), and the causal softmax of
 *
 *   s_ij = q_i·k_j/√D + c_i − c_j,      c_t = Σ_{s≤t} log f_s   (fp32 cumsum of log σ)
 *
 * computed by ops/fox_attention.ts. Parameters under the block's name: `fgate.weight` (H, C) and
 * `fgate.bias` (H), initialised as the FoX code's "full" gate does (weight normal(0, 0.02), bias 0,
 * so f ≈ 0.5 at step 0; its special bias init is only for its data-independent gates), plus the
 * output gate's with `outputGate` (attention/output_gate.ts). No positional encoding is needed:
 * the config makes positions "none" by default for models with fox layers (model/config.ts).
 *
 * Cache: besides k and v, c at every cached position per query head (state "c", f32), so a step
 * continues the cumsum from the last cached row and attends over rows 0 … pos+n−1.
 */
import { foxAttention } from '../ops/fox_attention.ts';
import { kvWrite } from '../ops/attention.ts';
import { cumsum } from '../ops/scan_sort.ts';
import { Linear } from '../nn/linear.ts';
import { Module } from '../nn/module.ts';
import type { ModelConfig } from '../model/config.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cacheState, continueCumsum, headGates, logSigmoid, stateRows } from './gates.ts';
import type { AttentionMechanism, CacheStateLayout, LayerKv, MechanismContext, MechanismInput } from './mechanism.ts';
import { OutputGate } from './output_gate.ts';

/** The config entry of a FoX layer. */
export interface FoxSpec {
  type: 'fox';
  /** FoX (Pro) output norm + output gate: y = W_o(RMSNorm_perhead(o) ⊙ σ(W_g x)). */
  outputGate: boolean;
}

export class FoxAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly fgate: Linear;
  readonly outputGate?: OutputGate;

  constructor(readonly spec: FoxSpec, ctx: MechanismContext) {
    super();
    const { f, name, config: c } = ctx;
    this.name = spec.outputGate ? 'fox(outputGate)' : 'fox';
    this.fgate = this.child(new Linear(f, `${name}.fgate`, c.dModel, c.nHeads, { bias: true }));
    if (spec.outputGate) this.outputGate = this.child(new OutputGate(f, name, c));
  }

  /** Cache state: c per query head. */
  static cacheState(c: ModelConfig): CacheStateLayout {
    return { c: c.nHeads };
  }

  /** log f (B, H, T) f32 from x (B, T, C). */
  logForget(x: Tensor): Tensor {
    return logSigmoid(headGates(this.fgate, x));
  }

  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor {
    const c = cumsum(this.logForget(input.x), -1); // (B, H, T)
    return this.finish(foxAttention(q, k, v, c), input);
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    const state = cacheState(cache.state, 'c', this.name);
    continueCumsum(this.logForget(input.x), state, pos);
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return this.finish(foxAttention(q, cache.k, cache.v, stateRows(state), { kvLength: pos + n }), input);
  }

  private finish(o: Tensor, input: MechanismInput): Tensor {
    return this.outputGate ? this.outputGate.forward(o, input.x) : o;
  }

  cacheBytesPerToken(nKvHeads: number, headDim: number, bytesPerElement: number): number {
    return 2 * nKvHeads * headDim * bytesPerElement + 4 * this.fgate.outFeatures;
  }
}
