/**
 * `fon serve`'s server (serve/server.ts) through OpenAI's official npm client on loopback: the
 * model list; completions and chat completions equal to the library's greedy generate and chat;
 * streamed ones whose pieces join to the same text, ending with a finish reason; an aborted stream
 * that leaves the server serving (its pages back in the pool); a full queue answered 429 (one
 * request decoding at a time, one waiting); FON's own failures in a prefill (a 500) and in a
 * batched step (an error event mid-stream); and every malformed request a 4xx in OpenAI's error
 * shape (wrong model, out-of-range fields, logprobs, a prompt past the context, bad JSON, unknown
 * paths and methods). The batcher itself: test/serve/batcher.test.ts.
 * Run: node --import tsx --test test/serve/openai_server.test.ts
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { load } from '../../src/io/load.ts';
import type { LanguageModel } from '../../src/infer/language_model.ts';
import { createFonServer, type FonServer } from '../../src/serve/server.ts';
import { DeviceError } from '../../src/errors.ts';
import { chatModelFolder } from '../io/chat_fixtures.ts';

const NAME = 'qwen3-chat';
let dir = '', lm: LanguageModel, server: FonServer, base = '', client: OpenAI;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fon-serve-'));
  const model = chatModelFolder(dir, NAME);
  lm = await load(model, { backend: 'cpu' });
  server = createFonServer(lm, { name: NAME, maxQueue: 1 });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  lm.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const greedy = { max_tokens: 6, temperature: 0 };
const messages = [{ role: 'user' as const, content: 'Hello' }];

test('models, completions and chat completions equal the library\'s greedy generate and chat', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [NAME]);
  const c = await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy });
  const want = await lm.generate('The capital of', { maxTokens: 6, temperature: 0 });
  assert.equal(c.choices[0].text, want.text);
  assert.equal(c.choices[0].finish_reason, want.stopReason === 'maxTokens' ? 'length' : 'stop');
  assert.deepEqual(c.usage, { prompt_tokens: want.promptTokens, completion_tokens: want.ids.length, total_tokens: want.promptTokens + want.ids.length });
  const ch = await client.chat.completions.create({ model: NAME, messages, ...greedy });
  const wantChat = await lm.chat(messages, { maxTokens: 6, temperature: 0 });
  assert.equal(ch.choices[0].message.role, 'assistant');
  assert.equal(ch.choices[0].message.content, wantChat.text);
  assert.equal(ch.object, 'chat.completion');
});

test('logprobs while streaming: each chunk carries its tokens\', and together they are the unstreamed response\'s (completions\' text offsets run on across chunks)', async () => {
  const c = await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy, logprobs: 2 });
  const want = c.choices[0].logprobs!;
  const got = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as Record<string, number>[], text_offset: [] as number[] };
  let text = '', carrying = 0;
  for await (const k of await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy, logprobs: 2, stream: true })) {
    const lp = k.choices[0]?.logprobs;
    if (lp) carrying++;
    if (lp) for (const key of Object.keys(got) as (keyof typeof got)[]) (got[key] as unknown[]).push(...(lp[key] as unknown[]));
    text += k.choices[0]?.text ?? '';
  }
  assert.equal(text, c.choices[0].text);
  assert.deepEqual(got, want);
  assert.ok(carrying > 1, `${carrying} chunks carried logprobs: they go out with the text, not all at the end`);
  const messages = [{ role: 'user' as const, content: 'Hi' }];
  const ch = await client.chat.completions.create({ model: NAME, messages, ...greedy, logprobs: true, top_logprobs: 2 });
  const content: unknown[] = [];
  for await (const k of await client.chat.completions.create({ model: NAME, messages, ...greedy, logprobs: true, top_logprobs: 2, stream: true })) content.push(...(k.choices[0]?.logprobs?.content ?? []));
  assert.deepEqual(content, ch.choices[0].logprobs!.content);
  assert.ok(content.length > 0);
});

test('logprobs: completions\' and chat\'s shapes, the library\'s values, greedy\'s token the best of its step', async () => {
  const want = await lm.generate('The capital of', { maxTokens: 6, temperature: 0, logprobs: 2 });
  const c = await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy, logprobs: 2 });
  const lp = c.choices[0].logprobs!;
  assert.deepEqual(lp.token_logprobs, want.logprobs!.map((l) => l.logprob));
  assert.equal(lp.tokens!.join(''), c.choices[0].text);
  // (The fixture's generation_config has a repetition penalty: greedy takes the best of the penalised
  // logits, and logprobs are of the raw ones, so the chosen token need not be the raw best.)
  lp.top_logprobs!.forEach((top, i) => assert.ok(Math.max(...Object.values(top)) >= lp.token_logprobs![i]));
  assert.deepEqual(lp.text_offset!.slice(0, 2), [0, lp.tokens![0].length]);
  const ch = await client.chat.completions.create({ model: NAME, messages, ...greedy, logprobs: true, top_logprobs: 3 });
  const content = ch.choices[0].logprobs!.content!;
  const wantChat = await lm.chat(messages, { maxTokens: 6, temperature: 0, logprobs: 3 });
  assert.deepEqual(content.map((t) => t.logprob), wantChat.logprobs!.map((l) => l.logprob));
  assert.equal(content.map((t) => t.token).join(''), ch.choices[0].message.content);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob && t.top_logprobs.every((x, j) => j === 0 || x.logprob <= t.top_logprobs[j - 1].logprob));
    assert.deepEqual(t.bytes, Array.from(new TextEncoder().encode(t.token)));
  }
});

test('streamed completions and chat completions join to the same text and end with a finish reason', async () => {
  const full = await client.chat.completions.create({ model: NAME, messages, ...greedy });
  const stream = await client.chat.completions.create({ model: NAME, messages, ...greedy, stream: true });
  let text = '', finish: string | null = null, roles = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].delta.role) roles++;
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, full.choices[0].message.content);
  assert.equal(roles, 1);
  assert.equal(finish, full.choices[0].finish_reason);
  const fullC = await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy });
  let textC = '';
  for await (const chunk of await client.completions.create({ model: NAME, prompt: 'The capital of', ...greedy, stream: true })) textC += chunk.choices[0].text;
  assert.equal(textC, fullC.choices[0].text);
});

test('an aborted stream ends its generation on the server, its pages back in the pool; a full queue is answered 429; the server keeps serving', async () => {
  // One request decodes at a time and one may wait; each step 10 ms apart, so that this tiny
  // model's generation is still running when the other requests come.
  const one = createFonServer(lm, { name: NAME, maxBatch: 1, maxQueue: 1, beforeStep: () => new Promise((r) => setTimeout(r, 10)) });
  await new Promise<void>((r) => one.listen(0, '127.0.0.1', r));
  const c = new OpenAI({ baseURL: `http://127.0.0.1:${(one.address() as AddressInfo).port}/v1`, apiKey: 'unused', maxRetries: 0 });
  try {
    const long = await c.completions.create({ model: NAME, prompt: 'Once upon a time', max_tokens: 60, temperature: 0, stream: true });
    const it = long[Symbol.asyncIterator]();
    await it.next(); // the first piece: the generation is running
    assert.equal(one.batcher.activeCount, 1);
    // One request may wait (maxQueue 1); a second is refused.
    const waiting = c.completions.create({ model: NAME, prompt: 'A', ...greedy });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(one.batcher.waitingCount, 1);
    await assert.rejects(c.completions.create({ model: NAME, prompt: 'B', ...greedy }), (e) => e instanceof OpenAI.APIError && e.status === 429 && e.type === 'rate_limit_error');
    long.controller.abort();
    try { while (!(await it.next()).done); } catch (e) { assert.ok(e instanceof OpenAI.APIUserAbortError, String(e)); }
    assert.equal((await waiting).choices.length, 1); // runs once the aborted one has ended
    assert.equal(one.batcher.stats.aborted, 1);
    assert.ok(one.batcher.stats.rows < 60 + 6, `${one.batcher.stats.rows} rows: the aborted generation stopped early`);
    await one.idle();
    assert.equal(one.batcher.pool.pagesInUse, 0, 'every page back in the pool');
    const again = await c.completions.create({ model: NAME, prompt: 'The capital of', ...greedy });
    assert.equal(again.choices[0].text, (await lm.generate('The capital of', { maxTokens: 6, temperature: 0 })).text);
  } finally {
    one.closeAllConnections();
    await new Promise<void>((r) => one.close(() => r()));
  }
});

test('content given as parts; FON\'s own failures are 500s, and an error mid-stream reaches the client', async () => {
  const parts = await client.chat.completions.create({ model: NAME, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hel' }, { type: 'text', text: 'lo' }] }], ...greedy });
  assert.equal(parts.choices[0].message.content, (await client.chat.completions.create({ model: NAME, messages, ...greedy })).choices[0].message.content);
  const m = lm.model;
  try {
    // A prompt's prefill fails: a 500 before any header.
    m.forward = () => { throw new DeviceError('the device was lost'); };
    await assert.rejects(client.completions.create({ model: NAME, prompt: 'x', ...greedy }), (e) => e instanceof OpenAI.APIError && e.status === 500 && e.type === 'server_error' && /internal error: the device was lost/.test(e.message));
    delete (m as Partial<typeof m>).forward;
    // The batched step fails after the first piece went out: an error event.
    m.forwardRows = () => { throw new DeviceError('lost mid-stream'); };
    await assert.rejects((async () => { for await (const _ of await client.chat.completions.create({ model: NAME, messages, ...greedy, stream: true })) { /* the pieces */ } })(), /lost mid-stream/);
  } finally {
    delete (m as Partial<typeof m>).forward;
    delete (m as Partial<typeof m>).forwardRows;
  }
  assert.equal((await client.completions.create({ model: NAME, prompt: 'x', ...greedy })).choices.length, 1);
  assert.equal(server.batcher.pool.pagesInUse, 0, 'failed requests gave their pages back');
});

