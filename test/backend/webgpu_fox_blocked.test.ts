/**
 * The register-blocked FoX kernels (attention_blocked.wgsl's FOX variant, dispatched by
 * src/backend/webgpu/kernels/fox_fpa_attention.ts when no tile is forced) against the CPU reference
 * (src/backend/cpu/fox_attention.ts): out, lse, dq, dk, dv and dc on shapes of several 32-key
 * blocks (whole-visible blocks, the diagonal blocks and their corners), T not a multiple of the
 * 32- or 64-row query blocks, Tq < Tk, kvLength < Tk, GQA (dk, dv summed over the group), head dims
 * 16, 32, 64 and others (13, 24, 40), f32, bf16 and f16 (packed where the device has no
 * shader-f16), and forget gates whose cumulative sum c spans −50…0. Every
 * pass that blockedRows takes on this device must have gone through the blocked kernel (the
 * dispatch counter says so); SwiftShader's 32 KiB of workgroup memory takes the blocked forward up
 * to head dim 64 and the blocked backward up to 32 (64 falls back to the tiled backward there).
 *
 * Tolerance: |gpu − cpu| ≤ tol·(1 + |cpu|), as test/backend/webgpu_fox_fpa.test.ts.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_fox_blocked.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { blockedRows } from '../../src/backend/webgpu/kernels/attention_plan.ts';
import { foxAttention, foxAttentionBackward } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { f32ToHost, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, passesOf, readWith } from './gpu_compare.ts';
import type { DispatchRecord } from '../../src/backend/webgpu/runtime.ts';
import { forgetCumsum, foxArgs, gradTol, randomF32, statTol, TOL } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
const readF32 = readWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

/** `wide`: c falls by about 50 over the row (strong forgetting) instead of the usual log σ steps. */
interface Case { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; dtype?: FloatDType; wide?: boolean }

const CASES: Case[] = [
  { b: 1, h: 2, hkv: 2, tq: 100, tk: 100, d: 16 },
  { b: 2, h: 4, hkv: 2, tq: 70, tk: 80, d: 32, kvLength: 77 },
  { b: 1, h: 2, hkv: 1, tq: 97, tk: 97, d: 64 },
  { b: 1, h: 3, hkv: 1, tq: 75, tk: 75, d: 13 },
  { b: 1, h: 2, hkv: 2, tq: 66, tk: 66, d: 40 },
  { b: 1, h: 4, hkv: 2, tq: 65, tk: 70, d: 32, kvLength: 68, dtype: 'bf16' },
  { b: 1, h: 2, hkv: 1, tq: 90, tk: 90, d: 16, dtype: 'bf16' },
  { b: 1, h: 2, hkv: 1, tq: 70, tk: 70, d: 24, dtype: 'f16' },
  { b: 1, h: 2, hkv: 1, tq: 128, tk: 128, d: 32, wide: true },
  { b: 1, h: 2, hkv: 2, tq: 100, tk: 100, d: 64, wide: true },
];

