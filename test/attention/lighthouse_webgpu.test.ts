/**
 * Lighthouse on the WebGPU backend (SwiftShader in CI) against the CPU reference
 * (backend/cpu/lighthouse.ts): the device selection (lighthouse.wgsl: scores, pooling, the cascade
 * per tile, the causal placement) gives the CPU's rows word for word on equal scores — levels 1 to 4,
 * pool 2 and 4, small tiles, qk from 0 to tile, tails padded to the tiles, several lists with GQA,
 * heavy ties (integer and repeated rows, bf16 storage), a tile with thousands of coarsest candidates;
 * invertRows and the distinct-row gathers equal the CPU's; the whole layer's output and its
 * gradients in q, k and v match the CPU's within f32 rounding; bad arguments are refused by name.
 * Scores are squared norms summed in f32, so inputs whose sums are exact (one column, or small
 * multiples of 1/4) give equal scores on both backends whatever order or fusion the device uses.
 * Run: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 XDG_RUNTIME_DIR=/tmp node --import tsx --test test/attention/lighthouse_webgpu.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { lighthouseGeometry, LIGHTHOUSE_DEFAULTS, type LighthouseOptions } from '../../src/attention/lighthouse/geometry.ts';
import { lighthouseAttention, lighthouseSelection } from '../../src/attention/lighthouse/lighthouse.ts';
import { dilatedTokenScores } from '../../src/attention/lighthouse/dilated.ts';
import { lighthouseSelect, type LighthouseSelectOptions } from '../../src/ops/lighthouse.ts';
import { gatherDistinctRows, invertRows, scatterDistinctRows } from '../../src/ops/indexing.ts';
import { lighthouseLayout } from '../../src/backend/lighthouse_layout.ts';
import { ArgumentError, DTypeError, ShapeError, UnsupportedError } from '../../src/errors.ts';
import type { DType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const opts = (o: Partial<LighthouseOptions>): LighthouseOptions => ({ ...LIGHTHOUSE_DEFAULTS, ...o, qk: o.qk ?? Math.floor((o.tile ?? 128) / 2) });

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Host values of a shape: 'float' uniform in (−2, 2); 'int' multiples of 1/4 in [−1, 1] (exact squared sums, many ties); 'repeat' rows copied from a few (equal scores across positions). */
function values(shape: readonly number[], seed: number, kind: 'float' | 'int' | 'repeat'): Float32Array {
  const rnd = lcg(seed), size = shape.reduce((a, b) => a * b, 1), d = shape[shape.length - 1];
  const x = Float32Array.from({ length: size }, () => (kind === 'float' ? 4 * rnd() - 2 : Math.round(8 * rnd() - 4) / 4));
  if (kind === 'repeat') for (let r = 0; r < size / d; r++) x.copyWithin(r * d, ((r * 7) % 5) * d, ((r * 7) % 5) * d + d);
  return x;
}

const on = (b: Backend, x: Float32Array, shape: readonly number[], dtype: DType = 'f32') => fon.tensor(x, shape, { backend: b, dtype });
const rowsOf = async (t: fon.Tensor) => Array.from((await t.data()) as Int32Array);

/** The tile structure lighthouseGeometry gives for N tokens and the options. */
function structure(n: number, o: LighthouseOptions): LighthouseSelectOptions {
  const g = lighthouseGeometry(n, o);
  return { levels: g.levels, pool: g.pool, tiles: g.tiles, perTile: g.perTile, tile: g.tile, qk: g.qk };
}

interface Case { b: number; h: number; hkv: number; n: number; d: number; o: Partial<LighthouseOptions>; kind: 'float' | 'int' | 'repeat'; dtype?: DType; what: string }

