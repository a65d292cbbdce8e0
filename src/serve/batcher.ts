/**
 * `fon serve`'s scheduler: continuous batching. Requests join and leave one ragged decoding step
 * (infer/cached_step.ts raggedStep: each sequence one token at its own position through its own
 * batch-1 KV cache, the weights read once a step for all of them). Each iteration
 *   1. prefills the requests that joined since the last (each prompt in one call of its own),
 *   2. ends those aborted (client gone) or out of room, and runs one ragged step over the rest,
 *   3. lets each sample its token with its own sampler and check its own stops
 *      (infer/generation.ts: what `generate` does for one sequence, so a greedy request's text is
 *      `fon generate`'s whether it ran alone or beside others),
 *   4. removes the finished ones (their pages back to the shared pool) and admits waiting ones.
 * At most `maxBatch` requests are active; past them up to `maxQueue` wait, holding at most
 * `maxQueuedTokens` tokens (prompt + max_tokens, within the context) together; past either limit a
 * request is refused with a 429 in OpenAI's shape. A waiting request whose client goes away leaves
 * the queue at once; an active one ends before the next step.
 *
 * The full and local layers of every request take their k/v pages from one PagePool (of
 * `pageRows`-position pages), so memory follows the positions in use. Within one page a request's
 * logits are bit for bit those of `fon generate` on the CPU backend; past a page they are merged
 * over pages (ops/paged_attention.ts), as `fon generate --page-rows` does, which may differ from one
 * contiguous page in the last bits.
 *
 * Draft–revise: a request that decodes by draft–revise cycles (the default on a model with organs)
 * joins the schedule but runs its cycle alone each iteration, between the ragged steps: batching
 * the cycles (ragged γ, per-row acceptance and truncation) is not built.
 */
import { RequestError } from './openai_requests.ts';
import type { LanguageModel } from '../infer/language_model.ts';
import type { GenerateOptions, GenerateResult } from '../infer/generate.ts';
import { generationDtype, raggedStep } from '../infer/cached_step.ts';
import { Generation } from '../infer/generation.ts';
import { PagePool } from '../infer/page_pool.ts';
import { PAGE_TILE } from '../ops/paged_attention.ts';
import { ArgumentError } from '../errors.ts';

export interface BatcherOptions {
  /** Requests decoded together at most (default 16); more wait. */
  maxBatch?: number;
  /** Requests that may wait for a place (default 64); more get a 429. */
  maxQueue?: number;
  /** Tokens (prompt + max_tokens, within the context) the waiting requests may hold together (default 2²⁰); more get a 429. */
  maxQueuedTokens?: number;
  /**
   * Positions per page of the shared pool (a multiple of 128; default 512, or the whole context
   * when it is shorter).
   */
  pageRows?: number;
  /** Awaited before each iteration: a caller's pacing (the tests slow the server down to watch requests overlap). */
  beforeStep?: () => Promise<void>;
}

/** What the batcher has done: ragged steps, the rows they ran, the largest, draft–revise cycles, requests ended by kind. */
export interface BatcherStats { steps: number; rows: number; largestBatch: number; cycles: number; finished: number; aborted: number; failed: number }

/** A request's own options beyond generation's: `behind()` is true while its client has not taken what was sent (it sits out the steps till then). */
export interface RequestOptions extends GenerateOptions { behind?: () => boolean }

interface Entry {
  gen: Generation;
  behind?: () => boolean;
  /** Prompt + max_tokens, within the context: what it counts against maxQueuedTokens while it waits. */
  tokens: number;
  signal?: AbortSignal;
  prefilled: boolean;
  resolve(r: GenerateResult): void;
  reject(e: unknown): void;
  /** Leaves the queue when its client goes away while it waits. */
  onAbort?: () => void;
}

/** The default page rows: 512 positions, or the whole context when it is shorter. */
export const SERVE_PAGE_ROWS = 4 * PAGE_TILE;

