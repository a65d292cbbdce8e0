/**
 * Text generation: prefill the prompt into a KV cache allocated once for the whole sequence, then
 * decode through the cache — one token per step (plain decoding), or one draft–revise cycle per
 * step (infer/draft_revise.ts: the draft organ proposes, the revise organ verifies; the default
 * for a model with organs) — sampling on the host, streaming text as it completes, stopping at
 * end-of-text, a stop string or the length. The sequence's state machine is infer/generation.ts
 * (`fon serve`'s batcher runs many of them side by side); this runs one alone.
 */
import type { Decoder } from '../model/decoder.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import type { DraftReviseOptions } from './draft_revise.ts';
import { Generation } from './generation.ts';
import type { PagePool } from './page_pool.ts';
import type { SamplingOptions } from './sampler.ts';
import type { SpeculativeStatsJSON } from './speculative.ts';
import type { TokenLogprob } from './logprobs.ts';

export interface GenerateOptions extends SamplingOptions {
  /** Tokens to generate at most (default 128). */
  maxTokens?: number;
  /** Generation ends before any of these strings; they are not part of the output. */
  stop?: string[];
  /**
   * Called with each piece of text as soon as it is final; with `logprobs`, also with the
   * log-probabilities of the tokens taken since the last call (those whose text is still held back,
   * by a stop string or a partial character, come with a later piece, or only in the result).
   */
  onText?: (text: string, logprobs?: readonly TokenLogprob[]) => void;
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

export { cachedStep, generationCache, generationDtype } from './cached_step.ts';

/** The prompt goes after `opts.startIds` (by default the end-of-text id: see GenerateOptions). */
export async function generate(model: Decoder, tok: Tokenizer, prompt: string, opts: GenerateOptions = {}): Promise<GenerateResult> {
  const g = new Generation(model, tok, prompt, opts); // options are checked before the cache exists, so a bad one leaks nothing
  try {
    await g.prefill();
    while (!g.finished) {
      if (opts.beforeStep) await opts.beforeStep();
      if (!g.ready()) break;
      await g.advance();
    }
    return g.result();
  } finally {
    g.dispose();
  }
}
