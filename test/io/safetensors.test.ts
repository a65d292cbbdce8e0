/** safetensors: byte layout, round trips of every dtype, each corrupt file → its message, tensor bridges. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import {
  decodeSafetensors, encodeSafetensors, safetensorsToTensors, tensorsToSafetensors, SafetensorsError,
  SAFE_DTYPE_BYTES, type SafeDType,
} from '../../src/io/safetensors.ts';

const enc = (s: string) => new TextEncoder().encode(s);

function u64le(n: number): number[] {
  return [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff, 0, 0, 0, 0];
}

/** A file from a header string and data bytes, the header padded (or not) as given. */
function rawFile(header: string, data: number[] = []): Uint8Array {
  const h = enc(header);
  return new Uint8Array([...u64le(h.length), ...h, ...data]);
}

function throwsWith(fn: () => unknown, fragment: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof SafetensorsError, `expected SafetensorsError, got ${String(e)}`);
    if (typeof fragment === 'string') assert.ok(e.message.includes(fragment), `message ${JSON.stringify(e.message)} lacks ${JSON.stringify(fragment)}`);
    else assert.match(e.message, fragment);
    return true;
  });
}

test('a hand-built file, byte for byte: order by element size then name, header padded to 8 with spaces', () => {
  const bytes = encodeSafetensors(
    { a: { dtype: 'F16', shape: [1], data: new Uint16Array([0x3c00]) }, b: { dtype: 'I32', shape: [2], data: new Int32Array([1, -1]) } },
    { format: 'pt' },
  );
  const json = '{"__metadata__":{"format":"pt"},"b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}';
  assert.equal(json.length, 139);
  const want = new Uint8Array([
    144, 0, 0, 0, 0, 0, 0, 0,
    ...enc(json), 0x20, 0x20, 0x20, 0x20, 0x20,
    1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, // b = [1, -1] as little-endian i32
    0x00, 0x3c, // a = f16 1.0
  ]);
  assert.deepEqual(bytes, want);
});

test('reads the example file from the reference implementation docs', () => {
  const header = '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}';
  assert.equal(header.length, 60);
  const d = decodeSafetensors(rawFile(header, new Array(16).fill(0)));
  assert.deepEqual(Object.keys(d.tensors), ['test']);
  assert.equal(d.tensors.test.dtype, 'I32');
  assert.deepEqual(d.tensors.test.shape, [2, 2]);
  assert.equal(d.tensors.test.data.length, 16);
  assert.deepEqual(d.metadata, {});
});

test('round trip of every dtype keeps the bytes, views into the file, 8-aligned data section', () => {
  const inputs: Record<string, { dtype: SafeDType; shape: number[]; data: ArrayBufferView }> = {
    f32: { dtype: 'F32', shape: [2, 2], data: new Float32Array([1.5, -0, Infinity, 3.4e38]) },
    f16: { dtype: 'F16', shape: [5], data: new Uint16Array([0x3c00, 0x8000, 0x7c00, 0x0001, 0x7e01]) },
    bf16: { dtype: 'BF16', shape: [4], data: new Uint16Array([0x3f80, 0xff80, 0x0001, 0x7fc1]) },
    i32: { dtype: 'I32', shape: [3], data: new Int32Array([-2147483648, 0, 2147483647]) },
    u8: { dtype: 'U8', shape: [3], data: new Uint8Array([0, 128, 255]) },
    f64: { dtype: 'F64', shape: [1], data: new Float64Array([Math.PI]) },
    i64: { dtype: 'I64', shape: [2], data: new BigInt64Array([-5n, 1n << 40n]) },
    i16: { dtype: 'I16', shape: [2], data: new Int16Array([-32768, 7]) },
    i8: { dtype: 'I8', shape: [2], data: new Int8Array([-128, 127]) },
    bool: { dtype: 'BOOL', shape: [2], data: new Uint8Array([1, 0]) },
    empty: { dtype: 'F32', shape: [0, 3], data: new Float32Array(0) },
    scalar: { dtype: 'F32', shape: [], data: new Float32Array([42]) },
  };
  const bytes = encodeSafetensors(inputs, { note: 'ünïcode ✓', step: '12' });
  const headerLen = new DataView(bytes.buffer).getUint32(0, true);
  assert.equal(headerLen % 8, 0);
  const d = decodeSafetensors(bytes, 'rt.safetensors');
  assert.deepEqual(d.metadata, { note: 'ünïcode ✓', step: '12' });
  assert.deepEqual(Object.keys(d.tensors).sort(), Object.keys(inputs).sort());
  for (const [name, t] of Object.entries(inputs)) {
    const got = d.tensors[name];
    assert.equal(got.dtype, t.dtype, name);
    assert.deepEqual(got.shape, t.shape, name);
    assert.deepEqual([...got.data], [...new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)], name);
    assert.equal(got.data.buffer, bytes.buffer, `${name} is a view, not a copy`);
    // Largest elements first keeps every tensor aligned to its element size in the file.
    assert.equal(got.data.byteOffset % SAFE_DTYPE_BYTES[t.dtype], 0, `${name} aligned`);
  }
});

