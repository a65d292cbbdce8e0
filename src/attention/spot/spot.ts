/**
 * SpotAttention (specs/focus_spot.md Part B): full causal attention with a small selector beside it
 * (selector.ts) that learns, by KL distillation from the layer itself, which 16-token key blocks a
 * decoding query needs; decoding then reads only those blocks, for every head of the layer.
 *
 * - Training / prefill forward: dense causal attention, what the frozen layer computes. Under a
 *   training-terms collection (nn/training_terms.ts: the trainer's forward, and the validation of
 *   the KL under noGrad) the layer also adds its
 *   distillation term "spotKL": the teacher is its own head-averaged attention rebuilt from the flash
 *   pass's logsumexp (distill.ts), the student the selector's token softmax over the same input,
 *   SparseKL on the student's top K_train = ⌈trainFraction · T⌉ tokens (default) or DenseKL. The
 *   selector reads the input detached: the term trains the selector only, never the model it imitates.
 * - Cached steps: k and v go into the contiguous cache, the selector keys into the slot's side state
 *   "spot" (key_cache.ts, f16 or INT4). A prompt (pos = 0, several rows) is attended densely, as in
 *   the paper. Every later row (a decoding step, or each row of a draft–revise verify pass, so both
 *   give the same result) selects its blocks (selection.ts: dual top-p or static top-K, sink and
 *   recency reserved) from the selector's block scores and masses, and attends over the selected
 *   blocks alone through a block mask of the shared kernels (decode_mask.ts).
 * The selection runs on the host where reads are synchronous (cpu, wasm) and on the device on
 * webgpu (device_select.ts). `setSpotInference` (index.ts) overrides the rule (eval and generate:
 * --spot-top-p, --spot-top-k).
 */
import { ArgumentError } from '../../errors.ts';
import { attention, kvWriteMany } from '../../ops/attention.ts';
import { tensor } from '../../ops/creation.ts';
import { cast } from '../../ops/cast.ts';
import { add, div, mul } from '../../ops/elementwise.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { matmul } from '../../ops/matmul.ts';
import { mean, softmax, sum } from '../../ops/reduce.ts';
import { Module } from '../../nn/module.ts';
import { addTrainingTerm, collectingTrainingTerms } from '../../nn/training_terms.ts';
import { isGradEnabled, keep, noGrad } from '../../tensor/scope.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { AttentionMechanism, LayerKv, MechanismContext, MechanismInput } from '../mechanism.ts';
import { spotDecodeMask } from './decode_mask.ts';
import { denseKL, sparseKL, teacherDistribution } from './distill.ts';
import type { SpotKeyCache, SpotKeyFormat } from './key_cache.ts';
import { checkSpotRule, selectBlocks, SPOT_BLOCK, type SpotRule } from './selection.ts';
import { decodeBlockScores, SpotSelector } from './selector.ts';
import { gatherOnDevice, selectOnDevice, topKBlocks } from './device_select.ts';

/** The config entry of a SpotAttention layer. */
export interface SpotSpec {
  type: 'spot';
  /** H_I, the selector's index heads (B2: 4). */
  heads: number;
  /** d_I, their width and the selector keys' (B2: 128). */
  dim: number;
  /** How the cache keeps selector keys. */
  keys: SpotKeyFormat;
  /** The decoding rule: dual top-p (B4, the paper's adaptive rule) or static top-K. */
  rule: 'top-p' | 'top-k';
  /** top-p's mass p in (0, 1]. */
  p: number;
  /** top-K's fraction ρ of the causal blocks, in (0, 1]. */
  fraction: number;
  /** The distillation loss: SparseKL on the student's own top tokens (B3's default) or DenseKL. */
  loss: 'sparse' | 'dense';
  /** K_train = ⌈trainFraction · T⌉ tokens per query for SparseKL (the paper: 0.5·L). */
  trainFraction: number;
}

/** How a device step reads its selected blocks (SpotAttention.decodePath). */
export type SpotDecodePath = 'auto' | 'mask' | 'gather';
export const SPOT_DECODE_PATHS: readonly SpotDecodePath[] = ['auto', 'mask', 'gather'];

