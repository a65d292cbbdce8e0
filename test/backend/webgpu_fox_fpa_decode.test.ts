/**
 * The split decode path of WebGPU FoX and FPA attention (src/backend/webgpu/kernels/fox_fpa_decode.ts)
 * against the CPU references (src/backend/cpu/fox_attention.ts, fpa_attention.ts): one query row and
 * a few, GQA groups 1, 2 and 4, kvLength < Tk (a cache longer than its valid part), key counts that
 * are multiples of no chunk, several chunks and several steps per chunk (small chunks and steps
 * forced through the options, so that FPA's carry crosses steps and chunks), the last Tq positions
 * (per-row tails), rows that see no key, integer-valued φ and levels (ties), λ per kv head, dead keys
 * at level 1e20 (DEAD_LEVEL of attention/fpa_decode.ts, and the eviction path's φ ≡ 0 with −1e30 for
 * the newest key), head dims that are and are not multiples of 4 (vector and scalar K/V loads),
 * f32, f16 and bf16 storage, with and without subgroups. The dispatcher
 * (fox_fpa_attention.ts) must take this path for few rows (counted) and not for many.
 *
 * Tolerance as test/backend/webgpu_fox_fpa.test.ts: |gpu − cpu| ≤ tol·(1 + |cpu|), 2e-5 f32, 4e-3
 * f16, 2e-2 bf16 for out; lse 1e-4 (f32) or 1e-3 (16-bit inputs).
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_fox_fpa_decode.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEAD_LEVEL } from '../../src/attention/fpa/fpa_decode.ts';
import type { FoxAttentionArgs } from '../../src/backend/backend.ts';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { foxAttention, fpaAttention } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { foxDecode, foxFpaDecodeRows, foxFpaDecodeStats, fpaDecode, type FoxFpaDecodeOptions } from '../../src/backend/webgpu/kernels/fox_fpa_decode.ts';
import { UnsupportedError } from '../../src/errors.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { f32ToHost, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref } from './gpu_compare.ts';
import { forgetCumsum, foxArgs, randomF32, TOL } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

/**
 * FPA's φ and ℓ: a ±1/0 integer walk with integer offsets (ties); 'dead' sets a third of the levels
 * to DEAD_LEVEL; 'dip' drops φ by 4 at each of the last Tq − 1 positions (the rows' own tails then
 * set M_ij for most keys); 'evict' is the eviction path's φ ≡ 0, ℓ = excess ≥ 0 or DEAD_LEVEL, −1e30
 * for the newest key.
 */
type Walk = 'ties' | 'dead' | 'dip' | 'evict';

interface Case { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; dtype?: FloatDType; walk?: Walk }

const CASES: Case[] = [
  { b: 1, h: 2, hkv: 2, tq: 1, tk: 300, d: 8 },
  { b: 1, h: 4, hkv: 2, tq: 1, tk: 260, d: 12, kvLength: 233 },
  { b: 2, h: 4, hkv: 1, tq: 1, tk: 200, d: 5, kvLength: 171, walk: 'dead' },
  { b: 1, h: 2, hkv: 1, tq: 3, tk: 150, d: 16, kvLength: 141 },
  { b: 1, h: 4, hkv: 1, tq: 4, tk: 97, d: 20, walk: 'dead' },
  { b: 1, h: 2, hkv: 1, tq: 6, tk: 120, d: 8, kvLength: 111, walk: 'dip' },
  { b: 1, h: 1, hkv: 1, tq: 5, tk: 70, d: 8, kvLength: 3 },
  { b: 1, h: 2, hkv: 2, tq: 1, tk: 180, d: 16, kvLength: 165, walk: 'evict' },
  { b: 1, h: 4, hkv: 2, tq: 2, tk: 130, d: 16, kvLength: 129, dtype: 'f16' },
  { b: 1, h: 2, hkv: 1, tq: 1, tk: 220, d: 6, kvLength: 199, dtype: 'bf16', walk: 'dead' },
];

