/**
 * FPA, First Passage Attention (specs/fpa_depth.md §2; everything past the abstract is the spec's
 * proposal [P], implemented as written). Per KV head, from the block's normed input x_t:
 *
 *   [a_t, u_t, w_t] = W_fpa x_t + b_fpa          three (Hkv × C) projections with biases
 *   δ_t = g(a_t)                                  walk increment, by `walk`:
 *           "fox"    δ = log σ(a)                 (§2.5 (iii), the default)
 *           "linear" δ = a                        (§2.5 (i), signed)
 *           "tanh"   δ = κ_h · tanh(a)            (§2.5 (ii), κ_h learned per KV head, init 1)
 *   W_t = Σ_{s≤t} δ_s (fp32 cumsum);   φ_t = W_t + u_t (field);   ℓ_t = W_t + w_t (level)
 *   λ_h = softplus(ρ_h + ln(e − 1))               (> 0; ρ stored minus ln(e − 1), so ρ = 0 is λ = 1,
 *                                                  the spec's ρ init 0.5413: the factory's inits are 0/1/normal)
 *
 * then ops/fpa_attention.ts: s_ij = q_i·k_j/√D − λ·relu(ℓ_j − min_{j<t≤i} φ_t).
 *
 * Init ([P] §2.5): the walk rows a as FoX's forget gate (weight normal(0, 0.02), bias 0), the field
 * and level rows u, w all zero (weights and biases), λ = 1. With walk "fox" the layer is then exactly
 * FoX at step 0 (§2.3.1: φ = ℓ = W non-increasing, pen_ij = W_j − W_i), up to GQA: FoX has one gate
 * per query head, FPA one walk per KV head, so they coincide when nKvHeads = nHeads. The spec fuses
 * the three projections into one 3·Hkv-row GEMM; they are kept as three matrices so each has its own
 * init: `fpa.walk.{weight,bias}`, `fpa.field.{weight,bias}`, `fpa.level.{weight,bias}`, `fpa.rho`
 * (Hkv), `fpa.kappa` (Hkv, walk "tanh" only), plus the output gate's with `outputGate`.
 *
 * Cache: per KV head and cached position φ, ℓ and W (states "phi", "level", "walk", f32). The walk
 * is kept per position rather than as one running scalar so that a cache rewound to an earlier
 * position (draft-revise decoding) continues correctly. Dead-key eviction (§2.6) is not done here.
 */
import { fpaAttention } from '../ops/fpa_attention.ts';
import { kvWrite } from '../ops/attention.ts';
import { add, mul, softplus, tanh } from '../ops/elementwise.ts';
import { reshape } from '../ops/layout.ts';
import { cumsum } from '../ops/scan_sort.ts';
import { Linear } from '../nn/linear.ts';
import { Module } from '../nn/module.ts';
import type { ModelConfig } from '../model/config.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { cacheState, continueCumsum, headGates, logSigmoid, stateRows, toF32, writeState } from './gates.ts';
import type { AttentionMechanism, CacheStateLayout, LayerKv, MechanismContext, MechanismInput } from './mechanism.ts';
import { OutputGate } from './output_gate.ts';

export type FpaWalk = 'fox' | 'linear' | 'tanh';
export const FPA_WALKS: readonly FpaWalk[] = ['fox', 'linear', 'tanh'];

/** The config entry of an FPA layer. */
export interface FpaSpec {
  type: 'fpa';
  /** The walk increment g(a): "fox" (default), "linear" or "tanh". */
  walk: FpaWalk;
  /** FoX (Pro) output norm + output gate, as for FoX layers. */
  outputGate: boolean;
}

/** softplus⁻¹(1) = ln(e − 1): the offset that makes a stored ρ of 0 mean λ = 1. */
export const RHO_OFFSET = Math.log(Math.E - 1);

export class FpaAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly walkProj: Linear;
  readonly fieldProj: Linear;
  readonly levelProj: Linear;
  readonly rho: Tensor;
  readonly kappa?: Tensor;
  readonly outputGate?: OutputGate;

  constructor(readonly spec: FpaSpec, ctx: MechanismContext) {
    super();
    const { f, name, config: c } = ctx;
    const hkv = c.nKvHeads;
    this.name = `fpa(walk=${spec.walk}${spec.outputGate ? ', outputGate' : ''})`;
    this.walkProj = this.child(new Linear(f, `${name}.fpa.walk`, c.dModel, hkv, { bias: true }));
    this.fieldProj = this.child(new Linear(f, `${name}.fpa.field`, c.dModel, hkv, { bias: true, std: 0 }));
    this.levelProj = this.child(new Linear(f, `${name}.fpa.level`, c.dModel, hkv, { bias: true, std: 0 }));
    this.rho = this.param(f, `${name}.fpa.rho`, [hkv], { kind: 'zeros' });
    if (spec.walk === 'tanh') this.kappa = this.param(f, `${name}.fpa.kappa`, [hkv], { kind: 'ones' });
    if (spec.outputGate) this.outputGate = this.child(new OutputGate(f, name, c));
  }

  /** Cache state: φ, ℓ and W per KV head. */
  static cacheState(c: ModelConfig): CacheStateLayout {
    return { phi: c.nKvHeads, level: c.nKvHeads, walk: c.nKvHeads };
  }

  /** The walk increments δ (B, Hkv, T) f32 from x (B, T, C). */
  increments(x: Tensor): Tensor {
    const a = headGates(this.walkProj, x);
    switch (this.spec.walk) {
      case 'fox': return logSigmoid(a);
      case 'linear': return a;
      case 'tanh': return mul(tanh(a), reshape(toF32(this.kappa!), [1, -1, 1]));
    }
  }

  /** λ (Hkv) f32. */
  lambda(): Tensor {
    return softplus(add(toF32(this.rho), RHO_OFFSET));
  }

  /** φ and ℓ (B, Hkv, T) from the walk W (B, Hkv, T) and x. */
  private fieldAndLevel(walk: Tensor, x: Tensor): [Tensor, Tensor] {
    return [add(walk, headGates(this.fieldProj, x)), add(walk, headGates(this.levelProj, x))];
  }

  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor {
    const [phi, level] = this.fieldAndLevel(cumsum(this.increments(input.x), -1), input.x);
    return this.finish(fpaAttention(q, k, v, phi, level, this.lambda()), input);
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    const phiState = cacheState(cache.state, 'phi', this.name);
    const levelState = cacheState(cache.state, 'level', this.name);
    const walk = continueCumsum(this.increments(input.x), cacheState(cache.state, 'walk', this.name), pos);
    const [phi, level] = this.fieldAndLevel(walk, input.x);
    writeState(phiState, phi, pos);
    writeState(levelState, level, pos);
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return this.finish(fpaAttention(q, cache.k, cache.v, stateRows(phiState), stateRows(levelState), this.lambda(), { kvLength: pos + n }), input);
  }

  private finish(o: Tensor, input: MechanismInput): Tensor {
    return this.outputGate ? this.outputGate.forward(o, input.x) : o;
  }

  cacheBytesPerToken(nKvHeads: number, headDim: number, bytesPerElement: number): number {
    return 2 * nKvHeads * headDim * bytesPerElement + 4 * 3 * this.walkProj.outFeatures;
  }
}
