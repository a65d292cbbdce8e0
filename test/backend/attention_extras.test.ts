/**
 * The one attention entry's extras (Backend.attention with a score modifier or a block mask):
 * the CPU entry dispatches to the modifier's reference, and refuses what no kernel implements —
 * a modifier without causal attention, with a window, or with a block mask — naming it.
 *
 *   node --import tsx --test test/backend/attention_extras.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UnsupportedError } from '../../src/errors.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { foxAttention } from '../../src/backend/cpu/fox_attention.ts';
import type { AttentionArgs } from '../../src/backend/backend.ts';

const be = new CpuBackend();
const a: AttentionArgs = { batch: 1, heads: 2, kvHeads: 1, tq: 5, tk: 5, d: 4, kvLength: 5, qOffset: 0, causal: true, window: 0, scale: 0.5 };
const ref = (n: number, seed: number) => ({ h: Float32Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed)), shape: [n], dtype: 'f32' as const });
const q = ref(40, 1), k = ref(20, 2), v = ref(20, 3), c = ref(10, 4);

test('the entry with FoX\'s modifier is the FoX reference; its backward returns dq, dk, dv and dc', () => {
  const [out, lse] = be.attention(q, k, v, a, { modifier: { kind: 'fox', c } });
  const [wantOut, wantLse] = foxAttention(q, k, v, c, a);
  assert.deepEqual(out, wantOut);
  assert.deepEqual(lse, wantLse);
  const grads = be.attentionBackward(q, k, v, { h: out, shape: [40], dtype: 'f32' }, { h: lse, shape: [10], dtype: 'f32' }, ref(40, 5), a, { modifier: { kind: 'fox', c } });
  assert.deepEqual(grads.map((g) => g.length), [40, 20, 20, 10]);
});

test('a modifier without causal attention, with a window or with a block mask is refused by name', () => {
  const fox = { modifier: { kind: 'fox' as const, c } };
  assert.throws(() => be.attention(q, k, v, { ...a, causal: false }, fox), (e: Error) => e instanceof UnsupportedError && e.message === 'cpu: the fox score modifier takes causal attention without a window, got causal false, window 0');
  assert.throws(() => be.attention(q, k, v, { ...a, window: 3 }, fox), /got causal true, window 3/);
  assert.throws(() => be.attention(q, k, v, { ...a, mask: { heads: 1, qBlocks: 1, kBlocks: 1, kBlock: 64, byKeyOffset: 2, segmentOffset: 0, bitsOffset: 0 } }, { ...fox, mask: { h: new Int32Array(4), shape: [4], dtype: 'i32' } }),
    (e: Error) => e instanceof UnsupportedError && e.message === 'cpu: block masks with the fox score modifier are not implemented (the fox kernels do not read masks)');
});

test('a block mask needs its table and its shape together', () => {
  const mask = { h: new Int32Array(4), shape: [4], dtype: 'i32' as const };
  assert.throws(() => be.attention(q, k, v, a, { mask }), /cpu: a block mask needs its table and its shape together; got the table without its shape/);
  assert.throws(() => be.attention(q, k, v, { ...a, mask: { heads: 1, qBlocks: 1, kBlocks: 1, kBlock: 64, byKeyOffset: 2, segmentOffset: 0, bitsOffset: 0 } }), /got the shape \(args.mask\) without the table/);
});
