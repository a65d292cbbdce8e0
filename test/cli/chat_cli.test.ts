/**
 * Chat models from the command line: `fon generate --messages FILE` renders the conversation with
 * the folder's chat template (the same continuation as the rendered text given as a prompt), and
 * `fon chat` holds a conversation over piped stdin (each reply what generate --messages gives for
 * the conversation so far; /reset starts over); a model without a template, a malformed messages
 * file and clashing flags are refused by name with exit code 2.
 * Run: node --import tsx --test test/cli/chat_cli.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChatTemplate } from '../../src/io/hf/chat_template.ts';
import { FON, fon } from './fon_process.ts';
import { CHATML, chatModelFolder } from '../io/chat_fixtures.ts';

const FIXTURE = join(import.meta.dirname, '../fixtures/hf/qwen3');
const COMMON = ['--max-tokens', '6', '--temperature', '0', '--backend', 'cpu'];

test('fon generate --messages renders the chat template; fon chat replies turn by turn and /reset starts over', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-chat-'));
  try {
    const model = chatModelFolder(dir);
    const t = new ChatTemplate(CHATML, 'test');
    const reply = (messages: { role: string; content: string }[]) => {
      const file = join(dir, `m${Math.random()}.json`);
      writeFileSync(file, JSON.stringify(messages));
      const r = fon('generate', '--model', model, '--messages', file, ...COMMON);
      assert.equal(r.code, 0, r.err);
      return r.out.replace(/\n$/, '');
    };
    // --messages is the rendered conversation given as the prompt.
    const hello = [{ role: 'user', content: 'Hello' }];
    writeFileSync(join(dir, 'rendered.txt'), t.render(hello));
    const byFile = fon('generate', '--model', model, '--prompt-file', join(dir, 'rendered.txt'), ...COMMON);
    assert.equal(byFile.code, 0, byFile.err);
    const first = reply(hello);
    assert.equal(first, byFile.out.replace(/\n$/, ''));
    // fon chat: two turns, then /reset and the first turn again.
    const r = spawnSync(process.execPath, [FON, 'chat', '--model', model, ...COMMON], { input: 'Hello\nHow are you?\n/reset\nHello\n', encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    const second = reply([...hello, { role: 'assistant', content: first }, { role: 'user', content: 'How are you?' }]);
    assert.equal(r.stdout, `${first}\n${second}\n${first}\n`);
    assert.match(r.stderr, /\(a new conversation\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a model without a chat template, a malformed messages file and clashing flags are refused with exit code 2', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-chat-'));
  try {
    const good = join(dir, 'good.json');
    writeFileSync(good, JSON.stringify([{ role: 'user', content: 'Hi' }]));
    const noTemplate = fon('generate', '--model', FIXTURE, '--messages', good, ...COMMON);
    assert.equal(noTemplate.code, 2);
    assert.match(noTemplate.err, /^fon: generate: the model in .*qwen3 has no chat template \(chat_template\.jinja, or chat_template in tokenizer_config\.json\); give a --prompt instead/m);
    const chatNoTemplate = spawnSync(process.execPath, [FON, 'chat', '--model', FIXTURE, ...COMMON], { input: 'Hi\n', encoding: 'utf8', timeout: 120_000 });
    assert.equal(chatNoTemplate.status, 2);
    assert.match(chatNoTemplate.stderr, /chat: the model in .* has no chat template/);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ role: 'user', content: 5 }]));
    const malformed = fon('generate', '--model', FIXTURE, '--messages', bad, ...COMMON);
    assert.equal(malformed.code, 2);
    assert.match(malformed.err, /bad\.json: message 0: "content" must be a string; got 5/);
    writeFileSync(bad, '[{"role": "user",');
    const broken = fon('generate', '--model', FIXTURE, '--messages', bad, ...COMMON);
    assert.equal(broken.code, 2);
    assert.match(broken.err, /bad\.json: /);
    const both = fon('generate', '--model', FIXTURE, '--messages', good, '--prompt', 'x', ...COMMON);
    assert.equal(both.code, 2);
    assert.match(both.err, /generate: --messages excludes --prompt and --prompt-file; give one/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
