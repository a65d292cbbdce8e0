/**
 * WebGPU FoX and FPA attention (src/backend/webgpu/kernels/fox_fpa_attention.ts) against the CPU
 * references (src/backend/cpu/fox_attention.ts, fpa_attention.ts) on small random inputs whose
 * sizes are multiples of no tile: Tq < Tk, kvLength < Tk, GQA, several key tiles (so FPA's carry
 * crosses tiles in the forward, the DQ sweep and the DKDV gap carry), odd head dims, f32, f16 and
 * bf16 storage. FPA's walks take integer steps so that φ has many ties (the argmin rule, latest
 * index, decides dφ) and levels sit on both sides of the field. Every output is compared: out, lse,
 * dq, dk, dv, FoX's dc, FPA's dφ, dℓ, dλ; and the backward is bitwise repeatable (no atomics).
 *
 * Tolerance: |gpu − cpu| ≤ tol·(1 + |cpu|), tol as test/backend/webgpu_attention.test.ts (2e-5
 * for f32 forwards, 1e-4 for f32 gradients, 4e-3 f16, 2e-2 bf16 — one rounding of the stored
 * output plus order); the f32 statistics (lse, dc, dφ, dℓ, dλ) of 16-bit inputs take 1e-3
 * (they are sums of terms computed from the same stored inputs in f32, only the order differs).
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_fox_fpa.test.ts
 */
import { test } from 'node:test';
import { UnsupportedError } from '../../src/errors.ts';
import assert from 'node:assert/strict';
import type { FoxAttentionArgs } from '../../src/backend/backend.ts';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { foxAttention, foxAttentionBackward, fpaAttention, fpaAttentionBackward, fpaBackwardKvHeads, foxFpaTile, type Tile } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { f32ToHost, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, readWith } from './gpu_compare.ts';
import { forgetCumsum, foxArgs, gradTol, randomF32, statTol, TOL } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
const readF32 = readWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

interface Case { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; dtype?: FloatDType }

const CASES: Case[] = [
  { b: 1, h: 2, hkv: 2, tq: 19, tk: 19, d: 12 },
  { b: 1, h: 4, hkv: 2, tq: 10, tk: 40, d: 8, kvLength: 37 },
  { b: 2, h: 2, hkv: 1, tq: 45, tk: 50, d: 16, kvLength: 48 },
  { b: 1, h: 3, hkv: 1, tq: 70, tk: 70, d: 5 },
  { b: 1, h: 2, hkv: 1, tq: 1, tk: 30, d: 8, kvLength: 25 },
  { b: 1, h: 2, hkv: 1, tq: 33, tk: 36, d: 20, dtype: 'f16' },
  { b: 1, h: 4, hkv: 2, tq: 20, tk: 40, d: 16, kvLength: 34, dtype: 'bf16' },
];

const name = (c: Case) => JSON.stringify(c);

/**
 * The device's tiles, then narrow query and key tiles (more blocks: the carries cross more
 * boundaries, BQ ≠ BK) for the cases with 36 keys or more, where the narrow tiles give many blocks.
 */
const tilesFor = (c: Case): (Tile | undefined)[] => (c.tk >= 36 ? [undefined, { bq: 8, bk: 4 }, { bq: 4, bk: 16 }] : [undefined]);

/** φ: a ±1/0 integer walk plus an integer offset (many ties); ℓ: the walk plus a half-integer offset. */
function walks(rows: number, tk: number, seed: number): [Float32Array, Float32Array] {
  const r = uniformStream(seed);
  const phi = new Float32Array(rows * tk), level = new Float32Array(rows * tk);
  for (let row = 0; row < rows; row++) {
    let w = 0;
    for (let t = 0; t < tk; t++) {
      w += Math.floor(r() * 3) - 1;
      phi[row * tk + t] = w + Math.floor(r() * 3) - 1;
      level[row * tk + t] = w + Math.floor(r() * 4) - 3.5;
    }
  }
  return [phi, level];
}

interface Inputs { a: FoxAttentionArgs; dtype: FloatDType; host: AnyHostArray[]; refs: { h: GpuHandle; shape: number[]; dtype: FloatDType | 'f32' }[] }

/** q, k, v, dO in the case's dtype, then the f32 extras (c; or φ, ℓ, λ), host and device. */
function inputs(c: Case, mode: 'fox' | 'fpa', seed: number): Inputs {
  const a = foxArgs(c), dtype = c.dtype ?? 'f32';
  const sizes = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
  const host: AnyHostArray[] = sizes.map((n, i) => f32ToHost(randomF32(n, seed + i, i === 0 ? 2 : 1), dtype));
  const extras: Float32Array[] = mode === 'fox' ? [forgetCumsum(c.b * c.h, c.tk, seed + 9)]
    : [...walks(c.b * c.hkv, c.tk, seed + 9), Float32Array.from({ length: c.hkv }, (_, g) => 0.5 + 0.75 * g)];
  const refs = [
    ...host.map((x) => ({ h: gpu!.upload(x, dtype), shape: [], dtype })),
    ...extras.map((x) => ({ h: gpu!.upload(x, 'f32'), shape: [], dtype: 'f32' as const })),
  ];
  return { a, dtype, host: [...host, ...extras], refs };
}

