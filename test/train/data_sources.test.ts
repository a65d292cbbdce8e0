/** User corpora: folders, text files with <|endoftext|> separators, JSONL; streamed; bad input named. */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FonError } from '../../src/errors.ts';
import { DataError } from '../../src/train/data/data_error.ts';
import { readDocuments } from '../../src/train/data/sources.ts';

const made: string[] = [];
after(() => made.forEach((root) => fs.rmSync(root, { recursive: true, force: true })));

function tempFolder(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fon-sources-'));
  made.push(root);
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  return root;
}

async function collect(p: string, options?: Parameters<typeof readDocuments>[1]): Promise<string[]> {
  const out: string[] = [];
  for await (const d of readDocuments(p, options)) out.push(d);
  return out;
}

async function rejectsWith(p: string, pattern: RegExp): Promise<void> {
  await assert.rejects(collect(p), (e: unknown) => {
    assert.ok(e instanceof DataError && e instanceof FonError, `expected a DataError, got ${String(e)}`);
    assert.match(e.message, pattern);
    return true;
  });
}

test('a folder: files depth-first in name order, .jsonl by line, text split at <|endoftext|> lines', async () => {
  const root = tempFolder({
    'b.txt': 'Second file.\r\nStill the second.\r\n',
    'a/z.jsonl': '{"text": "from jsonl 1", "id": 7}\n\n{"text": "from jsonl 2"}\n{"text": ""}\n',
    'a/m.md': '\n\n# Heading\n  indented line\n<|endoftext|>\nNext story, é and 字.\n<|endoftext|>\n\n',
    'c/.hidden': 'never read',
    'empty.txt': '',
  });
  assert.deepEqual(await collect(root), [
    '# Heading\n  indented line',
    'Next story, é and 字.',
    'from jsonl 1',
    'from jsonl 2',
    'Second file.\nStill the second.',
  ]);
  // one file alone
  assert.deepEqual(await collect(path.join(root, 'b.txt')), ['Second file.\nStill the second.']);
});

test('streaming: tiny read pieces cut multi-byte characters and lines; the documents come out the same', async () => {
  const story = (i: number) => `Story ${i}: naïve café — ${'字'.repeat(i % 7)}\nline two of ${i}`;
  const text = Array.from({ length: 50 }, (_, i) => story(i)).join('\n<|endoftext|>\n');
  const root = tempFolder({ 's.txt': text });
  const want = Array.from({ length: 50 }, (_, i) => story(i));
  assert.deepEqual(await collect(path.join(root, 's.txt'), { chunkBytes: 3 }), want);
  assert.deepEqual(await collect(path.join(root, 's.txt'), { chunkBytes: 1 << 20 }), want);
});

test('a document longer than maxDocumentChars is handed on in pieces cut at line ends, losing nothing', async () => {
  const lines = Array.from({ length: 100 }, (_, i) => `line ${i} ${'x'.repeat(i % 13)}`);
  const root = tempFolder({ 'big.txt': lines.join('\n') + '\n' });
  const pieces = await collect(path.join(root, 'big.txt'), { maxDocumentChars: 200, chunkBytes: 64 });
  assert.ok(pieces.length > 5, `${pieces.length} pieces`);
  assert.ok(pieces.every((p) => p.length < 200 + 30), 'no piece much over the limit');
  assert.deepEqual(pieces.flatMap((p) => p.split('\n')), lines, 'every line once, in order, never cut');
  // a single line longer than the limit is cut too
  const long = 'y'.repeat(1000);
  const one = tempFolder({ 'one.txt': long });
  const cut = await collect(path.join(one, 'one.txt'), { maxDocumentChars: 300, chunkBytes: 100 });
  assert.ok(cut.length >= 3);
  assert.equal(cut.join(''), long);
});

test('bad JSONL: the error names the file and line', async () => {
  const root = tempFolder({ 'bad.jsonl': '{"text": "ok"}\n{"text": "ok"}\n{"text": broken}\n' });
  await rejectsWith(path.join(root, 'bad.jsonl'), /bad\.jsonl:3: not valid JSON .*expected one JSON object with a string "text" field per line/);
  const noText = tempFolder({ 'x.jsonl': '{"text": "ok"}\n{"body": "no text here"}\n' });
  await rejectsWith(path.join(noText, 'x.jsonl'), /x\.jsonl:2: expected a string "text" field, got no "text" field/);
  const wrongType = tempFolder({ 'y.jsonl': '{"text": 12}\n' });
  await rejectsWith(path.join(wrongType, 'y.jsonl'), /y\.jsonl:1: expected a string "text" field, got number/);
  const notObject = tempFolder({ 'w.jsonl': '["text"]\n' });
  await rejectsWith(path.join(notObject, 'w.jsonl'), /w\.jsonl:1: expected a JSON object with a string "text" field, got an array/);
});

test('missing, empty folder, empty file, whitespace only: a DataError that says the corpus is empty', async () => {
  const root = tempFolder({});
  await rejectsWith(path.join(root, 'nope'), /corpus .*nope does not exist; expected a text file, a \.jsonl file/);
  await rejectsWith(root, /corpus .* is empty \(a folder with no files\); expected a text file/);
  const empties = tempFolder({ 'e.txt': '', 'f/w.txt': ' \n\n\t\n<|endoftext|>\n', 'g.jsonl': '\n{"text": ""}\n' });
  await rejectsWith(empties, /is empty \(a folder whose 3 file\(s\) hold no text\)/);
  await rejectsWith(path.join(empties, 'e.txt'), /e\.txt is empty \(a file with no text\)/);
});
