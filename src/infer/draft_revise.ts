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
 * Depth-Attention in the revise organ reads the draft layers' records (their k̂, ṽ) of the same
 * positions, collected across the draft steps.
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { concat } from '../ops/layout.ts';
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
}

/** The draft layer count for `model` under `opts`: opts.draftLayers, else the model's organs; ArgumentError naming the value and the range. */
export function draftLayersOf(model: Decoder, opts: DraftReviseOptions): number {
  const L = model.config.nLayers;
  const d = opts.draftLayers ?? model.config.organs?.draftLayers;
  if (d === undefined) throw new ArgumentError(`draft–revise decoding: the model has no organs; give the draft layer count D (--draft-layers D, an integer in [1, ${L - 1}]) to draft through its final norm and head at layer D, untrained for it`);
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
  private readonly budget?: { window: number };

  constructor(
    readonly model: Decoder,
    readonly cache: KvCache,
    readonly sampler: Sampler,
    opts: DraftReviseOptions,
    /** Turns a logits row into what the sampler may pick from (e.g. rows past the tokenizer's ids masked). */
    private readonly fixRow: (row: Float32Array) => Float32Array = (r) => r,
  ) {
    this.draftLayers = draftLayersOf(model, opts);
    const g: GammaOptions = { gamma: opts.gamma ?? 4, fixed: opts.fixedGamma ?? false, ...(opts.maxGamma !== undefined ? { max: opts.maxGamma } : {}) };
    this.gammas = new GammaController(g);
    if (opts.draftWindow !== undefined) {
      if (!Number.isInteger(opts.draftWindow) || opts.draftWindow < 1) throw new ArgumentError(`draft–revise decoding: draftWindow ${opts.draftWindow}: expected a positive integer`);
      this.budget = { window: opts.draftWindow };
    }
  }

  /** One cycle from `last` at position `pos`: the emitted tokens; [] when no position is left in the cache. */
  async next(last: number, pos: number, history: readonly number[]): Promise<number[]> {
    const room = this.cache.maxLength - 1 - pos; // positions after pos the cache can still take
    if (room < 0) return [];
    const gamma = Math.min(this.gammas.gamma, room);
    const { model, cache, draftLayers: D } = this;
    const L = model.config.nLayers;
    const backend = model.embed.weight.backend;
    const hidden: Tensor[] = []; // layer-D states of positions pos … pos+γ, (1, 1, C) each
    const records: (LayerRecord | undefined)[][] = []; // per step, per layer
    const drafted: number[] = [];
    const q: TokenDistribution[] = [];
    const uniform = () => this.sampler.uniform();
    try {
      // Draft: γ steps of layers [0, D) and the exit head, then layers [0, D) on x_γ.
      for (let i = 0; i <= gamma; i++) {
        const input = i === 0 ? last : drafted[i - 1];
        const step = noGrad(() => tidy(() => {
          const ids = tensor(Int32Array.of(input), [1, 1], { backend, dtype: 'i32' });
          const r = model.runLayers(model.embedTokens(ids, pos + i), 0, D, { pos: pos + i, cache: cache.layers, budget: this.budget });
          return { h: r.x, records: r.records.map((rec, l) => (l < D && model.recordIsRead(l) ? rec : undefined)), logits: i < gamma ? model.logits(r.x, true) : null };
        }));
        for (const t of [step.h, ...step.records.flatMap((r) => (r ? [r.k, r.v] : []))]) keep(t);
        hidden.push(step.h);
        records.push(step.records);
        cache.length = pos + i + 1;
        if (step.logits) {
          const row = this.fixRow((await step.logits.data()) as Float32Array);
          step.logits.dispose();
          const dist = this.sampler.distribution(row, [...history, ...drafted]);
          q.push(dist);
          drafted.push(drawFrom(dist, uniform, 'draft–revise: the exit head'));
        }
      }
      // Verify: the revise organ over positions pos … pos+γ (every layer again with a narrower draft budget).
      const rows = await this.verify(last, drafted, pos, hidden, records);
      const p = rows.map((row, i) => this.sampler.distribution(row, [...history, ...drafted.slice(0, i)]));
      const { accepted, next } = acceptDrafts(drafted, q, p, uniform);
      cache.truncate(pos + accepted + 1);
      await cache.settle();
      this.stats.record(gamma, accepted);
      this.gammas.update(gamma, accepted);
      return [...drafted.slice(0, accepted), next];
    } finally {
      for (const t of hidden) t.dispose();
      for (const rs of records) for (const r of rs) { r?.k.dispose(); r?.v.dispose(); }
    }
  }

  /** The full model's logits rows of positions pos … pos+γ (γ + 1 rows of the vocabulary). */
  private async verify(last: number, drafted: readonly number[], pos: number, hidden: readonly Tensor[], records: readonly (LayerRecord | undefined)[][]): Promise<Float32Array[]> {
    const { model, cache, draftLayers: D } = this;
    const L = model.config.nLayers, V = model.config.vocabSize, n = drafted.length + 1;
    const backend = model.embed.weight.backend;
    const logits = noGrad(() => tidy(() => {
      if (this.budget) {
        // The draft's entries of layers < D were computed under the narrower budget: recompute every layer.
        cache.truncate(pos);
        const ids = tensor(Int32Array.from([last, ...drafted]), [1, n], { backend, dtype: 'i32' });
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
    const host = (await logits.data()) as Float32Array;
    logits.dispose();
    return Array.from({ length: n }, (_, i) => this.fixRow(host.slice(i * V, (i + 1) * V)));
  }
}
