/**
 * The register-blocked FPA kernels (attention_blocked.wgsl's FPA variant, dispatched by
 * src/backend/webgpu/kernels/fox_fpa_attention.ts when no tile is forced) against the CPU reference
 * (src/backend/cpu/fpa_attention.ts) and the tiled kernels: out and lse of the forward; dq, dk, dv,
 * dφ, dℓ and dλ of the backward fed the blocked forward's out and lse. Ragged lengths (one key, 31,
 * 33, 100, 257: whole-visible 32-key blocks, the diagonal blocks and their corners), Tq < Tk with
 * qOffset > 0 (up to 136: a long gap between a key block and the first query) and kvLength < Tk,
 * GQA (φ, ℓ, λ per kv head), head dims 16, 32, 40, 64, f32, bf16 and f16, and five kinds of walk:
 * integer φ with many ties (the argmin that takes dφ follows the CPU's tie rule), a continuous walk,
 * a rising walk (the argmin moves at every key), a large λ that kills keys outright (penalty ≫
 * scores), and λ = 0 (no penalty: FoX with c = 0, i.e. plain NoPE softmax; the backward is then
 * checked against the tiled one only, the CPU reference asks λ > 0). Every forward must have gone
 * through the blocked kernel, every backward pass that fpaBlockedRows takes on this device too (the
 * dispatch counters say so; SwiftShader's 32 KiB take the blocked backward up to head dim 32), a
 * forced tile none, and a second backward must repeat the first bitwise.
 *
 * Tolerance: |gpu − cpu| ≤ tol·(1 + |cpu|), as test/backend/webgpu_fox_fpa.test.ts.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_fpa_blocked.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { foxFpaOptions, fpaAttention, fpaAttentionBackward } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { fpaBlockedRows } from '../../src/backend/webgpu/kernels/attention_plan.ts';
import type { DispatchRecord } from '../../src/backend/webgpu/runtime.ts';
import { f32ToHost, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, passesOf } from './gpu_compare.ts';
import { foxArgs, gradTol, randomF32, statTol, TOL, walks, type Walk } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

interface Case { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; dtype?: FloatDType; walk: Walk }

const CASES: Case[] = [
  { b: 1, h: 2, hkv: 2, tq: 31, tk: 31, d: 16, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 33, tk: 33, d: 32, walk: 'ties' },
  { b: 2, h: 2, hkv: 1, tq: 100, tk: 100, d: 64, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 257, tk: 257, d: 16, walk: 'ties' },
  { b: 1, h: 2, hkv: 1, tq: 70, tk: 130, d: 32, kvLength: 120, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 45, tk: 100, d: 64, kvLength: 97, walk: 'smooth' },
  { b: 1, h: 2, hkv: 2, tq: 100, tk: 100, d: 40, walk: 'smooth' },
  { b: 1, h: 18, hkv: 1, tq: 1, tk: 1, d: 16, walk: 'ties' },
  { b: 1, h: 34, hkv: 2, tq: 1, tk: 257, d: 32, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 100, tk: 100, d: 32, walk: 'kill' },
  { b: 1, h: 2, hkv: 1, tq: 66, tk: 80, d: 64, kvLength: 75, walk: 'kill' },
  { b: 1, h: 4, hkv: 2, tq: 70, tk: 70, d: 32, walk: 'zero' },
  { b: 1, h: 4, hkv: 2, tq: 65, tk: 70, d: 32, kvLength: 68, dtype: 'bf16', walk: 'ties' },
  { b: 1, h: 2, hkv: 1, tq: 70, tk: 70, d: 16, dtype: 'f16', walk: 'smooth' },
  { b: 2, h: 4, hkv: 2, tq: 90, tk: 130, d: 32, kvLength: 123, walk: 'kill' },
  { b: 1, h: 2, hkv: 1, tq: 64, tk: 200, d: 16, walk: 'ties' },
  { b: 1, h: 4, hkv: 1, tq: 40, tk: 170, d: 16, kvLength: 165, walk: 'smooth' },
  { b: 1, h: 2, hkv: 2, tq: 100, tk: 100, d: 32, walk: 'rise' },
  { b: 1, h: 4, hkv: 2, tq: 50, tk: 77, d: 16, kvLength: 75, walk: 'rise' },
];


/** Share of the visible (query, key) pairs of kv head 0 whose weight the penalty scales below e^−30. */
function killedShare(phi: Float32Array, level: Float32Array, lam: number, c: Case): number {
  const kvLength = c.kvLength ?? c.tk;
  let killed = 0, pairs = 0;
  for (let i = 0; i < c.tq; i++) {
    const p = kvLength - c.tq + i;
    let m = Infinity;
    for (let j = Math.min(p, kvLength - 1); j >= 0; j--) { pairs++; if (lam * (level[j] - m) > 30) killed++; m = Math.min(m, phi[j]); }
  }
  return killed / Math.max(1, pairs);
}