export class Batcher {
  readonly maxBatch: number;
  readonly maxQueue: number;
  readonly maxQueuedTokens: number;
  /** Where every request's full and local layers take their pages. */
  readonly pool: PagePool;
  readonly stats: BatcherStats = { steps: 0, rows: 0, largestBatch: 0, cycles: 0, finished: 0, aborted: 0, failed: 0 };
  private readonly waiting: Entry[] = [];
  private readonly active: Entry[] = [];
  private queuedTokens = 0;
  private running?: Promise<void>;

  constructor(private readonly lm: LanguageModel, private readonly o: BatcherOptions = {}) {
    const positive = (v: number | undefined, d: number, what: string) => {
      const x = v ?? d;
      if (!Number.isInteger(x) || x < 1) throw new ArgumentError(`Batcher: ${what} ${x} must be a positive integer`);
      return x;
    };
    this.maxBatch = positive(o.maxBatch, 16, 'maxBatch');
    this.maxQueue = positive(o.maxQueue, 64, 'maxQueue');
    this.maxQueuedTokens = positive(o.maxQueuedTokens, 2 ** 20, 'maxQueuedTokens');
    const m = lm.model, ctx = m.config.contextLength;
    const geometry = { batch: 1, kvHeads: m.config.nKvHeads, headDim: m.config.headDim, dtype: generationDtype(m) };
    const rows = o.pageRows ?? SERVE_PAGE_ROWS;
    // A context that fits one page: pages of exactly the context (no rows a sequence can never reach).
    this.pool = o.pageRows === undefined && ctx <= rows ? new PagePool(m.embed.weight.backend, geometry, ctx, { onePage: true }) : new PagePool(m.embed.weight.backend, geometry, rows);
  }

  /** Requests decoding now (admitted, prefilled or about to be). */
  get activeCount(): number { return this.active.length; }
  /** Requests waiting for a place. */
  get waitingCount(): number { return this.waiting.length; }
  /** Tokens the waiting requests hold (prompt + max_tokens each). */
  get waitingTokens(): number { return this.queuedTokens; }

  /**
   * Generates `prompt`'s continuation beside the other requests: `opts` over the model's defaults
   * (LanguageModel.defaults), its text through opts.onText as it comes, its result at the end
   * (stopReason 'aborted' when opts.signal ended it). Throws at once an ArgumentError for a bad
   * option or a prompt past the context, and a RequestError 429 past maxQueue or maxQueuedTokens;
   * a failure of its prefill or of a step rejects the promise.
   */
  submit(prompt: string, opts: RequestOptions = {}): Promise<GenerateResult> {
    const { behind, ...genOpts } = opts;
    const gen = new Generation(this.lm.model, this.lm.tokenizer, prompt, { ...this.lm.defaults(), ...genOpts, pool: this.pool });
    const queued = this.active.length >= this.maxBatch || this.waiting.length > 0;
    if (queued && this.waiting.length >= this.maxQueue) throw tooMany(`${this.waiting.length} requests are already waiting`);
    if (queued && this.queuedTokens + gen.maxLength > this.maxQueuedTokens) throw tooMany(`the waiting requests hold ${this.queuedTokens} tokens, and this one's ${gen.maxLength} (prompt and max_tokens) would pass the server's ${this.maxQueuedTokens}`);
    const result = new Promise<GenerateResult>((resolve, reject) => {
      const e: Entry = { gen, behind, tokens: gen.maxLength, signal: opts.signal, prefilled: false, resolve, reject };
      if (!queued) { this.active.push(e); return; }
      this.waiting.push(e);
      this.queuedTokens += e.tokens;
      if (!opts.signal) return;
      e.onAbort = () => {
        const at = this.waiting.indexOf(e);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        this.queuedTokens -= e.tokens;
        this.end(e);
      };
      opts.signal.addEventListener('abort', e.onAbort, { once: true });
    });
    // loop() awaits before anything else, so `running` is set before it can end.
    this.running ??= this.loop();
    return result;
  }

