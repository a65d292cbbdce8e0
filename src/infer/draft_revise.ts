/**
 * Draft–revise decoding, FON's two organs at work (DESIGN.md "The FON model (organs)",
 * specs/lighthouse_fon.md §2.3 Design A): the draft organ — layers 0 … D−1 and the exit head (the
 * model's own final norm and LM head after layer D−1) — proposes γ tokens one at a time; the revise
 * organ — layers D … L−1 — checks all of them in one pass over the γ + 1 positions, reusing the
 * cache entries and the layer-D hidden states the draft steps wrote (the "exit query cache"); the
 * longest prefix the full model agrees with is kept by standard speculative sampling
 * (infer/speculative.ts), plus one token of the full model's own; the rejected positions are
 * truncated from every layer's cache and every mechanism's side state (KvCache.truncate). Output:
 * greedy is token-identical to plain greedy decoding of the whole network; sampling has the same
 * distribution.
 *
 * One cycle, with `last` the newest committed token, not yet run, at position n:
 *   draft   x_{i+1} ~ q_i = exit head of layers [0, D) on (last, x_1, …, x_{i}) at n + i, i < γ;
 *           layers [0, D) also run x_γ at n + γ (the verify pass needs every position's layer-D state);
 *   verify  layers [D, L) over the layer-D states of n … n+γ in one call → p_1 … p_{γ+1};
 *   accept  a = accepted drafts, y = the correction or bonus token; emit x_1 … x_a, y;
 *   commit  truncate the cache to n + a + 1 positions, settle it; last ← y.
 * With `draftWindow` the draft layers attend through a narrower window than their own (the knob of
 * the spec's Design C): their cache entries then differ from the full model's, so verify truncates
 * to n and re-runs every layer over the γ + 1 positions.
 * The cache caps γ: a cycle must not rewind further than every side state can (the token shift
 * keeps its last 15 positions' rows; KvCache.maxRewind).
 * Depth-Attention in the revise organ reads the draft layers' records (their k̂, ṽ) of the same
 * positions, collected across the draft steps.
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { concat, narrow, reshape } from '../ops/layout.ts';
import { topk } from '../ops/scan_sort.ts';
import type { Decoder, LayerRecord } from '../model/decoder.ts';
import { checkDraftLayers } from '../model/organs.ts';
import { keep, noGrad, tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { KvCache } from './kv_cache.ts';
import type { Sampler, TokenDistribution } from './sampler.ts';
import { acceptDrafts, drawFrom, GammaController, SpeculativeStats, type GammaOptions } from './speculative.ts';

export interface DraftReviseOptions {
  /** D: the draft organ is layers 0 … D−1 plus the exit head. Default: the model's organs.draftLayers (required without organs). */
  draftLayers?: number;
  /** γ to start with (default 4); it adapts to the running acceptance unless `fixedGamma`. */
  gamma?: number;
  /** Keep γ constant. */
  fixedGamma?: boolean;
  /** Largest γ the adaptation reaches (default max(8, gamma)). */
  maxGamma?: number;
  /** Draft with a sliding window of this many keys in full and local layers (then layers < D are recomputed in verify). */
  draftWindow?: number;
  /**
   * Greedy drafting on the device: each draft step's argmax feeds the next step there, and the
   * drafts are read back once, beside the verify pass's logits (one wait a cycle instead of γ + 1).
   * Default: on where it is exact — greedy sampling without a repetition penalty (the penalty
   * depends on the drafts, which the host then has not seen); false drafts on the host.
   */
  deviceDraft?: boolean;
}

/** The draft layer count for `model` under `opts`: opts.draftLayers, else the model's organs; ArgumentError naming the value and the range. */
export function draftLayersOf(model: Decoder, opts: DraftReviseOptions): number {
  const L = model.config.nLayers;
  const d = opts.draftLayers ?? model.config.organs?.draftLayers;
  if (d === undefined) throw new ArgumentError(`draft–revise decoding: the model has no organs; give the draft layer count D (the draftLayers option, an integer in [1, ${L - 1}]; --draft-layers in fon generate) to draft through its final norm and head at layer D, untrained for it`);
  return checkDraftLayers(d, L, 'draft–revise decoding: draftLayers', (m) => new ArgumentError(m));
}

/**
 * The decoding loop after the prefill, one cycle per `next` call: the tokens it emits (one or more;
 * none once the cache is full). `history` = the ids so far (for the repetition penalty); `last` the
 * newest token, not yet run, at position `pos`.
 */