test('encoding takes a view at its offset, not the whole buffer', () => {
  const big = new Float32Array([9, 1, 2, 9]);
  const d = decodeSafetensors(encodeSafetensors({ x: { dtype: 'F32', shape: [2], data: big.subarray(1, 3) } }));
  assert.deepEqual([...new Float32Array(d.tensors.x.data.slice().buffer)], [1, 2]);
});

test('encode errors name the tensor and what is wrong', () => {
  throwsWith(() => encodeSafetensors({ w: { dtype: 'F32', shape: [2, 3], data: new Float32Array(5) } }), "tensor 'w': shape [2, 3] of F32 needs 24 bytes, data has 20");
  throwsWith(() => encodeSafetensors({ w: { dtype: 'F8' as SafeDType, shape: [1], data: new Uint8Array(1) } }), "unknown dtype 'F8'");
  throwsWith(() => encodeSafetensors({ __metadata__: { dtype: 'U8', shape: [1], data: new Uint8Array(1) } }), 'reserved key __metadata__');
  throwsWith(() => encodeSafetensors({ w: { dtype: 'U8', shape: [-1], data: new Uint8Array(0) } }), 'bad shape [-1]');
});

test('each corrupt file gives its own message, naming the file', () => {
  const src = 'bad.safetensors';
  throwsWith(() => decodeSafetensors(new Uint8Array(5), src), 'bad.safetensors: truncated: 5 bytes, but a safetensors file starts with an 8-byte header length');
  throwsWith(() => decodeSafetensors(new Uint8Array([200, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d]), src), 'bad.safetensors: header length 200 exceeds the file (2 bytes after the 8-byte length field)');
  throwsWith(() => decodeSafetensors(new Uint8Array([0, 0, 0, 0, 1, 0, 0, 0]), src), 'header length 4294967296 exceeds the file');
  throwsWith(() => decodeSafetensors(rawFile('{"a": [1,'), src), /^bad\.safetensors: header is not valid JSON \(/);
  throwsWith(() => decodeSafetensors(new Uint8Array([2, 0, 0, 0, 0, 0, 0, 0, 0xc3, 0x28]), src), 'bad.safetensors: header is not valid UTF-8');
  throwsWith(() => decodeSafetensors(rawFile('[1,2]'), src), 'header must be a JSON object, got an array');
  throwsWith(() => decodeSafetensors(rawFile('{"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', [0]), src), `bad.safetensors: tensor 'w': unknown dtype "F8_E4M3"`);
  throwsWith(() => decodeSafetensors(rawFile('{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', [0, 0, 0, 0]), src), "tensor 'w': bad shape [1.5]");
  throwsWith(() => decodeSafetensors(rawFile('{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}', [0, 0, 0, 0]), src), "tensor 'w': bad data_offsets [4,0]");
  throwsWith(() => decodeSafetensors(rawFile('{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}', new Array(20).fill(0)), src), "tensor 'w': shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 20] hold 20");
  throwsWith(() => decodeSafetensors(rawFile('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}', new Array(6).fill(0)), src), "tensors 'a' and 'b' overlap: 'b' begins at byte 2, before 4 where 'a' ends");
  throwsWith(() => decodeSafetensors(rawFile('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}', new Array(5).fill(0)), src), "bytes [2, 3) belong to no tensor (before 'b')");
  throwsWith(() => decodeSafetensors(rawFile('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', [0, 0, 9]), src), 'do not cover the data section: 1 bytes after the last tensor');
  throwsWith(() => decodeSafetensors(rawFile('{"a":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}}', [0, 0]), src), "tensor 'a': data_offsets [8, 10] reach past the end of the data section (2 bytes)");
  throwsWith(() => decodeSafetensors(rawFile('{"__metadata__":{"step":3}}'), src), "__metadata__['step'] must be a string, got 3");
  throwsWith(() => decodeSafetensors(rawFile('{"w":7}'), src), "tensor 'w': expected an object with dtype, shape and data_offsets, got 7");
});

test('a truncated file (a valid file cut short) says so', () => {
  const bytes = encodeSafetensors({ w: { dtype: 'F32', shape: [4], data: new Float32Array(4) } });
  throwsWith(() => decodeSafetensors(bytes.subarray(0, bytes.length - 3), 'cut.safetensors'), "cut.safetensors: tensor 'w': data_offsets [0, 16] reach past the end of the data section (13 bytes): the file is truncated");
  throwsWith(() => decodeSafetensors(bytes.subarray(0, 20), 'cut.safetensors'), 'cut.safetensors: header length');
});

test('decoding a view at an odd offset of a larger buffer (a pooled Node Buffer) works', () => {
  const bytes = encodeSafetensors({ w: { dtype: 'F32', shape: [2], data: new Float32Array([1.25, -2]) } });
  const host = new Uint8Array(bytes.length + 3);
  host.set(bytes, 3);
  const d = decodeSafetensors(host.subarray(3));
  const ts = safetensorsToTensors(d, { backend: new CpuBackend() });
  assert.deepEqual([...ts.w.dataSync()], [1.25, -2]);
});

test('FON tensors → safetensors → FON tensors keeps every dtype bit for bit', async () => {
  const backend = new CpuBackend();
  const bits16 = new Uint16Array([0x0000, 0x8000, 0x3c00, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x7e01, 0x3555]);
  const f32 = new Float32Array([0.1, -3.5e-40, Infinity, -0, 65504.5]);
  const nanBits = new Uint32Array([0x7fc12345]);
  const src = {
    f32: fon.tensor(f32, [5], { backend }),
    f16: fon.tensor(bits16, [3, 3], { dtype: 'f16', backend }),
    bf16: fon.tensor(bits16, [9], { dtype: 'bf16', backend }),
    i32: fon.tensor(new Int32Array([-2147483648, 2147483647, 0]), [3], { backend }),
    u8: fon.tensor(new Uint8Array([0, 1, 255]), [1, 3], { backend }),
  };
  const bytes = await tensorsToSafetensors(src, { kind: 'test' });
  const d = decodeSafetensors(bytes);
  assert.deepEqual(Object.fromEntries(Object.entries(d.tensors).map(([k, v]) => [k, v.dtype])), { f32: 'F32', f16: 'F16', bf16: 'BF16', i32: 'I32', u8: 'U8' });
  assert.deepEqual(d.metadata, { kind: 'test' });
  const back = safetensorsToTensors(d, { backend });
  for (const [name, t] of Object.entries(src)) {
    assert.equal(back[name].dtype, t.dtype, name);
    assert.deepEqual(back[name].shape, t.shape, name);
    const a = t.dataSync(), b = back[name].dataSync();
    assert.deepEqual(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), new Uint8Array(a.buffer, a.byteOffset, a.byteLength), name);
  }
  // A NaN payload survives too: the bridge uploads the file's bits, never numbers.
  const nanFile = encodeSafetensors({ n: { dtype: 'F32', shape: [1], data: nanBits } });
  const n = safetensorsToTensors(decodeSafetensors(nanFile), { backend }).n.dataSync();
  assert.equal(new Uint32Array(n.buffer, n.byteOffset, 1)[0], 0x7fc12345);
});