  /** Resolves once no request is active or waiting (await it before freeing the model). */
  idle(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  /** Frees the pool's pages (after idle()). */
  dispose(): void {
    this.pool.dispose();
  }

  private async loop(): Promise<void> {
    try {
      while (this.active.length > 0) {
        // A turn of the event loop: requests arrive, clients disconnect, streamed text goes out.
        await new Promise<void>((r) => setImmediate(r));
        await this.o.beforeStep?.();
        for (const e of [...this.active]) {
          if (e.prefilled) continue;
          e.prefilled = true;
          if (e.signal?.aborted) { e.gen.abort(); continue; }
          try { await e.gen.prefill(); } catch (err) { this.fail(e, err); }
        }
        const plain: Entry[] = [], alone: Entry[] = [];
        // (A request that joined during the prefills above waits for the next iteration's; one whose
        // client is behind sits this step out: backpressure on that stream alone, the others go on.)
        let held = 0;
        for (const e of this.active) {
          if (!e.prefilled || e.gen.finished) continue;
          if (e.behind?.() && !e.signal?.aborted) { held++; continue; }
          if (e.gen.ready()) (e.gen.draftRevise ? alone : plain).push(e);
        }
        // Every request waiting on its client: wait a little for their sockets instead of spinning.
        if (held > 0 && plain.length === 0 && alone.length === 0) { await new Promise<void>((r) => setTimeout(r, 2)); continue; }
        if (plain.length > 0) {
          let rows: Float32Array[] = [];
          try {
            rows = await raggedStep(this.lm.model, plain.map((e) => e.gen.next));
            this.stats.steps++;
            this.stats.rows += plain.length;
            this.stats.largestBatch = Math.max(this.stats.largestBatch, plain.length);
          } catch (err) {
            for (const e of plain) this.fail(e, err); // the step is every row's
          }
          // A request's own failure (its text's listener) is its alone.
          rows.forEach((row, i) => { try { plain[i].gen.takeRow(row); } catch (err) { this.fail(plain[i], err); } });
        }
        for (const e of alone) {
          try { await e.gen.advance(); this.stats.cycles++; } catch (err) { this.fail(e, err); }
        }
        this.sweep();
      }
    } catch (err) {
      // A fault of the scheduler itself: no request is left hanging.
      for (const e of [...this.active, ...this.waiting.splice(0)]) this.fail(e, err);
      this.queuedTokens = 0;
    } finally {
      this.running = undefined;
    }
  }

  /** Finished requests out (their results given), waiting ones in while there is room. */
  private sweep(): void {
    for (let i = this.active.length - 1; i >= 0; i--) {
      const e = this.active[i];
      if (!e.gen.finished) continue;
      this.active.splice(i, 1);
      this.end(e);
    }
    while (this.active.length < this.maxBatch && this.waiting.length > 0) {
      const e = this.waiting.shift()!;
      this.queuedTokens -= e.tokens;
      if (e.onAbort) e.signal!.removeEventListener('abort', e.onAbort);
      this.active.push(e);
    }
  }

  /** A request's result out (a failed one was rejected already). */
  private end(e: Entry): void {
    if (!e.gen.finished) e.gen.abort();
    const r = e.gen.result();
    this.stats[r.stopReason === 'aborted' ? 'aborted' : 'finished']++;
    e.resolve(r);
  }

  /** A request whose prefill or step threw: its cache freed, its error to its caller, out of the batch. */
  private fail(e: Entry, err: unknown): void {
    e.gen.dispose();
    const at = this.active.indexOf(e);
    if (at >= 0) this.active.splice(at, 1);
    this.stats.failed++;
    e.reject(err);
  }
}

const tooMany = (why: string) => new RequestError(`${why}; try again later`, 429, null, 'rate_limit_exceeded', 'rate_limit_error');
