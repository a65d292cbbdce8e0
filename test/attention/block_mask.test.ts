/**
 * Block masks (src/attention/block_mask.ts) on the CPU reference: a mask keeping every block the
 * predicate reaches equals plain causal attention (bitwise, forward and gradients); a mask keeping
 * some blocks equals dense attention with the dropped blocks' scores at −∞ (forward and gradients,
 * per-head masks, GQA, window, kvLength < Tk); the masked backward against central differences; the
 * tables' counts; segments (packed documents: forward and gradients against the dense reference,
 * each document alone, one segment as plain causal, the blocks between documents left out); and bad
 * masks refused with the block named.
 *
 *   node --import tsx --test test/attention/block_mask.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, ShapeError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { blockMask, blockMaskFromBlocks, blockMaskFromLists, maskEntries, maskKeeps, maskKeyEntries, MASK_K_BLOCK, MASK_Q_BLOCK, type BlockMask } from '../../src/attention/block_mask.ts';
import { attention, attentionWithLse, type AttentionOptions } from '../../src/ops/attention.ts';
import { checkGradient } from '../parity/run.ts';

const backend = new CpuBackend();
fon.setBackend(backend);
const vals = (t: Tensor) => Float32Array.from(t.dataSync() as ArrayLike<number>);

/** Dense reference: softmax(scale·q·kᵀ + mask)·v, the mask −∞ outside the predicate, across segments and outside the kept blocks (every case keeps some key of every row). */
function dense(q: Tensor, k: Tensor, v: Tensor, m: BlockMask, opts: AttentionOptions): Tensor {
  const [b, h, tq, d] = q.shape, [, hkv, tk] = k.shape, g = h / hkv;
  const add = new Float32Array(b * h * tq * tk);
  for (let bb = 0; bb < b; bb++) for (let hh = 0; hh < h; hh++) for (let i = 0; i < tq; i++) {
    const p = m.qOffset + i;
    for (let j = 0; j < tk; j++) {
      const sameSegment = m.segmentOffset === 0 || m.table[m.segmentOffset + bb * m.tk + p] === m.table[m.segmentOffset + bb * m.tk + j];
      const ok = j < m.kvLength && (!m.causal || j <= p) && (m.window === 0 || j > p - m.window) && sameSegment && maskKeeps(m, bb, hh, Math.floor(i / MASK_Q_BLOCK), Math.floor(j / MASK_K_BLOCK));
      add[((bb * h + hh) * tq + i) * tk + j] = ok ? 0 : -Infinity;
    }
  }
  const expand = (x: Tensor) => (g === 1 ? x : fon.reshape(fon.broadcastTo(fon.reshape(x, [b, hkv, 1, tk, d]), [b, hkv, g, tk, d]), [b, h, tk, d]));
  const s = fon.add(fon.mul(fon.matmul(q, expand(k), { transB: true }), 1 / Math.sqrt(d)), fon.tensor(add, [b, h, tq, tk]));
  return fon.matmul(fon.softmax(s, -1), expand(v));
}

function close(a: Float32Array, b: Float32Array, what: string, tol = 1e-5): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    assert.ok(Math.abs(a[i] - b[i]) <= tol * (1 + Math.abs(b[i])), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}

interface Case { name: string; q: number[]; kv: number[]; opts: AttentionOptions; heads: number; keep: (b: number, h: number, qb: number, kb: number) => boolean }

