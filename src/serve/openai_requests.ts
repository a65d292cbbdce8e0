/**
 * The bodies of OpenAI's /v1/completions and /v1/chat/completions requests that `fon serve`
 * takes, checked field by field: a field of the wrong type or out of range, a missing prompt or
 * message list and `n` other than 1 are RequestErrors that name the
 * field, which the server sends back as a 400 in OpenAI's error shape. Fields FON does not use
 * (user, presence_penalty, …) are accepted and ignored, as OpenAI-compatible servers do.
 * Log-probabilities: completions' `logprobs` (top tokens a step, 0 … 5), chat's `logprobs` and
 * `top_logprobs` (0 … 20), streamed or not.
 */
import { parseMessages, type ChatMessage } from '../io/hf/chat_template.ts';
import { FonError, showValue } from '../errors.ts';

/** A bad request: its HTTP status, OpenAI's error type, the field at fault and the message. */
export class RequestError extends FonError {
  constructor(message: string, readonly status = 400, readonly param: string | null = null, readonly code: string | null = null, readonly type = 'invalid_request_error') {
    super(message);
  }
}

/** What both endpoints share. */
export interface SamplingRequest {
  model: string;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  seed?: number;
  stop: string[];
  stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage and no choices. */
  streamUsage: boolean;
  /** Log-probabilities asked for: how many top tokens a step (0 for the chosen token's alone); undefined for none. */
  logprobs?: number;
}

export interface CompletionRequest extends SamplingRequest { prompt: string }
export interface ChatRequest extends SamplingRequest { messages: ChatMessage[] }

function fail(param: string, want: string, got: unknown): never {
  throw new RequestError(`'${param}': expected ${want}; got ${showValue(got)}`, 400, param);
}

function body(json: unknown): Record<string, unknown> {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new RequestError(`the request body must be a JSON object; got ${showValue(json)}`);
  return json as Record<string, unknown>;
}

function optNumber(b: Record<string, unknown>, key: string, check: (x: number) => boolean, want: string): number | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || !check(v)) fail(key, want, v);
  return v;
}

function sampling(b: Record<string, unknown>, maxKey: string): SamplingRequest {
  if (typeof b.model !== 'string' || b.model === '') fail('model', 'the served model\'s name (GET /v1/models)', b.model);
  const n = optNumber(b, 'n', (x) => x === 1, '1 (one choice a request)');
  void n;
  const stream = b.stream ?? false;
  if (typeof stream !== 'boolean') fail('stream', 'a boolean', stream);
  const stopRaw = b.stop ?? [];
  const stop = typeof stopRaw === 'string' ? [stopRaw] : stopRaw;
  if (!Array.isArray(stop) || stop.length > 4 || !stop.every((s) => typeof s === 'string' && s !== '')) fail('stop', 'a non-empty string or a list of at most 4', stopRaw);
  const so = b.stream_options ?? {};
  if (typeof so !== 'object' || Array.isArray(so)) fail('stream_options', 'an object', so);
  const include = (so as Record<string, unknown>).include_usage ?? false;
  if (typeof include !== 'boolean') fail('stream_options.include_usage', 'a boolean', include);
  const maxTokens = optNumber(b, maxKey, (x) => Number.isInteger(x) && x >= 1, 'an integer ≥ 1') ?? optNumber(b, 'max_tokens', (x) => Number.isInteger(x) && x >= 1, 'an integer ≥ 1');
  return {
    model: b.model as string,
    maxTokens,
    temperature: optNumber(b, 'temperature', (x) => x >= 0 && x <= 2, 'a number in [0, 2]'),
    topP: optNumber(b, 'top_p', (x) => x > 0 && x <= 1, 'a number in (0, 1]'),
    seed: optNumber(b, 'seed', (x) => Number.isInteger(x) && x >= 0, 'an integer ≥ 0'),
    stop: stop as string[],
    stream,
    streamUsage: stream && include,
  };
}

/** A /v1/completions body (logprobs: how many top tokens a step, 0 … 5). */
export function completionRequest(json: unknown): CompletionRequest {
  const b = body(json);
  const prompt = Array.isArray(b.prompt) && b.prompt.length === 1 ? b.prompt[0] : b.prompt;
  if (typeof prompt !== 'string') fail('prompt', 'a string (or a list of one)', b.prompt);
  const logprobs = optNumber(b, 'logprobs', (x) => Number.isInteger(x) && x >= 0 && x <= 5, 'an integer in [0, 5]');
  return { ...sampling(b, 'max_tokens'), logprobs, prompt };
}

/** A /v1/chat/completions body. */
export function chatRequest(json: unknown): ChatRequest {
  const b = body(json);
  let messages: ChatMessage[];
  try {
    // OpenAI's content may be a list of parts ({"type": "text", "text"}: joined) or null (an assistant turn of tool calls: empty).
    const plain = Array.isArray(b.messages) ? b.messages.map((m) => {
      if (!m || typeof m !== 'object') return m;
      const c = (m as Record<string, unknown>).content;
      if (c === null) return { ...m, content: '' };
      if (Array.isArray(c) && c.every((p) => p && typeof p === 'object' && (p as Record<string, unknown>).type === 'text' && typeof (p as Record<string, unknown>).text === 'string')) return { ...m, content: c.map((p) => (p as { text: string }).text).join('') };
      return m;
    }) : b.messages;
    messages = parseMessages(plain, "'messages'");
  } catch (e) {
    throw new RequestError((e as Error).message, 400, 'messages');
  }
  const want = b.logprobs ?? false;
  if (typeof want !== 'boolean') fail('logprobs', 'a boolean', want);
  const top = optNumber(b, 'top_logprobs', (x) => Number.isInteger(x) && x >= 0 && x <= 20, 'an integer in [0, 20]');
  if (top !== undefined && !want) throw new RequestError("'top_logprobs': needs 'logprobs': true", 400, 'top_logprobs');
  return { ...sampling(b, 'max_completion_tokens'), logprobs: want ? top ?? 0 : undefined, messages };
}