export class DraftRevise {
  readonly draftLayers: number;
  readonly stats = new SpeculativeStats();
  readonly gammas: GammaController;
  /** Whether the drafts are picked on the device (DraftReviseOptions.deviceDraft). */
  readonly deviceDraft: boolean;
  private readonly budget?: { window: number };

  constructor(
    readonly model: Decoder,
    readonly cache: KvCache,
    readonly sampler: Sampler,
    opts: DraftReviseOptions,
    /** Turns a logits row into what the sampler may pick from (e.g. rows past the tokenizer's ids masked). */
    private readonly fixRow: (row: Float32Array) => Float32Array = (r) => r,
    /** The ids a draft may be (0 … vocabLimit − 1: the tokenizer's, where the model's rows are more); what fixRow leaves unmasked. */
    private readonly vocabLimit = model.config.vocabSize,
  ) {
    this.draftLayers = draftLayersOf(model, opts);
    const exact = sampler.temperature === 0 && sampler.repetitionPenalty === 1;
    if (opts.deviceDraft && !exact) throw new ArgumentError(`draft–revise decoding: deviceDraft needs greedy sampling without a repetition penalty (temperature ${sampler.temperature}, repetitionPenalty ${sampler.repetitionPenalty})`);
    this.deviceDraft = opts.deviceDraft ?? exact;
    if (opts.draftWindow !== undefined) {
      if (!Number.isInteger(opts.draftWindow) || opts.draftWindow < 1) throw new ArgumentError(`draft–revise decoding: draftWindow ${opts.draftWindow}: expected a positive integer`);
      this.budget = { window: opts.draftWindow };
    }
    // A cycle rewinds the cache by up to γ positions (γ + 1 with a draft window, which re-runs from pos).
    const cap = cache.maxRewind - (this.budget ? 1 : 0);
    const gamma = opts.gamma ?? Math.min(4, cap);
    for (const [k, g] of [['gamma', gamma], ['maxGamma', opts.maxGamma]] as const) {
      if (g !== undefined && (!Number.isInteger(g) || g < 1 || g > cap)) {
        throw new ArgumentError(`draft–revise decoding: ${k} ${g}: expected an integer ${cap < Infinity ? `in [1, ${cap}]` : '≥ 1'}${cap < Infinity ? ` (this model's cache can rewind at most ${cache.maxRewind} positions${this.budget ? ', and a draft window re-runs one more' : ''}: the token shift keeps only the last pre-shift rows)` : ''}`);
      }
    }
    if (opts.maxGamma !== undefined && gamma > opts.maxGamma) throw new ArgumentError(`draft–revise decoding: gamma ${gamma} above maxGamma ${opts.maxGamma}: expected gamma ≤ maxGamma`);
    const g: GammaOptions = { gamma, fixed: opts.fixedGamma ?? false, max: opts.maxGamma ?? Math.min(Math.max(8, gamma), cap) };
    this.gammas = new GammaController(g);
  }

  /** One cycle from `last` at position `pos`: the emitted tokens; [] when no position is left in the cache. */
  async next(last: number, pos: number, history: readonly number[]): Promise<number[]> {
    if (pos !== this.cache.length) throw new ArgumentError(`draft–revise decoding: a cycle at position ${pos}, but the cache holds ${this.cache.length} positions; a cycle continues where the cache ends (truncate it to rewind)`);
    const room = this.cache.maxLength - 1 - pos; // positions after pos the cache can still take
    if (room < 0) return [];
    const gamma = Math.min(this.gammas.gamma, room);
    const { model, cache, draftLayers: D } = this;
    const backend = model.embed.weight.backend;
    const hidden: Tensor[] = []; // layer-D states of positions pos … pos+γ, (1, 1, C) each
    const records: (LayerRecord | undefined)[][] = []; // per step, per layer
    const inputs: Tensor[] = []; // the ids (1, 1) i32 run at pos … pos+γ
    let drafted: number[] = [];
    let q: TokenDistribution[] = [];
    const uniform = () => this.sampler.uniform();
    const onDevice = this.deviceDraft;
    try {
      // Draft: γ steps of layers [0, D) and the exit head, then layers [0, D) on x_γ. On the
      // device (greedy): each step's argmax feeds the next without a read-back.
      inputs.push(keep(tensor(Int32Array.of(last), [1, 1], { backend, dtype: 'i32' })));
      for (let i = 0; i <= gamma; i++) {
        const step = noGrad(() => tidy(() => {
          const r = model.runLayers(model.embedTokens(inputs[i], pos + i), 0, D, { pos: pos + i, cache: cache.layers, budget: this.budget });
          const logits = i < gamma ? model.logits(r.x, true) : null;
          const pick = logits && onDevice ? reshape(topk(narrow(logits, 2, 0, this.vocabLimit), 1).indices, [1, 1]) : null;
          return { h: r.x, records: r.records.map((rec, l) => (l < D && model.recordIsRead(l) ? rec : undefined)), logits: onDevice ? null : logits, pick };
        }));
        for (const t of [step.h, ...step.records.flatMap((r) => (r ? [r.k, r.v] : []))]) keep(t);
        hidden.push(step.h);
        records.push(step.records);
        cache.length = pos + i + 1;
        if (step.pick) inputs.push(keep(step.pick));
        if (step.logits) {
          let host: Float32Array;
          try { host = (await step.logits.data()) as Float32Array; } finally { step.logits.dispose(); }
          const row = this.fixRow(host);
          const dist = this.sampler.distribution(row, [...history, ...drafted]);
          q.push(dist);
          drafted.push(drawFrom(dist, uniform, 'draft–revise: the exit head'));
          inputs.push(keep(tensor(Int32Array.of(drafted[i]), [1, 1], { backend, dtype: 'i32' })));
        }
      }
      // Verify: the revise organ over positions pos … pos+γ (every layer again with a narrower draft budget),
      // queued before the device's drafts are read, so one wait serves both.
      const logits = this.verify(inputs, pos, hidden, records);
      let rows: Float32Array[];
      if (onDevice) {
        let picks: Tensor | null = null, ids: Int32Array | null = null;
        try {
          picks = noGrad(() => (gamma === 0 ? null : concat(inputs.slice(1, gamma + 1), 1)));
          [rows, ids] = await Promise.all([this.readRows(logits, gamma + 1), picks ? picks.data() as Promise<Int32Array> : null]);
        } finally {
          picks?.dispose();
          if (!logits.disposed) logits.dispose(); // readRows frees it; not if concat threw first
        }
        drafted = Array.from(ids ?? []);
        q = drafted.map((x) => ({ ids: Int32Array.of(x), probs: Float64Array.of(1) }));
      } else rows = await this.readRows(logits, gamma + 1);
      const p = rows.map((row, i) => this.sampler.distribution(row, [...history, ...drafted.slice(0, i)]));
      const { accepted, next } = acceptDrafts(drafted, q, p, uniform);
      cache.truncate(pos + accepted + 1);
      await cache.settle();
      this.stats.record(gamma, accepted);
      this.gammas.update(gamma, accepted);
      return [...drafted.slice(0, accepted), next];
    } finally {
      for (const t of [...hidden, ...inputs]) t.dispose();
      for (const rs of records) for (const r of rs) { r?.k.dispose(); r?.v.dispose(); }
    }
  }

  /** The full model's logits (1, γ+1, V) of positions pos … pos+γ, recorded, not read. */
  private verify(inputs: readonly Tensor[], pos: number, hidden: readonly Tensor[], records: readonly (LayerRecord | undefined)[][]): Tensor {
    const { model, cache, draftLayers: D } = this;
    const L = model.config.nLayers, n = inputs.length;
    const logits = noGrad(() => tidy(() => {
      if (this.budget) {
        // The draft's entries of layers < D were computed under the narrower budget: recompute every layer.
        cache.truncate(pos);
        const ids = n === 1 ? inputs[0] : concat(inputs, 1); // (1, γ+1)
        return model.logits(model.runLayers(model.embedTokens(ids, pos), 0, L, { pos, cache: cache.layers }).x);
      }
      const h = n === 1 ? hidden[0] : concat(hidden, 1); // (1, γ+1, C)
      const given = Array.from({ length: L }, (_, l) => {
        if (l >= D || !records[0][l]) return undefined;
        const rs = records.map((r) => r[l]!);
        return n === 1 ? rs[0] : { k: concat(rs.map((r) => r.k), 2), v: concat(rs.map((r) => r.v), 2) }; // (1, Hkv, γ+1, D)
      });
      return model.logits(model.runLayers(h, D, L, { pos, cache: cache.layers, records: given }).x);
    }));
    cache.length = pos + n;
    return logits;
  }

  /** The n logits rows of `logits` (1, n, V) on the host, each through fixRow; frees the tensor. */
  private async readRows(logits: Tensor, n: number): Promise<Float32Array[]> {
    const V = this.model.config.vocabSize;
    let host: Float32Array;
    try { host = (await logits.data()) as Float32Array; } finally { logits.dispose(); }
    return Array.from({ length: n }, (_, i) => this.fixRow(host.slice(i * V, (i + 1) * V)));
  }
}