const CASES: Case[] = [
  { name: 'causal, every other block dropped, one mask for all heads', q: [1, 2, 300, 8], kv: [1, 2, 300, 8], opts: {}, heads: 1, keep: (_b, _h, qb, kb) => kb === qb * 2 || (qb + kb) % 2 === 0 },
  { name: 'per-head masks, GQA 4/2, two sequences', q: [2, 4, 200, 4], kv: [2, 2, 200, 4], opts: {}, heads: 4, keep: (b, h, qb, kb) => (kb + h + b) % 3 !== 1 || kb === 2 * qb },
  { name: 'window 100 and kvLength < Tk', q: [1, 2, 150, 4], kv: [1, 2, 260, 4], opts: { window: 100, kvLength: 240 }, heads: 2, keep: (_b, h, _qb, kb) => kb !== 2 + h },
  { name: 'not causal', q: [1, 1, 140, 4], kv: [1, 1, 200, 4], opts: { causal: false }, heads: 1, keep: (_b, _h, qb, kb) => kb !== qb + 1 },
];

function maskFor(c: Case): BlockMask {
  const kvLength = c.opts.kvLength ?? c.kv[2];
  return blockMask({ batch: c.q[0], heads: c.heads, tq: c.q[2], tk: c.kv[2], kvLength, causal: c.opts.causal ?? true, window: c.opts.window ?? 0 }, c.keep);
}

test('a block mask keeping every block equals plain attention, forward and gradients, bitwise', () => fon.tidy(() => {
  const q = fon.randn([1, 2, 300, 8], { seed: 1, requiresGrad: true }), k = fon.randn([1, 2, 300, 8], { seed: 2, requiresGrad: true }), v = fon.randn([1, 2, 300, 8], { seed: 3, requiresGrad: true });
  const m = blockMask({ batch: 1, heads: 1, tq: 300, tk: 300 });
  // 3 query blocks × 5 key blocks, causal: 2 + 4 + 5 blocks have a visible pair.
  assert.equal(m.visited, 11);
  assert.equal(m.predicateBlocks, 11);
  const w = fon.randn([1, 2, 300, 8], { seed: 4 });
  const grads = (opts: AttentionOptions) => {
    const out = attention(q, k, v, opts);
    fon.backward(fon.sum(fon.mul(out, w)));
    const g = [out, q.grad!, k.grad!, v.grad!].map(vals);
    for (const t of [q, k, v]) { t.grad!.dispose(); t.grad = null; }
    return g;
  };
  const plain = grads({}), masked = grads({ mask: m });
  plain.forEach((p, i) => assert.deepEqual(masked[i], p, `output ${i}`));
}));

for (const c of CASES) {
  test(`masked attention = dense attention without the dropped blocks: ${c.name}`, () => fon.tidy(() => {
    const m = maskFor(c);
    assert.ok(m.visited < m.predicateBlocks, `the mask drops some blocks (${m.visited} of ${m.predicateBlocks})`);
    const q = fon.randn(c.q, { seed: 11, requiresGrad: true }), k = fon.randn(c.kv, { seed: 12, requiresGrad: true }), v = fon.randn(c.kv, { seed: 13, requiresGrad: true });
    const w = fon.randn(c.q, { seed: 14 });
    const out = attention(q, k, v, { ...c.opts, mask: m });
    fon.backward(fon.sum(fon.mul(out, w)));
    const got = [out, q.grad!, k.grad!, v.grad!].map(vals);
    for (const t of [q, k, v]) { t.grad!.dispose(); t.grad = null; }
    const ref = dense(q, k, v, m, c.opts);
    fon.backward(fon.sum(fon.mul(ref, w)));
    const want = [ref, q.grad!, k.grad!, v.grad!].map(vals);
    ['out', 'dq', 'dk', 'dv'].forEach((n, i) => close(got[i], want[i], `${c.name} ${n}`, 1e-4));
  }));
}

