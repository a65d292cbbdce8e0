/** safetensors files read from disk tensor by tensor, single and sharded, and each bad file → its error. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { CheckpointError } from '../../src/io/checkpoint_dir.ts';
import { encodeSafetensors, MAX_HEADER_BYTES, SafetensorsError, type SafeTensorInput } from '../../src/io/safetensors.ts';
import { openSafetensorsDir, openSafetensorsFile } from '../../src/platform/node_folder.ts';
import { f32ToBf16Bits, f32ToF16Bits } from '../../src/tensor/dtype.ts';

const cpu = await fon.initBackend('cpu');

const TENSORS: Record<string, SafeTensorInput> = {
  a: { dtype: 'F32', shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
  b: { dtype: 'BF16', shape: [3], data: new Uint16Array([1.5, -2, 0.25].map(f32ToBf16Bits)) },
  c: { dtype: 'F16', shape: [2], data: new Uint16Array([0.5, -3].map(f32ToF16Bits)) },
  d: { dtype: 'I32', shape: [1], data: new Int32Array([-7]) },
};

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'fon-st-'));
}

function write(dir: string, name: string, bytes: Uint8Array | string): string {
  const p = join(dir, name);
  writeFileSync(p, bytes);
  return p;
}

/** A file from a header object and a data section, the length field written as given. */
function rawFile(header: object, data: Uint8Array, headerLen?: number): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setUint32(0, headerLen ?? json.length, true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

async function rejectsWith(p: Promise<unknown>, type: new (...a: never[]) => Error, fragment: string | RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof type, `expected ${type.name}, got ${String(e)}`);
    if (typeof fragment === 'string') assert.ok(e.message.includes(fragment), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(fragment)}`);
    else assert.match(e.message, fragment);
    return true;
  });
}

test('SafetensorsFile reads each tensor on demand: the bytes written, dtypes converted to f32', async () => {
  const path = write(tempDir(), 'm.safetensors', encodeSafetensors(TENSORS, { format: 'pt' }));
  const f = await openSafetensorsFile(path);
  assert.deepEqual(f.names().sort(), ['a', 'b', 'c', 'd']);
  assert.deepEqual(f.header.metadata, { format: 'pt' });
  assert.deepEqual(f.info('b')?.shape, [3]);
  assert.equal(f.info('nope'), undefined);
  for (const [name, t] of Object.entries(TENSORS)) {
    const v = await f.read(name);
    assert.equal(v.dtype, t.dtype);
    assert.deepEqual(v.data, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), name);
  }
  const b = await f.readTensor('b', { backend: cpu, dtype: 'f32' });
  assert.equal(b.dtype, 'f32');
  assert.deepEqual([...(await b.data())], [1.5, -2, 0.25]);
  const c = await f.readTensor('c', { backend: cpu, dtype: 'f32' });
  assert.deepEqual([...(await c.data())], [0.5, -3]);
  const a = await f.readTensor('a', { backend: cpu });
  assert.deepEqual(a.shape, [2, 3]);
  assert.deepEqual([...(await a.data())], [1, 2, 3, 4, 5, 6]);
  await rejectsWith(f.read('nope'), SafetensorsError, `${path}: no tensor 'nope'`);
  [a, b, c].forEach((t) => t.dispose());
  await f.close();
});

test('SafetensorsFile: each bad file gives its own error, naming the file', async () => {
  const dir = tempDir();
  const good = encodeSafetensors(TENSORS);
  const cases: [string, Uint8Array, string | RegExp][] = [
    ['short', new Uint8Array([1, 2, 3]), 'truncated: 3 bytes, but a safetensors file starts with an 8-byte header length'],
    ['cut', good.subarray(0, good.length - 3), /tensor '\w': data_offsets \[\d+, \d+\] reach past the end of the data section \(\d+ bytes\): the file is truncated/],
    ['huge-header', rawFile({}, new Uint8Array(4), 1e6), 'header length 1000000 exceeds the file (6 bytes after the 8-byte length field)'],
    ['offsets', rawFile({ x: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, new Uint8Array(8)), "tensor 'x': data_offsets [4, 12] reach past the end of the data section (8 bytes)"],
    ['gap', rawFile({ x: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, new Uint8Array(8)), "bytes [0, 4) belong to no tensor (before 'x')"],
    ['dtype', rawFile({ x: { dtype: 'F8_E4M3', shape: [4], data_offsets: [0, 4] } }, new Uint8Array(4)), `tensor 'x': unknown dtype "F8_E4M3", FON reads`],
    ['json', rawFile({}, new Uint8Array(0), 0), 'header is not valid JSON'],
  ];
  for (const [name, bytes, fragment] of cases) {
    const path = write(dir, `${name}.safetensors`, bytes);
    await rejectsWith(openSafetensorsFile(path), SafetensorsError, fragment);
    await rejectsWith(openSafetensorsFile(path), SafetensorsError, `${path}: `);
  }
  await rejectsWith(openSafetensorsFile(join(dir, 'absent.safetensors')), CheckpointError, `${join(dir, 'absent.safetensors')}: no such file`);
});

test('SafetensorsFile: a file cut short after opening fails on the read, not with wrong data', async () => {
  const path = write(tempDir(), 'm.safetensors', encodeSafetensors(TENSORS));
  const f = await openSafetensorsFile(path);
  truncateSync(path, 40);
  await rejectsWith(f.read('a'), SafetensorsError, `${path}: truncated: ended after`);
  await f.close();
});

test('SafetensorsFile: a 1 GiB file (sparse on disk) is opened and one small tensor read without reading the rest', async () => {
  const big = 2 ** 28; // f32 elements: 1 GiB
  const header = new TextEncoder().encode(JSON.stringify({
    big: { dtype: 'F32', shape: [big], data_offsets: [0, 4 * big] },
    small: { dtype: 'F32', shape: [2], data_offsets: [4 * big, 4 * big + 8] },
  }));
  const head = new Uint8Array(8 + header.length);
  new DataView(head.buffer).setUint32(0, header.length, true);
  head.set(header, 8);
  const path = write(tempDir(), 'big.safetensors', head);
  truncateSync(path, head.length + 4 * big + 8); // zeros, not written
  const rss = process.memoryUsage().rss;
  const f = await openSafetensorsFile(path);
  const small = await f.read('small');
  assert.deepEqual([...small.data], new Array(8).fill(0));
  assert.equal(f.size, head.length + 4 * big + 8);
  await f.close();
  const grown = process.memoryUsage().rss - rss;
  assert.ok(grown < 64 * 2 ** 20, `resident memory grew by ${grown} bytes while reading 8 bytes of a 1 GiB file`);
  rmSync(path);
});

/** Writes TENSORS split over two shards with an index; returns the folder. */
function shardedDir(index?: object): string {
  const dir = tempDir();
  write(dir, 'model-00001-of-00002.safetensors', encodeSafetensors({ a: TENSORS.a, b: TENSORS.b }));
  write(dir, 'model-00002-of-00002.safetensors', encodeSafetensors({ c: TENSORS.c }));
  const map = { a: 'model-00001-of-00002.safetensors', b: 'model-00001-of-00002.safetensors', c: 'model-00002-of-00002.safetensors' };
  write(dir, 'model.safetensors.index.json', JSON.stringify(index ?? { metadata: {}, weight_map: map }));
  return dir;
}

test('SafetensorsShards: one file, or the shards of model.safetensors.index.json, read as one set', async () => {
  const single = tempDir();
  write(single, 'model.safetensors', encodeSafetensors(TENSORS));
  const s1 = await openSafetensorsDir(single);
  assert.deepEqual(s1.names().sort(), ['a', 'b', 'c', 'd']);
  assert.equal(s1.source, join(single, 'model.safetensors'));
  await s1.close();

  const dir = shardedDir();
  const s = await openSafetensorsDir(dir);
  assert.equal(s.source, join(dir, 'model.safetensors.index.json'));
  assert.deepEqual(s.names().sort(), ['a', 'b', 'c']);
  assert.equal(s.info('c')?.file, join(dir, 'model-00002-of-00002.safetensors'));
  assert.deepEqual(s.info('a')?.shape, [2, 3]);
  assert.ok(s.has('b') && !s.has('d'));
  const c = await s.read('c');
  assert.deepEqual(c.data, new Uint8Array(TENSORS.c.data.buffer));
  await s.close();
});

test('SafetensorsShards: a missing shard, no weights, a bad index each name the file', async () => {
  const gone = shardedDir();
  rmSync(join(gone, 'model-00002-of-00002.safetensors'));
  await rejectsWith(openSafetensorsDir(gone), CheckpointError, `${join(gone, 'model.safetensors.index.json')} lists shard model-00002-of-00002.safetensors, which is missing (looked for ${join(gone, 'model-00002-of-00002.safetensors')})`);

  const empty = tempDir();
  await rejectsWith(openSafetensorsDir(empty), CheckpointError, `${empty} has no weights: expected model.safetensors or model.safetensors.index.json`);

  const wrong = shardedDir({ weight_map: { c: 'model-00001-of-00002.safetensors' } });
  await rejectsWith(openSafetensorsDir(wrong), CheckpointError, "places tensor 'c' in model-00001-of-00002.safetensors, which does not hold it");

  const escape = shardedDir({ weight_map: { a: '../model-00001-of-00002.safetensors' } });
  await rejectsWith(openSafetensorsDir(escape), CheckpointError, `weight_map['a'] = "../model-00001-of-00002.safetensors": expected a file name in the same folder`);

  const noMap = shardedDir({ metadata: {} });
  await rejectsWith(openSafetensorsDir(noMap), CheckpointError, 'expected an object with "weight_map"');

  const notJson = shardedDir();
  write(notJson, 'model.safetensors.index.json', '{"weight_map": ');
  await rejectsWith(openSafetensorsDir(notJson), CheckpointError, `${join(notJson, 'model.safetensors.index.json')}: not valid JSON`);

  const corrupt = shardedDir();
  write(corrupt, 'model-00002-of-00002.safetensors', new Uint8Array([255, 255, 255, 255, 0, 0, 0, 0, 1]));
  await rejectsWith(openSafetensorsDir(corrupt), SafetensorsError, `${join(corrupt, 'model-00002-of-00002.safetensors')}: header length 4294967295 exceeds the file`);
});

test('a header length above 100 MB is refused from the 8-byte prefix, before the header is read', async () => {
  const path = join(tmpdir(), `fon-bighead-${process.pid}.safetensors`);
  const len = MAX_HEADER_BYTES + 8;
  const fd = openSync(path, 'w');
  const prefix = new Uint8Array(8);
  new DataView(prefix.buffer).setUint32(0, len, true);
  writeSync(fd, prefix);
  ftruncateSync(fd, 8 + len); // a sparse file of NUL bytes: nothing written, nothing to read
  closeSync(fd);
  try {
    const t0 = performance.now();
    await assert.rejects(openSafetensorsFile(path), (e: unknown) => e instanceof SafetensorsError
      && e.message === `${path}: header length ${len} is above the 100000000-byte limit for a safetensors header (expected kilobytes to a few megabytes of JSON); not read`);
    assert.ok(performance.now() - t0 < 2000, 'refused without reading 100 MB');
  } finally {
    rmSync(path, { force: true });
  }
});