const CASES: Case[] = [
  { b: 1, h: 1, hkv: 1, n: 13, d: 1, o: { levels: 1, pool: 2, topk: 8, tile: 4 }, kind: 'float', what: 'one level (tokens only), a padded tail' },
  { b: 1, h: 2, hkv: 2, n: 64, d: 1, o: { levels: 2, pool: 2, topk: 8, tile: 4 }, kind: 'float', what: 'L = 2, p = 2, two tiles of 16' },
  { b: 2, h: 2, hkv: 1, n: 200, d: 1, o: { levels: 3, pool: 4, topk: 8, tile: 4, qk: 1 }, kind: 'float', what: 'L = 3, p = 4, B·H = 4 with GQA, N padded to 256' },
  { b: 1, h: 3, hkv: 3, n: 300, d: 1, o: { levels: 4, pool: 2, topk: 16, tile: 8, qk: 3 }, kind: 'float', what: 'L = 4, p = 2, uneven qk, N padded' },
  { b: 1, h: 2, hkv: 1, n: 96, d: 4, o: { levels: 3, pool: 2, topk: 8, tile: 4, qk: 0 }, kind: 'int', what: 'qk = 0 (key scores only), integer ties' },
  { b: 1, h: 2, hkv: 2, n: 96, d: 4, o: { levels: 3, pool: 2, topk: 8, tile: 4, qk: 4 }, kind: 'int', what: 'qk = tile (query scores only), integer ties' },
  { b: 2, h: 2, hkv: 2, n: 120, d: 3, o: { levels: 3, pool: 2, topk: 12, tile: 4, qk: 2 }, kind: 'repeat', what: 'repeated rows: equal scores everywhere, ties by index' },
  { b: 1, h: 2, hkv: 1, n: 150, d: 8, o: { levels: 2, pool: 4, topk: 8, tile: 8, qk: 5 }, kind: 'int', dtype: 'bf16', what: 'bf16 storage, integer ties' },
  { b: 1, h: 1, hkv: 1, n: 40, d: 1, o: { levels: 3, pool: 2, topk: 16, tile: 16 }, kind: 'float', what: 'Cc < tile: every block refined' },
  { b: 1, h: 2, hkv: 1, n: 10000, d: 1, o: { levels: 2, pool: 2, topk: 8, tile: 8, qk: 3 }, kind: 'float', what: 'one tile of 5000 coarsest candidates (more than a 16 KiB workgroup holds)' },
];

test('lighthouseSelect on webgpu gives the CPU\'s rows word for word: levels 1–4, pool 2 and 4, qk 0 … tile, padded tails, GQA, ties, bf16, Cc = 5000 [webgpu]', { skip }, async () => {
  for (const c of CASES) {
    const o = opts(c.o), so = structure(c.n, o);
    const qv = values([c.b, c.h, c.n, c.d], c.n + 1, c.kind), kv = values([c.b, c.hkv, c.n, c.d], c.n + 2, c.kind);
    const run = (b: Backend) => lighthouseSelect(on(b, qv, [c.b, c.h, c.n, c.d], c.dtype), on(b, kv, [c.b, c.hkv, c.n, c.d], c.dtype), so);
    const want = await rowsOf(run(cpu)), got = await rowsOf(run(gpu!));
    const S = lighthouseLayout({ n: c.n, ...so }).gathered;
    assert.equal(want.length, c.b * c.h * S, c.what);
    const first = got.findIndex((r, i) => r !== want[i]);
    assert.equal(first, -1, `${c.what}: first difference at list ${Math.floor(first / S)}, place ${first % S}: webgpu ${got[first]}, cpu ${want[first]}`);
  }
});

test('the selection depends on the scores: scaling one token\'s q changes which rows the device gathers, as on the CPU [webgpu]', { skip }, async () => {
  const c = CASES[2], o = opts(c.o), so = structure(c.n, o);
  const qv = values([c.b, c.h, c.n, c.d], 5, 'float'), kv = values([c.b, c.hkv, c.n, c.d], 6, 'float');
  const base = await rowsOf(lighthouseSelect(on(gpu!, qv, [c.b, c.h, c.n, c.d]), on(gpu!, kv, [c.b, c.hkv, c.n, c.d]), so));
  qv[137] = 50; // list 0, token 137: now the largest query norm of its tile at every level
  const moved = lighthouseSelect(on(gpu!, qv, [c.b, c.h, c.n, c.d]), on(gpu!, kv, [c.b, c.hkv, c.n, c.d]), so);
  const after = await rowsOf(moved);
  assert.notDeepEqual(after, base);
  assert.ok(after.slice(0, lighthouseLayout({ n: c.n, ...so }).gathered).includes(137), 'token 137 is gathered at full resolution');
  assert.deepEqual(after, await rowsOf(lighthouseSelect(on(cpu, qv, [c.b, c.h, c.n, c.d]), on(cpu, kv, [c.b, c.hkv, c.n, c.d]), so)));
});