test('safetensorsToTensors: other dtypes widen, float dtype conversion, I64 out of range', () => {
  const backend = new CpuBackend();
  const d = decodeSafetensors(encodeSafetensors({
    f64: { dtype: 'F64', shape: [2], data: new Float64Array([0.5, 1 / 3]) },
    i64: { dtype: 'I64', shape: [2], data: new BigInt64Array([-7n, 2147483647n]) },
    i16: { dtype: 'I16', shape: [1], data: new Int16Array([-300]) },
    i8: { dtype: 'I8', shape: [1], data: new Int8Array([-3]) },
    bool: { dtype: 'BOOL', shape: [2], data: new Uint8Array([1, 0]) },
    bf: { dtype: 'BF16', shape: [1], data: new Uint16Array([0x3fc0]) },
  }));
  const ts = safetensorsToTensors(d, { backend });
  assert.equal(ts.f64.dtype, 'f32');
  assert.deepEqual([...ts.f64.dataSync()], [0.5, Math.fround(1 / 3)]);
  assert.equal(ts.i64.dtype, 'i32');
  assert.deepEqual([...ts.i64.dataSync()], [-7, 2147483647]);
  assert.deepEqual([...ts.i16.dataSync()], [-300]);
  assert.deepEqual([...ts.i8.dataSync()], [-3]);
  assert.equal(ts.bool.dtype, 'u8');
  assert.deepEqual([...ts.bool.dataSync()], [1, 0]);

  const asF32 = safetensorsToTensors(d, { backend, dtype: 'f32' });
  assert.equal(asF32.bf.dtype, 'f32');
  assert.deepEqual([...asF32.bf.dataSync()], [1.5]);
  assert.equal(asF32.i8.dtype, 'i32', 'integer tensors keep their dtype');
  assert.throws(() => safetensorsToTensors(d, { backend, dtype: 'i32' }), /dtype 'i32' converts float tensors/);

  const big = decodeSafetensors(encodeSafetensors({ ids: { dtype: 'I64', shape: [2], data: new BigInt64Array([1n, 1n << 31n]) } }), 'm.safetensors');
  throwsWith(() => safetensorsToTensors(big, { backend, source: 'm.safetensors' }), "m.safetensors: tensor 'ids': I64 value 2147483648 at index 1 does not fit FON's i32");
});

