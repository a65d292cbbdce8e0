/**
 * `fon serve`'s HTTP server (node:http): OpenAI's API over one LanguageModel —
 *   GET  /health                 {"status": "ok"}
 *   GET  /v1/models              the served model
 *   POST /v1/completions         a text completion (stream: server-sent events)
 *   POST /v1/chat/completions    a chat completion through the model's chat template (stream likewise)
 * Requests generate together, by continuous batching (serve/batcher.ts): up to `maxBatch` decode in
 * one ragged step, joining and leaving between steps; up to `maxQueue` more wait, holding at most
 * `maxQueuedTokens` tokens; past either a 429. A client that disconnects, waiting or streaming,
 * ends its generation (its KV pages go back to the pool before the next step). Every malformed
 * request (bad JSON, a field of the wrong type, a prompt past the context, an unknown model name or
 * path) gets a 4xx in OpenAI's error shape, {"error": {"message", "type", "param", "code"}}, and
 * the server keeps serving; a failure of FON's own is a 500 (logged), or, once a stream has begun,
 * an error event before its end. Logprobs come back in each endpoint's own shape, streamed or not.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ArgumentError, ConfigError } from '../errors.ts';
import type { LanguageModel } from '../infer/language_model.ts';
import type { GenerateOptions, GenerateResult } from '../infer/generate.ts';
import type { TokenLogprob } from '../infer/logprobs.ts';
import { Batcher, type BatcherOptions } from './batcher.ts';
import { chatRequest, completionRequest, RequestError, type SamplingRequest } from './openai_requests.ts';

/** The server's options; the batcher's (maxBatch, maxQueue, maxQueuedTokens, pageRows) among them. */
export interface ServeOptions extends BatcherOptions {
  /** The model's name in /v1/models and in requests' `model`. */
  name: string;
  /** Bytes a request body may have (default 4 MiB); more get a 413. */
  maxBodyBytes?: number;
}

const json = (res: ServerResponse, status: number, value: unknown) => {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

function sendError(res: ServerResponse, e: RequestError): void {
  const allow = (e as RequestError & { allow?: string }).allow;
  if (allow) res.setHeader('allow', allow);
  json(res, e.status, { error: { message: e.message, type: e.type, param: e.param, code: e.code } });
}

async function readBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > limit) throw new RequestError(`the request body passes ${limit} bytes`, 413);
    parts.push(chunk);
  }
  const text = Buffer.concat(parts).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new RequestError(`the request body is not JSON: ${(e as Error).message}`);
  }
}

/** OpenAI's finish_reason for a stop reason. */
const finishReason = (r: GenerateResult['stopReason']) => (r === 'maxTokens' || r === 'context' ? 'length' : 'stop');

/**
 * The accept backlog `fon serve` listens with (the kernel caps it at net.core.somaxconn): Node's
 * default of 511 let connections beyond it fail under a burst of 1,000 clients while the event loop
 * was busy decoding (43 of 1,000 "Connection error" in test/serve/load.test.ts on 2 busy cores).
 */
export const LISTEN_BACKLOG = 4096;

/**
 * The server, its batcher (its counts and stats), and `idle()`: resolves once no generation is
 * running or queued (await it before freeing the model). The pool's pages are freed once the
 * server has closed and is idle.
 */
export type FonServer = Server & { idle(): Promise<void>; batcher: Batcher };

