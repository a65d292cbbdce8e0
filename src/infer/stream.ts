/**
 * Generation as an async iterable of text pieces: `for await (const piece of streamText(model, tok,
 * prompt, opts))`, each piece as soon as it is final (what generate's onText hears). Leaving the
 * loop early (break, return, an exception in its body) or aborting `opts.signal` ends the
 * generation after at most one more step, its cache freed; the iterator's return value is the
 * GenerateResult (stopReason 'aborted' when cut short).
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
  let settled = false;
  const ping = () => { const w = wake; wake = undefined; w?.(); };
  const run = generate(model, tok, prompt, {
    ...opts,
    signal: stop.signal,
    onText: (s) => { opts.onText?.(s); pieces.push(s); ping(); },
  }).finally(() => { settled = true; ping(); });
  // A rejection is rethrown from the loop below; until then it must not count as unhandled.
  run.catch(() => {});
  try {
    for (;;) {
      if (pieces.length) { yield pieces.shift()!; continue; }
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
