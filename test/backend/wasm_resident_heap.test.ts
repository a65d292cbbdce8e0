/**
 * The wasm backend's resident handles (src/backend/wasm/resident_heap.ts, runtime.ts): block size
 * classes, reuse of freed views, the capacity limit, ownership, and a threaded backend whose
 * outputs live in the wasm memory and feed the next kernel in place with the CPU reference's values.
 *
 *   node --import tsx --test test/backend/wasm_resident_heap.test.ts
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { MatmulArgs } from '../../src/backend/backend.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { blockBytes, MIN_RESIDENT_LENGTH, ResidentHeap } from '../../src/backend/wasm/resident_heap.ts';
import { WasmBackend } from '../../src/backend/wasm/backend.ts';
import { nodeSpawner } from '../../src/platform/wasm_threads.ts';

/** A heap over a plain buffer with a bump pointer, as the runtime gives it. */
function heapOver(bytes: number, capacity: number): ResidentHeap {
  const buffer = new SharedArrayBuffer(bytes);
  let top = 0;
  return new ResidentHeap(capacity, (n) => { if (top + n > bytes) return null; const at = top; top += n; return at; }, (at, len) => new Float32Array(buffer, at, len));
}

describe('resident heap', () => {
  test('block classes: 64-byte steps to 1 KiB, then 8 per power of two, never below the request', () => {
    assert.equal(blockBytes(1), 64);
    assert.equal(blockBytes(65), 128);
    assert.equal(blockBytes(1024), 1024);
    assert.equal(blockBytes(1025), 1152);
    assert.equal(blockBytes(4096 + 1), 4096 + 512);
    for (let b = 1; b < 1 << 20; b = Math.ceil(b * 1.37) + 1) {
      const c = blockBytes(b);
      assert.ok(c >= b && c <= Math.max(64, b * 1.125 + 64), `blockBytes(${b}) = ${c}`);
    }
  });

  test('a freed view is reused for the same length (same object) and for another length of its class (same address)', () => {
    const heap = heapOver(1 << 20, 1 << 20);
    const a = heap.take(4096)!;
    assert.ok(heap.owns(a));
    assert.equal(heap.give(a), true);
    assert.equal(heap.take(4096), a);
    heap.give(a);
    const b = heap.take(4090)!;
    assert.equal(b.length, 4090);
    assert.equal(b.byteOffset, a.byteOffset);
    assert.ok(heap.owns(b));
  });

  test('short lengths, a full heap and foreign arrays are refused', () => {
    const heap = heapOver(1 << 16, 20000);
    assert.equal(heap.take(MIN_RESIDENT_LENGTH - 1), null);
    assert.ok(heap.take(4096));
    assert.equal(heap.take(4096), null, 'past the capacity');
    assert.equal(heap.give(new Float32Array(4096)), false);
    assert.equal(heap.owns(new Float32Array(4096)), false);
  });
});

describe('resident handles in a threaded wasm backend', () => {
  let wasm: WasmBackend;
  const cpu = new CpuBackend();
  before(async () => { wasm = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, minParallelFlops: 0 }); });
  after(() => wasm.destroy());

  test('outputs live in the wasm memory and chain through matmul, binary and rmsnorm as the CPU reference', () => {
    const n = 64;
    const x = Float32Array.from({ length: n * n }, (_, i) => Math.sin(i));
    const up = wasm.upload(x, 'f32');
    assert.ok(up.buffer instanceof SharedArrayBuffer, 'an uploaded f32 handle is resident');
    const args: MatmulArgs = { batch: 1, m: n, n, k: n, transA: false, transB: true, batchA: 1, batchB: 1, outDType: 'f32' };
    const ref = { h: up, shape: [n, n], dtype: 'f32' as const };
    const y = wasm.matmul(ref, ref, args);
    assert.ok(y.buffer instanceof SharedArrayBuffer, 'a matmul output is resident');
    const z = wasm.binary({ h: y, shape: [n, n], dtype: 'f32' }, ref, 'mul', [n, n]);
    const [w] = wasm.rmsnorm({ h: z, shape: [n, n], dtype: 'f32' }, { h: new Float32Array(n).fill(1), shape: [n], dtype: 'f32' }, { rows: n, cols: n, eps: 1e-5 });
    const cx = { h: x, shape: [n, n], dtype: 'f32' as const };
    const cy = cpu.matmul(cx, cx, args);
    const cz = cpu.binary({ h: cy, shape: [n, n], dtype: 'f32' }, cx, 'mul', [n, n]);
    const [cw] = cpu.rmsnorm({ h: cz, shape: [n, n], dtype: 'f32' }, { h: new Float32Array(n).fill(1), shape: [n], dtype: 'f32' }, { rows: n, cols: n, eps: 1e-5 });
    for (let i = 0; i < n * n; i++) assert.ok(Math.abs(w[i] - cw[i]) <= 1e-4 * (1 + Math.abs(cw[i])), `[${i}] ${w[i]} vs ${cw[i]}`);
    for (const h of [up, y, z, w]) wasm.free(h);
    const again = wasm.upload(x, 'f32');
    assert.ok([up, y, z, w].includes(again), 'a freed resident handle is handed out again');
    wasm.free(again);
  });
});
