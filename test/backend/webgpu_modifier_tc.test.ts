/**
 * The score modifiers on the tensor-core kernels, the default for f16 where they take the call:
 * FoX's forward and backward (attention_tc.wgsl with attention_tc_mod_fox.wgsl, and
 * attention_tc_backward.wgsl FOX: the bias c[p_i] − c[j] on every score; dc from the dS row and
 * column sums) and FPA's forward and backward (attention_tc_mod_fpa.wgsl: key blocks from the last
 * to the first with each row's carry of min φ; dφ owed to each pair's argmin through the carry's
 * posts, the suffix minima's column sums or the scan of the block holding the row's end; dℓ per
 * key with a carry over the query blocks) (foxFpaOptions.tensorCores in
 * src/backend/webgpu/kernels/fox_fpa_attention.ts), against the CPU reference
 * (src/backend/cpu/fox_attention.ts): out and lse in f16 storage, Tq = Tk and Tq < Tk with
 * kvLength < Tk, GQA, cut-off query blocks, head dims 32 to 256, forget gates spanning −50…0.
 * The runtime's dispatch log must show the tensor-core path ran. Runs only where the device has f16
 * subgroup matrices (not on SwiftShader); on the H200:
 *
 *   bash .gpu/enter node --import tsx --test test/backend/webgpu_modifier_tc.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { tcBackwardEligible, tcEligible } from '../../src/backend/webgpu/kernels/attention_tc.ts';
import { foxAttention, foxAttentionBackward, foxFpaOptions, fpaAttention, fpaAttentionBackward } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { f32ToHost, type AnyHostArray } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, passesOf, readWith } from './gpu_compare.ts';
import { foxArgs, forgetCumsum, randomF32, statTol, TOL, walks, type FoxShape, type Walk } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
const read = readWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

/**
 * Runs a modifier's backward (`backward`, f16 gradients then f32 ones) twice: both tensor-core passes
 * ran with the `mod` hooks (dispatch log), every output within 1e-2 of `want`, the second run
 * bitwise equal to the first. Returns both runs' outputs for the caller to free.
 */
async function checkTcBackward(backward: () => GpuHandle[], mod: 'fox' | 'fpa', names: string[], want: AnyHostArray[], what: string): Promise<GpuHandle[]> {
  const { result: got, dispatches } = gpu!.rt.recordDispatches(backward);
  assert.deepEqual(passesOf(dispatches, 'attention_tc_backward'), { fwd: 0, dq: 1, dkdv: 1 }, `${what}: the tensor-core passes ran (dispatch log)`);
  assert.ok(dispatches.filter((d) => d.kernel === 'attention_tc_backward').every((d) => d.variant.MOD === mod), `${what}: with the ${mod} modifier`);
  const dtypes = names.map((_, i) => (i < 3 ? 'f16' as const : 'f32' as const));
  for (let i = 0; i < names.length; i++) await compare(got[i], dtypes[i], want[i], 1e-2, `${what} ${names[i]}`);
  const again = backward();
  for (let i = 0; i < names.length; i++) {
    const [x1, x2] = await Promise.all([read(got[i], dtypes[i], want[i].length), read(again[i], dtypes[i], want[i].length)]);
    assert.deepStrictEqual(x2, x1, `${what} ${names[i]}: a second backward differs`);
  }
  return [...got, ...again];
}

const CASES: (FoxShape & { wide?: boolean })[] = [
  { b: 1, h: 2, hkv: 2, tq: 200, tk: 200, d: 64 },
  { b: 1, h: 4, hkv: 1, tq: 77, tk: 130, d: 128, kvLength: 120 },
  { b: 2, h: 2, hkv: 2, tq: 33, tk: 33, d: 32, wide: true },
  { b: 1, h: 1, hkv: 1, tq: 20, tk: 20, d: 256 },
  { b: 1, h: 2, hkv: 1, tq: 300, tk: 300, d: 128, wide: true },
];

test('FoX forward on tensor cores vs CPU: out, lse; Tq < Tk, kvLength < Tk, GQA, cut-off blocks, D 32 to 256, wide forget gates [webgpu]', { skip }, async (t) => {
  if (!tcEligible(gpu!.caps, 'f16', 64)) { t.skip(`no f16 subgroup matrices on ${gpu!.caps.adapterName}: the tensor-core kernel cannot run here`); return; }
  const was = foxFpaOptions.tensorCores;
  foxFpaOptions.tensorCores = true;
  try {
    for (const c of CASES) {
      const a = foxArgs(c), what = JSON.stringify(c);
      const host = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d].map((n, i) => f32ToHost(randomF32(n, 41 + i, i === 0 ? 2 : 1), 'f16'));
      const cv = forgetCumsum(c.b * c.h, c.tk, 50, !!c.wide);
      const [want, wantLse] = cpuFox.foxAttention(cref(host[0], 'f16'), cref(host[1], 'f16'), cref(host[2], 'f16'), cref(cv, 'f32'), a);
      const [rq, rk, rv] = host.map((x) => ({ h: gpu!.upload(x, 'f16'), shape: [], dtype: 'f16' as const }));
      const rc = { h: gpu!.upload(cv, 'f32'), shape: [], dtype: 'f32' as const };
      const { result: [out, lse], dispatches } = gpu!.rt.recordDispatches(() => foxAttention(gpu!, rq, rk, rv, rc, a));
      assert.equal(dispatches.filter((d) => d.kernel === 'attention_tc' && d.variant.MOD === 'fox').length, 1, `${what}: the tensor-core path ran (dispatch log)`);
      await compare(out, 'f16', want as AnyHostArray, 2 * TOL.f16, `${what} out`);
      await compare(lse, 'f32', wantLse as AnyHostArray, statTol('f16'), `${what} lse`);
      for (const h of [out, lse, rq.h, rk.h, rv.h, rc.h]) gpu!.free(h);
    }
  } finally {
    foxFpaOptions.tensorCores = was;
  }
});