/**
 * Selected tokens from which decodePath 'auto' gathers: none by default. On an H100 (BENCHMARKS.md,
 * Spot's ninth run), once the masked decode ran as LANES (lane pairs a key over the selection's
 * list), the masked step was as fast as the gathered one or faster at 64K–512K cached tokens (128K,
 * top-K 0.1: 0.110 against 0.146 ms; 512K: 0.323 against 0.451); only at 16K was the gathered step
 * faster (0.094 against 0.103 ms at top-K 0.1, 0.096 against 0.099 at 0.5), where Spot reads little
 * anyway. The eighth run, before LANES, gathered from 12,288.
 */
export const SPOT_GATHER_FROM_TOKENS = Number.POSITIVE_INFINITY;

/** The rule a spec names. */
export const specRule = (s: SpotSpec): SpotRule => (s.rule === 'top-p' ? { kind: 'top-p', p: s.p } : { kind: 'top-k', fraction: s.fraction });

/** Decoding figures since the last reset: blocks read against causal blocks, per step and summed. */
export interface SpotLayerStats {
  /** Query rows that selected (decoding steps and verify rows). */
  rows: number;
  /** With measureBudget: (2) f32 on the device, [tokens in the selected blocks, causal tokens], summed over those rows. */
  tokens?: Tensor;
  /**
   * With measureRecall: (2) f32 on the device, [Σ recall, rows], a row's recall being the share of
   * the layer's own head-averaged attention (over every causal key) that falls in its selected blocks.
   */
  recall?: Tensor;
}

export class SpotAttention extends Module implements AttentionMechanism {
  readonly name: string;
  readonly selector: SpotSelector;
  /** The rule in force: the config's, or setSpotInference's. */
  rule: SpotRule;
  readonly stats: SpotLayerStats = { rows: 0 };
  /**
   * Whether selecting rows add up their budgets (SpotLayerStats.tokens): a few small ops a step (on
   * the device: a cast, a sum and the causal count) that a plain decode does without, so off by
   * default; `fon generate --stats` and the experiments turn it on.
   */
  measureBudget = false;
  /**
   * Whether each selecting row also measures its recall (SpotLayerStats.recall): one more pass of
   * dense logits over the cache per row, for experiments, off by default.
   */
  measureRecall = false;
  /**
   * How a device step under static top-K reads its blocks: 'mask' (the split-K decode over the
   * selected blocks through a fine block mask, device_select.ts selectOnDevice), 'gather' (the
   * selected blocks' K and V rows compacted, then a plain dense decode over them: gatherOnDevice),
   * or 'auto' (the default): gather where the step selects at least `gatherFromTokens` tokens (none
   * by default: SPOT_GATHER_FROM_TOKENS says why), the mask below. The same keys either
   * way. Top-p (its count is the device's) and steps that measure recall take the mask.
   */
  decodePath: SpotDecodePath = 'auto';
  /** Selected tokens from which decodePath 'auto' gathers. */
  gatherFromTokens = SPOT_GATHER_FROM_TOKENS;

  constructor(readonly spec: SpotSpec, ctx: MechanismContext) {
    super();
    this.name = spotLabel(spec);
    this.selector = this.child(new SpotSelector(ctx.f, ctx.name, ctx.dims.dModel, { heads: spec.heads, dim: spec.dim }));
    this.rule = specRule(spec);
  }

  forward(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput): Tensor {
    if (!collectingTrainingTerms()) return attention(q, k, v);
    const x = input.x.detach();
    const scores = this.selector.scores(x, this.selector.keys(x)); // (B, T, T)
    const teacher = teacherDistribution(q, k, v); // (B, T, T), no gradient
    const t = q.shape[2];
    const kTrain = Math.max(1, Math.ceil(this.spec.trainFraction * t));
    addTrainingTerm('spotKL', this.spec.loss === 'sparse' ? sparseKL(scores, teacher, kTrain) : denseKL(scores, teacher));
    return attention(q, k, v);
  }