/**
 * Forward and backward of one mode on one case against the CPU; the backward runs twice and must
 * repeat bitwise. `limit`: the device's binding and buffer limits, in bytes, while the backward runs.
 */
async function check(c: Case, mode: 'fox' | 'fpa', tile?: Tile, limit?: number): Promise<void> {
  const x = inputs(c, mode, mode === 'fox' ? 3 : 5);
  const { a, dtype } = x;
  const [q, k, v, g] = x.host.slice(0, 4).map((h) => cref(h, dtype));
  const extra = x.host.slice(4).map((h) => cref(h, 'f32'));
  const [rq, rk, rv, rg] = x.refs.slice(0, 4);
  const rx = x.refs.slice(4);
  const what = `${mode} ${name(c)} tile ${JSON.stringify(tile ?? 'device')}`;

  const [wantOut, wantLse] = mode === 'fox' ? cpuFox.foxAttention(q, k, v, extra[0], a) : cpuFpa.fpaAttention(q, k, v, extra[0], extra[1], extra[2], a);
  const [out, lse] = mode === 'fox' ? foxAttention(gpu!, rq, rk, rv, rx[0], a, tile) : fpaAttention(gpu!, rq, rk, rv, rx[0], rx[1], rx[2], a, tile);
  await compare(out, dtype, wantOut as AnyHostArray, TOL[dtype], `${what} out`);
  await compare(lse, 'f32', wantLse as AnyHostArray, dtype === 'f32' ? 1e-4 : statTol(dtype), `${what} lse`);

  // The backward from the CPU's out and lse on both sides, so that only the backward is compared.
  const o = cref(wantOut as AnyHostArray, dtype), l = cref(wantLse as AnyHostArray, 'f32');
  const want = (mode === 'fox' ? cpuFox.foxAttentionBackward(q, k, v, extra[0], o, l, g, a)
    : cpuFpa.fpaAttentionBackward(q, k, v, extra[0], extra[1], extra[2], o, l, g, a)) as AnyHostArray[];
  const ro = { h: gpu!.upload(wantOut as AnyHostArray, dtype), shape: [], dtype }, rl = { h: gpu!.upload(wantLse as AnyHostArray, 'f32'), shape: [], dtype: 'f32' as const };
  const caps = gpu!.caps as { maxBinding: number; maxBuffer: number };
  const run = () => {
    const had = [caps.maxBinding, caps.maxBuffer];
    if (limit !== undefined) caps.maxBinding = caps.maxBuffer = limit;
    try {
      return (mode === 'fox' ? foxAttentionBackward(gpu!, rq, rk, rv, rx[0], ro, rl, rg, a, tile)
        : fpaAttentionBackward(gpu!, rq, rk, rv, rx[0], rx[1], rx[2], ro, rl, rg, a, tile)) as GpuHandle[];
    } finally {
      [caps.maxBinding, caps.maxBuffer] = had;
    }
  };
  const got = run();
  const names = mode === 'fox' ? ['dq', 'dk', 'dv', 'dc'] : ['dq', 'dk', 'dv', 'dphi', 'dlevel', 'dlambda'];
  const dtypes = names.map((_, i) => (i < 3 ? dtype : 'f32' as const));
  for (let i = 0; i < names.length; i++) await compare(got[i], dtypes[i], want[i], i < 3 ? gradTol(dtype) : statTol(dtype), `${what} ${names[i]}`);
  const again = run();
  for (let i = 0; i < names.length; i++) {
    const [x1, x2] = await Promise.all([readF32(got[i], dtypes[i], want[i].length), readF32(again[i], dtypes[i], want[i].length)]);
    assert.deepStrictEqual(x2, x1, `${what} ${names[i]}: a second backward differs`);
  }
  for (const h of [out, lse, ...got, ...again, ro.h, rl.h, ...x.refs.map((r) => r.h)]) gpu!.free(h);
}

test('FoX attention vs CPU: out, lse, dq, dk, dv, dc; Tq < Tk, kvLength < Tk, GQA, several key tiles, 16×16, 8×4 and 4×16 tiles, one query row, odd D, f32, f16, bf16; the backward repeats bitwise [webgpu]', { skip }, async () => {
  for (const c of CASES) for (const tile of tilesFor(c)) await check(c, 'fox', tile);
});

test('FPA attention vs CPU: out, lse, dq, dk, dv, dφ, dℓ, dλ; ties in φ, the carry across key tiles, 16×16, 8×4 and 4×16 tiles, Tq < Tk, kvLength < Tk, GQA, f32, f16, bf16; the backward repeats bitwise [webgpu]', { skip }, async () => {
  for (const c of CASES) for (const tile of tilesFor(c)) await check(c, 'fpa', tile);
});

