/**
 * `fon serve` under load (issue 22): 1,000 streaming completions sent at once through OpenAI's npm
 * client to a server on a tiny model, on loopback; every one completes with the tokens it asked for
 * (or ends at an end-of-text before them), the batcher decodes several of them in one step (continuous
 * batching: serve/batcher.ts), every page goes back to the pool, and a greedy request sent in the
 * middle of the load gets `fon generate`'s text.
 * Bounded: 1,000 requests of 1 … 8 tokens, about a minute on 2 cores.
 * Run: node --import tsx --test test/serve/load.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import OpenAI from 'openai';
import { load } from '../../src/io/load.ts';
import { createFonServer, LISTEN_BACKLOG } from '../../src/serve/server.ts';
import { loadRun } from '../../bench/lib/serve_load.ts';
import { fon } from '../cli/fon_process.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');

test('1,000 concurrent streaming requests all complete with the tokens they asked for, decoded in batches; greedy beside them equals fon generate', { timeout: 600_000 }, async () => {
  const lm = await load(FIXTURE, { backend: 'cpu' });
  const server = createFonServer(lm, { name: 'tiny', maxQueue: 2000 });
  await new Promise<void>((r) => server.listen({ port: 0, host: '127.0.0.1', backlog: LISTEN_BACKLOG }, r)); // as fon serve listens
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
    const load = loadRun(client, 'tiny', 1000, 8);
    // A greedy request in the middle of the load: decoded beside the others, it must still give fon generate's text.
    await new Promise((r) => setTimeout(r, 200));
    const greedy = await client.completions.create({ model: 'tiny', prompt: 'The capital of', max_tokens: 8, temperature: 0 });
    const { run, failures } = await load;
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of 1000 failed`);
    assert.ok(run.tokens >= 1000, `${run.tokens} tokens`);
    const s = server.batcher.stats;
    console.log(`1000 concurrent streams: ${run.tokens} tokens in ${run.seconds.toFixed(1)} s (${run.tokensPerSecond.toFixed(0)} tokens/s), latency p50 ${run.latencyMs.p50.toFixed(0)} ms, p99 ${run.latencyMs.p99.toFixed(0)} ms; ${s.steps} batched steps of ${(s.rows / s.steps).toFixed(1)} rows on average, ${s.largestBatch} at most`);
    assert.ok(s.largestBatch > 1 && s.rows > s.steps, `the steps ran several requests at once: ${JSON.stringify(s)}`);
    await server.idle();
    assert.equal(server.batcher.pool.pagesInUse, 0, 'every page back in the pool');
    const cli = fon('generate', '--model', FIXTURE, '--prompt', 'The capital of', '--max-tokens', '8', '--temperature', '0', '--backend', 'cpu');
    assert.equal(cli.code, 0, cli.err);
    assert.equal(greedy.choices[0].text, cli.out.replace(/\n$/, ''));
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    lm.dispose();
  }
});
