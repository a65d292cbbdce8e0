/**
 * A load run against `fon serve`'s server through OpenAI's npm client, shared by
 * test/serve/load.test.ts (correctness under load) and bench/serve_load.ts (the figures): `count`
 * streaming completions sent at once (request i asks for 1 + i % maxTokens tokens, greedy, with the
 * usage chunk), each checked to complete with the tokens it asked for (or an end-of-text before
 * them); then the latency percentiles and the aggregate tokens/s, beside the same requests sent
 * one at a time.
 */
import OpenAI from 'openai';

export interface LoadRun { requests: number; tokens: number; seconds: number; tokensPerSecond: number; latencyMs: { p50: number; p90: number; p99: number; max: number }; firstTokenMs: { p50: number; p99: number } }
export interface LoadFailure { index: number; why: string }

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };

/** Sends `count` streaming requests (all at once, or one at a time with `serial`) and checks each. */
export async function loadRun(client: OpenAI, model: string, count: number, maxTokens: number, serial = false): Promise<{ run: LoadRun; failures: LoadFailure[] }> {
  const failures: LoadFailure[] = [];
  const latency: number[] = [], first: number[] = [];
  let tokens = 0;
  const one = async (i: number) => {
    const want = 1 + (i % maxTokens);
    const t0 = performance.now();
    let t1 = 0, text = '', usage: { completion_tokens: number } | undefined, finish: string | null = null;
    try {
      const stream = await client.completions.create({ model, prompt: `Request ${i}: the`, max_tokens: want, temperature: 0, stream: true, stream_options: { include_usage: true } });
      for await (const c of stream) {
        if (c.choices[0]) { if (!t1) t1 = performance.now(); text += c.choices[0].text; finish = c.choices[0].finish_reason ?? finish; }
        if (c.usage) usage = c.usage;
      }
    } catch (e) {
      failures.push({ index: i, why: String(e) });
      return;
    }
    latency.push(performance.now() - t0);
    first.push((t1 || performance.now()) - t0);
    if (!usage) { failures.push({ index: i, why: 'no usage chunk' }); return; }
    tokens += usage.completion_tokens;
    if (!(usage.completion_tokens === want ? finish === 'length' : usage.completion_tokens < want && finish === 'stop')) failures.push({ index: i, why: `asked ${want} tokens, got ${usage.completion_tokens}, finish ${finish}` });
    void text;
  };
  const t0 = performance.now();
  if (serial) for (let i = 0; i < count; i++) await one(i);
  else await Promise.all(Array.from({ length: count }, (_, i) => one(i)));
  const seconds = (performance.now() - t0) / 1000;
  return {
    run: { requests: count, tokens, seconds, tokensPerSecond: tokens / seconds, latencyMs: { p50: pct(latency, 50), p90: pct(latency, 90), p99: pct(latency, 99), max: Math.max(...latency) }, firstTokenMs: { p50: pct(first, 50), p99: pct(first, 99) } },
    failures,
  };
}