test('masked attention gradient vs central differences', async () => {
  const m = blockMask({ batch: 1, heads: 1, tq: 140, tk: 140 }, (_b, _h, qb, kb) => !(qb === 1 && kb === 0));
  const spec = (shape: number[], seed: number) => ({ shape, dtype: 'f32' as const, gen: { kind: 'randn' as const, std: 1, mean: 0 }, seed });
  const r = await checkGradient({
    name: 'attention/block mask', op: 'attention', dtype: 'f32',
    inputs: [spec([1, 1, 140, 4], 31), spec([1, 1, 140, 4], 32), spec([1, 1, 140, 4], 33)],
    run: (xs) => attention(xs[0], xs[1], xs[2], { mask: m }),
    grad: [0, 1, 2], tol: { rtol: 1e-4, atol: 1e-4 },
  }, { backend });
  assert.ok(r.ok, r.detail);
  assert.ok(r.checks >= 18, `only ${r.checks} directions compared`);
});

test('blockMaskFromLists: the lists in order, by query and by key; a future, unknown or repeated block is refused, naming it', () => {
  const g = { batch: 1, heads: 1, tq: 256, tk: 256 };
  const m = blockMaskFromLists(g, (_b, _h, qb) => (qb === 0 ? [1, 0] : [3, 0]));
  // Query block 0 (rows 0…127) lists key blocks 0 and 1, both cut by the causal rule (partial).
  assert.deepEqual([...maskEntries(m, 0, 0, 0)], [2 * 0 + 1, 2 * 1 + 1]);
  assert.deepEqual([...maskEntries(m, 0, 0, 1)], [2 * 0 + 0, 2 * 3 + 1], 'query block 1: key block 0 whole, 3 on the diagonal');
  // By key: key block 0 is seen by query blocks 0 (partial) and 1 (whole); 2 by none, 3 by query block 1 (partial).
  assert.deepEqual([...maskKeyEntries(m, 0, 0, 0)], [1, 2]);
  assert.deepEqual([...maskKeyEntries(m, 0, 0, 2)], []);
  assert.deepEqual([...maskKeyEntries(m, 0, 0, 3)], [2 * 1 + 1]);
  // The table is compact: two indexes (2 query rows, 4 key rows), each list's count and entries.
  assert.equal(m.table.length, 2 + 4 + (2 + 4) + (4 + 4));
  assert.equal(m.visited, 4);
  assert.throws(() => blockMaskFromLists(g, (_b, _h, qb) => (qb === 0 ? [2] : [])),
    (e: Error) => e instanceof ArgumentError && e.message === 'blockMask: batch 0, head 0, query block 0 (rows 0…127): key block 2 (keys 128…) lies after every query of the block (last position 127): a causal mask cannot let a query see a future key');
  assert.throws(() => blockMaskFromLists(g, () => [4]), /query block 0 \(rows 0…127\): key block 4 is not one of 0…3/);
  assert.throws(() => blockMaskFromLists(g, () => [0, 0]), /key block 0 is listed twice/);
  assert.throws(() => blockMask({ ...g, kvLength: 300 }), /kvLength 300 must be at most tk 256/);
});

test('a mask built for another call is refused, naming both; attentionWithLse takes masks as attention does, decode paths refuse them', () => fon.tidy(() => {
  const q = fon.randn([1, 2, 200, 4], { seed: 1 }), k = fon.randn([1, 2, 200, 4], { seed: 2 });
  const m = blockMask({ batch: 1, heads: 1, tq: 150, tk: 200 });
  assert.throws(() => attention(q, k, k, { mask: m }),
    (e: Error) => e instanceof ShapeError && e.message === 'attention: the block mask was built for another call: tq 150 (attention: 200), qOffset 50 (attention: 0); q [1, 2, 200, 4], k [1, 2, 200, 4]');
  assert.throws(() => attention(q, k, k, { mask: blockMask({ batch: 1, heads: 3, tq: 200, tk: 200 }) }), /heads 3 \(attention: 1 or 2\)/);
  assert.throws(() => attention(q, k, k, { window: 8, mask: blockMask({ batch: 1, heads: 1, tq: 200, tk: 200 }) }), /window 0 \(attention: 8\)/);
  // attentionWithLse takes a mask as attention does (Focus merges masked parts): the same checks, the same output.
  assert.throws(() => attentionWithLse(q, k, k, { window: 8, mask: blockMask({ batch: 1, heads: 1, tq: 200, tk: 200 }) }), /window 0 \(attention: 8\)/);
  const whole = blockMask({ batch: 1, heads: 1, tq: 200, tk: 200 });
  close(vals(attentionWithLse(q, k, k, { mask: whole })[0]), vals(attention(q, k, k, { mask: whole })), 'attentionWithLse with a mask');
}));