export function createFonServer(lm: LanguageModel, o: ServeOptions): FonServer {
  const maxBody = o.maxBodyBytes ?? 4 << 20;
  const batcher = new Batcher(lm, o);
  let counter = 0;

  function options(r: SamplingRequest, signal: AbortSignal, maxDefault: number | undefined): GenerateOptions {
    return {
      ...(r.maxTokens !== undefined ? { maxTokens: r.maxTokens } : maxDefault !== undefined ? { maxTokens: maxDefault } : {}),
      ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
      ...(r.topP !== undefined ? { topP: r.topP } : {}),
      ...(r.logprobs !== undefined ? { logprobs: r.logprobs, draftRevise: false } : {}),
      seed: r.seed ?? Math.floor(Math.random() * 2 ** 31),
      stop: r.stop,
      signal,
    };
  }

  async function complete(req: IncomingMessage, res: ServerResponse, chat: boolean): Promise<void> {
    const raw = await readBody(req, maxBody);
    const r = chat ? chatRequest(raw) : completionRequest(raw);
    if (r.model !== o.name) throw new RequestError(`the model '${r.model}' does not exist here; this server serves '${o.name}'`, 404, 'model', 'model_not_found');
    let prompt: string;
    try {
      prompt = 'messages' in r ? lm.chatPrompt(r.messages) : r.prompt;
    } catch (e) {
      throw new RequestError((e as Error).message, 400, 'messages');
    }
    const abort = new AbortController();
    res.on('close', () => { if (!res.writableFinished) abort.abort(); });
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${++counter}`, created = Math.floor(Date.now() / 1000);
    // OpenAI's completions default to 16 tokens; chat to the model's own default.
    const opts = options(r, abort.signal, chat ? undefined : 16);
    if (!r.stream) {
      const g = await generateOrBadRequest(() => batcher.submit(prompt, opts));
      if (abort.signal.aborted) return;
      const usage = { prompt_tokens: g.promptTokens, completion_tokens: g.ids.length, total_tokens: g.promptTokens + g.ids.length };
      json(res, 200, chat
        ? { id, object: 'chat.completion', created, model: o.name, choices: [{ index: 0, message: { role: 'assistant', content: g.text }, finish_reason: finishReason(g.stopReason), logprobs: g.logprobs ? chatLogprobs(lm, g.logprobs) : null }], usage }
        : { id, object: 'text_completion', created, model: o.name, choices: [{ index: 0, text: g.text, finish_reason: finishReason(g.stopReason), logprobs: g.logprobs ? completionLogprobs(lm, g.logprobs) : null }], usage });
      return;
    }
    const send = (v: unknown) => { if (!res.destroyed) res.write(`data: ${JSON.stringify(v)}\n\n`); };
    // With logprobs, each chunk carries its tokens' (completions' text offsets run on across chunks).
    let sentText = 0, sentLps = 0;
    const chunk = (piece: string, finish: string | null, lps?: readonly TokenLogprob[]) => {
      const lp = lps?.length ? (chat ? chatLogprobs(lm, lps) : completionLogprobs(lm, lps, sentText)) : null;
      sentText += piece.length;
      sentLps += lps?.length ?? 0;
      return chat
        ? { id, object: 'chat.completion.chunk', created, model: o.name, choices: [{ index: 0, delta: finish ? {} : { content: piece }, finish_reason: finish, logprobs: lp }] }
        : { id, object: 'text_completion', created, model: o.name, choices: [{ index: 0, text: piece, finish_reason: finish, logprobs: lp }] };
    };
    // Headers go with the first piece (or the end): a failure before it, such as a prompt past the context, is still a 4xx or 500.
    const open = () => {
      if (res.headersSent) return;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      // Chat streams open with the assistant's role, as OpenAI's do (even a reply with no text has one).
      if (chat) send({ id, object: 'chat.completion.chunk', created, model: o.name, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }] });
    };
    let g: GenerateResult;
    try {
      // behind: the socket's buffer is past its high-water mark (a client that reads slowly); its request
      // sits out steps until the buffer drains, so the server holds a bounded amount of its text.
      g = await generateOrBadRequest(() => batcher.submit(prompt, { ...opts, onText: (piece, lps) => { open(); send(chunk(piece, null, lps)); }, behind: () => res.writableNeedDrain }));
    } catch (e) {
      if (!res.headersSent) throw e;
      // Headers are gone: the error goes out as an event (OpenAI's clients raise it), then the end.
      if (!(e instanceof RequestError)) console.error(`fon serve: ${id}: ${(e as Error)?.stack ?? e}`);
      send({ error: { message: (e as Error)?.message ?? String(e), type: 'server_error', param: null, code: null } });
      res.end();
      return;
    }
    if (!abort.signal.aborted) {
      open();
      // Tokens whose text never went out (held by a stop string, or ending in a partial character) bring their logprobs here.
      send(chunk('', finishReason(g.stopReason), g.logprobs?.slice(sentLps)));
      if (r.streamUsage) send({ id, object: chat ? 'chat.completion.chunk' : 'text_completion', created, model: o.name, choices: [], usage: { prompt_tokens: g.promptTokens, completion_tokens: g.ids.length, total_tokens: g.promptTokens + g.ids.length } });
      if (!res.destroyed) res.write('data: [DONE]\n\n');
    }
    res.end();
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const route = async () => {
      if (path === '/health') { if (req.method !== 'GET') throw notAllowed(req, 'GET'); json(res, 200, { status: 'ok' }); return; }
      if (path === '/v1/models') { if (req.method !== 'GET') throw notAllowed(req, 'GET'); json(res, 200, { object: 'list', data: [{ id: o.name, object: 'model', created: 0, owned_by: 'fon' }] }); return; }
      if (path === '/v1/completions' || path === '/v1/chat/completions') {
        if (req.method !== 'POST') throw notAllowed(req, 'POST');
        await complete(req, res, path === '/v1/chat/completions');
        return;
      }
      throw new RequestError(`no route ${req.method} ${path}: this server has GET /health, GET /v1/models, POST /v1/completions and POST /v1/chat/completions`, 404, null, 'not_found');
    };
    route().catch((e) => {
      if (!(e instanceof RequestError)) console.error(`fon serve: ${req.method} ${path}: ${(e as Error)?.stack ?? e}`);
      if (res.headersSent) { res.end(); return; }
      if (e instanceof RequestError) sendError(res, e);
      else sendError(res, new RequestError(`internal error: ${(e as Error)?.message ?? String(e)}`, 500, null, null, 'server_error'));
    });
  });
  server.on('close', () => { void batcher.idle().then(() => batcher.dispose()); });
  return Object.assign(server, { idle: () => batcher.idle(), batcher });
}

/**
 * A token's text as a piece of generated text (a continuation: SentencePiece's leading space kept;
 * a piece of a character decodes to U+FFFD) and its UTF-8 bytes.
 */
function tokenText(lm: LanguageModel, id: number): { text: string; bytes: number[] } {
  const d = lm.tokenizer.streamDecoder({ continuation: true });
  const text = d.push(id) + d.flush();
  return { text, bytes: Array.from(new TextEncoder().encode(text)) };
}

/** Chat's logprobs: {content: [{token, logprob, bytes, top_logprobs}]}. */
function chatLogprobs(lm: LanguageModel, lps: readonly TokenLogprob[]) {
  const entry = (token: number, logprob: number) => { const t = tokenText(lm, token); return { token: t.text, logprob, bytes: t.bytes }; };
  return { content: lps.map((l) => ({ ...entry(l.token, l.logprob), top_logprobs: l.top.map((t) => entry(t.token, t.logprob)) })) };
}

/** Completions' logprobs: {tokens, token_logprobs, top_logprobs (text → logprob), text_offset (from `start`)}. */
function completionLogprobs(lm: LanguageModel, lps: readonly TokenLogprob[], start = 0) {
  const tokens = lps.map((l) => tokenText(lm, l.token).text);
  const offsets: number[] = [];
  let at = start;
  for (const t of tokens) { offsets.push(at); at += t.length; }
  return {
    tokens, token_logprobs: lps.map((l) => l.logprob),
    // Text → logprob: where two tokens decode alike (pieces of one character), the better one stays.
    top_logprobs: lps.map((l) => {
      const o: Record<string, number> = {};
      for (const t of l.top) { const k = tokenText(lm, t.token).text; if (!(k in o)) o[k] = t.logprob; }
      return o;
    }),
    text_offset: offsets,
  };
}

function notAllowed(req: IncomingMessage, allow: string): RequestError {
  return Object.assign(new RequestError(`method ${req.method} is not allowed here; this path takes ${allow}`, 405, null, 'method_not_allowed'), { allow });
}

/** Runs a generation; the request's faults (a prompt past the context, a bad option: ArgumentError, ConfigError) become 400s, anything else stays a 500. */
async function generateOrBadRequest<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ArgumentError || e instanceof ConfigError) throw new RequestError(e.message, 400);
    throw e;
  }
}
