/**
 * Paged attention (ops/paged_attention.ts) against the contiguous op over the same positions, on
 * cpu, wasm and webgpu: pages of 128 rows, contexts of 1 … 4 pages, calls of 1 … 40 query rows that
 * start inside a page and cross one or two boundaries, GQA, sliding windows narrower and wider than
 * a page (rows that see none of an earlier page), f32 and f16; kvWritePaged writes exactly the rows
 * a contiguous kvWrite writes. One page holding every position is the contiguous call bit for bit.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/ops/paged_attention.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import '../../src/backend/wasm/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';
import { attention, kvWrite } from '../../src/ops/attention.ts';
import { attentionPaged, kvWritePaged, PAGE_TILE } from '../../src/ops/paged_attention.ts';
import type { FloatDType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const wasm = await fon.initBackend('wasm');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();

const P = PAGE_TILE;
const TOL: Record<FloatDType, number> = { f32: 2e-5, f16: 4e-3, bf16: 2e-2 };

interface Case { kvLength: number; tq: number; heads: number; kvHeads: number; d: number; window?: number; dtype: FloatDType }

const CASES: Case[] = [
  { kvLength: 100, tq: 1, heads: 2, kvHeads: 1, d: 16, dtype: 'f32' },          // one page
  { kvLength: 129, tq: 1, heads: 2, kvHeads: 1, d: 16, dtype: 'f32' },          // the first row of page 2
  { kvLength: 300, tq: 1, heads: 4, kvHeads: 2, d: 8, dtype: 'f32' },           // decode over 3 pages
  { kvLength: 300, tq: 5, heads: 4, kvHeads: 2, d: 8, dtype: 'f32' },           // a verify pass inside page 3
  { kvLength: 260, tq: 8, heads: 2, kvHeads: 2, d: 16, dtype: 'f32' },          // rows 252 … 259 cross into page 3
  { kvLength: 400, tq: 40, heads: 2, kvHeads: 1, d: 16, dtype: 'f32' },         // 40 rows from page 3 into page 4
  { kvLength: 290, tq: 170, heads: 2, kvHeads: 1, d: 8, dtype: 'f32' },         // rows over two boundaries
  { kvLength: 300, tq: 6, heads: 4, kvHeads: 1, d: 16, window: 40, dtype: 'f32' },  // the window reaches one page back
  { kvLength: 300, tq: 20, heads: 2, kvHeads: 1, d: 16, window: 8, dtype: 'f32' },  // rows past page 2's reach
  { kvLength: 511, tq: 3, heads: 2, kvHeads: 1, d: 16, window: 200, dtype: 'f32' }, // window over two pages
  { kvLength: 300, tq: 4, heads: 4, kvHeads: 2, d: 16, dtype: 'f16' },
  { kvLength: 383, tq: 30, heads: 2, kvHeads: 1, d: 16, window: 64, dtype: 'f16' },
];

const randn = (shape: number[], seed: number, backend: Backend, dtype: FloatDType) => fon.randn(shape, { seed, backend, dtype });

/** The contiguous reference and the paged result of one case on `backend`, as f32 host arrays. */
async function run(c: Case, backend: Backend, pageRows = P): Promise<{ want: Float32Array; got: Float32Array }> {
  return fon.noGrad(async () => {
    const { kvLength, tq, heads, kvHeads, d, window, dtype } = c;
    const pages = Math.max(1, Math.ceil(kvLength / pageRows));
    const q = randn([1, heads, tq, d], 1, backend, dtype);
    const k = randn([1, kvHeads, kvLength, d], 2, backend, dtype);
    const v = randn([1, kvHeads, kvLength, d], 3, backend, dtype);
    const contiguous = { k: fon.zeros([1, kvHeads, pages * pageRows, d], { backend, dtype }), v: fon.zeros([1, kvHeads, pages * pageRows, d], { backend, dtype }) };
    kvWrite(contiguous.k, k, 0);
    kvWrite(contiguous.v, v, 0);
    const want = attention(q, contiguous.k, contiguous.v, { causal: true, window, kvLength });
    const kp = Array.from({ length: pages }, () => fon.zeros([1, kvHeads, pageRows, d], { backend, dtype }));
    const vp = Array.from({ length: pages }, () => fon.zeros([1, kvHeads, pageRows, d], { backend, dtype }));
    // Written in two calls, the second crossing a boundary where there is one.
    const cut = Math.min(kvLength, pageRows - 3 > 0 && kvLength > pageRows ? pageRows - 3 : kvLength);
    for (const [pg, x] of [[kp, k], [vp, v]] as const) {
      kvWritePaged(pg, pageRows, fon.narrow(x, 2, 0, cut), 0);
      if (cut < kvLength) kvWritePaged(pg, pageRows, fon.narrow(x, 2, cut, kvLength - cut), cut);
    }
    const got = attentionPaged(q, { k: kp, v: vp, pageRows }, { window, kvLength });
    const f32 = async (t: Tensor) => Float32Array.from((await (t.dtype === 'f32' ? t : fon.cast(t, 'f32')).data()) as Float32Array);
    // The pages hold exactly the contiguous rows.
    for (let i = 0; i < pages; i++) {
      const rows = Math.min(pageRows, kvLength - i * pageRows);
      const a = await f32(fon.narrow(kp[i], 2, 0, rows)), b = await f32(fon.narrow(contiguous.k, 2, i * pageRows, rows));
      assert.deepEqual(a, b, `page ${i}'s k rows`);
    }
    const out = { want: await f32(want), got: await f32(got) };
    for (const t of [q, k, v, contiguous.k, contiguous.v, want, got, ...kp, ...vp]) t.dispose();
    return out;
  });
}

