/**
 * attention and kvWrite on the CPU backend: the fused op against a dense composition of existing
 * ops (matmul, an additive −∞ mask, softmax, matmul; kv heads expanded by broadcasting for GQA)
 * for causal and full attention, sliding windows, GQA, kvLength < Tk with its query offset, and
 * one-query decode; gradients of q, k and v against central differences (checkGradient) and
 * against the dense composition's gradients; kvWrite; decode step by step with kvWrite equals
 * the prefill; the error types and messages.
 * Run: node --import tsx --test test/ops/attention.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, ShapeError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { attention, kvWrite, type AttentionOptions } from '../../src/ops/attention.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { checkGradient, type OpCase } from '../parity/run.ts';

const backend = new CpuBackend();
fon.setBackend(backend);

const vals = (t: Tensor): Float32Array => hostToF32(t.dataSync(), t.dtype);

/** |a − b| ≤ atol + rtol·|b| everywhere; names the first bad index. */
function close(a: Float32Array, b: Float32Array, what: string, rtol = 1e-5, atol = 1e-5): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < b.length; i++) {
    assert.ok(Number.isFinite(a[i]), `${what}[${i}]: got ${a[i]}`);
    assert.ok(Math.abs(a[i] - b[i]) <= atol + rtol * Math.abs(b[i]), `${what}[${i}]: got ${a[i]}, want ${b[i]}`);
  }
}

/** (Tq, Tk) additive mask: 0 where key j is visible to query i, −∞ elsewhere (the rule of the op's doc). */
function maskOf(tq: number, tk: number, opts: AttentionOptions): Tensor {
  const kvLength = opts.kvLength ?? tk, causal = opts.causal ?? true;
  const m = new Float32Array(tq * tk);
  for (let i = 0; i < tq; i++) {
    const p = kvLength - tq + i;
    for (let j = 0; j < tk; j++) {
      const ok = j < kvLength && (!causal || j <= p) && (opts.window === undefined || j > p - opts.window);
      m[i * tk + j] = ok ? 0 : -Infinity;
    }
  }
  return fon.tensor(m, [tq, tk]);
}

/** The dense reference: softmax(q·kᵀ·scale + mask)·v with kv heads repeated for GQA. */
function dense(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const [b, h, tq, d] = q.shape;
  const [, hkv, tk] = k.shape;
  const g = h / hkv;
  // (B, Hkv, Tk, D) → (B, Hkv, G, Tk, D) → (B, H, Tk, D)
  const expand = (x: Tensor) => (g === 1 ? x : fon.reshape(fon.broadcastTo(fon.reshape(x, [b, hkv, 1, tk, d]), [b, hkv, g, tk, d]), [b, h, tk, d]));
  const s = fon.mul(fon.matmul(q, expand(k), { transB: true }), opts.scale ?? 1 / Math.sqrt(d)); // (B, H, Tq, Tk)
  const p = fon.softmax(fon.add(s, maskOf(tq, tk, opts)), -1);
  return fon.matmul(p, expand(v)); // (B, H, Tq, D)
}

interface Case { name: string; q: number[]; kv: number[]; opts: AttentionOptions }

const CASES: Case[] = [
  { name: 'causal', q: [2, 3, 7, 8], kv: [2, 3, 7, 8], opts: {} },
  { name: 'full (not causal)', q: [1, 2, 5, 4], kv: [1, 2, 9, 4], opts: { causal: false } },
  { name: 'sliding window 3', q: [1, 2, 9, 8], kv: [1, 2, 9, 8], opts: { window: 3 } },
  { name: 'GQA 6/2', q: [1, 6, 5, 8], kv: [1, 2, 5, 8], opts: {} },
  { name: 'GQA 4/1 with window 2 and scale', q: [2, 4, 6, 5], kv: [2, 1, 6, 5], opts: { window: 2, scale: 0.7 } },
  { name: 'kvLength < Tk: query offset', q: [1, 2, 3, 8], kv: [1, 2, 11, 8], opts: { kvLength: 7 } },
  { name: 'kvLength < Tk, window, GQA', q: [1, 4, 4, 8], kv: [1, 2, 12, 8], opts: { kvLength: 9, window: 5 } },
  { name: 'Tq = 1 decode into a longer cache', q: [2, 4, 1, 16], kv: [2, 2, 20, 16], opts: { kvLength: 13 } },
  { name: 'not causal, kvLength < Tk', q: [1, 1, 4, 4], kv: [1, 1, 6, 4], opts: { causal: false, kvLength: 3 } },
];

