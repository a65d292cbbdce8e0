/**
 * fon.load and LanguageModel (io/load.ts, infer/language_model.ts): a folder in one call, whose
 * generate, chat and eval give what `fon generate`, `fon generate --messages` and `fon eval` give
 * for the same folder (its generation defaults, prefix and eos ids and chat template applied
 * without restating them), and whose stream and chatStream yield the same text; bad backends and
 * chat without a template are refused by name.
 * Run: node --import tsx --test test/infer/language_model.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from '../../src/io/load.ts';
import { ArgumentError } from '../../src/errors.ts';
import { fon } from '../cli/fon_process.ts';
import { chatModelFolder } from '../io/chat_fixtures.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');
const TEXT = join(import.meta.dirname, '../fixtures/hf/eval.txt');

test('load: generate, chat and eval agree with the CLI on the same folder; stream and chatStream yield the same text', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-load-'));
  try {
    const model = chatModelFolder(dir);
    const m = await load(model, { backend: 'cpu' });
    try {
      const g = await m.generate('The capital of', { maxTokens: 6, temperature: 0 });
      const cli = fon('generate', '--model', model, '--prompt', 'The capital of', '--max-tokens', '6', '--temperature', '0', '--backend', 'cpu');
      assert.equal(cli.code, 0, cli.err);
      assert.equal(g.text, cli.out.replace(/\n$/, ''));
      const pieces: string[] = [];
      for await (const p of m.stream('The capital of', { maxTokens: 6, temperature: 0 })) pieces.push(p);
      assert.equal(pieces.join(''), g.text);
      const messages = [{ role: 'user', content: 'Hello' }];
      writeFileSync(join(dir, 'm.json'), JSON.stringify(messages));
      const c = await m.chat(messages, { maxTokens: 6, temperature: 0 });
      const cliChat = fon('generate', '--model', model, '--messages', join(dir, 'm.json'), '--max-tokens', '6', '--temperature', '0', '--backend', 'cpu');
      assert.equal(c.text, cliChat.out.replace(/\n$/, ''));
      const chatPieces: string[] = [];
      for await (const p of m.chatStream(messages, { maxTokens: 6, temperature: 0 })) chatPieces.push(p);
      assert.equal(chatPieces.join(''), c.text);
      const e = await m.eval(readFileSync(TEXT, 'utf8'), { context: 64 });
      const cliEval = fon('eval', '--model', model, '--file', TEXT, '--context', '64', '--backend', 'cpu', '--json');
      assert.equal(cliEval.code, 0, cliEval.err);
      const want = JSON.parse(cliEval.out) as { perplexity: number; bitsPerByte: number; tokens: number };
      assert.equal(e.tokens, want.tokens);
      assert.ok(Math.abs(e.perplexity - want.perplexity) <= 1e-9 * want.perplexity, `${e.perplexity} against ${want.perplexity}`);
    } finally {
      m.dispose();
    }
    const plain = await load(FIXTURE, { backend: 'cpu' });
    try {
      await assert.rejects(plain.chat([{ role: 'user', content: 'Hi' }]), (err) => err instanceof ArgumentError && /chat: this model has no chat template/.test(err.message));
    } finally {
      plain.dispose();
    }
    // @ts-expect-error: a backend name load does not know
    await assert.rejects(load(FIXTURE, { backend: 'tpu' }), (err) => err instanceof ArgumentError && err.message === 'load: backend "tpu": expected one of auto, cpu, wasm, webgpu, or a Backend');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