/** The device's split, then small chunks (one step each, then three steps per chunk), one chunk for everything, and no subgroups. */
const SPLITS: FoxFpaDecodeOptions[] = [{}, { step: 32, chunk: 32 }, { step: 32, chunk: 96 }, { chunk: 1024 }, { step: 64, chunk: 64, subgroups: false }];

const name = (c: Case) => JSON.stringify(c);

function walks(rows: number, tk: number, kvLength: number, tq: number, seed: number, kind: Walk): [Float32Array, Float32Array] {
  const r = uniformStream(seed);
  const phi = new Float32Array(rows * tk), level = new Float32Array(rows * tk);
  for (let row = 0; row < rows; row++) {
    let w = 0;
    for (let t = 0; t < tk; t++) {
      const i = row * tk + t;
      if (kind === 'evict') {
        phi[i] = 0;
        level[i] = t === kvLength - 1 ? -1e30 : r() < 0.3 ? DEAD_LEVEL : Math.floor(r() * 6);
        continue;
      }
      w += Math.floor(r() * 3) - 1;
      if (kind === 'dip' && t > kvLength - tq && t < kvLength) w -= 4;
      phi[i] = w + Math.floor(r() * 3) - 1;
      level[i] = kind === 'dead' && r() < 0.33 ? DEAD_LEVEL : w + Math.floor(r() * 4) - 3;
    }
  }
  return [phi, level];
}

interface Inputs { a: FoxAttentionArgs; dtype: FloatDType; host: AnyHostArray[]; refs: { h: GpuHandle; shape: number[]; dtype: FloatDType | 'f32' }[] }

/** q, k, v in the case's dtype, then the f32 extras (c; or φ, ℓ, λ), host and device. */
function inputs(c: Case, mode: 'fox' | 'fpa', seed: number): Inputs {
  const a = foxArgs(c), dtype = c.dtype ?? 'f32';
  const sizes = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d];
  const host: AnyHostArray[] = sizes.map((n, i) => f32ToHost(randomF32(n, seed + i, i === 0 ? 2 : 1), dtype));
  const extras: Float32Array[] = mode === 'fox' ? [forgetCumsum(c.b * c.h, c.tk, seed + 9)]
    : [...walks(c.b * c.hkv, c.tk, a.kvLength, c.tq, seed + 9, c.walk ?? 'ties'), Float32Array.from({ length: c.hkv }, (_, g) => 0.5 + 0.75 * g)];
  const refs = [
    ...host.map((x) => ({ h: gpu!.upload(x, dtype), shape: [], dtype })),
    ...extras.map((x) => ({ h: gpu!.upload(x, 'f32'), shape: [], dtype: 'f32' as const })),
  ];
  return { a, dtype, host: [...host, ...extras], refs };
}

type Run = (x: Inputs) => [GpuHandle, GpuHandle];

/** One mode on one case: `run` (a decode entry with options, or the dispatcher) against the CPU. */
async function check(c: Case, mode: 'fox' | 'fpa', run: Run, what: string): Promise<void> {
  const x = inputs(c, mode, mode === 'fox' ? 3 : 5);
  const { a, dtype } = x;
  const [q, k, v] = x.host.slice(0, 3).map((h) => cref(h, dtype));
  const extra = x.host.slice(3).map((h) => cref(h, 'f32'));
  const [wantOut, wantLse] = mode === 'fox' ? cpuFox.foxAttention(q, k, v, extra[0], a) : cpuFpa.fpaAttention(q, k, v, extra[0], extra[1], extra[2], a);
  const [out, lse] = run(x);
  const label = `${mode} ${name(c)} ${what}`;
  await compare(out, dtype, wantOut as AnyHostArray, TOL[dtype], `${label} out`);
  await compare(lse, 'f32', wantLse as AnyHostArray, dtype === 'f32' ? 1e-4 : 1e-3, `${label} lse`);
  for (const h of [out, lse, ...x.refs.map((r) => r.h)]) gpu!.free(h);
}

const viaDecode = (mode: 'fox' | 'fpa', opts: FoxFpaDecodeOptions): Run => (x) => {
  const [q, k, v, ...e] = x.refs;
  return mode === 'fox' ? foxDecode(gpu!, q, k, v, e[0], x.a, opts) : fpaDecode(gpu!, q, k, v, e[0], e[1], e[2], x.a, opts);
};

