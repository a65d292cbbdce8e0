/**
 * One sequence's generation as a state machine: the prompt checked and tokenized, its sampler, stop
 * strings, text stream and, once it starts, its KV cache; then `prefill` (the prompt in one call,
 * the first token), steps (`advance`: one cached step or one draft–revise cycle of its own; or
 * `takeRow`: its row of a ragged step of many sequences, infer/cached_step.ts raggedStep), each
 * token checked against end-of-text, the stop strings and the length, until it ends (`finished`)
 * and its cache is freed. `generate` runs one alone; `fon serve`'s batcher (serve/batcher.ts) runs
 * many side by side, so both decide alike what a sequence emits and when it stops.
 */
import { ArgumentError } from '../errors.ts';
import type { Decoder } from '../model/decoder.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { cachedStep, generationCache } from './cached_step.ts';
import { DraftRevise } from './draft_revise.ts';
import type { GenerateOptions, GenerateResult } from './generate.ts';
import type { KvCache } from './kv_cache.ts';
import { tokenLogprob, type TokenLogprob } from './logprobs.ts';
import { Sampler } from './sampler.ts';
import { StopMatcher } from './stop_strings.ts';

export class Generation {
  /** The prompt's ids after the start ids (truncated as GenerateOptions.truncatePrompt allows). */
  readonly ids: number[];
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** Positions the cache will hold: the prompt and its tokens, at most the context. */
  readonly maxLength: number;
  /** Whether it decodes by draft–revise cycles (then it steps alone: `advance`). */
  readonly draftRevise: boolean;
  private readonly sampler: Sampler;
  private readonly stops: StopMatcher;
  private readonly stream: ReturnType<Tokenizer['streamDecoder']>;
  private readonly stopIds: Set<number>;
  private readonly top: number | undefined;
  private readonly history: number[];
  private readonly out: number[] = [];
  private readonly lps: TokenLogprob[] = [];
  /** How many of lps went out with the text so far (onText's second argument). */
  private lpsSent = 0;
  private text = '';
  private cache?: KvCache;
  private organs?: DraftRevise;
  /** The position of the newest token, not yet run. */
  private pos = 0;
  private stopReason: GenerateResult['stopReason'] = 'maxTokens';
  private ended = false;
  private t0 = 0;
  private t1 = 0;
  private cacheKept: number[][] = [];

  /** Checks the options and tokenizes the prompt (ArgumentError for a bad one); nothing is allocated until prefill. */
  constructor(private readonly model: Decoder, private readonly tok: Tokenizer, prompt: string, private readonly opts: GenerateOptions = {}) {
    const cfg = model.config;
    const maxTokens = opts.maxTokens ?? 128;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new ArgumentError(`generate: maxTokens ${maxTokens} must be a positive integer`);
    const start = [...(opts.startIds ?? [tok.eosId])];
    let ids = [...start, ...tok.encode(prompt, { allowSpecial: opts.specialInPrompt === true })];
    if (ids.length === 0) throw new ArgumentError('generate: an empty prompt with no start token gives the model nothing to continue; give a prompt');
    if (ids.length >= cfg.contextLength) {
      const msg = `prompt of ${ids.length - start.length} tokens${start.length ? ` (plus ${start.length} start token${start.length > 1 ? 's' : ''})` : ''} leaves no room in the context of ${cfg.contextLength} tokens`;
      if (!opts.truncatePrompt) throw new ArgumentError(`generate: ${msg}; shorten it or allow truncation (--truncate)`);
      const keep = cfg.contextLength - 1 - start.length;
      if (keep < 1) throw new ArgumentError(`generate: ${start.length} start tokens leave no room in the context of ${cfg.contextLength} tokens`);
      // Keep the start tokens and the prompt's end, leaving one position to generate into.
      ids = [...start, ...ids.slice(ids.length - keep)];
      opts.onWarning?.(`${msg}: kept its last ${keep} tokens`);
    }
    const top = opts.logprobs;
    if (top !== undefined && !(Number.isInteger(top) && top >= 0 && top <= 20)) throw new ArgumentError(`generate: logprobs ${top} must be an integer in [0, 20]`);
    if (top !== undefined && opts.draftRevise) throw new ArgumentError('generate: logprobs needs plain decoding; give draftRevise false (draft–revise makes the same tokens)');
    this.ids = ids;
    this.promptTokens = ids.length - start.length;
    this.maxTokens = maxTokens;
    this.maxLength = Math.min(cfg.contextLength, ids.length + maxTokens);
    this.top = top;
    this.draftRevise = top === undefined && (opts.draftRevise ?? cfg.organs !== undefined) !== false;
    this.stopIds = new Set([tok.eosId, ...(opts.stopIds ?? [])]);
    this.sampler = new Sampler(cfg.vocabSize, opts);
    this.stops = new StopMatcher(opts.stop ?? []);
    this.stream = tok.streamDecoder({ continuation: true }); // the text goes on from the prompt's: no first-space strip
    this.history = ids.slice();
  }

  /** Whether it has ended (its result is ready, its cache freed). */
  get finished(): boolean { return this.ended; }

  /** The newest token and its position: the input of its next plain step. */
  get next(): { token: number; pos: number; cache: KvCache } {
    return { token: this.history[this.history.length - 1], pos: this.pos, cache: this.cache! };
  }

