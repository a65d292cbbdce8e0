/**
 * `fon serve`: OpenAI's API over a model folder (serve/server.ts), until Ctrl-C.
 */
import { basename } from 'node:path';
import { load } from '../io/load.ts';
import { createFonServer, LISTEN_BACKLOG } from '../serve/server.ts';
import { numberFlag, parseFlags, requireFlag, UsageError } from './args.ts';
import { backendFromFlag, dtypeFromFlag, DTYPE_USAGE } from './backend_flag.ts';
import { checkPageRows } from '../infer/page_pool.ts';

export const SERVE_USAGE = `usage: fon serve --model DIR [--host 127.0.0.1] [--port 8080] [--name NAME] [--max-batch 16] [--max-queue 64]
                 [--max-queued-tokens 1048576] [--page-rows 512] [--backend auto] [--dtype auto]

Serves the model in DIR (a FON checkpoint or a Hugging Face folder) with OpenAI's API:
  GET  /health, GET /v1/models
  POST /v1/completions        {"model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "stream"}
  POST /v1/chat/completions   {"model", "messages", …} through the model's chat template
stream: true sends server-sent events. Requests decode together by continuous batching: up to
--max-batch of them in one step, joining and leaving between steps; up to --max-queue more wait,
holding at most --max-queued-tokens tokens (prompt + max_tokens each) together; past either limit a
request gets a 429. Every request's KV cache takes its pages (--page-rows positions each, a multiple
of 128; default 512, or the whole context when shorter) from one shared pool. The model's name is
--name (default: DIR's last part). Ctrl-C stops the server.

${DTYPE_USAGE}`;

export async function serveCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('serve', argv, { model: { type: 'string' }, host: { type: 'string' }, port: { type: 'string' }, name: { type: 'string' }, 'max-queue': { type: 'string' }, 'max-batch': { type: 'string' }, 'max-queued-tokens': { type: 'string' }, 'page-rows': { type: 'string' }, backend: { type: 'string' }, dtype: { type: 'string' } });
  if (v.help) { console.log(SERVE_USAGE); return 0; }
  const dir = requireFlag('serve', 'model', v.model);
  const port = numberFlag('serve', 'port', v.port, 8080, { integer: true, min: 0, max: 65535 });
  const maxQueue = numberFlag('serve', 'max-queue', v['max-queue'], 64, { integer: true, min: 1 });
  const maxBatch = numberFlag('serve', 'max-batch', v['max-batch'], 16, { integer: true, min: 1 });
  const maxQueuedTokens = numberFlag('serve', 'max-queued-tokens', v['max-queued-tokens'], 2 ** 20, { integer: true, min: 1 });
  const pageRows = v['page-rows'] === undefined ? undefined : checkPageRows(numberFlag('serve', 'page-rows', v['page-rows'], 0, { integer: true }), 'serve: --page-rows', (m) => new UsageError(m));
  const host = v.host ?? '127.0.0.1';
  const lm = await load(dir, { backend: await backendFromFlag('serve', v.backend), dtype: dtypeFromFlag('serve', v.dtype) });
  const name = v.name ?? basename(dir.replace(/\/+$/, ''));
  const server = createFonServer(lm, { name, maxQueue, maxBatch, maxQueuedTokens, ...(pageRows !== undefined ? { pageRows } : {}) });
  try {
    await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen({ port, host, backlog: LISTEN_BACKLOG }, resolve); });
  } catch (e) {
    lm.dispose();
    throw new UsageError(`serve: cannot listen on ${host}:${port}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const addr = server.address();
  const at = typeof addr === 'object' && addr ? `http://${host}:${addr.port}` : String(addr);
  console.error(`fon serve: '${name}' at ${at} (OpenAI API under ${at}/v1); Ctrl-C stops`);
  await new Promise<void>((resolve) => process.once('SIGINT', resolve).once('SIGTERM', resolve));
  server.closeAllConnections(); // their generations abort
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await server.idle(); // no step still running on the model
  lm.dispose();
  return 0;
}
