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
 * (Hkv), `fpa.kappa` (Hkv, walk "tanh" only), plus the output gate's with `outputGate`, and with
 * `tokenShift` the Pro token shift's `shift_k.weight`, `shift_v.weight` (attention/common/token_shift.ts,
 * applied by the block to the raw k and v through transformKv; its cache side state "shift" keeps
 * the last pre-shift rows of each sequence).
 *
 * Cache: per KV head and cached position φ, ℓ and W (states "phi", "level", "walk", f32). The walk
 * is kept per position rather than as one running scalar so that a cache truncated into a prefill
 * (draft-revise decoding) can rebuild its decode state, and the exact path continue.
 *
 * Decoding (§2.6, attention/fpa/fpa_decode.ts): the prefill (the first call, at position 0) runs
 * the exact op, then sets each key's running minimum m_j to the suffix minimum of φ; every later
 * token lowers the minima to its φ_t and attends with the penalties λ·relu(ℓ_j − m_j) through the
 * same op given φ ≡ 0 and levels ℓ_j − m_j (then M_ij = 0 below the diagonal, so pen_ij =
 * λ·relu(ℓ_j − m_j), and the newest key has none). With `evict` keys whose penalty passes τ are
 * marked dead, right after the prefill and at every step (weight exactly 0 from then on), and the
 * cache is compacted — ONLY in KvCache.settle(), the generation loop's asynchronous point (every
 * `every` steps, when the dead fraction passes `deadFraction`, or at the first settle after a
 * prefill that left dead keys) — never inside a step, so the rows of positions not yet settled
 * never move. The decode state is the slot's side state "fpa" and implements the cache protocol:
 * KvCache.truncate(L) (draft–revise decoding's rejected drafts) restores it to the state before
 * position L for any L at or after the last settle — from a snapshot taken at the start of each
 * token's step, or, inside a prefill chunk, rebuilt from the stored φ, ℓ, W as a prefill of L
 * positions makes it — so the next call at L continues bit for bit as if positions ≥ L had never
 * been seen (test/attention/fpa_truncate.test.ts); below the last settle it is an ArgumentError. A
 * cached call at an earlier position than the last is such a truncation.
 *
 * One formulation for every backend (no branch on the backend): a layer without `evict` or `stack`
 * recomputes M_ij from the stored φ of every position each step, exactly (one fused kernel, no
 * extra state: rows are positions, a truncation only moves the row pointer); with `evict` (or
 * `stack`) the state lives in tensors updated by a handful of elementwise ops, with no read-back
 * inside a step, and settle() reads the kept counts and compacts. The host formulation it
 * replaced is the tests' reference (test/attention/fpa_reference.ts).
 *
 * Shared walk (`shared`, §2.2's sub-case u ≡ w ≡ 0): field and level are the walk itself, φ = ℓ = W.
 * The layer then has no field and level projections (parameters `fpa.walk.{weight,bias}`,
 * `fpa.rho`, `fpa.kappa` with walk "tanh": 2·Hkv·(C + 1) fewer than the general layer; a
 * checkpoint with or without `fpa.field.*` / `fpa.level.*` does not load into the other kind:
 * ShapeError "tensor … is missing" or CheckpointError "tensors the config does not use"), and the
 * cache keeps φ, ℓ, W as for the general layer (three equal rows). Sub-cases (§2.3.1):
 * - walk "fox" (δ = log σ(a) ≤ 0): W never rises, so M_ij = W_i and pen_ij = λ·(W_j − W_i) =
 *   −λ·Σ_{(j,i]} log f: FoX with forget gates f^λ, exactly FoX (same gate weights) while λ = 1,
 *   which is the init; λ stays learned.
 * - any walk whose increments are ≥ 0 (e.g. "linear" with a ≥ 0): pen ≡ 0, plain NoPE softmax.
 *
 * Stack decoding (`stack`, only with `shared`, not with `evict`; §2.3.4 and §2.6's last lines):
 * the cached calls — the prompt's prefill included, one token at a time — compute the hard limit
 * λ → ∞ of the layer: each query attends with no penalty to exactly the keys of penalty 0,
 * A_i = {j ≤ i : W_j ≤ W_t for all t ∈ (j, i]} (the monotone stack of §2.3.4: pop the keys whose
 * level passes W_t, push t); every key leaving that set is dead at once and the cache is compacted to the alive keys under the `stack` rule (every `every`
 * steps or past `deadFraction` dead rows, at settle()), as with `evict`. THIS CHANGES THE MODEL'S FUNCTION:
 * the training forward (and what `fon eval` measures) keeps the learned, finite λ, under which a
 * key undercut by a dip d still weighs ∝ e^{−λ·d}; stack decoding removes it. The two agree only
 * when λ·d is large against the score range (2U + ln n) for every dip the walk makes. To decode a
 * model this way, train it in (or near) the hard regime — a large λ (ρ; no config option sets its
 * init, it is learned from λ = 1), or a walk whose steps are large against the scores ("linear"
 * learns their scale, "tanh" its κ) — or accept the approximation and measure it against the
 * exact decoding (the same checkpoint without `stack`). With walk "fox" (every δ < 0) the stack
 * holds only the newest key (and ties), so "linear" or "tanh" is the useful walk here. The mode is
 * the decode state with death threshold 0 (attention/fpa/fpa_decode.ts: a key is dead once
 * λ·relu(ℓ_j − m_j) > 0, i.e. once the field went below its level — the stack's alive set, ties
 * kept), the prompt one token at a time, compaction at settle() under the `stack` rule; the
 * explicit stack (FpaStack, amortised O(1) per token) is the tests' reference.
 */
import { fpaAttention } from '../../ops/fpa_attention.ts';
import { kvWrite } from '../../ops/attention.ts';
import { ArgumentError } from '../../errors.ts';
import { zeros } from '../../ops/creation.ts';
import { add, div, mul, softplus, tanh } from '../../ops/elementwise.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { cumsum } from '../../ops/scan_sort.ts';
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { noGrad, tidy } from '../../tensor/scope.ts';
import { cacheState, continueCumsum, headGates, logSigmoid, stateRows, toF32, writeState } from '../common/gates.ts';
import { attachFpaDecodeState, peekFpaDecodeState, type FpaCompaction, type FpaDecodeState, type FpaEvict } from './fpa_decode.ts';
import type { AttentionMechanism, LayerKv, MechanismContext, MechanismInput } from '../mechanism.ts';
import { OutputGate } from '../common/output_gate.ts';
import { TokenShift } from '../common/token_shift.ts';

export type FpaWalk = 'fox' | 'linear' | 'tanh';
export const FPA_WALKS: readonly FpaWalk[] = ['fox', 'linear', 'tanh'];

/** The config entry of an FPA layer. */
export interface FpaSpec {
  type: 'fpa';
  /** The walk increment g(a): "fox" (default), "linear" or "tanh". */
  walk: FpaWalk;
  /** FoX (Pro) output norm + output gate, as for FoX layers. */
  outputGate: boolean;
  /** FoX (Pro) data-dependent token shift of k and v, as for FoX layers; absent = off. */
  tokenShift?: boolean;
  /** Dead-key eviction while decoding (§2.6); absent = off. See fpa/fpa_decode.ts DEFAULT_EVICT. */
  evict?: FpaEvict;
  /** Shared walk: φ = ℓ = W, no field and level projections (§2.2, u ≡ w ≡ 0); absent = off. */
  shared?: boolean;
  /**
   * Shared-walk hard-limit decoding, with this compaction rule (needs `shared`, excludes `evict`);
   * absent = off. Changes the model's function: see fpa/fpa.ts. Defaults: fpa/fpa_decode.ts DEFAULT_STACK.
   */
  stack?: FpaCompaction;
}

/** The layer's label, e.g. "fpa(walk=fox, outputGate, evict τ=16)". */
export function fpaLabel(spec: FpaSpec): string {
  const opts = [spec.outputGate && 'outputGate', spec.tokenShift && 'tokenShift', spec.shared && 'shared', spec.evict && `evict τ=${spec.evict.tau}`, spec.stack && 'stack'].filter(Boolean);
  return `fpa(walk=${spec.walk}${opts.map((o) => `, ${o}`).join('')})`;
}

/** softplus⁻¹(1) = ln(e − 1): the offset that makes a stored ρ of 0 mean λ = 1. */
export const RHO_OFFSET = Math.log(Math.E - 1);

export class FpaAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly walkProj: Linear;
  readonly rho: Tensor;
  readonly kappa?: Tensor;
  readonly outputGate?: OutputGate;
  readonly tokenShift?: TokenShift;
  /** The field and level projections (u, w); absent with a shared walk. */
  private readonly offsets?: { field: Linear; level: Linear };

  constructor(readonly spec: FpaSpec, ctx: MechanismContext) {
    super();
    const { f, name, dims: c } = ctx;
    const hkv = c.nKvHeads;
    if (spec.stack && !spec.shared) throw new ArgumentError(`fpa: 'stack' needs 'shared' (the stack holds the alive keys only when field and level are the walk itself)`);
    if (spec.stack && spec.evict) throw new ArgumentError(`fpa: 'stack' and 'evict' exclude each other`);
    this.name = fpaLabel(spec);
    this.walkProj = this.child(new Linear(f, `${name}.fpa.walk`, c.dModel, hkv, { bias: true }));
    if (!spec.shared) {
      this.offsets = {
        field: this.child(new Linear(f, `${name}.fpa.field`, c.dModel, hkv, { bias: true, std: 0 })),
        level: this.child(new Linear(f, `${name}.fpa.level`, c.dModel, hkv, { bias: true, std: 0 })),
      };
    }
    this.rho = this.param(f, `${name}.fpa.rho`, [hkv], { kind: 'zeros' });
    if (spec.walk === 'tanh') this.kappa = this.param(f, `${name}.fpa.kappa`, [hkv], { kind: 'ones' });
    if (spec.outputGate) this.outputGate = this.child(new OutputGate(f, name, c));
    if (spec.tokenShift) this.tokenShift = this.child(new TokenShift(f, name, c, this.name));
  }

  /** The field projection (u); ArgumentError for a shared walk, which has none. */
  get fieldProj(): Linear {
    if (!this.offsets) throw new ArgumentError(`${this.name}: a shared walk has no field projection (φ = W)`);
    return this.offsets.field;
  }

  /** The level projection (w); ArgumentError for a shared walk, which has none. */
  get levelProj(): Linear {
    if (!this.offsets) throw new ArgumentError(`${this.name}: a shared walk has no level projection (ℓ = W)`);
    return this.offsets.level;
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

  /** φ and ℓ (B, Hkv, T) from the walk W (B, Hkv, T) and x (both W with a shared walk). */
  private fieldAndLevel(walk: Tensor, x: Tensor): [Tensor, Tensor] {
    if (!this.offsets) return [walk, walk];
    return [add(walk, headGates(this.offsets.field, x)), add(walk, headGates(this.offsets.level, x))];
  }

  /** The offsets u and w (B, Hkv, T) f32 from x (B, T, C); zeros with a shared walk. */
  private offsetGates(x: Tensor): [Tensor, Tensor] {
    if (this.offsets) return [headGates(this.offsets.field, x), headGates(this.offsets.level, x)];
    const z = () => zeros([x.shape[0], this.walkProj.outFeatures, x.shape[1]], { backend: x.backend });
    return [z(), z()];
  }

  /** The token shift of the raw k and v (B, T, Hkv, D) when on; otherwise k and v as they are. */
  transformKv(k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv | undefined, pos: number): [Tensor, Tensor] {
    if (!this.tokenShift) return [k, v];
    return cache ? this.tokenShift.forwardCached(k, v, input.x, cache, pos) : this.tokenShift.forward(k, v, input.x);
  }

  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor {
    const [phi, level] = this.fieldLevel(input.x);
    return this.finish(fpaAttention(q, k, v, phi, level, this.lambda()), input);
  }

  /** φ and ℓ (B, Hkv, T) of a whole sequence x (B, T, C), as the training forward makes them. */
  fieldLevel(x: Tensor): [Tensor, Tensor] {
    return this.fieldAndLevel(cumsum(this.increments(x), -1), x);
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    if (!this.spec.evict && !this.spec.stack) return this.finish(this.exactCached(q, k, v, input, cache, pos), input);
    const st = peekFpaDecodeState(cache) ?? attachFpaDecodeState(cache, { ...(this.spec.evict ? { evict: this.spec.evict } : {}), ...(this.spec.stack ? { stack: this.spec.stack } : {}) });
    return this.finish(this.decode(st, q, k, v, input, cache, pos), input);
  }

  /**
   * Checks a cached call at `pos` against the state: a restart at 0, the next position, or an
   * earlier one at or after the last settle (a rewind: the state is truncated there, as
   * KvCache.truncate does); anything else is an ArgumentError.
   */
  private seek(st: FpaDecodeState, pos: number): void {
    if (pos === 0) st.reset();
    else if (pos !== st.pos) {
      if (pos > st.pos) throw new ArgumentError(`${this.name}: decoding at position ${pos} after ${st.pos}: positions ${st.pos} … ${pos - 1} were never written to this cache`);
      if (pos < st.committed) {
        throw new ArgumentError(`${this.name}: decoding at position ${pos} after ${st.pos}: the first ${st.committed} positions are committed (the cache settled after them and may have compacted them), so only a restart at position 0 or a call at a position ≥ ${st.committed} is possible`);
      }
      st.truncate(pos);
    }
  }

  /** τ/λ per KV head (1, Hkv, 1): a key dies when its excess ℓ − m passes it (the device state's form of λ·relu(ℓ − m) > τ). */
  private deathThreshold(evict: FpaEvict): Tensor {
    return reshape(div(evict.tau, this.lambda()), [1, -1, 1]);
  }

  /**
   * The cached step with eviction or in the stack mode (attention/fpa/fpa_decode.ts, one
   * formulation in ops for every backend): the prefill exact, then the suffix minima (stack mode:
   * the prompt one token at a time as well); then one token at a time: W ← W + δ_t, φ_t, ℓ_t; every
   * cached excess raised to ℓ_j − φ_t, the keys past the threshold (τ/λ, or 0 in the stack mode)
   * dead; the new key appended; the query attends with the penalties; re-centring when due
   * (compaction waits for settle()). Each token starts with a snapshot (checkpoint) that truncate
   * can restore.
   */
  private decode(st: FpaDecodeState, q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const { evict, stack } = this.spec;
    if (evict) st.evict = evict;
    if (stack) st.stackRule = stack;
    // τ/λ per KV head; in the stack mode 0: a key dies once its penalty is positive (the hard limit).
    const deathThreshold = () => (evict ? this.deathThreshold(evict) : zeros([1, this.walkProj.outFeatures, 1], { backend: k.backend }));
    const states = () => ['phi', 'level', 'walk'].map((key) => stateRows(cacheState(cache.state, key, this.name))) as [Tensor, Tensor, Tensor];
    st.rebuilder = (n) => noGrad(() => tidy(() => st.rebuild(...states(), n, deathThreshold())));
    this.seek(st, pos);
    const threshold = deathThreshold();
    // Stack mode has no exact prefill: the prompt goes through the state one token at a time (the hard limit throughout).
    if (st.length === 0 && !stack) {
      const o = this.exactCached(q, k, v, input, cache, 0);
      st.rebuild(...states(), q.shape[2], threshold);
      return o;
    }
    const n = q.shape[2];
    const inc = this.increments(input.x), [u, w] = this.offsetGates(input.x); // (B, Hkv, n)
    const lambda = this.lambda();
    const outs: Tensor[] = [];
    // A stack-mode prefill takes no snapshots: each would hold that step's state tensors, O(n²)
    // for a prompt of n; a truncation into it rebuilds from the stored rows instead.
    const snapshots = !(stack && pos === 0);
    for (let i = 0; i < n; i++) {
      const at = (t: Tensor) => narrow(t, 2, i, 1);
      if (snapshots) st.checkpoint();
      const [phiT, levelT, walkT] = st.advance(at(inc), at(u), at(w));
      st.observe(phiT, threshold);
      const row = st.length;
      if (st.exactHistory) {
        writeState(cacheState(cache.state, 'phi', this.name), phiT, row);
        writeState(cacheState(cache.state, 'level', this.name), levelT, row);
        writeState(cacheState(cache.state, 'walk', this.name), walkT, row);
      }
      kvWrite(cache.k, at(k), row);
      kvWrite(cache.v, at(v), row);
      st.append(levelT);
      outs.push(fpaAttention(at(q), cache.k, cache.v, st.zeroField, st.attentionLevels, lambda, { kvLength: st.length }));
      st.maybeRecentre();
    }
    return n === 1 ? outs[0] : concat(outs, 2);
  }

  /** The exact cached step: writes φ, ℓ, W, k, v at rows pos …, recomputes M_ij from the stored φ. */
  private exactCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    const phiState = cacheState(cache.state, 'phi', this.name);
    const levelState = cacheState(cache.state, 'level', this.name);
    const walk = continueCumsum(this.increments(input.x), cacheState(cache.state, 'walk', this.name), pos);
    const [phi, level] = this.fieldAndLevel(walk, input.x);
    writeState(phiState, phi, pos);
    writeState(levelState, level, pos);
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    return fpaAttention(q, cache.k, cache.v, stateRows(phiState), stateRows(levelState), this.lambda(), { kvLength: pos + n });
  }

  private finish(o: Tensor, input: MechanismInput): Tensor {
    return this.outputGate ? this.outputGate.forward(o, input.x) : o;
  }
}