/** The blocked forward of one case against the CPU (and the tiled forward), then the backward from its out and lse likewise. */
async function check(c: Case, seed: number): Promise<void> {
  const a = foxArgs(c), dtype = c.dtype ?? 'f32';
  const what = JSON.stringify(c);
  const sizes = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
  const host = sizes.map((n, i) => f32ToHost(randomF32(n, seed + i, i === 0 ? 2 : 1), dtype));
  const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
  if (c.walk === 'kill') {
    const share = killedShare(phi, level, lam[0], c);
    assert.ok(share > 0.2 && share < 0.9, `${what}: ${share} of the pairs killed`);
  }
  const [q, k, v, g] = host.map((x) => cref(x, dtype));
  const [rq, rk, rv, rg] = host.map((x) => ({ h: gpu!.upload(x, dtype), shape: [], dtype }));
  const [rphi, rlevel, rlam] = [phi, level, lam].map((x) => ({ h: gpu!.upload(x, 'f32'), shape: [], dtype: 'f32' as const }));

  // λ = 0 is outside the CPU reference's domain (it asks λ > 0): there FPA is FoX with c = 0.
  const [wantOut, wantLse] = c.walk === 'zero' ? cpuFox.foxAttention(q, k, v, cref(new Float32Array(c.b * c.h * c.tk), 'f32'), a)
    : cpuFpa.fpaAttention(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'), a);
  // Which kernels ran, from the runtime's dispatch log.
  const fwd = gpu!.rt.recordDispatches(() => fpaAttention(gpu!, rq, rk, rv, rphi, rlevel, rlam, a));
  const [out, lse] = fwd.result;
  assert.equal(passesOf(fwd.dispatches, 'fpa_blocked').fwd, 1, `${what}: the blocked forward ran`);
  await compare(out, dtype, wantOut as AnyHostArray, TOL[dtype], `${what} out`);
  await compare(lse, 'f32', wantLse as AnyHostArray, statTol(dtype), `${what} lse`);

  // The tiled forward gives the same (it does not count as blocked).
  const tiledFwd = gpu!.rt.recordDispatches(() => fpaAttention(gpu!, rq, rk, rv, rphi, rlevel, rlam, a, { bq: 16, bk: 16 }));
  const [tOut, tLse] = tiledFwd.result;
  assert.equal(passesOf(tiledFwd.dispatches, 'fpa_blocked').fwd, 0, `${what}: a forced tile ran the blocked forward`);
  await compare(out, dtype, await gpu!.read(tOut, dtype, wantOut.length), TOL[dtype], `${what} out vs tiled`);
  await compare(lse, 'f32', await gpu!.read(tLse, 'f32', wantLse.length), statTol(dtype), `${what} lse vs tiled`);

  // The backward from the blocked forward's out and lse: blocked passes where they fit, twice, then tiled.
  const handles = [out, lse, tOut, tLse, rq.h, rk.h, rv.h, rg.h, rphi.h, rlevel.h, rlam.h];
  const log: DispatchRecord[][] = [];
  const backward = (tile?: { bq: number; bk: number }) => {
    const r = gpu!.rt.recordDispatches(() => fpaAttentionBackward(gpu!, rq, rk, rv, rphi, rlevel, rlam, { h: out, shape: [], dtype }, { h: lse, shape: [], dtype: 'f32' }, rg, a, tile));
    log.push(r.dispatches);
    return r.result;
  };
  const names = ['dq', 'dk', 'dv', 'dphi', 'dlevel', 'dlambda'];
  const nkv = c.b * c.hkv * c.tk;
  const lengths = [sizes[0], sizes[1], sizes[2], nkv, nkv, c.hkv];
  const dtypeOf = (i: number) => (i < 3 ? dtype : 'f32');
  const tolOf = (i: number) => (i < 3 ? gradTol(dtype) : statTol(dtype));
  const got = backward();
  const { dq: dqRan, dkdv: kvRan } = passesOf(log[0], 'fpa_blocked');
  const ran = { dq: dqRan, dkdv: kvRan };
  const expect = { dq: fpaBlockedRows(gpu!.caps, c.d, 'dq') > 0 ? 1 : 0, dkdv: fpaBlockedRows(gpu!.caps, c.d, 'dkdv') > 0 ? 1 : 0 };
  assert.deepStrictEqual(ran, expect, `${what}: blocked backward dispatches`);
  const again = backward();
  const tiled = backward({ bq: 16, bk: 16 });
  assert.deepStrictEqual(passesOf(log[1], 'fpa_blocked'), { fwd: 0, ...expect }, `${what}: the second backward ran the same kernels`);
  assert.deepStrictEqual(passesOf(log[2], 'fpa_blocked'), { fwd: 0, dq: 0, dkdv: 0 }, `${what}: a forced tile ran a blocked pass`);
  handles.push(...got, ...again, ...tiled);
  for (let i = 0; i < names.length; i++) {
    const first = await gpu!.read(got[i], dtypeOf(i), lengths[i]), second = await gpu!.read(again[i], dtypeOf(i), lengths[i]);
    assert.ok(Buffer.from(first.buffer, first.byteOffset, first.byteLength).equals(Buffer.from(second.buffer, second.byteOffset, second.byteLength)), `${what} ${names[i]}: a second backward differs`);
    await compare(got[i], dtypeOf(i), await gpu!.read(tiled[i], dtypeOf(i), lengths[i]), tolOf(i), `${what} ${names[i]} vs tiled`);
  }
  // Against the CPU's backward from its own out and lse (λ > 0 only).
  if (c.walk !== 'zero') {
    const want = cpuFpa.fpaAttentionBackward(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'),
      cref(wantOut as AnyHostArray, dtype), cref(wantLse as AnyHostArray, 'f32'), g, a) as AnyHostArray[];
    for (let i = 0; i < names.length; i++) await compare(got[i], dtypeOf(i), want[i], tolOf(i), `${what} ${names[i]}`);
  }
  for (const h of handles) gpu!.free(h);
}

test('FPA blocked forward and backward vs CPU and the tiled kernels: out, lse, dq, dk, dv, dφ, dℓ, dλ; T 1/31/33/100/257, qOffset > 0, kvLength < Tk, GQA, D 16/32/40/64, f32, bf16, f16, ties in φ, a rising walk, keys killed by λ = 1e4, λ = 0; the blocked passes ran; the backward repeats bitwise [webgpu]', { skip }, async () => {
  // Head dims up to 64 take the blocked forward, up to 32 the blocked backward, on any device with 32 KiB of workgroup memory (SwiftShader has that).
  assert.ok(fpaBlockedRows(gpu!.caps, 64) > 0, `fpaBlockedRows(${gpu!.caps.maxWorkgroupStorage} bytes, 64) = 0`);
  for (const pass of ['dq', 'dkdv'] as const) assert.ok(fpaBlockedRows(gpu!.caps, 32, pass) > 0, `fpaBlockedRows(${gpu!.caps.maxWorkgroupStorage} bytes, 32, ${pass}) = 0`);
  // The f16 forward goes to tensor cores where the device has them (webgpu_modifier_tc.test.ts tests that): off here.
  const was = foxFpaOptions.tensorCores;
  foxFpaOptions.tensorCores = false;
  try {
    let seed = 31;
    for (const c of CASES) await check(c, seed += 10);
  } finally {
    foxFpaOptions.tensorCores = was;
  }
});

test('fpaBlockedRows: blockedRows with room for the FPA state (forward 256 bytes, dq 512, dk/dv 384); none past head dim 128 [webgpu]', { skip }, () => {
  const caps = (bytes: number) => ({ ...gpu!.caps, maxWorkgroupStorage: bytes, maxInvocations: 256 });
  assert.equal(fpaBlockedRows(caps(49152), 64), 16);
  // TR = 16 at head dim 64 needs 46080 bytes for the softmax tiles: FPA's 256 more then pick TR = 8.
  assert.equal(fpaBlockedRows(caps(46080 + 255), 64), 8);
  assert.equal(fpaBlockedRows(caps(46080 + 256), 64), 16);
  assert.equal(fpaBlockedRows(caps(32768), 64), 8);
  assert.equal(fpaBlockedRows(caps(16384), 64), 0);
  assert.equal(fpaBlockedRows(caps(1 << 20), 200), 0);
  // The backward passes take TR = 8 only: at head dim 64 dq's softmax tiles need 39424 bytes, dk/dv's 44032.
  assert.equal(fpaBlockedRows(caps(49152), 64, 'dq'), 8);
  assert.equal(fpaBlockedRows(caps(39424 + 511), 64, 'dq'), 0);
  assert.equal(fpaBlockedRows(caps(39424 + 512), 64, 'dq'), 8);
  assert.equal(fpaBlockedRows(caps(49152), 64, 'dkdv'), 8);
  assert.equal(fpaBlockedRows(caps(44032 + 383), 64, 'dkdv'), 0);
  assert.equal(fpaBlockedRows(caps(44032 + 384), 64, 'dkdv'), 8);
  assert.equal(fpaBlockedRows(caps(32768), 64, 'dq'), 0);
  assert.equal(fpaBlockedRows(caps(32768), 32, 'dkdv'), 8);
});