const inputs = (c: Case, seed: number, dtype: fon.FloatDType = 'f32', requiresGrad = false): [Tensor, Tensor, Tensor] => [
  fon.randn(c.q, { seed, dtype, requiresGrad }),
  fon.randn(c.kv, { seed: seed + 1, dtype, requiresGrad }),
  fon.randn(c.kv, { seed: seed + 2, dtype, requiresGrad }),
];

for (const c of CASES) {
  test(`attention forward = dense composition: ${c.name}`, () => fon.tidy(() => {
    const [q, k, v] = inputs(c, 11);
    close(vals(attention(q, k, v, c.opts)), vals(dense(q, k, v, c.opts)), c.name);
  }));

  test(`attention gradient = dense composition's gradient: ${c.name}`, () => fon.tidy(() => {
    const [q, k, v] = inputs(c, 21, 'f32', true);
    const w = fon.randn(c.q, { seed: 99 });
    fon.backward(fon.sum(fon.mul(attention(q, k, v, c.opts), w)));
    const got = [q, k, v].map((t) => vals(t.grad!));
    for (const t of [q, k, v]) { t.grad!.dispose(); t.grad = null; }
    fon.backward(fon.sum(fon.mul(dense(q, k, v, c.opts), w)));
    ['dq', 'dk', 'dv'].forEach((n, i) => close(got[i], vals([q, k, v][i].grad!), `${c.name} ${n}`, 1e-4, 1e-5));
  }));
}

/** The op as a parity case, for the central-difference check of test/parity/run.ts. */
function gradCase(c: Case): OpCase {
  const spec = (shape: number[], seed: number) => ({ shape, dtype: 'f32' as const, gen: { kind: 'randn' as const, std: 1, mean: 0 }, seed });
  return {
    name: `attention/${c.name}`, op: 'attention', dtype: 'f32',
    inputs: [spec(c.q, 31), spec(c.kv, 32), spec(c.kv, 33)],
    run: (xs) => attention(xs[0], xs[1], xs[2], c.opts),
    grad: [0, 1, 2], tol: { rtol: 1e-4, atol: 1e-4 },
  };
}

for (const c of [CASES[0], CASES[2], CASES[4], CASES[6]]) {
  test(`attention gradient vs central differences: ${c.name}`, async () => {
    const r = await checkGradient(gradCase(c), { backend });
    assert.ok(r.ok, r.detail);
    assert.ok(r.checks >= 18, `only ${r.checks} directions compared`);
  });
}

test('attention f16 and bf16: f32 statistics, close to the f32 result on the same rounded inputs', () => fon.tidy(() => {
  const c = CASES[3];
  for (const [dtype, tol] of [['f16', 2e-3], ['bf16', 1.6e-2]] as const) {
    const [q, k, v] = inputs(c, 41, dtype);
    const out = attention(q, k, v, c.opts);
    assert.equal(out.dtype, dtype);
    const ref = attention(fon.cast(q, 'f32'), fon.cast(k, 'f32'), fon.cast(v, 'f32'), c.opts);
    close(vals(out), vals(ref), dtype, tol, tol);
  }
}));

test('attention with kvLength 0 gives zeros (not NaN), and zero gradients', () => fon.tidy(() => {
  for (const causal of [true, false]) {
    const q = fon.randn([1, 2, 3, 4], { seed: 5, requiresGrad: true });
    const k = fon.randn([1, 2, 6, 4], { seed: 6, requiresGrad: true });
    const v = fon.randn([1, 2, 6, 4], { seed: 7, requiresGrad: true });
    const out = attention(q, k, v, { kvLength: 0, causal });
    assert.deepEqual(Array.from(vals(out)), new Array(24).fill(0));
    fon.backward(fon.sum(out));
    for (const t of [q, k, v]) assert.ok(vals(t.grad!).every((x) => x === 0), 'gradient not zero');
  }
}));