test('FoX backward on tensor cores vs CPU: dq, dk, dv, dc; Tq < Tk, kvLength < Tk, GQA, cut-off blocks, D 32 to 256, wide forget gates; repeats bitwise [webgpu]', { skip }, async (t) => {
  if (!tcEligible(gpu!.caps, 'f16', 64)) { t.skip(`no f16 subgroup matrices on ${gpu!.caps.adapterName}: the tensor-core kernels cannot run here`); return; }
  const was = foxFpaOptions.tensorCores;
  foxFpaOptions.tensorCores = true;
  try {
    let ran = 0;
    for (const c of CASES) {
      const a = foxArgs(c), what = JSON.stringify(c);
      if (!tcBackwardEligible(gpu!.caps, 'f16', 'f16', { ...a, causal: true, window: 0 })) continue;
      const n = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
      const host = n.map((len, i) => f32ToHost(randomF32(len, 51 + i, i === 0 ? 2 : 1), 'f16'));
      const cv = forgetCumsum(c.b * c.h, c.tk, 60, !!c.wide);
      const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
      const [o, l] = cpuFox.foxAttention(q, k, v, cref(cv, 'f32'), a);
      // The backward from the CPU's out (f16, as its inputs) and lse on both sides.
      const o16 = o as AnyHostArray;
      const want = cpuFox.foxAttentionBackward(q, k, v, cref(cv, 'f32'), cref(o16, 'f16'), cref(l as AnyHostArray, 'f32'), g, a) as AnyHostArray[];
      const [rq, rk, rv, rg] = host.map((x) => ({ h: gpu!.upload(x, 'f16'), shape: [], dtype: 'f16' as const }));
      const rc = { h: gpu!.upload(cv, 'f32'), shape: [], dtype: 'f32' as const };
      const ro = { h: gpu!.upload(o16, 'f16'), shape: [], dtype: 'f16' as const };
      const rl = { h: gpu!.upload(l as AnyHostArray, 'f32'), shape: [], dtype: 'f32' as const };
      const outs = await checkTcBackward(() => foxAttentionBackward(gpu!, rq, rk, rv, rc, ro, rl, rg, a), 'fox', ['dq', 'dk', 'dv', 'dc'], want, what);
      for (const h of [...outs, rq.h, rk.h, rv.h, rg.h, rc.h, ro.h, rl.h]) gpu!.free(h);
      ran++;
    }
    assert.ok(ran >= 4, `the tensor-core backward took ${ran} of ${CASES.length} cases`);
  } finally {
    foxFpaOptions.tensorCores = was;
  }
});

const FPA_CASES: (FoxShape & { walk: Walk })[] = [
  { b: 1, h: 2, hkv: 2, tq: 200, tk: 200, d: 64, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 77, tk: 130, d: 128, kvLength: 120, walk: 'smooth' },
  { b: 2, h: 4, hkv: 2, tq: 100, tk: 100, d: 32, walk: 'kill' },
  { b: 1, h: 2, hkv: 1, tq: 66, tk: 80, d: 64, kvLength: 75, walk: 'rise' },
  { b: 1, h: 4, hkv: 2, tq: 70, tk: 70, d: 32, walk: 'zero' },
  { b: 1, h: 2, hkv: 1, tq: 300, tk: 300, d: 128, walk: 'ties' },
  { b: 1, h: 1, hkv: 1, tq: 20, tk: 20, d: 256, walk: 'smooth' },
  { b: 1, h: 2, hkv: 2, tq: 40, tk: 260, d: 16, walk: 'ties' },
];