function close(c: Case, want: Float32Array, got: Float32Array, what: string): void {
  assert.equal(got.length, want.length);
  const tol = TOL[c.dtype];
  for (let i = 0; i < want.length; i++) {
    assert.ok(Number.isFinite(got[i]) && Math.abs(got[i] - want[i]) <= tol * (1 + Math.abs(want[i])), `${what} [${i}]: paged ${got[i]}, contiguous ${want[i]}`);
  }
}

const label = (c: Case) => `kvLength ${c.kvLength}, ${c.tq} rows, H ${c.heads}/${c.kvHeads}, D ${c.d}${c.window ? `, window ${c.window}` : ''}, ${c.dtype}`;

for (const [name, backend] of [['cpu', cpu], ['wasm', wasm]] as const) {
  test(`paged attention equals the contiguous op on ${name}: pages of ${P}, boundaries crossed by keys and by query rows, windows, GQA`, async () => {
    for (const c of CASES) {
      const { want, got } = await run(c, backend);
      close(c, want, got, `${name}, ${label(c)}`);
    }
  });
}

test('paged attention equals the contiguous op [webgpu]', { skip: webgpuSkipReason() }, async () => {
  for (const c of CASES) {
    const { want, got } = await run(c, gpu!);
    close(c, want, got, `webgpu, ${label(c)}`);
  }
});

test('one page holding every position is the contiguous call bit for bit', async () => {
  const c: Case = { kvLength: 200, tq: 3, heads: 2, kvHeads: 1, d: 16, dtype: 'f32' };
  const { want, got } = await run(c, cpu, 256);
  assert.deepEqual(got, want);
});

test('paged ops: pages that do not match, too few pages, a row past the last page', () => {
  const z = (rows: number) => fon.zeros([1, 1, rows, 8], { backend: cpu });
  const q = z(1);
  assert.throws(() => attentionPaged(q, { k: [z(P)], v: [z(P)], pageRows: P }, { kvLength: P + 1 }), /attentionPaged: rows up to 129 need 2 pages of 128 rows, the list has 1/);
  assert.throws(() => attentionPaged(q, { k: [z(P), z(64)], v: [z(P), z(P)], pageRows: P }, { kvLength: 130 }), /attentionPaged: page \[1, 1, 64, 8\]: expected \(B, Hkv, 128, D\)/);
  assert.throws(() => attentionPaged(q, { k: [z(P)], v: [], pageRows: P }, { kvLength: 1 }), /1 k pages and 0 v pages/);
  assert.throws(() => kvWritePaged([z(P)], P, z(4), 126), /kvWritePaged: row 128 needs page 1, the list has 1 pages of 128 rows/);
});