test('invertRows, gatherDistinctRows and scatterDistinctRows on webgpu equal the CPU; the gathers\' gradients too [webgpu]', { skip }, async () => {
  const rnd = lcg(9), lists = 3, m = 37, n = 101;
  const rows = new Int32Array(lists * m);
  for (let s = 0; s < lists; s++) {
    const perm = Array.from({ length: n }, (_, i) => i).sort(() => rnd() - 0.5);
    rows.set(perm.slice(0, m), s * m);
  }
  const inv = (b: Backend) => invertRows(fon.tensor(rows, [lists, m], { dtype: 'i32', backend: b }), n);
  const want = await rowsOf(inv(cpu));
  assert.deepEqual(await rowsOf(inv(gpu!)), want);
  for (let s = 0; s < lists; s++) for (let j = 0; j < m; j++) assert.equal(want[s * n + rows[s * m + j]], j);
  assert.equal(want.filter((x) => x === m).length, lists * (n - m), 'rows not listed hold M');
  // x (lists, n, 5), one row list per leading entry: gathered, weighted, scattered back, with the gradient of x.
  const xv = values([lists, n, 5], 3, 'float'), wv = values([lists, m, 5], 4, 'float'), w2 = values([lists, n, 5], 8, 'float');
  const run = async (b: Backend) => {
    const x = fon.tensor(xv, [lists, n, 5], { backend: b, requiresGrad: true });
    const r = fon.tensor(rows, [lists, m], { dtype: 'i32', backend: b });
    const iv = invertRows(r, n);
    const g = gatherDistinctRows(x, r, iv, 1); // (lists, m, 5)
    const back = scatterDistinctRows(fon.mul(g, fon.tensor(wv, [lists, m, 5], { backend: b })), r, iv, 1); // (lists, n, 5)
    fon.backward(fon.sum(fon.mul(back, fon.tensor(w2, [lists, n, 5], { backend: b }))));
    return [await g.data(), await back.data(), await x.grad!.data()] as Float32Array[];
  };
  const [a, b] = [await run(cpu), await run(gpu!)];
  a.forEach((x, i) => assert.deepEqual(Array.from(b[i]), Array.from(x), ['gathered', 'scattered back', 'dx'][i]));
});

test('the whole layer on webgpu: output and the gradients of q, k and v match the CPU within f32 rounding, the selection equal word for word [webgpu]', { skip }, async () => {
  const shapes: [n: number, o: Partial<LighthouseOptions>, h: number, hkv: number][] = [
    [29, { levels: 3, pool: 2, topk: 4, tile: 4 }, 2, 1],
    [70, { levels: 2, pool: 4, topk: 8, tile: 4, qk: 1 }, 2, 2],
    [64, { levels: 4, pool: 2, topk: 4, tile: 4, qk: 3 }, 1, 1],
  ];
  for (const [n, oo, h, hkv] of shapes) {
    const o = opts(oo), b = 2, d = 4;
    // q and k in multiples of 1/4: their squared norms are exact, so both backends select alike.
    const host = [values([b, h, n, d], n, 'int'), values([b, hkv, n, d], n + 1, 'int'), values([b, hkv, n, d], n + 2, 'float')];
    const w = values([b, h, n, d], n + 3, 'float');
    const run = async (be: Backend) => {
      const [q, k, v] = host.map((x, i) => fon.tensor(x, [b, i === 0 ? h : hkv, n, d], { backend: be, requiresGrad: true }));
      const sel = lighthouseSelection(q, k, o);
      const rows = await rowsOf(sel.rows);
      sel.dispose();
      const y = lighthouseAttention(q, k, v, o);
      fon.backward(fon.sum(fon.mul(y, fon.tensor(w, [b, h, n, d], { backend: be }))));
      return { rows, out: [await y.data(), await q.grad!.data(), await k.grad!.data(), await v.grad!.data()] as Float32Array[] };
    };
    const [a, g] = [await run(cpu), await run(gpu!)];
    assert.deepEqual(g.rows, a.rows, `N=${n}: selection`);
    a.out.forEach((x, i) => {
      let worst = 0, scale = 0;
      for (let j = 0; j < x.length; j++) { worst = Math.max(worst, Math.abs(x[j] - g.out[i][j])); scale = Math.max(scale, Math.abs(x[j])); }
      assert.ok(scale > 0.01, `N=${n}: ${['y', 'dq', 'dk', 'dv'][i]} is not all zero`);
      assert.ok(worst <= 1e-5 * Math.max(1, scale), `N=${n}: ${['y', 'dq', 'dk', 'dv'][i]}: max |webgpu − cpu| ${worst} (largest ${scale})`);
    });
  }
});