test('FPA backward in kv-head groups where its partials pass the binding limit: the gradients vs CPU, batch 2, GQA, a smaller last group, bf16 at odd offsets; refused by name where one kv head does not fit [webgpu]', { skip }, async () => {
  // Partials of the whole call: 4·(rows 3072 + keys 1536 + dφ cells 2·6·8·256) = 116736 bytes; a
  // limit of 110000 bytes takes 2 kv heads a group (77824 bytes of partials), then 1.
  const c: Case = { b: 2, h: 6, hkv: 3, tq: 256, tk: 256, d: 8 };
  const limit = 110_000;
  const caps = (lim: number) => ({ ...gpu!.caps, maxBinding: lim, maxBuffer: lim });
  assert.equal(fpaBackwardKvHeads(caps(limit), foxArgs(c), 'f32', 'f32'), 2);
  assert.equal(fpaBackwardKvHeads(gpu!.caps, foxArgs(c), 'f32', 'f32'), 3, 'one piece under the device\'s own limits');
  await check(c, 'fpa', undefined, limit);
  // bf16 (two a word) with odd head offsets: groups of one kv head at the largest limit that forces them.
  const odd: Case = { b: 2, h: 4, hkv: 2, tq: 33, tk: 35, d: 5, dtype: 'bf16' };
  let one = 4000;
  while (one > 100 && fpaBackwardKvHeads(caps(one), foxArgs(odd), 'bf16', 'bf16') !== 1) one -= 16;
  assert.equal(fpaBackwardKvHeads(caps(one), foxArgs(odd), 'bf16', 'bf16'), 1, `no limit found that takes one kv head a group (down to ${one} bytes)`);
  await check(odd, 'fpa', undefined, one);
  // Where not even one kv head fits, the refusal names the bytes and the limit.
  assert.equal(fpaBackwardKvHeads(caps(64), foxArgs(odd), 'bf16', 'bf16'), 0);
  const x = inputs(odd, 'fpa', 5);
  const had = [gpu!.caps.maxBinding, gpu!.caps.maxBuffer];
  const mc = gpu!.caps as { maxBinding: number; maxBuffer: number };
  try {
    mc.maxBinding = mc.maxBuffer = 64;
    assert.throws(() => fpaAttentionBackward(gpu!, x.refs[0], x.refs[1], x.refs[2], x.refs[4], x.refs[5], x.refs[6], x.refs[0], x.refs[0], x.refs[3], x.a),
      /^UnsupportedError: webgpu: fpaAttentionBackward needs \d+ bytes of partials for one kv head of one batch entry \(2 query heads, 33×35 tokens\), above this device's 64-byte binding limit$/);
  } finally {
    [mc.maxBinding, mc.maxBuffer] = had;
  }
  for (const r of x.refs) gpu!.free(r.h);
});

test('FPA: the penalty is active and φ has ties in these inputs (so the tests above exercise the carry and the argmin rule)', () => {
  const c = CASES[2];
  const [phi, level] = walks(c.b * c.hkv, c.tk, 14);
  let ties = 0, active = 0, pairs = 0;
  for (let t = 1; t < c.tk; t++) if (phi.slice(t).some((f, i) => i > 0 && f === phi[t])) ties++;
  for (let p = 0; p < c.tk; p++) {
    let m = Infinity;
    for (let j = p; j >= 0; j--) { pairs++; if (level[j] > m) active++; m = Math.min(m, phi[j]); }
  }
  assert.ok(ties > 10, `${ties} positions whose φ value recurs later`);
  assert.ok(active > 0.2 * pairs && active < 0.8 * pairs, `${active} of ${pairs} (query, key) pairs penalised`);
});

test('FoX/FPA tiles: 16×16 for head dim 32 in 16 KiB of workgroup memory, 8×4 for 256 in 32 KiB, refused by name in 16 KiB; head dims over 256 are refused by name [webgpu]', { skip }, () => {
  for (const backward of [false, true]) assert.deepStrictEqual(foxFpaTile({ ...gpu!.caps, maxWorkgroupStorage: 16384 }, 32, backward), { bq: 16, bk: 16 });
  assert.deepStrictEqual(foxFpaTile({ ...gpu!.caps, maxWorkgroupStorage: 32768 }, 256, true), { bq: 8, bk: 4 });
  assert.throws(() => foxFpaTile({ ...gpu!.caps, maxWorkgroupStorage: 16384 }, 256, true),
    (e: unknown) => e instanceof UnsupportedError && (e as Error).message === "webgpu: FoX/FPA attention with head dim 256 needs more workgroup memory than this device's 16384 bytes");
  const a = foxArgs({ b: 1, h: 1, hkv: 1, tq: 2, tk: 2, d: 300 });
  const ref = { h: gpu!.upload(new Float32Array(600), 'f32'), shape: [], dtype: 'f32' as const };
  const c = { h: gpu!.upload(new Float32Array(2), 'f32'), shape: [], dtype: 'f32' as const };
  assert.throws(() => foxAttention(gpu!, ref, ref, ref, c, a), (e: unknown) => e instanceof UnsupportedError && (e as Error).message === 'webgpu: foxAttention takes head dims up to 256, got 300');
  gpu!.free(ref.h); gpu!.free(c.h);
});
