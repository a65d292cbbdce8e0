/** Token stores: documents packed with a separator, in memory or on disk, read back identically. */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ArgumentError } from '../../src/errors.ts';
import { DataError } from '../../src/train/data/data_error.ts';
import { buildTokenStore, FileTokenStore, MemoryTokenStore, openTokenStore } from '../../src/train/data/token_store.ts';

/** Stand-in tokenizer: UTF-8 bytes, end-of-text id 256. */
const bytes = { encode: (t: string) => Array.from(new TextEncoder().encode(t)), eosId: 256, vocabSize: 257 };

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fon-store-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));

const docs = ['hello', 'wörld', '', 'a longer third document, with more bytes in it'];
const packed = docs.flatMap((d) => [...bytes.encode(d), 256]);

async function* slowly(items: string[]): AsyncGenerator<string> {
  for (const x of items) yield x;
}

test('documents are packed each followed by eosId; a small store stays in memory', async () => {
  const progress: [number, number][] = [];
  const store = await buildTokenStore(slowly(docs), bytes, { onProgress: (d, t) => progress.push([d, t]) });
  assert.ok(store instanceof MemoryTokenStore);
  assert.equal(store.length, packed.length);
  assert.deepEqual(Array.from(store.read(0, store.length)), packed);
  assert.deepEqual(Array.from(store.read(3, 5)), packed.slice(3, 8));
  assert.deepEqual(progress.map(([d]) => d), [1, 2, 3, 4]);
  assert.equal(progress[3][1], packed.length);
  assert.throws(() => store.read(packed.length - 2, 3), ArgumentError);
  assert.throws(() => store.read(-1, 1), ArgumentError);
});

test("separator 'between': the end-of-text id between documents only, none after the last (evaluation stores)", async () => {
  const store = await buildTokenStore(docs, bytes, { separator: 'between' });
  const want = docs.flatMap((d, i) => [...(i > 0 ? [256] : []), ...bytes.encode(d)]);
  assert.deepEqual(Array.from(store.read(0, store.length)), want);
  assert.equal(store.length, packed.length - 1);
  await assert.rejects(buildTokenStore(['', ''], bytes, { separator: 'between' }), (e: unknown) => e instanceof DataError && /2 document\(s\) that encoded to no tokens/.test(e.message));
});

test('a store longer than memoryTokens goes to disk (atomically) and reads back identically', async () => {
  const many = Array.from({ length: 300 }, (_, i) => `document ${i}: ${'abcdefgh'.slice(0, i % 8)} ü`);
  const want = many.flatMap((d) => [...bytes.encode(d), 256]);
  const inMemory = await buildTokenStore(many, bytes, { memoryTokens: 1 << 20 });
  const file = path.join(root, 'sub', 'tokens.bin');
  const onDisk = await buildTokenStore(slowly(many), bytes, { memoryTokens: 1000, file });
  assert.ok(inMemory instanceof MemoryTokenStore);
  assert.ok(onDisk instanceof FileTokenStore);
  assert.equal(onDisk.length, want.length);
  assert.deepEqual(Array.from(onDisk.read(0, onDisk.length)), want);
  for (const [s, n] of [[0, 1], [999, 3], [want.length - 7, 7], [1234, 0]]) {
    assert.deepEqual(onDisk.read(s, n), inMemory.read(s, n), `read(${s}, ${n})`);
  }
  assert.equal(fs.statSync(file).size, 16 + 2 * want.length, 'header + 2 bytes per id');
  assert.deepEqual(fs.readdirSync(path.dirname(file)), ['tokens.bin'], 'no temporary file left beside it');
  onDisk.close();
  assert.ok(fs.existsSync(file), 'a file the caller named is kept');
  const reopened = openTokenStore(file);
  assert.deepEqual(Array.from(reopened.read(0, reopened.length)), want);
  reopened.close();
});

test('vocabularies over 65,536 ids take 4 bytes per id; a temporary store file goes on close()', async () => {
  const wide = { encode: (t: string) => Array.from(t, (c) => c.codePointAt(0)! * 3), eosId: 200_000, vocabSize: 200_001 };
  const store = await buildTokenStore(['字字', 'ab'], wide, { memoryTokens: 0 });
  assert.ok(store instanceof FileTokenStore);
  assert.deepEqual(Array.from(store.read(0, store.length)), [0x5b57 * 3, 0x5b57 * 3, 200_000, 97 * 3, 98 * 3, 200_000]);
  const file = (store as FileTokenStore).path;
  assert.equal(fs.statSync(file).size, 16 + 4 * 6);
  store.close();
  assert.equal(fs.existsSync(file), false);
});

test('bad input: empty corpus, ids out of range, a file that is not a store; nothing half-written', async () => {
  await assert.rejects(buildTokenStore([], bytes), (e: unknown) => e instanceof DataError && /the corpus is empty \(no documents\)/.test(e.message));
  await assert.rejects(buildTokenStore(['', ''], bytes), (e: unknown) => e instanceof DataError && /2 document\(s\) that encoded to no tokens/.test(e.message));
  const file = path.join(root, 'bad', 'never.bin');
  const badTok = { encode: (t: string) => (t === 'bad' ? [1, 300] : [1, 2]), eosId: 256, vocabSize: 257 };
  await assert.rejects(
    buildTokenStore(['ok', 'ok', 'bad'], badTok, { memoryTokens: 2, file }),
    (e: unknown) => e instanceof ArgumentError && /document 2 encoded to id 300; expected whole numbers in \[0, vocabSize = 257\)/.test(e.message),
  );
  assert.deepEqual(fs.readdirSync(path.dirname(file)), [], 'the temporary file was removed and no store was created');
  await assert.rejects(buildTokenStore(['x'], { ...bytes, eosId: 257 }), ArgumentError);
  const junk = path.join(root, 'junk.bin');
  fs.writeFileSync(junk, 'not a token store at all');
  assert.throws(() => openTokenStore(junk), (e: unknown) => e instanceof DataError && /junk\.bin is not a FON token store/.test(e.message));
  assert.throws(() => openTokenStore(path.join(root, 'missing.bin')), (e: unknown) => e instanceof DataError && /missing\.bin cannot be opened/.test(e.message));
});
