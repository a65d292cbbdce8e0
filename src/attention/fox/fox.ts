/**
 * FoX, the Forgetting Transformer's attention (specs/fpa_depth.md §1.1 [V]): a forget gate per
 * query head, f_t = σ(W_f x_t + b_f), and the causal softmax of
 *
 *   s_ij = q_i·k_j/√D + c_i − c_j,      c_t = Σ_{s≤t} log f_s   (fp32 cumsum of log σ)
 *
 * computed by ops/fox_attention.ts. Parameters under the block's name: `fgate.weight` (H, C) and
 * `fgate.bias` (H), initialised as the FoX code's "full" gate does (weight normal(0, 0.02), bias 0,
 * so f ≈ 0.5 at step 0; its special bias init is only for its data-independent gates), plus the
 * output gate's with `outputGate` (attention/common/output_gate.ts). No positional encoding is needed:
 * the config makes positions "none" by default for models with fox layers (model/config.ts).
 * With `tokenShift`, the Pro token shift on the raw k and v projections (attention/common/token_shift.ts:
 * `shift_k.weight`, `shift_v.weight`, Hkv × C), applied by the block through transformKv.
 *
 * Cache: besides k and v, c at every cached position per query head (state "c", f32), so a step
 * continues the cumsum from the last cached row and attends over rows 0 … pos+n−1; with
 * `tokenShift`, the token shift's side state (common/token_shift.ts). The def (options, cache
 * layout, info, export) is fox/index.ts.
 */
import { foxAttention } from '../../ops/fox_attention.ts';
import { kvWrite } from '../../ops/attention.ts';
import { cumsum } from '../../ops/scan_sort.ts';
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { cacheState, continueCumsum, headGates, logSigmoid, stateRows } from '../common/gates.ts';
import type { AttentionMechanism, LayerKv, MechanismContext, MechanismInput } from '../mechanism.ts';
import { OutputGate } from '../common/output_gate.ts';
import { TokenShift } from '../common/token_shift.ts';

/** The config entry of a FoX layer. */
export interface FoxSpec {
  type: 'fox';
  /** FoX (Pro) output norm + output gate: y = W_o(RMSNorm_perhead(o) ⊙ σ(W_g x)). */
  outputGate: boolean;
  /** FoX (Pro) data-dependent token shift of k and v (common/token_shift.ts); absent = off. */
  tokenShift?: boolean;
}

export class FoxAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly fgate: Linear;
  readonly outputGate?: OutputGate;
  readonly tokenShift?: TokenShift;

  constructor(readonly spec: FoxSpec, ctx: MechanismContext) {
    super();
    const { f, name, dims: c } = ctx;
    const opts = [spec.outputGate && 'outputGate', spec.tokenShift && 'tokenShift'].filter(Boolean);
    this.name = opts.length ? `fox(${opts.join(', ')})` : 'fox';
    this.fgate = this.child(new Linear(f, `${name}.fgate`, c.dModel, c.nHeads, { bias: true }));
    if (spec.outputGate) this.outputGate = this.child(new OutputGate(f, name, c));
    if (spec.tokenShift) this.tokenShift = this.child(new TokenShift(f, name, c, this.name));
  }

  /** log f (B, H, T) f32 from x (B, T, C). */
  logForget(x: Tensor): Tensor {
    return logSigmoid(headGates(this.fgate, x));
  }

  /** The token shift of the raw k and v (B, T, Hkv, D) when on; otherwise k and v as they are. */
  transformKv(k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv | undefined, pos: number): [Tensor, Tensor] {
    if (!this.tokenShift) return [k, v];
    return cache ? this.tokenShift.forwardCached(k, v, input.x, cache, pos) : this.tokenShift.forward(k, v, input.x);
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
}