/** Forward and backward of one case against the CPU, each blocked pass counted. */
/** Checks one case against the CPU and returns the dispatches of its forward and backward. */
async function check(c: Case): Promise<DispatchRecord[]> {
  const a = foxArgs(c), dtype = c.dtype ?? 'f32';
  const what = JSON.stringify(c);
  const sizes = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
  const host = sizes.map((n, i) => f32ToHost(randomF32(n, 21 + i, i === 0 ? 2 : 1), dtype));
  const cv = forgetCumsum(c.b * c.h, c.tk, 30, !!c.wide);
  if (c.wide) assert.ok(Math.min(...cv) < -40, `${what}: c reaches ${Math.min(...cv)}`);
  const [q, k, v, g] = host.map((x) => cref(x, dtype));
  const cc = cref(cv, 'f32');
  const [rq, rk, rv, rg] = host.map((x) => ({ h: gpu!.upload(x, dtype), shape: [], dtype }));
  const rc = { h: gpu!.upload(cv, 'f32'), shape: [], dtype: 'f32' as const };

  const [wantOut, wantLse] = cpuFox.foxAttention(q, k, v, cc, a);
  const fwd = gpu!.rt.recordDispatches(() => foxAttention(gpu!, rq, rk, rv, rc, a));
  const [out, lse] = fwd.result;
  await compare(out, dtype, wantOut as AnyHostArray, TOL[dtype], `${what} out`);
  await compare(lse, 'f32', wantLse as AnyHostArray, statTol(dtype), `${what} lse`);

  // The backward from the CPU's out and lse, so that only the backward is compared.
  const o = cref(wantOut as AnyHostArray, dtype), l = cref(wantLse as AnyHostArray, 'f32');
  const want = cpuFox.foxAttentionBackward(q, k, v, cc, o, l, g, a) as AnyHostArray[];
  const ro = { h: gpu!.upload(wantOut as AnyHostArray, dtype), shape: [], dtype }, rl = { h: gpu!.upload(wantLse as AnyHostArray, 'f32'), shape: [], dtype: 'f32' as const };
  const bwd = gpu!.rt.recordDispatches(() => foxAttentionBackward(gpu!, rq, rk, rv, rc, ro, rl, rg, a));
  const got = bwd.result;
  const names = ['dq', 'dk', 'dv', 'dc'];
  for (let i = 0; i < 4; i++) await compare(got[i], i < 3 ? dtype : 'f32', want[i], i < 3 ? gradTol(dtype) : statTol(dtype), `${what} ${names[i]}`);

  // The runtime's dispatch log says which passes ran on the blocked kernels.
  const ran = passesOf([...fwd.dispatches, ...bwd.dispatches], 'fox_blocked');
  const expect = { fwd: blockedRows(gpu!.caps, c.d, 'fwd', dtype) > 0 ? 1 : 0, dq: blockedRows(gpu!.caps, c.d, 'dq', dtype) > 0 ? 1 : 0, dkdv: blockedRows(gpu!.caps, c.d, 'dkdv', dtype) > 0 ? 1 : 0 };
  assert.deepStrictEqual(ran, expect, `${what}: blocked dispatches`);
  for (const h of [out, lse, ...got, ro.h, rl.h, rq.h, rk.h, rv.h, rg.h, rc.h]) gpu!.free(h);
  return [...fwd.dispatches, ...bwd.dispatches];
}

test('FoX blocked kernels vs CPU: out, lse, dq, dk, dv, dc; several 32-key blocks, T off the tile, Tq < Tk, kvLength < Tk, GQA, D 13/16/24/32/40/64, f32, bf16, f16, c down to −50; the blocked passes ran [webgpu]', { skip }, async () => {
  const dispatches: DispatchRecord[] = [];
  for (const c of CASES) dispatches.push(...await check(c));
  // Head dim 32 must take every blocked pass on any device that runs the softmax blocked backward.
  assert.ok(blockedRows(gpu!.caps, 32, 'dq') > 0 && blockedRows(gpu!.caps, 32, 'dkdv') > 0, 'the blocked backward should take head dim 32');
  const forwards = passesOf(dispatches, 'fox_blocked').fwd;
  assert.ok(forwards === CASES.length, `blocked forwards: ${forwards} of ${CASES.length}`);
});

test('FoX with a forced tile keeps the tiled kernels (no blocked dispatch) [webgpu]', { skip }, async () => {
  const c: Case = { b: 1, h: 2, hkv: 1, tq: 40, tk: 40, d: 16 };
  const a = foxArgs(c);
  const x = { h: gpu!.upload(randomF32(c.b * c.h * c.tq * c.d, 1), 'f32'), shape: [], dtype: 'f32' as const };
  const kv = { h: gpu!.upload(randomF32(c.b * c.hkv * c.tk * c.d, 2), 'f32'), shape: [], dtype: 'f32' as const };
  const cv = { h: gpu!.upload(forgetCumsum(c.b * c.h, c.tk, 3, false), 'f32'), shape: [], dtype: 'f32' as const };
  const { result: [out, lse, grads], dispatches } = gpu!.rt.recordDispatches(() => {
    const [o, l] = foxAttention(gpu!, x, kv, kv, cv, a, { bq: 16, bk: 16 });
    return [o, l, foxAttentionBackward(gpu!, x, kv, kv, cv, { h: o, shape: [], dtype: 'f32' }, { h: l, shape: [], dtype: 'f32' }, x, a, { bq: 16, bk: 16 })] as const;
  });
  await readF32(grads[3], 'f32', c.b * c.h * c.tk);
  assert.deepStrictEqual(passesOf(dispatches, 'fox_blocked'), { fwd: 0, dq: 0, dkdv: 0 });
  assert.ok(dispatches.some((d) => d.kernel === 'fox_fpa_attention' && d.variant.FWD), 'the tiled forward ran');
  for (const h of [out, lse, ...grads, x.h, kv.h, cv.h]) gpu!.free(h);
});
