/**
 * Text generation: prefill the prompt into a KV cache allocated once for the whole sequence, then
 * decode through the cache — one token per step (plain decoding), or one draft–revise cycle per
 * step (infer/draft_revise.ts: the draft organ proposes, the revise organ verifies; the default
 * for a model with organs) — sampling on the host, streaming text as it completes, stopping at
 * end-of-text, a stop string or the length.
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import type { Decoder } from '../model/decoder.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { noGrad } from '../tensor/scope.ts';
import { DraftRevise, type DraftReviseOptions } from './draft_revise.ts';
import { KvCache, type KvCacheOptions } from './kv_cache.ts';
import type { PagePool } from './page_pool.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import { Sampler, type SamplingOptions } from './sampler.ts';
import type { SpeculativeStatsJSON } from './speculative.ts';
import { StopMatcher } from './stop_strings.ts';
import { tokenLogprob, type TokenLogprob } from './logprobs.ts';

export interface GenerateOptions extends SamplingOptions {
  /** Tokens to generate at most (default 128). */
  maxTokens?: number;
  /** Generation ends before any of these strings; they are not part of the output. */
  stop?: string[];
  /** Called with each piece of text as soon as it is final. */
  onText?: (text: string) => void;
  /** Keep the last tokens of a prompt that does not fit the context (with a warning) instead of failing. */
  truncatePrompt?: boolean;
  /** Called with warnings (e.g. prompt truncation). */
  onWarning?: (message: string) => void;
  /**
   * Ids put before the prompt. Default: [tok.eosId], the separator FON's training puts before
   * every document, so an empty prompt starts a new one. A Hugging Face model takes its
   * tokenizer's `prefixIds` (Llama 3's <|begin_of_text|>, or none).
   */
  startIds?: readonly number[];
  /** Ids that end generation besides tok.eosId (a generation_config.json's eos_token_id list). */
  stopIds?: readonly number[];
  /** Special tokens written in the prompt are tokens (chat markup such as <|im_start|>), not text. */
  specialInPrompt?: boolean;
  /**
   * Draft–revise decoding (infer/draft_revise.ts): true or its options to use it, false for plain
   * decoding. Default: on for a model with organs (config.organs), off otherwise.
   */
  draftRevise?: boolean | DraftReviseOptions;
  /**
   * Positions per page of the paged layers' KV cache (full and local: infer/page_pool.ts), a
   * positive multiple of 128; default the whole context up to 64K positions a page.
   */
  pageRows?: number;
  /** A page pool to take the cache's pages from (shared with other generations of the same model); default the cache's own. */
  pool?: PagePool;
  /**
   * Ends generation early when aborted: checked before each decoding step, so at most one more
   * step runs; the result so far comes back with stopReason 'aborted' (nothing is thrown).
   */
  signal?: AbortSignal;
  /** Awaited before each decoding step after the first token: a caller's pacing (streamText holds generation back while its reader is behind). */
  beforeStep?: () => Promise<void>;
  /**
   * Also report each generated token's log-probability under the model (the raw logits' softmax)
   * and the `logprobs` most likely tokens of its step (0 … 20); plain decoding only (draft–revise
   * gives the same tokens, but not one row a token).
   */
  logprobs?: number;
}

export interface GenerateResult {
  text: string;
  /** Generated ids (without the prompt). */
  ids: number[];
  promptTokens: number;
  stopReason: 'eos' | 'stop' | 'maxTokens' | 'context' | 'aborted';
  /** Decode speed after the prefill. */
  tokensPerSecond: number;
  /**
   * Per layer, per KV head: the fraction of the sequence's keys the KV cache kept at the end (1
   * without eviction; below 1 for FPA layers with `evict` once keys died: KvCache.kept).
   */
  cacheKept: number[][];
  /** With `logprobs`: one entry a generated token. */
  logprobs?: TokenLogprob[];
  /** With draft–revise decoding: verify passes, tokens drafted and accepted, acceptance rate and tokens per pass. */
  speculative?: SpeculativeStatsJSON & { draftLayers: number };
}

/** A batch-1 KV cache of `maxLength` positions for `model`, in its weights' dtype; `opts` sets its pages. */
export function generationCache(model: Decoder, maxLength: number, opts: KvCacheOptions = {}): KvCache {
  return new KvCache(model.config, 1, maxLength, model.embed.weight.backend, generationDtype(model), opts);
}

/**
 * The dtype of generation's KV cache for `model`: its weights' (f32, f16 or bf16: the projections
 * write k and v in it), which a page pool shared by its generations is made with.
 */
export const generationDtype = (model: Decoder): FloatDType => model.embed.weight.dtype as FloatDType;

/**
 * One step of batch-1 generation: `input` (token ids at positions pos …) through the model and the
 * cache, the last position's logits read back (f32, vocabSize values), the cache settled beside the
 * read (FPA eviction on webgpu reads its kept counts and compacts: KvCache.settle) and its length set.
 * `onRecorded` is called once the step's work is recorded, before the read-back is awaited.
 */