test('attention: rows before the first key (causal, kvLength < Tq) are zero, the others match the dense rows', () => fon.tidy(() => {
  const q = fon.randn([1, 1, 5, 4], { seed: 8 }), k = fon.randn([1, 1, 3, 4], { seed: 9 }), v = fon.randn([1, 1, 3, 4], { seed: 10 });
  const out = vals(attention(q, k, v)); // query offset −2: rows 0 and 1 see no key
  assert.ok(out.subarray(0, 8).every((x) => x === 0));
  const tail = dense(fon.slice(q, [0, 0, 2, 0], [1, 1, 3, 4]), k, v);
  close(out.subarray(8), vals(tail), 'rows 2..4');
}));

test('kvWrite writes rows [pos, pos + n) of every (batch, kv head) in place; other rows are untouched', () => fon.tidy(() => {
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    const cache = fon.randn([2, 3, 6, 4], { seed: 1, dtype });
    const view = fon.reshape(cache, [6, 6, 4]); // shares the storage
    const before = vals(cache);
    const x = fon.randn([2, 3, 2, 4], { seed: 2, dtype });
    kvWrite(cache, x, 3);
    const after = vals(cache), xv = vals(x), seen = vals(view);
    for (let bh = 0; bh < 6; bh++) for (let t = 0; t < 6; t++) for (let c = 0; c < 4; c++) {
      const i = (bh * 6 + t) * 4 + c;
      const want = t >= 3 && t < 5 ? xv[(bh * 2 + t - 3) * 4 + c] : before[i];
      assert.equal(after[i], want, `${dtype} (${bh}, ${t}, ${c})`);
      assert.equal(seen[i], want, `${dtype}: a view of the cache sees the write`);
    }
  }
}));

test('kvWriteMany writes each (cache, rows) pair as kvWrite does, caches of other shapes and dtypes at one position; a bad pair is refused by the op\'s name before anything is written', () => fon.tidy(() => {
  const caches = [fon.randn([2, 3, 6, 4], { seed: 1 }), fon.randn([2, 3, 6, 4], { seed: 2, dtype: 'f16' }), fon.randn([2, 1, 6, 8], { seed: 3, dtype: 'bf16' })];
  const rows = [fon.randn([2, 3, 2, 4], { seed: 4 }), fon.randn([2, 3, 2, 4], { seed: 5, dtype: 'f16' }), fon.randn([2, 1, 2, 8], { seed: 6, dtype: 'bf16' })];
  const want = caches.map((c, i) => { const w = fon.add(c, 0); kvWrite(w, rows[i], 3); return vals(w); });
  fon.kvWriteMany(caches.map((c, i) => [c, rows[i]] as const), 3);
  caches.forEach((c, i) => assert.deepEqual(vals(c), want[i], `pair ${i}`));
  const before = caches.map(vals);
  assert.throws(() => fon.kvWriteMany([[caches[0], rows[0]], [caches[1], rows[0]]], 1), (e) => e instanceof DTypeError && e.message === 'kvWriteMany: x dtype f32 must equal cache dtype f16');
  assert.throws(() => fon.kvWriteMany([[caches[0], rows[0]]], 5), (e) => e instanceof ArgumentError && e.message.startsWith('kvWriteMany: rows [5, 7) must be integers inside the cache\'s 6 rows'));
  caches.forEach((c, i) => assert.deepEqual(vals(c), before[i], `pair ${i} untouched by a refused call`));
}));

test('decode step by step with kvWrite equals the prefill output (GQA, window)', () => fon.tidy(() => {
  const [b, h, hkv, t, d, tmax] = [1, 4, 2, 9, 8, 12];
  for (const opts of [{}, { window: 4 }] as AttentionOptions[]) {
    const q = fon.randn([b, h, t, d], { seed: 1 }), k = fon.randn([b, hkv, t, d], { seed: 2 }), v = fon.randn([b, hkv, t, d], { seed: 3 });
    const prefill = vals(attention(q, k, v, opts));
    const kc = fon.zeros([b, hkv, tmax, d]), vc = fon.zeros([b, hkv, tmax, d]);
    // The first 3 tokens as one chunk, then one token at a time.
    const steps: [number, number][] = [[0, 3], ...Array.from({ length: t - 3 }, (_, i): [number, number] => [3 + i, 1])];
    for (const [pos, n] of steps) {
      kvWrite(kc, fon.slice(k, [0, 0, pos, 0], [b, hkv, n, d]), pos);
      kvWrite(vc, fon.slice(v, [0, 0, pos, 0], [b, hkv, n, d]), pos);
      const out = vals(attention(fon.slice(q, [0, 0, pos, 0], [b, h, n, d]), kc, vc, { ...opts, kvLength: pos + n }));
      for (let hh = 0; hh < h; hh++) {
        const want = prefill.subarray((hh * t + pos) * d, (hh * t + pos + n) * d);
        close(out.subarray(hh * n * d, (hh + 1) * n * d), want, `step at ${pos}, head ${hh}`, 1e-5, 1e-6);
      }
    }
  }
}));