test('the dilated scorer on webgpu: its token scores match the CPU\'s within f32 rounding, and the layer under it runs forward and backward [webgpu]', { skip }, async () => {
  const shape = [1, 2, 40, 8];
  const make = (be: Backend, seed: number) => fon.tensor(values(shape, seed, 'float'), shape, { backend: be });
  const [qc, kc, vc] = [1, 2, 3].map((s) => make(cpu, s)), [qg, kg, vg] = [1, 2, 3].map((s) => make(gpu!, s));
  const c = dilatedTokenScores(qc, kc, vc), g = dilatedTokenScores(qg, kg, vg);
  for (const key of ['qk', 'kq'] as const) {
    const x = (await g[key].data()) as Float32Array, y = c[key].dataSync() as Float32Array;
    for (let i = 0; i < y.length; i++) assert.ok(Math.abs(x[i] - y[i]) <= 1e-5 * Math.max(1, Math.abs(y[i])), `${key}[${i}]: ${x[i]} against ${y[i]}`);
  }
  const q = fon.tensor(values(shape, 1, 'float'), shape, { backend: gpu!, requiresGrad: true });
  const y = lighthouseAttention(q, kg, vg, opts({ levels: 2, pool: 2, topk: 8, tile: 4, qk: 2, scorer: 'dilated' }));
  fon.sum(y).backward();
  assert.ok(((await q.grad!.data()) as Float32Array).every(Number.isFinite));
});

test('memory on webgpu: a forward and backward leave no buffer behind once the output and gradients are freed [webgpu]', { skip }, async () => {
  const o = opts({ levels: 3, pool: 2, topk: 4, tile: 4 });
  const xs = [[1, 2, 30, 4], [1, 1, 30, 4], [1, 1, 30, 4]].map((shape, i) => fon.randn(shape, { seed: 51 + i, backend: gpu!, requiresGrad: true }));
  await gpu!.sync();
  const before = gpu!.memory().liveHandles;
  const y = lighthouseAttention(xs[0], xs[1], xs[2], o);
  const loss = fon.sum(y);
  fon.backward(loss);
  for (const t of [y, loss]) t.dispose();
  for (const x of xs) { x.grad!.dispose(); x.grad = null; }
  await gpu!.sync();
  assert.equal(gpu!.memory().liveHandles, before);
});