  forwardCached(q: Tensor, k: Tensor, v: Tensor, input: MechanismInput, cache: LayerKv, pos: number): Tensor {
    const n = q.shape[2];
    const keys = cache.side?.spot as SpotKeyCache | undefined;
    if (!keys) throw new ArgumentError(`${this.name}: the KV cache slot has no selector keys; make the cache with KvCache from this model's config`);
    const l = pos + n;
    const keyDType = keys.format === 'f16' ? 'f16' : undefined; // f16 keys come out of the GEMM as stored
    if (pos === 0 && n > 1) {
      kvWriteMany([[cache.k, k], [cache.v, v], ...keys.writes(pos, this.selector.keys(input.x, keyDType))], pos);
      return attention(q, cache.k, cache.v, { causal: true, kvLength: l }); // the prompt: dense
    }
    // Each row selects its blocks among its causal ones, then attends over them: the selector's
    // three projections of the rows in one pass, the rows' K, V and selector keys written in one
    // call, then block scores and log-masses in one pass over the cached selector keys.
    const proj = this.selector.decodeProjections(input.x, { keys: true, keyDType });
    kvWriteMany([[cache.k, k], [cache.v, v], ...keys.writes(pos, proj.keys!)], pos);
    const { max: scores, logMass } = decodeBlockScores(this.selector, input.x, keys.scoring(l), { l, pos, proj }); // (B, n, ⌈L/16⌉)
    const rows: Tensor[] = [];
    let selected: Tensor | undefined;
    const tk = cache.k.shape[2];
    if (q.backend.readSync) {
      const b = q.shape[0], nb = scores.shape[2];
      const hs = scores.dataSync() as Float32Array, hm = logMass.dataSync() as Float32Array;
      let chosen = 0;
      for (let i = 0; i < n; i++) {
        const picks = Array.from({ length: b }, (_, bb) => {
          const at = (bb * n + i) * nb, own = Math.floor((pos + i) / SPOT_BLOCK) + 1;
          // Masses on one scale for the row (the rule only compares their shares).
          const lm = hm.subarray(at, at + own);
          const top = Math.max(...lm);
          return selectBlocks(pos + i, hs.subarray(at, at + own), Float64Array.from(lm, (x) => Math.exp(x - top)), this.rule).blocks;
        });
        if (this.measureBudget) for (const p of picks) chosen += selectedTokens(p, pos + i + 1);
        const mask = spotDecodeMask(picks, pos + i + 1, tk);
        const qi = narrow(q, 2, i, 1);
        rows.push(attention(qi, cache.k, cache.v, { kvLength: pos + i + 1, mask }));
        if (this.measureRecall) this.recordRecall(qi, cache.k, pos + i, tensor(Int32Array.from(mask.table.subarray(mask.segmentOffset, mask.segmentOffset + b * tk), (s) => 1 - s), [b, tk], { dtype: 'i32', backend: q.backend }));
      }
      if (this.measureBudget) selected = tensor(Float32Array.of(chosen), [1], { backend: q.backend });
    } else {
      // The device's mask is forward-only (no by-key lists): a step that would be differentiated is
      // refused here, by the layer's name, rather than deep inside attention.
      if (isGradEnabled() && (q.requiresGrad || k.requiresGrad || v.requiresGrad || input.x.requiresGrad)) {
        throw new ArgumentError(`${this.name}: Spot's cached steps on ${q.backend.name} select their blocks on the device and carry no gradient; run them under noGrad (as generation does), or on the CPU`);
      }
      const picks: Tensor[] = [];
      const rule = this.rule;
      let gathered = 0;
      // One row (a plain decoding step) takes the tensors as they are: a view each costs host time.
      const one = n === 1;
      for (let i = 0; i < n; i++) {
        const s = one ? scores : narrow(scores, 1, i, 1), m = one ? logMass : narrow(logMass, 1, i, 1), qi = one ? q : narrow(q, 2, i, 1);
        if (rule.kind === 'top-k' && this.gathers(pos + i, rule)) {
          const g = gatherOnDevice(s, m, pos + i, rule, cache.k, cache.v);
          gathered += q.shape[0] * g.kvLength;
          rows.push(attention(qi, g.k, g.v, { kvLength: g.kvLength }));
          continue;
        }
        // The flags only where a figure reads them (the selection's kernel then skips their writes).
        const sel = selectOnDevice(s, m, pos + i, rule, tk, this.measureBudget || this.measureRecall);
        if (this.measureBudget) picks.push(sel.tokens());
        rows.push(attention(qi, cache.k, cache.v, { kvLength: pos + i + 1, mask: sel.mask }));
        if (this.measureRecall) this.recordRecall(qi, cache.k, pos + i, sel.selected());
      }
      if (this.measureBudget && gathered > 0) picks.push(tensor(Float32Array.of(gathered), [1], { backend: q.backend }));
      if (picks.length) selected = picks.length === 1 ? picks[0] : picks.reduce((a, c) => add(a, c));
    }
    this.stats.rows += q.shape[0] * n;
    if (selected) this.record(selected, q.shape[0], pos, n);
    return rows.length === 1 ? rows[0] : concat(rows, 2);
  }