/** fn throws exactly `cls` with a message matching `re`. */
function throwsExactly(fn: () => unknown, cls: typeof ShapeError | typeof DTypeError | typeof ArgumentError, re: RegExp): void {
  const before = backend.memory().liveHandles;
  fon.tidy(() => assert.throws(fn, (e: unknown) => (e as Error).constructor === cls && re.test((e as Error).message), `expected ${cls.name} matching ${re}`));
  assert.equal(backend.memory().liveHandles, before, 'the failed call left handles alive');
}

test('attention and kvWrite errors name the op, the shapes and the bad values', () => fon.tidy(() => {
  const q = fon.randn([1, 4, 3, 8]), k = fon.randn([1, 2, 5, 8]), v = fon.randn([1, 2, 5, 8]);
  throwsExactly(() => attention(fon.randn([4, 3, 8]), k, v), ShapeError, /attention: q, k and v must have rank 4 \(B, H, T, D\), got q \[4, 3, 8\], k \[1, 2, 5, 8\], v \[1, 2, 5, 8\]/);
  throwsExactly(() => attention(q, k, fon.randn([1, 2, 4, 8])), ShapeError, /attention: v must have k's shape, got q \[1, 4, 3, 8\], k \[1, 2, 5, 8\], v \[1, 2, 4, 8\]/);
  throwsExactly(() => attention(q, fon.randn([1, 2, 5, 6]), fon.randn([1, 2, 5, 6])), ShapeError, /attention: k and v must be \(1, Hkv, Tk, 8\).*k \[1, 2, 5, 6\]/);
  throwsExactly(() => attention(fon.randn([1, 3, 3, 8]), k, v), ShapeError, /attention: query heads 3 must be a multiple of kv heads 2/);
  throwsExactly(() => attention(q, fon.cast(k, 'f16'), v), DTypeError, /attention: q, k and v must share one dtype, got f32, f16 and f32/);
  throwsExactly(() => attention(fon.zeros([1, 4, 3, 8], { dtype: 'i32' }), k, v), DTypeError, /attention: expected a float tensor/);
  throwsExactly(() => attention(q, k, v, { kvLength: 6 }), ArgumentError, /attention: kvLength 6 must be an integer in \[0, 5\]/);
  throwsExactly(() => attention(q, k, v, { kvLength: 2.5 }), ArgumentError, /attention: kvLength 2.5/);
  throwsExactly(() => attention(q, k, v, { window: 0 }), ArgumentError, /attention: window 0 must be a positive integer/);
  throwsExactly(() => attention(q, k, v, { scale: NaN }), ArgumentError, /attention: scale NaN must be a finite number/);
  const cache = fon.zeros([1, 2, 6, 8]);
  throwsExactly(() => kvWrite(cache, fon.randn([1, 2, 2, 8]), 5), ArgumentError, /kvWrite: rows \[5, 7\) must be integers inside the cache's 6 rows/);
  throwsExactly(() => kvWrite(cache, fon.randn([1, 2, 2, 8]), -1), ArgumentError, /kvWrite: rows \[-1, 1\)/);
  throwsExactly(() => kvWrite(cache, fon.randn([1, 3, 2, 8]), 0), ShapeError, /kvWrite: x \[1, 3, 2, 8\] must be \(1, 2, n, 8\) for cache \[1, 2, 6, 8\]/);
  throwsExactly(() => kvWrite(cache, fon.randn([1, 2, 2, 8], { dtype: 'f16' }), 0), DTypeError, /kvWrite: x dtype f16 must equal cache dtype f32/);
  throwsExactly(() => kvWrite(fon.zeros([2, 6, 8]), fon.randn([1, 2, 2, 8]), 0), ShapeError, /kvWrite: cache and x must have rank 4/);
}));