test('blocks with no visible pair are never listed; a dropped key never contributes, while NaN in a visited one still shows', () => fon.tidy(() => {
  // The query at position 134 with a window of 1 sees key 134 only, past the 130 valid keys: no block.
  const empty = blockMask({ batch: 1, heads: 1, tq: 1, tk: 130, kvLength: 130, qOffset: 134, window: 1 });
  assert.equal(empty.visited, 0);
  assert.equal(empty.predicateBlocks, 0);
  const m = blockMask({ batch: 1, heads: 1, tq: 200, tk: 200 }, (_b, _h, _qb, kb) => kb !== 1);
  const q = fon.randn([1, 1, 200, 4], { seed: 1 });
  const kv = new Float32Array(200 * 4).map((_, i) => Math.sin(i));
  kv.fill(NaN, 64 * 4, 128 * 4); // key block 1, dropped by the mask
  const k = fon.tensor(kv, [1, 1, 200, 4]);
  const out = vals(attention(q, k, k, { mask: m }));
  assert.ok(out.every(Number.isFinite), 'the dropped NaN keys are never read');
  const qv = vals(q);
  qv.fill(NaN, 150 * 4, 151 * 4);
  const poisoned = vals(attention(fon.tensor(qv, [1, 1, 200, 4]), k, k, { mask: m }));
  assert.ok(poisoned.subarray(150 * 4, 151 * 4).every(Number.isNaN), 'a NaN query row comes out NaN');
  assert.ok(poisoned.subarray(0, 150 * 4).every(Number.isFinite));
}));

/** Segment ids of documents of the given lengths laid end to end. */
function packed(lengths: number[]): number[] {
  return lengths.flatMap((n, doc) => new Array<number>(n).fill(doc));
}