test('bad arguments are refused by name: lighthouseSelect\'s shapes, dtypes and tile structure; invertRows; the distinct-row gathers; the device\'s level limit', async () => {
  const q = fon.zeros([1, 2, 16, 4]), k = fon.zeros([1, 2, 16, 4]);
  const so: LighthouseSelectOptions = { levels: 2, pool: 2, tiles: 2, perTile: 4, tile: 4, qk: 2 };
  const refuses = (fn: () => unknown, type: new (...a: never[]) => Error, message: string) => assert.throws(fn, (e: Error) => e instanceof type && e.message === message, message);
  refuses(() => lighthouseSelect(fon.zeros([2, 16, 4]), k, so), ShapeError, 'lighthouseSelect: q [2, 16, 4] and k [1, 2, 16, 4] must be (B, H, N, D) and (B, Hkv, N, D) with Hkv dividing H');
  refuses(() => lighthouseSelect(q, fon.zeros([1, 3, 16, 4]), so), ShapeError, 'lighthouseSelect: q [1, 2, 16, 4] and k [1, 3, 16, 4] must be (B, H, N, D) and (B, Hkv, N, D) with Hkv dividing H');
  refuses(() => lighthouseSelect(q, fon.zeros([1, 2, 15, 4]), so), ShapeError, 'lighthouseSelect: q [1, 2, 16, 4] and k [1, 2, 15, 4] must be (B, H, N, D) and (B, Hkv, N, D) with Hkv dividing H');
  refuses(() => lighthouseSelect(fon.zeros([1, 2, 16, 4], { dtype: 'i32' }), k, so), DTypeError, 'lighthouseSelect: expected a float tensor (f32, f16, bf16), got i32');
  refuses(() => lighthouseSelect(q, k, { ...so, pool: 3 }), ArgumentError, 'lighthouseSelect: pool 3 must be a power of 2 ≥ 2');
  refuses(() => lighthouseSelect(q, k, { ...so, qk: 5 }), ArgumentError, 'lighthouseSelect: qk 5 must be an integer in [0, tile = 4]');
  refuses(() => lighthouseSelect(q, k, { ...so, tiles: 0 }), ArgumentError, 'lighthouseSelect: tiles 0 must be an integer ≥ 1');
  refuses(() => lighthouseSelect(q, k, { ...so, levels: 1.5 }), ArgumentError, 'lighthouseSelect: levels 1.5 must be an integer ≥ 1');
  refuses(() => lighthouseSelect(q, k, { ...so, perTile: 3 }), ArgumentError, 'lighthouseSelect: 2 tiles of 3 coarsest entries of 2^1 tokens cover 12 tokens, fewer than the sequence\'s 16');
  const rows = fon.tensor(new Int32Array([3, 1, 3]), [1, 3], { dtype: 'i32' });
  refuses(() => invertRows(rows, 2), ArgumentError, 'invertRows: n 2 must be an integer ≥ M = 3 (the rows of a list are distinct, in [0, n))');
  refuses(() => invertRows(fon.zeros([3], { dtype: 'i32' }), 4), ShapeError, 'invertRows: rows [3] must be (S, M)');
  refuses(() => invertRows(fon.zeros([1, 3]), 4), DTypeError, 'invertRows: rows must be i32, got f32');
  refuses(() => invertRows(rows, 5), ArgumentError, 'invertRows: row 3 listed twice in list 0 (places 0 and 2); rows must be distinct within a list');
  refuses(() => invertRows(fon.tensor(new Int32Array([0, 7]), [1, 2], { dtype: 'i32' }), 5), ArgumentError, 'invertRows: row 7 (list 0, place 1) out of range [0, 5)');
  const good = fon.tensor(new Int32Array([4, 0]), [1, 2], { dtype: 'i32' }), inv = invertRows(good, 5);
  refuses(() => gatherDistinctRows(fon.zeros([2, 6, 3]), good, inv, 1), ShapeError, 'gatherDistinctRows: rows [1, 2] and inverse [1, 5] must be (S, M) and (S, 6) with S dividing the 2 entries before axis 1 of [2, 6, 3]');
  refuses(() => scatterDistinctRows(fon.zeros([2, 3, 3]), good, inv, 1), ShapeError, 'scatterDistinctRows: y [2, 3, 3] has 3 rows along axis 1, but rows [1, 2] lists 2');
  if (gpu) {
    const qg = fon.zeros([1, 1, 2 ** 16, 1], { backend: gpu });
    refuses(() => lighthouseSelect(qg, qg, { levels: 17, pool: 2, tiles: 1, perTile: 1, tile: 1, qk: 0 }), UnsupportedError, 'webgpu: lighthouseSelect takes at most 16 levels, got 17');
  }
});