const viaDispatcher = (mode: 'fox' | 'fpa'): Run => (x) => {
  const [q, k, v, ...e] = x.refs;
  return mode === 'fox' ? foxAttention(gpu!, q, k, v, e[0], x.a) : fpaAttention(gpu!, q, k, v, e[0], e[1], e[2], x.a);
};

for (const mode of ['fox', 'fpa'] as const) {
  test(`${mode === 'fox' ? 'FoX' : 'FPA'} decode path vs CPU: out and lse; one row and a few, GQA 1/2/4, kvLength < Tk, ragged chunks, several chunks and steps per chunk, rows that see no key, ${mode === 'fpa' ? 'ties in φ, dead keys at 1e20, the eviction levels, λ per kv head, ' : ''}f32, f16, bf16, with and without subgroups [webgpu]`, { skip }, async () => {
    for (const c of CASES) {
      for (const opts of SPLITS) await check(c, mode, viaDecode(mode, opts), `split ${JSON.stringify(opts)}`);
    }
  });
}

test('FoX/FPA dispatcher: few query rows take the decode path (counted) and match the CPU; 20 rows of a GQA group and a forced tile take the tiled kernel [webgpu]', { skip }, async () => {
  for (const mode of ['fox', 'fpa'] as const) {
    for (const c of [CASES[0], CASES[2], CASES[4]]) {
      const before = foxFpaDecodeStats[mode];
      await check(c, mode, viaDispatcher(mode), 'dispatcher');
      assert.equal(foxFpaDecodeStats[mode], before + 1, `${mode} ${name(c)}: the dispatcher did not take the decode path`);
    }
    const many: Case = { b: 1, h: 4, hkv: 1, tq: 5, tk: 40, d: 8 };
    assert.equal(foxFpaDecodeRows(gpu!.caps, foxArgs(many)), 0);
    const before = foxFpaDecodeStats[mode];
    await check(many, mode, viaDispatcher(mode), 'dispatcher, 20 rows');
    const x = inputs(CASES[0], mode, 7);
    const [q, k, v, ...e] = x.refs;
    const r = mode === 'fox' ? foxAttention(gpu!, q, k, v, e[0], x.a, { bq: 8, bk: 4 }) : fpaAttention(gpu!, q, k, v, e[0], e[1], e[2], x.a, { bq: 8, bk: 4 });
    assert.equal(foxFpaDecodeStats[mode], before, `${mode}: 20 rows or a forced tile went to the decode path`);
    for (const h of [...r, ...x.refs.map((t) => t.h)]) gpu!.free(h);
  }
});

test('FoX/FPA decode: the rows rule (group·Tq ≤ 16, head dim ≤ 256) and a step below the head-dim pitch / 4 refused by name [webgpu]', { skip }, () => {
  const a = foxArgs({ b: 1, h: 8, hkv: 2, tq: 4, tk: 64, d: 64 });
  assert.equal(foxFpaDecodeRows(gpu!.caps, a), 16);
  assert.equal(foxFpaDecodeRows(gpu!.caps, { ...a, tq: 5, qOffset: 59 }), 0);
  assert.equal(foxFpaDecodeRows(gpu!.caps, { ...a, d: 300 }), 0);
  const big = foxArgs({ b: 1, h: 1, hkv: 1, tq: 1, tk: 8, d: 256 });
  const x = inputs({ b: 1, h: 1, hkv: 1, tq: 1, tk: 8, d: 256 }, 'fox', 1);
  const [q, k, v, c] = x.refs;
  assert.equal(foxFpaDecodeRows(gpu!.caps, big), 1);
  assert.throws(() => foxDecode(gpu!, q, k, v, c, big, { step: 32 }),
    (e: unknown) => e instanceof UnsupportedError && (e as Error).message === 'webgpu: FoX/FPA decode step 32 must be 32, 64 or 128 and at least 64 for head dim 256');
  for (const r of x.refs) gpu!.free(r.h);
});
