/**
 * `fon serve` as a process: it prints where it listens (port 0: one the system picks), answers,
 * and exits 0 on SIGINT; a bad port, a busy one, a bad --max-batch or --page-rows is a clean error
 * with exit code 2.
 * Run: node --import tsx --test test/serve/serve_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { FON, fon } from '../cli/fon_process.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');

test('fon serve listens, answers /health and a completion, and stops on SIGINT with exit code 0', async () => {
  const child = spawn(process.execPath, [FON, 'serve', '--model', FIXTURE, '--port', '0', '--backend', 'cpu', '--name', 'tiny'], { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    let err = '';
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no address in 60 s: ${err}`)), 60_000);
      child.stderr.on('data', (d) => {
        err += d;
        const m = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
        if (m) { clearTimeout(t); resolve(m[1]); }
      });
    });
    assert.deepEqual(await (await fetch(`${url}/health`)).json(), { status: 'ok' });
    const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', prompt: 'The capital of', max_tokens: 4, temperature: 0 }) });
    assert.equal(r.status, 200);
    const body = await r.json() as { choices: { text: string }[]; usage: { completion_tokens: number } };
    assert.equal(typeof body.choices[0].text, 'string');
    assert.ok(body.usage.completion_tokens >= 1 && body.usage.completion_tokens <= 4);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGINT');
    assert.equal(await exited, 0);
  } finally {
    child.kill('SIGKILL');
  }
});

test('fon serve refuses a bad port, a busy one, a bad batch size and bad page rows with exit code 2', async () => {
  const bad = fon('serve', '--model', FIXTURE, '--port', '70000', '--backend', 'cpu');
  assert.equal(bad.code, 2);
  assert.match(bad.err, /serve: --port "70000": expected an integer ≥ 0 and ≤ 65535/);
  const batch = fon('serve', '--model', FIXTURE, '--max-batch', '0', '--backend', 'cpu');
  assert.equal(batch.code, 2);
  assert.match(batch.err, /serve: --max-batch "0": expected an integer ≥ 1/);
  const pages = fon('serve', '--model', FIXTURE, '--page-rows', '100', '--backend', 'cpu');
  assert.equal(pages.code, 2);
  assert.match(pages.err, /serve: --page-rows 100: expected a positive multiple of 128/);
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  try {
    const port = (busy.address() as { port: number }).port;
    const taken = fon('serve', '--model', FIXTURE, '--port', String(port), '--backend', 'cpu');
    assert.equal(taken.code, 2);
    assert.match(taken.err, new RegExp(`serve: cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
  } finally {
    busy.close();
  }
});
