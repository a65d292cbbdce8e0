/**
 * Focus (specs/focus_spot.md Part A): learned centroid groups. Each layer projects its normed input
 * to d_g dimensions (W_g) and scores it against K centroids (C); a query attends to its last w keys
 * at full resolution and, beyond them, only to keys that share one of its groups. Parameters, under
 * the block's name: `focus.proj.weight` (d_g, C) and `focus.centroids` (K, d_g), trained; and
 * `focus.lognorm` (K), the frozen per-group log-normalizers of the causal assignment (groups.ts),
 * which training keeps as a running mean of Sinkhorn's column potentials and never differentiates.
 * One assignment per layer, shared by every head (A2). Composed onto a frozen model, W_g and C are
 * the only trained tensors (about 0.1% of a GPT-2's parameters).
 *
 * Two modes:
 * - soft (training; the default whenever gradients are on): Sinkhorn-balanced soft assignments over
 *   the window and the gated logits of dense.ts (gate "literal" or "mask"), O(T²) like the paper's;
 * - hard (inference; the default under noGrad): each token's top-k groups of softmax(S/τ − u),
 *   causal, and the exact masked rule, run as sparse.ts's sorted segments + cross-group band: its
 *   plan (sort, row lists, masks) built on the host where reads are synchronous (cpu, wasm), and
 *   on the device (device_plan.ts) on webgpu, whose reads are asynchronous. A decoding step on
 *   webgpu runs the decode kernels with bit words over the cache (device_decode.ts); a verify pass
 *   of several rows the equal dense masked form (dense.ts hardFocusDenseOnDevice).
 * `setFocusInference` (index.ts) overrides the mode and k for eval and generate (--focus-top-k).
 *
 * Cache: contiguous k and v, the membership one-hot per position (state "member", K per position,
 * for the device form) and the group lists (side state "focus", group_lists.ts) that decode reads.
 */
import { attention, kvWrite } from '../../ops/attention.ts';
import { arange, tensor } from '../../ops/creation.ts';
import { abs, add, gt, le, lt, maximum, mul, sub, where } from '../../ops/elementwise.ts';
import { matmul } from '../../ops/matmul.ts';
import { concat, narrow, permute, reshape } from '../../ops/layout.ts';
import { Linear } from '../../nn/linear.ts';
import { Module } from '../../nn/module.ts';
import { isGradEnabled, keep, noGrad } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { ArgumentError } from '../../errors.ts';
import type { AttentionMechanism, LayerKv, MechanismContext, MechanismInput } from '../mechanism.ts';
import { hardFocusDenseOnDevice, softFocusAttention, type FocusGate } from './dense.ts';
import { causalLogits, centredPotentials, groupScores, membershipBits, membershipOneHot, softAssignments } from './groups.ts';
import { FocusGroupLists } from './group_lists.ts';
import { focusSparseAttention, gatherEntryRows, runSortedPrefill, type FocusPrefillStats } from './sparse.ts';
import { planFocusPrefillOnDevice } from './device_plan.ts';
import { focusDecodeOnDevice } from './device_decode.ts';
import { sum } from '../../ops/reduce.ts';

/** The config entry of a Focus layer. */
export interface FocusSpec {
  type: 'focus';
  /** K, the number of groups (centroids), 1 … 32. */
  groups: number;
  /** k, the groups each token joins at inference (1 … K; K keeps every pair). */
  topK: number;
  /** d_g, the width of the group space. */
  groupDim: number;
  /** w: a query sees its last w keys (i − j ≤ w) whatever their groups. */
  window: number;
  /** τ, the assignment temperature. */
  tau: number;
  /** N, Sinkhorn's iterations in training. */
  sinkhornIters: number;
  /** The training gate: the paper's Eq. 2 as written ("literal") or the additive log-gate ("mask"). */
  gate: FocusGate;
  /** λ, the gate's steepness (not given by the paper). */
  lambda: number;
  /** β, the mask gate's threshold on the affinity g_i·g_j. */
  beta: number;
}

/** Momentum of the running log-normalizers (per training step). */
const LOGNORM_MOMENTUM = 0.95;

/** Per-layer facts of the last forward, for logs and `fon eval --json`: tokens per group (summed since reset) and the pairs kept. */
export interface FocusLayerStats {
  /** Memberships per group over the positions seen (hard) or argmax tokens (soft); a device tensor (K) f32, read when logged. */
  counts?: Tensor;
  /** Hard sparse prefill only: blocks visited by set A and set B against full causal attention's. */
  blocks: FocusPrefillStats;
  /** Hard forwards (both forms): (2) f32, the pairs the rule keeps and the causal pairs, summed since reset. */
  pairs?: Tensor;
}

