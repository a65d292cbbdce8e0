/**
 * `fon generate`'s prompt sources (cli/prompt_input.ts): --prompt TEXT, --prompt - (standard input)
 * and --prompt-file FILE give the same continuation for the same text, a prompt with real newlines
 * included; both flags, neither, and an unreadable file are refused by name with exit code 2.
 * Run: node --import tsx --test test/cli/prompt_input.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readPrompt } from '../../src/cli/prompt_input.ts';
import { UsageError } from '../../src/cli/args.ts';
import { FileError } from '../../src/errors.ts';
import { FON, fon } from './fon_process.ts';

const MODEL = join(import.meta.dirname, '../fixtures/hf/qwen3');
const PROMPT = '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n';

async function* chunks(...parts: string[]): AsyncIterable<Buffer> {
  for (const p of parts) yield Buffer.from(p);
}

test('readPrompt: the text, standard input whole (across chunks, UTF-8 split between them), a file; refusals by name', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-prompt-'));
  try {
    assert.equal(await readPrompt('generate', 'plain', undefined, chunks('x')), 'plain');
    const euro = Buffer.from('a€b');
    async function* split(): AsyncIterable<Buffer> { yield euro.subarray(0, 2); yield euro.subarray(2); yield Buffer.from('\nline 2'); }
    assert.equal(await readPrompt('generate', '-', undefined, split()), 'a€b\nline 2');
    const file = join(dir, 'p.txt');
    writeFileSync(file, PROMPT);
    assert.equal(await readPrompt('generate', undefined, file), PROMPT);
    await assert.rejects(readPrompt('generate', 'x', file), (e) => e instanceof UsageError && e.message === 'generate: --prompt and --prompt-file exclude each other; give one');
    await assert.rejects(readPrompt('generate', undefined, undefined), (e) => e instanceof UsageError && e.message === 'generate: --prompt TEXT, --prompt - (standard input) or --prompt-file FILE is required (fon generate --help)');
    await assert.rejects(readPrompt('generate', undefined, join(dir, 'missing.txt')), (e) => e instanceof FileError && e.message.startsWith(`${join(dir, 'missing.txt')}: cannot read the prompt file: `) && /ENOENT/.test(e.message));
    await assert.rejects(readPrompt('generate', undefined, dir), (e) => e instanceof FileError && /cannot read the prompt file/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('fon generate: --prompt -, --prompt-file and --prompt give one continuation for one text; bad flags exit 2', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-prompt-'));
  try {
    const file = join(dir, 'p.txt');
    writeFileSync(file, PROMPT);
    const common = ['--model', MODEL, '--max-tokens', '6', '--temperature', '0', '--backend', 'cpu'];
    const byText = fon('generate', ...common, '--prompt', PROMPT);
    assert.equal(byText.code, 0, byText.err);
    const byFile = fon('generate', ...common, '--prompt-file', file);
    assert.equal(byFile.code, 0, byFile.err);
    const r = spawnSync(process.execPath, [FON, 'generate', ...common, '--prompt', '-'], { input: PROMPT, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(byFile.out, byText.out);
    assert.equal(r.stdout, byText.out);
    // The prompt's newlines are real: the same text with literal backslash-n tokenizes otherwise.
    const literal = fon('generate', ...common, '--prompt', PROMPT.replaceAll('\n', '\\n'), '--stats');
    const promptTokens = (s: string) => Number(/after a prompt of (\d+)/.exec(s)?.[1]);
    assert.notEqual(promptTokens(literal.err), promptTokens(byText.err));
    const both = fon('generate', ...common, '--prompt', 'x', '--prompt-file', file);
    assert.equal(both.code, 2);
    assert.match(both.err, /generate: --prompt and --prompt-file exclude each other; give one/);
    const missing = fon('generate', ...common, '--prompt-file', join(dir, 'nope.txt'));
    assert.equal(missing.code, 2);
    assert.match(missing.err, /nope\.txt: cannot read the prompt file: .*ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