test('segments: packed documents attend within themselves, as the dense reference and as each document alone; one segment is plain causal; blocks between documents are left out', () => fon.tidy(() => {
  const t = 300, d = 8;
  const segments = [...packed([70, 150, 80]), ...packed([300]).map((x) => x + 7)];
  const m = blockMask({ batch: 2, heads: 1, tq: t, tk: t, segments });
  const plain = blockMask({ batch: 2, heads: 1, tq: t, tk: t });
  assert.ok(m.visited < plain.visited, `segments leave blocks out (${m.visited} of ${plain.visited})`);
  // Rows 256…299 (the third document, from 220) see nothing of keys 0…63 (the first).
  assert.equal(maskKeeps(m, 0, 0, 2, 0), false);
  assert.equal(maskKeeps(m, 0, 0, 2, 3), true);
  // The one-segment batch entry's lists, partial bits included, are plain causal's.
  for (let qb = 0; qb < m.qBlocks; qb++) assert.deepEqual([...maskEntries(m, 1, 0, qb)], [...maskEntries(plain, 1, 0, qb)], `query block ${qb}`);
  // Block (1, 1) of the first entry (rows 128…255, keys 64…127) lies inside the second document
  // for its keys but not for its rows (70…219 is the second document): partial.
  const entry = (qb: number, kb: number) => { for (const e of maskEntries(m, 0, 0, qb)) if (e >> 1 === kb) return e & 1; return -1; };
  assert.equal(entry(1, 1), 1);
  assert.equal(maskEntries(blockMask({ batch: 1, heads: 1, tq: t, tk: t, segments: new Array(t).fill(3) }), 0, 0, 1)[0] & 1, 0, 'a block of one segment below the diagonal is whole');

  const q = fon.randn([2, 2, t, d], { seed: 11, requiresGrad: true });
  const k = fon.randn([2, 1, t, d], { seed: 12, requiresGrad: true });
  const v = fon.randn([2, 1, t, d], { seed: 13, requiresGrad: true });
  const w = fon.randn([2, 2, t, d], { seed: 14 });
  const got = attention(q, k, v, { mask: m });
  fon.sum(fon.mul(got, w)).backward();
  const gGot = [q, k, v].map((x) => vals(x.grad!));
  const [qd, kd, vd] = [q, k, v].map((x) => fon.detach(x));
  const [q2, k2, v2] = [qd, kd, vd].map((x) => fon.tensor(vals(x), x.shape, { requiresGrad: true }));
  const want = dense(q2, k2, v2, m, {});
  fon.sum(fon.mul(want, w)).backward();
  close(vals(got), vals(want), 'out vs dense');
  ['dq', 'dk', 'dv'].forEach((name, i) => close(gGot[i], vals([q2, k2, v2][i].grad!), `${name} vs dense`, 1e-4));

  // Each document alone (batch entry 0): plain causal attention over its own rows.
  const out0 = vals(got).subarray(0, 2 * t * d);
  let start = 0;
  for (const n of [70, 150, 80]) {
    const part = (x: Tensor, heads: number) => fon.tensor(vals(x).filter((_, e) => Math.floor(e / (t * d)) < heads && (e % (t * d)) >= start * d && (e % (t * d)) < (start + n) * d), [1, heads, n, d]);
    const alone = vals(attention(part(qd, 2), part(kd, 1), part(vd, 1)));
    for (let hh = 0; hh < 2; hh++) close(out0.subarray((hh * t + start) * d, (hh * t + start + n) * d), alone.subarray(hh * n * d, (hh + 1) * n * d), `document at ${start}, head ${hh}`);
    start += n;
  }
  // The one-segment entry equals plain causal attention.
  const causal = vals(attention(qd, kd, vd));
  close(vals(got).subarray(2 * t * d), causal.subarray(2 * t * d), 'one segment vs causal');
}));

test('segments: bad ids refused by name', () => {
  const g = { batch: 2, heads: 1, tq: 100, tk: 100 };
  assert.throws(() => blockMask({ ...g, segments: new Array(100).fill(0) }), (e: Error) => e instanceof ArgumentError && e.message === 'blockMask: segments has 100 ids; expected batch × tk = 2 × 100 = 200');
  assert.throws(() => blockMask({ ...g, segments: [...new Array(199).fill(0), 0.5] }), /segment id 0.5 at 199 \(batch 1, position 99\) is not a 32-bit integer/);
  assert.throws(() => blockMask({ batch: 1, heads: 1, tq: 10, tk: 100, qOffset: 95, causal: false, segments: new Array(100).fill(0) }), /with segments every query position must be a key position: qOffset 95 \+ tq 10 is past tk 100/);
});