export class FocusAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly proj: Linear;
  readonly centroids: Tensor;
  readonly lognorm: Tensor;
  /** Overrides of the mode and k (setFocusInference); absent: soft with gradients, hard with the config's k without. */
  override: { mode?: 'soft' | 'hard'; topK?: number } = {};
  readonly stats: FocusLayerStats = { blocks: { blocksA: 0, blocksB: 0, causalBlocks: 0 } };

  constructor(readonly spec: FocusSpec, ctx: MechanismContext) {
    super();
    const { f, name, dims } = ctx;
    this.name = focusLabel(spec);
    this.proj = this.child(new Linear(f, `${name}.focus.proj`, dims.dModel, spec.groupDim, { std: 1 / Math.sqrt(dims.dModel) }));
    this.centroids = this.param(f, `${name}.focus.centroids`, [spec.groups, spec.groupDim], { kind: 'normal', std: 1 / Math.sqrt(spec.groupDim) });
    this.lognorm = this.param(f, `${name}.focus.lognorm`, [spec.groups], { kind: 'zeros' });
    this.lognorm.requiresGrad = false;
  }

  /** k in force. */
  get topK(): number {
    return this.override.topK ?? this.spec.topK;
  }

  private soft(): boolean {
    return this.override.mode ? this.override.mode === 'soft' : isGradEnabled();
  }

  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor {
    const s = this.spec;
    const scores = groupScores(input.x, this.proj.weight, this.centroids); // (B, T, K)
    if (this.soft()) {
      const { g, potentials } = softAssignments(scores, s.tau, s.sinkhornIters);
      if (isGradEnabled()) this.followPotentials(potentials);
      this.count(noGrad(() => membershipOneHot(g, 1)));
      return softFocusAttention(q, k, v, g, s);
    }
    const logits = causalLogits(scores, s.tau, this.lognorm); // (B, T, K)
    const topK = this.topK;
    if (!q.backend.readSync) {
      const member = membershipOneHot(logits, topK);
      this.count(member);
      this.accumulate('pairs', noGrad(() => keptPairsOnDevice(member, s.window)));
      // k = K keeps every pair: plain causal attention; else the sparse path, planned on the device.
      return topK === s.groups ? attention(q, k, v) : runSortedPrefill(q, k, v, planFocusPrefillOnDevice(member, { groups: s.groups, topK, window: s.window }));
    }
    const [b, t] = scores.shape;
    const bits = membershipBits(logits.dataSync() as Float32Array, b * t, s.groups, topK);
    this.countBits(bits, q);
    this.accumulate('pairs', tensor(Float32Array.from(keptPairs(bits, b, t, s.window)), [2], { backend: q.backend }));
    return focusSparseAttention(q, k, v, bits, { groups: s.groups, topK, window: s.window }, this.stats.blocks);
  }

  /**
   * u ← m·u + (1 − m)·centred(U), in place and without gradient (the running log-normalizers), at
   * every forward with gradients (each micro-batch). A group whose potential is not finite (a step
   * that diverged) keeps its u: one bad batch must not poison every later hard assignment.
   */
  private followPotentials(potentials: Tensor): void {
    noGrad(() => {
      const fresh = centredPotentials(potentials);
      const blended = add(mul(this.lognorm, LOGNORM_MOMENTUM), mul(fresh, 1 - LOGNORM_MOMENTUM));
      const u = where(lt(abs(fresh), 1e30), blended, this.lognorm); // NaN and ±∞ compare false
      const k = this.spec.groups;
      kvWrite(reshape(this.lognorm, [1, 1, k, 1]), reshape(u, [1, 1, k, 1]), 0);
    });
  }

  /** Adds memberships (B, T, K) to the per-group counts. */
  private count(member: Tensor): void {
    this.accumulate('counts', noGrad(() => sum(member, [0, 1]))); // (K)
  }

  /** stats[key] += x, kept out of every scope (read when logged, freed by resetStats). */
  private accumulate(key: 'counts' | 'pairs', x: Tensor): void {
    noGrad(() => {
      const prev = this.stats[key];
      const next = prev ? add(prev, x) : x;
      prev?.dispose();
      this.stats[key] = keep(next);
    });
  }

  private countBits(bits: Uint32Array, like: Tensor): void {
    const c = new Float32Array(this.spec.groups);
    for (const w of bits) for (let g = 0; g < c.length; g++) if (w & (1 << g)) c[g]++;
    this.count(reshape(tensor(c, [c.length], { backend: like.backend }), [1, 1, c.length]));
  }

  /** Forgets the counts and block figures (a new measurement starts). */
  resetStats(): void {
    this.stats.counts?.dispose();
    this.stats.counts = undefined;
    this.stats.pairs?.dispose();
    this.stats.pairs = undefined;
    this.stats.blocks = { blocksA: 0, blocksB: 0, causalBlocks: 0 };
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const s = this.spec;
    const [b, h, n, d] = q.shape;
    kvWrite(cache.k, k, pos);
    kvWrite(cache.v, v, pos);
    const logits = causalLogits(groupScores(input.x, this.proj.weight, this.centroids), s.tau, this.lognorm); // (B, n, K)
    const topK = this.topK;
    const member = membershipOneHot(logits, topK); // (B, n, K)
    const state = cache.state?.member;
    const lists = cache.side?.focus as FocusGroupLists | undefined;
    if (!state || !lists) throw new ArgumentError(`${this.name}: the KV cache slot has no Focus state; make the cache with KvCache from this model's config`);
    kvWrite(state, reshape(permute(member, [0, 2, 1]), [b, s.groups, n, 1]), pos);
    const l = pos + n;
    if (lists.length > pos) lists.truncate(pos);
    if (topK === s.groups) { // every pair kept: plain causal attention over the cache
      lists.advance(pos, n);
      return attention(q, cache.k, cache.v, { causal: true, kvLength: l });
    }
    if (!q.backend.readSync) {
      lists.advance(pos, n);
      // A prompt: the sparse prefill planned on the device; a step: the decode kernels with bit
      // words (device_decode.ts); a verify pass of n rows: the dense masked form over the cache, O(n·L).
      if (pos === 0 && n > 1) return runSortedPrefill(q, k, v, planFocusPrefillOnDevice(member, { groups: s.groups, topK, window: s.window }));
      const tmax = cache.k.shape[2];
      if (n === 1) return focusDecodeOnDevice(q, cache.k, cache.v, permute(reshape(state, [b, s.groups, tmax]), [0, 2, 1]), { topK, window: s.window, kvLength: l });
      const all = permute(reshape(narrow(state, 2, 0, l), [b, s.groups, l]), [0, 2, 1]); // (B, L, K)
      return hardFocusDenseOnDevice(q, narrow(cache.k, 2, 0, l), narrow(cache.v, 2, 0, l), all, s.window);
    }
    const bits = membershipBits(logits.dataSync() as Float32Array, b * n, s.groups, topK);
    lists.append(pos, bits);
    if (pos === 0) return focusSparseAttention(q, k, v, bits, { groups: s.groups, topK, window: s.window });
    // Each new query over the keys its lists name (group_lists.ts visible), gathered from the
    // whole cache (batch entry bb's rows), so a step reads those keys only.
    const rows: Tensor[] = [];
    for (let bb = 0; bb < b; bb++) {
      for (let i = 0; i < n; i++) {
        const keys = lists.visible(bb, pos + i, s.window);
        const qi = narrow(narrow(q, 0, bb, 1), 2, i, 1); // (1, H, 1, D)
        rows.push(attention(qi, gatherEntryRows(cache.k, bb, keys), gatherEntryRows(cache.v, bb, keys), { causal: false }));
      }
    }
    const out = concat(rows, 2); // (1, H, B·n, D) in batch-major order
    return b === 1 ? out : permute(reshape(out, [h, b, n, d]), [1, 0, 2, 3]);
  }
}

