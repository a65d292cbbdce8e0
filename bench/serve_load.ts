/**
 * `fon serve` under load (issue 22, item 5): N streaming completions (1 … T tokens each, greedy)
 * sent at once through OpenAI's npm client, decoded by continuous batching (serve/batcher.ts: up
 * to --max-batch requests a step); the same N sent at once to a server of --max-batch 1 (one
 * request decoding at a time, the others waiting: the scheduling before batching); and the N sent
 * one at a time. Aggregate tokens/s, latency percentiles (whole request and first token) and the
 * batcher's mean and largest step, on loopback, over a model folder.
 *
 *   node --import tsx bench/serve_load.ts [--model test/fixtures/hf/qwen3] [--requests 1000] [--max-tokens 8] [--max-batch 16] [--backend cpu]
 */
import { parseArgs } from 'node:util';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { load } from '../src/io/load.ts';
import { createFonServer } from '../src/serve/server.ts';
import { loadRun, type LoadRun } from './lib/serve_load.ts';

const { values: f } = parseArgs({ options: { model: { type: 'string', default: 'test/fixtures/hf/qwen3' }, requests: { type: 'string', default: '1000' }, 'max-tokens': { type: 'string', default: '8' }, 'max-batch': { type: 'string', default: '16' }, backend: { type: 'string', default: 'cpu' } } });
const n = Number(f.requests), T = Number(f['max-tokens']), B = Number(f['max-batch']);
const lm = await load(f.model!, { backend: f.backend as 'cpu' });
const rows: [string, number, LoadRun, string][] = [];
for (const [label, maxBatch, serial] of [[`all at once`, B, false], ['all at once', 1, false], ['one at a time', B, true]] as const) {
  const server = createFonServer(lm, { name: 'm', maxQueue: n + 10, maxBatch, maxQueuedTokens: 2 ** 30 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 3_600_000 });
  const { run, failures } = await loadRun(client, 'm', n, T, serial);
  if (failures.length) console.error(`${label}: ${failures.length} failed, e.g. ${failures[0].why}`);
  const s = server.batcher.stats;
  rows.push([label, maxBatch, run, `${(s.rows / Math.max(1, s.steps)).toFixed(1)} / ${s.largestBatch}`]);
  console.error(`${label}, max batch ${maxBatch}: ${run.tokens} tokens in ${run.seconds.toFixed(2)} s`);
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  await server.idle();
}
console.log(`\n${n} streaming completions of 1 … ${T} tokens, ${f.model} on ${f.backend}\n`);
console.log('| sent | max batch | tokens | seconds | tokens/s | latency p50 / p90 / p99 / max (ms) | first token p50 / p99 (ms) | rows a step: mean / most |\n|---|---|---|---|---|---|---|---|');
for (const [label, maxBatch, r, batch] of rows) console.log(`| ${label} | ${maxBatch} | ${r.tokens} | ${r.seconds.toFixed(2)} | ${r.tokensPerSecond.toFixed(0)} | ${[r.latencyMs.p50, r.latencyMs.p90, r.latencyMs.p99, r.latencyMs.max].map((x) => x.toFixed(0)).join(' / ')} | ${r.firstTokenMs.p50.toFixed(0)} / ${r.firstTokenMs.p99.toFixed(0)} | ${batch} |`);
lm.dispose();
process.exit(0);