test('tensor and metadata names that are Object.prototype keys are kept as data: __proto__, constructor, toString', () => {
  const header = '{"__metadata__": {"__proto__": "p", "constructor": "c"}, "__proto__": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, '
    + '"constructor": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}, "toString": {"dtype": "U8", "shape": [1], "data_offsets": [3, 4]}}';
  const d = decodeSafetensors(rawFile(header, [7, 8, 9, 10]), 'proto.safetensors');
  assert.deepEqual(Object.keys(d.tensors).sort(), ['__proto__', 'constructor', 'toString']);
  assert.deepEqual([...d.tensors['__proto__'].data], [7, 8]);
  assert.deepEqual([...d.tensors['constructor'].data], [9]);
  assert.deepEqual([...d.tensors['toString'].data], [10]);
  assert.deepEqual(Object.entries(d.metadata).sort(), [['__proto__', 'p'], ['constructor', 'c']]);
  assert.ok(Object.hasOwn(d.tensors, '__proto__') && Object.getPrototypeOf(d.tensors) === Object.prototype);
  // …and written back: the encoder keeps them too (a plain assignment of '__proto__' would set the header's prototype and drop the tensor).
  const back = decodeSafetensors(encodeSafetensors(Object.fromEntries(Object.entries(d.tensors).map(([n, t]) => [n, { dtype: t.dtype, shape: t.shape, data: t.data }])), d.metadata), 'again.safetensors');
  assert.deepEqual(Object.keys(back.tensors).sort(), ['__proto__', 'constructor', 'toString']);
  assert.deepEqual([...back.tensors['__proto__'].data], [7, 8]);
  assert.deepEqual(Object.entries(back.metadata).sort(), [['__proto__', 'p'], ['constructor', 'c']]);
});