/**
 * Pairs the hard rule keeps over positions 0 … T − 1 of each batch entry, and the causal pairs
 * T(T + 1)/2 each: [kept, causal], from bit words (B·T). Exact for any k: a running count of each
 * distinct word seen more than w positions back.
 */
export function keptPairs(bits: Uint32Array, batch: number, t: number, window: number): [number, number] {
  let kept = 0;
  for (let b = 0; b < batch; b++) {
    const seen = new Map<number, number>();
    for (let i = 0; i < t; i++) {
      const far = i - window - 1; // position j ≤ far is outside the window
      if (far >= 0) { const w = bits[b * t + far]; seen.set(w, (seen.get(w) ?? 0) + 1); }
      kept += Math.min(i, window) + 1;
      const wi = bits[b * t + i];
      for (const [w, n] of seen) if (w & wi) kept += n;
    }
  }
  return [kept, (batch * t * (t + 1)) / 2];
}

/**
 * keptPairs on the device from membership one-hot (B, T, K): [kept, causal] (2) f32. Query rows
 * go in chunks against the keys up to each chunk's end, so no (T, T) tensor is made: a chunk's
 * tensors hold about 2^24 elements.
 */
function keptPairsOnDevice(member: Tensor, window: number): Tensor {
  const [b, t] = member.shape;
  const be = member.backend;
  const chunk = Math.max(1, Math.min(t, Math.floor(2 ** 24 / Math.max(1, b * t))));
  let kept: Tensor | undefined;
  for (let i0 = 0; i0 < t; i0 += chunk) {
    const c = Math.min(chunk, t - i0), l = i0 + c;
    const shared = gt(matmul(narrow(member, 1, i0, c), narrow(member, 1, 0, l), { transB: true }), 0.5); // (B, c, L)
    const i = reshape(arange(i0, l, 1, { dtype: 'f32', backend: be }), [c, 1]), j = reshape(arange(0, l, 1, { dtype: 'f32', backend: be }), [1, l]);
    const mask = mul(le(j, i), maximum(shared, le(sub(i, j), window))); // j ≤ i and (i − j ≤ w or a shared group)
    const part = reshape(sum(mask), [1]);
    kept = kept ? add(kept, part) : part;
  }
  return concat([kept ?? tensor(Float32Array.of(0), [1], { backend: be }), tensor(Float32Array.of((b * t * (t + 1)) / 2), [1], { backend: be })], 0);
}

/** The layer's label, e.g. "focus(K=8, k=2, w=128)". */
export function focusLabel(s: FocusSpec): string {
  return `focus(K=${s.groups}, k=${s.topK}, w=${s.window})`;
}
