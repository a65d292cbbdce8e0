/**
 * `fon serve` under load (issue 22, item 5): N streaming completions (1 … T tokens each, greedy)
 * sent at once through OpenAI's npm client, against the same N sent one at a time: aggregate
 * tokens/s and latency percentiles (whole request and first token), on loopback, over a model folder.
 *
 *   node --import tsx bench/serve_load.ts [--model test/fixtures/hf/qwen3] [--requests 1000] [--max-tokens 8] [--backend cpu]
 */
import { parseArgs } from 'node:util';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { load } from '../src/io/load.ts';
import { createFonServer } from '../src/serve/server.ts';
import { loadRun, type LoadRun } from './lib/serve_load.ts';

const { values: f } = parseArgs({ options: { model: { type: 'string', default: 'test/fixtures/hf/qwen3' }, requests: { type: 'string', default: '1000' }, 'max-tokens': { type: 'string', default: '8' }, backend: { type: 'string', default: 'cpu' } } });
const n = Number(f.requests), T = Number(f['max-tokens']);
const lm = await load(f.model!, { backend: f.backend as 'cpu' });
const server = createFonServer(lm, { name: 'm', maxQueue: n + 10 });
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 3_600_000 });
const rows: [string, LoadRun][] = [];
for (const [label, serial] of [['all at once', false], ['one at a time', true]] as const) {
  const { run, failures } = await loadRun(client, 'm', n, T, serial);
  if (failures.length) console.error(`${label}: ${failures.length} failed, e.g. ${failures[0].why}`);
  rows.push([label, run]);
  console.error(`${label}: ${run.tokens} tokens in ${run.seconds.toFixed(2)} s`);
}
console.log(`\n${n} streaming completions of 1 … ${T} tokens, ${f.model} on ${f.backend}\n`);
console.log('| sent | tokens | seconds | tokens/s | latency p50 / p90 / p99 / max (ms) | first token p50 / p99 (ms) |\n|---|---|---|---|---|---|');
for (const [label, r] of rows) console.log(`| ${label} | ${r.tokens} | ${r.seconds.toFixed(2)} | ${r.tokensPerSecond.toFixed(0)} | ${[r.latencyMs.p50, r.latencyMs.p90, r.latencyMs.p99, r.latencyMs.max].map((x) => x.toFixed(0)).join(' / ')} | ${r.firstTokenMs.p50.toFixed(0)} / ${r.firstTokenMs.p99.toFixed(0)} |`);
server.closeAllConnections();
server.close();
lm.dispose();
process.exit(0);