  /**
   * Allocates the cache (from opts.pool when given) and runs the prompt in one call: the first
   * token, from the prompt's last position (none when already aborted).
   */
  async prefill(): Promise<void> {
    const dr = this.opts.draftRevise;
    this.cache = generationCache(this.model, this.maxLength, { pageRows: this.opts.pageRows, pool: this.opts.pool });
    if (this.draftRevise) this.organs = new DraftRevise(this.model, this.cache, this.sampler, typeof dr === 'object' ? dr : {}, this.fixRow, Math.min(this.tok.vocabSize, this.model.config.vocabSize));
    const pending = this.aborted() ? [] : [this.sample(this.fixRow(await cachedStep(this.model, this.cache, this.ids, 0)))];
    if (this.aborted()) this.stopReason = 'aborted';
    this.pos = this.ids.length;
    this.t0 = performance.now();
    this.take(pending, false);
  }

  /**
   * Whether the next step is to run; ends the generation instead where its signal was aborted or
   * its cache is full (stopReason 'aborted' or 'context').
   */
  ready(): boolean {
    if (this.ended) return false;
    if (this.aborted()) { this.stopReason = 'aborted'; this.end(); return false; }
    if (this.pos >= this.cache!.maxLength) { this.stopReason = 'context'; this.end(); return false; }
    return true;
  }

  /** One step of its own: a draft–revise cycle, or a plain cached step of its newest token. */
  async advance(): Promise<void> {
    if (this.organs) {
      const pending = await this.organs.next(this.history[this.history.length - 1], this.pos, this.history);
      this.pos += pending.length;
      this.take(pending, true);
    } else {
      this.takeRow(await cachedStep(this.model, this.cache!, [this.history[this.history.length - 1]], this.pos));
    }
  }

  /** The logits row of its plain step (its own, or its row of a ragged step): the next token sampled and taken. */
  takeRow(row: Float32Array): void {
    const next = this.sample(this.fixRow(row));
    this.pos++;
    this.take([next], false);
  }

  /** Ends it now, as aborted (a request cancelled before or between steps); its cache is freed. */
  abort(): void {
    if (this.ended) return;
    this.stopReason = 'aborted';
    this.end();
  }

  /** What it generated, once finished. */
  result(): GenerateResult {
    if (!this.ended) throw new ArgumentError('Generation.result: the generation has not finished');
    const secs = (this.t1 - this.t0) / 1000, out = this.out;
    return {
      text: this.text, ids: out, promptTokens: this.promptTokens, stopReason: this.stopReason, tokensPerSecond: out.length > 1 ? (out.length - 1) / secs : 0, cacheKept: this.cacheKept,
      ...(this.top !== undefined ? { logprobs: this.lps.slice(0, out.length) } : {}),
      ...(this.organs ? { speculative: { ...this.organs.stats.toJSON(), draftLayers: this.organs.draftLayers } } : {}),
    };
  }

  /** Frees its cache (ended or not: after a failed step). */
  dispose(): void {
    this.cache?.dispose();
    this.cache = undefined;
  }

  private aborted(): boolean { return this.opts.signal?.aborted === true; }

  /** A model may have more rows than the tokenizer has ids (a vocabulary rounded up): never sample those. */
  private readonly fixRow = (row: Float32Array): Float32Array => { if (row.length > this.tok.vocabSize) row.fill(-Infinity, this.tok.vocabSize); return row; };

  private sample(row: Float32Array): number {
    const next = this.sampler.next(row, this.history);
    if (this.top !== undefined) this.lps.push(tokenLogprob(row, next, this.top));
    return next;
  }

  private emit(s: string): void {
    if (!s) return;
    this.text += s;
    if (this.top === undefined) { this.opts.onText?.(s); return; }
    // The log-probabilities of the tokens taken since the last piece (an end-of-text token is not one).
    const upTo = Math.min(this.lps.length, this.out.length), fresh = this.lps.slice(this.lpsSent, upTo);
    this.lpsSent = upTo;
    this.opts.onText?.(s, fresh);
  }

  /** Takes new tokens in order until end-of-text, a stop string or the length; ends the generation there or when aborted. */
  private take(pending: readonly number[], drafted: boolean): void {
    let used = 0, done = false;
    for (const next of pending) {
      if (this.stopIds.has(next)) { this.stopReason = 'eos'; done = true; break; }
      this.out.push(next);
      this.history.push(next);
      used++;
      const r = this.stops.push(this.stream.push(next));
      this.emit(r.emit);
      if (r.stopped) { this.stopReason = 'stop'; done = true; break; }
      if (this.out.length >= this.maxTokens) { done = true; break; }
    }
    if (drafted) this.organs!.stats.unused(pending.length - used);
    if (done || this.stopReason === 'aborted') this.end();
  }

  /** The held text flushed, the cache's kept fractions read, the cache freed. */
  private end(): void {
    if (this.stopReason !== 'stop') {
      const r = this.stops.push(this.stream.flush());
      this.emit(r.emit);
      if (r.stopped) this.stopReason = 'stop';
      else this.emit(this.stops.flush());
    }
    this.cacheKept = this.cache?.kept() ?? [];
    this.t1 = performance.now();
    this.ended = true;
    this.dispose();
  }
}