export async function cachedStep(model: Decoder, cache: KvCache, input: readonly number[], pos: number, onRecorded?: () => void): Promise<Float32Array> {
  const backend = model.embed.weight.backend;
  const logits = noGrad(() => {
    const x = tensor(Int32Array.from(input), [1, input.length], { backend, dtype: 'i32' });
    const y = model.forward(x, { cache: cache.layers, pos, lastOnly: true });
    x.dispose();
    return y;
  });
  const pending = Promise.all([logits.data(), cache.settle()]);
  onRecorded?.();
  const [data] = await pending;
  logits.dispose();
  cache.length = pos + input.length;
  return data as Float32Array;
}

/** The prompt goes after `opts.startIds` (by default the end-of-text id: see GenerateOptions). */
export async function generate(model: Decoder, tok: Tokenizer, prompt: string, opts: GenerateOptions = {}): Promise<GenerateResult> {
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
  const stopIds = new Set([tok.eosId, ...(opts.stopIds ?? [])]);
  // Options are checked before the cache exists, so a bad one leaks nothing.
  const top = opts.logprobs;
  if (top !== undefined && !(Number.isInteger(top) && top >= 0 && top <= 20)) throw new ArgumentError(`generate: logprobs ${top} must be an integer in [0, 20]`);
  if (top !== undefined && opts.draftRevise) throw new ArgumentError('generate: logprobs needs plain decoding; give draftRevise false (draft–revise makes the same tokens)');
  const sampler = new Sampler(cfg.vocabSize, opts);
  const stops = new StopMatcher(opts.stop ?? []);
  const cache = generationCache(model, Math.min(cfg.contextLength, ids.length + maxTokens), { pageRows: opts.pageRows, pool: opts.pool });
  const stream = tok.streamDecoder({ continuation: true }); // the text goes on from the prompt's: no first-space strip
  const history = ids.slice();
  const out: number[] = [];
  let text = '';
  const emit = (s: string) => { if (s) { text += s; opts.onText?.(s); } };
  // A model may have more rows than the tokenizer has ids (a vocabulary rounded up): never sample those.
  const fixRow = (row: Float32Array): Float32Array => { if (row.length > tok.vocabSize) row.fill(-Infinity, tok.vocabSize); return row; };
  const step = async (input: number[], pos: number): Promise<Float32Array> => fixRow(await cachedStep(model, cache, input, pos));
  const dr = top !== undefined ? false : opts.draftRevise ?? cfg.organs !== undefined;
  const lps: TokenLogprob[] = [];
  const sample = (row: Float32Array): number => {
    const next = sampler.next(row, history);
    if (top !== undefined) lps.push(tokenLogprob(row, next, top));
    return next;
  };
  let stopReason: GenerateResult['stopReason'] = 'maxTokens';
  let t0 = 0;
  let cacheKept: number[][] = [];
  let organs: DraftRevise | undefined;
  try {
    if (dr) organs = new DraftRevise(model, cache, sampler, dr === true ? {} : dr, fixRow, Math.min(tok.vocabSize, cfg.vocabSize));
    const aborted = () => opts.signal?.aborted === true;
    let pending = aborted() ? [] : [sample(await step(ids, 0))]; // the first token, from the prompt's last position
    if (aborted()) stopReason = 'aborted';
    let pos = ids.length; // the position of the newest token, not yet run
    let drafted = false; // pending came from a draft–revise cycle
    t0 = performance.now();
    for (let done = false; !done;) {
      let used = 0;
      for (const next of pending) {
        if (stopIds.has(next)) { stopReason = 'eos'; done = true; break; }
        out.push(next);
        history.push(next);
        used++;
        const r = stops.push(stream.push(next));
        emit(r.emit);
        if (r.stopped) { stopReason = 'stop'; done = true; break; }
        if (out.length >= maxTokens) { done = true; break; }
      }
      if (drafted) organs!.stats.unused(pending.length - used);
      if (done || stopReason === 'aborted') break;
      if (opts.beforeStep) await opts.beforeStep();
      if (aborted()) { stopReason = 'aborted'; break; }
      if (pos >= cache.maxLength) { stopReason = 'context'; break; }
      const last = history[history.length - 1];
      if (organs) {
        pending = await organs.next(last, pos, history);
        pos += pending.length;
        drafted = true;
      } else {
        pending = [sample(await step([last], pos))];
        pos++;
      }
    }
    if (stopReason !== 'stop') {
      const r = stops.push(stream.flush());
      emit(r.emit);
      if (r.stopped) stopReason = 'stop';
      else emit(stops.flush());
    }
    cacheKept = cache.kept();
  } finally {
    cache.dispose();
  }
  const secs = (performance.now() - t0) / 1000;
  return {
    text, ids: out, promptTokens: ids.length - start.length, stopReason, tokensPerSecond: out.length > 1 ? (out.length - 1) / secs : 0, cacheKept,
    ...(top !== undefined ? { logprobs: lps.slice(0, out.length) } : {}),
    ...(organs ? { speculative: { ...organs.stats.toJSON(), draftLayers: organs.draftLayers } } : {}),
  };
}
