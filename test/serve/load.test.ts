/**
 * `fon serve` under load (issue 22): 1,000 streaming completions sent at once through OpenAI's npm
 * client to a server on a tiny model, on loopback; every one completes with the tokens it asked for
 * (or ends at an end-of-text before them), and a greedy request's text equals `fon generate`'s.
 * Bounded: 1,000 requests of 1 … 8 tokens, about a minute on 2 cores.
 * Run: node --import tsx --test test/serve/load.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import OpenAI from 'openai';
import { load } from '../../src/io/load.ts';
import { createFonServer } from '../../src/serve/server.ts';
import { loadRun } from '../../bench/lib/serve_load.ts';
import { fon } from '../cli/fon_process.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');

test('1,000 concurrent streaming requests all complete with the tokens they asked for; greedy equals fon generate', { timeout: 600_000 }, async () => {
  const lm = await load(FIXTURE, { backend: 'cpu' });
  const server = createFonServer(lm, { name: 'tiny', maxQueue: 2000 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
    const { run, failures } = await loadRun(client, 'tiny', 1000, 8);
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of 1000 failed`);
    assert.ok(run.tokens >= 1000, `${run.tokens} tokens`);
    console.log(`1000 concurrent streams: ${run.tokens} tokens in ${run.seconds.toFixed(1)} s (${run.tokensPerSecond.toFixed(0)} tokens/s), latency p50 ${run.latencyMs.p50.toFixed(0)} ms, p99 ${run.latencyMs.p99.toFixed(0)} ms`);
    const greedy = await client.completions.create({ model: 'tiny', prompt: 'The capital of', max_tokens: 8, temperature: 0 });
    const cli = fon('generate', '--model', FIXTURE, '--prompt', 'The capital of', '--max-tokens', '8', '--temperature', '0', '--backend', 'cpu');
    assert.equal(cli.code, 0, cli.err);
    assert.equal(greedy.choices[0].text, cli.out.replace(/\n$/, ''));
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    lm.dispose();
  }
});
