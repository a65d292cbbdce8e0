/**
 * Generation as an async iterable of text pieces: `for await (const piece of streamText(model, tok,
 * prompt, opts))`, each piece as soon as it is final (what generate's onText hears). Leaving the
 * loop early (break, return, an exception in its body) or aborting `opts.signal` ends the
 * generation after at most one more step, its cache freed; the iterator's return value is the
 * GenerateResult (stopReason 'aborted' when cut short). Generation keeps pace with the reader: a
 * step waits while text the reader has not taken is queued (GenerateOptions.beforeStep).
 */
import type { Decoder } from '../model/decoder.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { generate, type GenerateOptions, type GenerateResult } from './generate.ts';

export async function* streamText(model: Decoder, tok: Tokenizer, prompt: string, opts: GenerateOptions = {}): AsyncGenerator<string, GenerateResult, undefined> {
  const stop = new AbortController();
  const outer = opts.signal;
  const onAbort = () => stop.abort(outer?.reason);
  if (outer?.aborted) stop.abort(outer.reason);
  else outer?.addEventListener('abort', onAbort, { once: true });
  const pieces: string[] = [];
  let wake: (() => void) | undefined;
  let drained: (() => void) | undefined;
  let settled = false;
  const ping = () => { const w = wake; wake = undefined; w?.(); };
  const release = () => { const d = drained; drained = undefined; d?.(); };
  stop.signal.addEventListener('abort', release, { once: true }); // a step held back by backpressure sees the abort
  const run = generate(model, tok, prompt, {
    ...opts,
    signal: stop.signal,
    onText: (s) => { opts.onText?.(s); pieces.push(s); ping(); },
    // Backpressure: the next step waits while pieces the reader has not taken are queued.
    beforeStep: async () => {
      await opts.beforeStep?.();
      while (pieces.length > 0 && !stop.signal.aborted) await new Promise<void>((r) => { drained = r; });
    },
  }).finally(() => { settled = true; ping(); });
  // A rejection is rethrown from the loop below; until then it must not count as unhandled.
  run.catch(() => {});
  try {
    for (;;) {
      if (pieces.length) {
        const piece = pieces.shift()!;
        if (pieces.length === 0) release();
        yield piece;
        continue;
      }
      if (settled) break;
      await new Promise<void>((r) => { wake = r; });
    }
    return await run;
  } finally {
    outer?.removeEventListener('abort', onAbort);
    if (!settled) {
      stop.abort();
      await run.catch(() => {});
    }
  }
}