test('FPA forward on tensor cores vs CPU: out, lse; ties in φ, a rising walk, keys killed by λ = 1e4, λ = 0, Tq < Tk, kvLength < Tk, GQA, cut-off blocks, D 16 to 256 [webgpu]', { skip }, async (t) => {
  if (!tcEligible(gpu!.caps, 'f16', 64)) { t.skip(`no f16 subgroup matrices on ${gpu!.caps.adapterName}: the tensor-core kernel cannot run here`); return; }
  const was = foxFpaOptions.tensorCores;
  foxFpaOptions.tensorCores = true;
  try {
    let seed = 70;
    for (const c of FPA_CASES) {
      const a = foxArgs(c), what = JSON.stringify(c);
      seed += 10;
      const host = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d].map((n, i) => f32ToHost(randomF32(n, seed + i, i === 0 ? 2 : 1), 'f16'));
      const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
      const [q, k, v] = host.map((x) => cref(x, 'f16'));
      // λ = 0 is outside the CPU reference's domain (it asks λ > 0): there FPA is FoX with c = 0.
      const [want, wantLse] = c.walk === 'zero' ? cpuFox.foxAttention(q, k, v, cref(new Float32Array(c.b * c.h * c.tk), 'f32'), a)
        : cpuFpa.fpaAttention(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'), a);
      const [rq, rk, rv] = host.map((x) => ({ h: gpu!.upload(x, 'f16'), shape: [], dtype: 'f16' as const }));
      const [rphi, rlevel, rlam] = [phi, level, lam].map((x) => ({ h: gpu!.upload(x, 'f32'), shape: [], dtype: 'f32' as const }));
      const { result: [out, lse], dispatches } = gpu!.rt.recordDispatches(() => fpaAttention(gpu!, rq, rk, rv, rphi, rlevel, rlam, a));
      assert.equal(dispatches.filter((d) => d.kernel === 'attention_tc' && d.variant.MOD === 'fpa').length, 1, `${what}: the tensor-core path ran (dispatch log)`);
      await compare(out, 'f16', want as AnyHostArray, 2 * TOL.f16, `${what} out`);
      await compare(lse, 'f32', wantLse as AnyHostArray, statTol('f16'), `${what} lse`);
      for (const h of [out, lse, rq.h, rk.h, rv.h, rphi.h, rlevel.h, rlam.h]) gpu!.free(h);
    }
  } finally {
    foxFpaOptions.tensorCores = was;
  }
});

test('FPA backward on tensor cores vs CPU: dq, dk, dv, dφ, dℓ, dλ; ties in φ, a rising walk, keys killed by λ = 1e4, Tq < Tk, kvLength < Tk, GQA, several and cut-off query blocks, D 16 to 256; repeats bitwise [webgpu]', { skip }, async (t) => {
  if (!tcEligible(gpu!.caps, 'f16', 64)) { t.skip(`no f16 subgroup matrices on ${gpu!.caps.adapterName}: the tensor-core kernels cannot run here`); return; }
  const was = foxFpaOptions.tensorCores;
  foxFpaOptions.tensorCores = true;
  try {
    let seed = 170, ran = 0;
    // λ = 0 ('zero') is outside the CPU reference's domain: its forward is checked above against FoX.
    for (const c of FPA_CASES.filter((x) => x.walk !== 'zero')) {
      const a = foxArgs(c), what = JSON.stringify(c);
      seed += 10;
      if (!tcBackwardEligible(gpu!.caps, 'f16', 'f16', { ...a, causal: true, window: 0 })) continue;
      const n = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
      const host = n.map((len, i) => f32ToHost(randomF32(len, seed + i, i === 0 ? 2 : 1), 'f16'));
      const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
      const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
      const ex = [phi, level, lam].map((x) => cref(x, 'f32'));
      const [o, l] = cpuFpa.fpaAttention(q, k, v, ex[0], ex[1], ex[2], a);
      const want = cpuFpa.fpaAttentionBackward(q, k, v, ex[0], ex[1], ex[2], cref(o as AnyHostArray, 'f16'), cref(l as AnyHostArray, 'f32'), g, a) as AnyHostArray[];
      const [rq, rk, rv, rg] = host.map((x) => ({ h: gpu!.upload(x, 'f16'), shape: [], dtype: 'f16' as const }));
      const [rphi, rlevel, rlam] = [phi, level, lam].map((x) => ({ h: gpu!.upload(x, 'f32'), shape: [], dtype: 'f32' as const }));
      const ro = { h: gpu!.upload(o as AnyHostArray, 'f16'), shape: [], dtype: 'f16' as const };
      const rl = { h: gpu!.upload(l as AnyHostArray, 'f32'), shape: [], dtype: 'f32' as const };
      const outs = await checkTcBackward(() => fpaAttentionBackward(gpu!, rq, rk, rv, rphi, rlevel, rlam, ro, rl, rg, a), 'fpa', ['dq', 'dk', 'dv', 'dphi', 'dlevel', 'dlambda'], want, what);
      for (const h of [...outs, rq.h, rk.h, rv.h, rg.h, rphi.h, rlevel.h, rlam.h, ro.h, rl.h]) gpu!.free(h);
      ran++;
    }
    assert.ok(ran >= 6, `the tensor-core FPA backward took ${ran} of ${FPA_CASES.length - 1} cases`);
  } finally {
    foxFpaOptions.tensorCores = was;
  }
});