  /** Whether a device step of static top-K at query position p gathers its blocks (decodePath; never while measuring recall). */
  private gathers(p: number, rule: SpotRule & { kind: 'top-k' }): boolean {
    if (this.measureRecall || this.decodePath === 'mask') return false;
    return this.decodePath === 'gather' || topKBlocks(p, rule).tokens >= this.gatherFromTokens;
  }

  /** Adds [tokens selected, causal tokens] of n rows at pos … to the stats (no read to the host). */
  private record(selected: Tensor, batch: number, pos: number, n: number): void {
    noGrad(() => {
      const causal = batch * (n * pos + (n * (n + 1)) / 2);
      const x = concat([selected, tensor(Float32Array.of(causal), [1], { backend: selected.backend })], 0);
      const prev = this.stats.tokens;
      this.stats.tokens = keep(prev ? add(prev, x) : x);
      prev?.dispose();
    });
  }

  /**
   * Adds one row's recall to the stats: its query qi (B, H, 1, D) at position p over the cached keys
   * k (B, Hkv, Tmax, D), the selected key positions (B, Tmax) 1/0. The teacher is the head-averaged
   * softmax of the layer's scaled logits over keys 0 … p; the recall is its mass on the selected keys,
   * averaged over the batch.
   */
  private recordRecall(qi: Tensor, k: Tensor, p: number, selected: Tensor): void {
    noGrad(() => {
      const [b, h, , d] = qi.shape, hkv = k.shape[1], l = p + 1;
      const keys = narrow(k, 2, 0, l);
      const logits = matmul(reshape(qi, [b, hkv, h / hkv, d]), keys, { transB: true, outDType: 'f32' }); // (B, Hkv, G, L)
      const teacher = mean(softmax(mul(logits, 1 / Math.sqrt(d)), -1), [1, 2]); // (B, L)
      const captured = div(sum(mul(teacher, cast(narrow(selected, 1, 0, l), 'f32'))), b);
      const x = concat([reshape(captured, [1]), tensor(Float32Array.of(1), [1], { backend: qi.backend })], 0);
      const prev = this.stats.recall;
      this.stats.recall = keep(prev ? add(prev, x) : x);
      prev?.dispose();
    });
  }

  /** Forgets the decoding figures. */
  resetStats(): void {
    this.stats.tokens?.dispose();
    this.stats.tokens = undefined;
    this.stats.recall?.dispose();
    this.stats.recall = undefined;
    this.stats.rows = 0;
  }

  /** Checks and sets the rule in force. */
  setRule(rule: SpotRule): void {
    checkSpotRule(rule);
    this.rule = rule;
  }
}

/** Tokens in ascending selector blocks `blocks` of a query that sees `length` keys (its own block may be partial). */
function selectedTokens(blocks: Int32Array, length: number): number {
  let n = 0;
  for (const b of blocks) n += Math.min(length, (b + 1) * SPOT_BLOCK) - b * SPOT_BLOCK;
  return n;
}

/** The layer's label, e.g. "spot(top-p 0.9, f16 keys)". */
export function spotLabel(s: SpotSpec): string {
  return `spot(${s.rule === 'top-p' ? `top-p ${s.p}` : `top-K ${s.fraction}`}, ${s.keys} keys)`;
}