test('bit words: a pair is visible only where the words share no bit (forward and gradients against the dense reference), every listed block partial; with segments both predicates hold', () => {
  const t = 260, words = Array.from({ length: 2 * t }, (_, i) => (1 << (i % 3)) | (i % 5 === 0 ? 8 : 0));
  const docs = Array.from({ length: 2 * t }, (_, i) => ((i % t) < 100 ? 0 : 1));
  for (const segments of [undefined, docs]) {
    const q = fon.randn([2, 2, t, 4], { seed: 31 }), k = fon.randn([2, 2, t, 4], { seed: 32 }), v = fon.randn([2, 2, t, 4], { seed: 33 });
    const m = blockMask({ batch: 2, heads: 1, tq: t, tk: t, bits: words, ...(segments ? { segments } : {}) });
    for (let qb = 0; qb < m.qBlocks; qb++) for (const e of maskEntries(m, 1, 0, qb)) assert.equal(e & 1, 1, 'every listed block is partial');
    // Each word shares a bit with itself: the reference drops the diagonal too, so each row keeps some earlier key but row 0.
    const ref = (qq: Tensor, kk: Tensor, vv: Tensor) => {
      const [b, h] = qq.shape;
      const add = new Float32Array(b * h * t * t);
      for (let bb = 0; bb < b; bb++) for (let hh = 0; hh < h; hh++) for (let i = 0; i < t; i++) for (let j = 0; j < t; j++) {
        const ok = j <= i && (words[bb * t + i] & words[bb * t + j]) === 0 && (!segments || segments[bb * t + i] === segments[bb * t + j]);
        add[((bb * h + hh) * t + i) * t + j] = ok ? 0 : -1e30;
      }
      return fon.matmul(fon.softmax(fon.add(fon.mul(fon.matmul(qq, kk, { transB: true }), 0.5), fon.tensor(add, [b, h, t, t])), -1), vv);
    };
    const [got, lse] = attentionWithLse(q, k, v, { mask: m });
    const l = vals(lse);
    // Rows that see no key (row 0, and each document's first row) have lse −∞ and come out 0.
    const blind = (r: number) => (r % t === 0) || (!!segments && r % t === 100);
    for (let r = 0; r < l.length; r++) if (!blind(r)) assert.ok(Number.isFinite(l[r]), `row ${r} sees a key`);
    const g = vals(got), w = vals(ref(q, k, v));
    for (let r = 0; r < l.length; r++) if (!blind(r)) close(g.subarray(r * 4, r * 4 + 4), w.subarray(r * 4, r * 4 + 4), `row ${r}`);
  }
  assert.throws(() => blockMask({ batch: 1, heads: 1, tq: 4, tk: 4, bits: [1, 2, -1, 0] }), /bit word -1 at 2 \(batch 0, position 2\) is not an integer in \[0, 2\^32\)/);
  assert.throws(() => blockMask({ batch: 1, heads: 1, tq: 4, tk: 4, bits: [1] }), /bits has 1 words; expected batch × tk = 1 × 4 = 4/);
});

test('blockMaskFromBlocks: the caller\'s entries as they are (whole and partial), predicate blocks counted arithmetically, bad entries refused with the block named', () => {
  const g = { batch: 1, heads: 1, tq: 300, tk: 300 };
  // Causal by hand: key blocks up to the last row's; whole where every key is at or before the block's first row.
  const lists = (_b: number, _h: number, qb: number) => Array.from({ length: Math.floor((Math.min(300, 128 * qb + 128) - 1) / 64) + 1 }, (_, kb) => 2 * kb + (kb * 64 + 63 <= 128 * qb ? 0 : 1));
  const fast = blockMaskFromBlocks(g, lists);
  const slow = blockMask(g);
  assert.deepEqual(Array.from(fast.table), Array.from(slow.table), 'the classified causal mask, entry for entry');
  assert.equal(fast.predicateBlocks, slow.predicateBlocks);
  assert.equal(fast.visited, slow.visited);
  const windowed = { ...g, window: 100 };
  assert.equal(blockMaskFromBlocks(windowed, () => []).predicateBlocks, blockMask(windowed).predicateBlocks);
  assert.throws(() => blockMaskFromBlocks(g, (_b, _h, qb) => (qb === 0 ? [2 * 3] : [])), /query block 0 \(rows 0…127\): key block 3 \(keys 192…\) lies after every query of the block/);
  assert.throws(() => blockMaskFromBlocks(g, (_b, _h, qb) => (qb === 1 ? [2, 0] : [])), /key block 0 follows key block 1; entries must name ascending blocks, each once/);
  assert.throws(() => blockMaskFromBlocks(g, (_b, _h, qb) => (qb === 2 ? [2 * 5] : [])), /entry 10 names key block 5, not one of 0…4/);
});