test('malformed requests get 4xx errors in OpenAI\'s shape, naming the field', async () => {
  const bad = async (p: Promise<unknown>, status: number, param: string | null, message: RegExp) => {
    await assert.rejects(p, (e) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.equal(e.status, status);
      assert.equal(e.param ?? null, param);
      assert.match(e.message, message);
      return true;
    });
  };
  await bad(client.completions.create({ model: 'gpt-9', prompt: 'x', ...greedy }), 404, 'model', /the model 'gpt-9' does not exist here; this server serves 'qwen3-chat'/);
  await bad(client.completions.create({ model: NAME, prompt: 'x', max_tokens: 6, temperature: 5 }), 400, 'temperature', /'temperature': expected a number in \[0, 2\]; got 5/);
  await bad(client.completions.create({ model: NAME, prompt: 'x', max_tokens: 0 }), 400, 'max_tokens', /'max_tokens': expected an integer ≥ 1; got 0/);
  await bad(client.completions.create({ model: NAME, prompt: 'x', ...greedy, logprobs: 9 }), 400, 'logprobs', /'logprobs': expected an integer in \[0, 5\]; got 9/);
  await bad(client.chat.completions.create({ model: NAME, messages, ...greedy, top_logprobs: 2 }), 400, 'top_logprobs', /'top_logprobs': needs 'logprobs': true/);
  await bad(client.completions.create({ model: NAME, prompt: 'x', ...greedy, n: 3 }), 400, 'n', /'n': expected 1/);
  await bad(client.chat.completions.create({ model: NAME, messages: [{ role: 'user', content: 7 as unknown as string }], ...greedy }), 400, 'messages', /message 0: "content" must be a string; got 7/);
  await bad(client.completions.create({ model: NAME, prompt: 'word '.repeat(2000), ...greedy }), 400, null, /leaves no room in the context/);
  await bad(client.completions.create({ model: NAME, prompt: 'word '.repeat(2000), ...greedy, stream: true }), 400, null, /leaves no room in the context/);
  const raw = async (method: string, path: string, body?: string) => {
    const r = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body });
    return { status: r.status, json: await r.json() as { error: { message: string; type: string; param: string | null; code: string | null } } };
  };
  const notJson = await raw('POST', '/v1/completions', '{"model": ');
  assert.equal(notJson.status, 400);
  assert.match(notJson.json.error.message, /^the request body is not JSON: /);
  assert.equal(notJson.json.error.type, 'invalid_request_error');
  assert.equal((await raw('POST', '/v1/completions', '[1, 2]')).json.error.message, 'the request body must be a JSON object; got [1,2]');
  assert.equal((await raw('GET', '/v1/nothing')).status, 404);
  assert.equal((await raw('GET', '/v1/completions')).status, 405);
  assert.equal((await fetch(`${base}/v1/completions`)).headers.get('allow'), 'POST');
  assert.deepEqual((await raw('GET', '/health')).json, { status: 'ok' });
  // Still serving after all of that.
  assert.equal((await client.completions.create({ model: NAME, prompt: 'x', ...greedy })).choices.length, 1);
});
