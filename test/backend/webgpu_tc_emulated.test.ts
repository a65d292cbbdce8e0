/**
 * The tensor-core attention kernels' skeletons, score-modifier hooks and block masks, checked in
 * CI: the generated forward (attention_tc.wgsl) and DQ and DKDV programs (attention_tc_backward.wgsl)
 * with none, FoX's and FPA's hooks, their subgroup-matrix statements replaced by ALU loops
 * (test/backend/tc_emulation.ts), against the CPU references — out and lse; dq, dk, dv, and FoX's
 * dc or FPA's dφ, dℓ, dλ (aux reduced here as fox_fpa_attention.wgsl's COMBINE and REDUCE do); and
 * without a modifier under block masks (shared and per-head, with segments; the dropped key
 * blocks hold NaN), a sliding window, and no causal masking. Shapes: a cut-off last block of rows and of keys,
 * GQA, Tq < Tk with kvLength < Tk (qoff > 0: FPA's key carry before the queries), several query
 * and key blocks (the carries cross them), φ with ties, λ = 1e4 (keys killed), 16 and 32 keys a
 * DQ step, each pass with and without PREFETCH. Head dim 16 with 2 or 4 subgroups a workgroup,
 * within SwiftShader's 32 KiB of workgroup memory. The real tensor-core kernels run on the GPU in
 * test/backend/webgpu_modifier_tc.test.ts.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_tc_emulated.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import * as cpuAttn from '../../src/backend/cpu/attention.ts';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { f32ToHost, hostToF32, type AnyHostArray } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, readWith } from './gpu_compare.ts';
import { foxArgs, forgetCumsum, randomF32, walks, type FoxShape, type Walk } from './fox_fpa_inputs.ts';
import { EMULATED_DEFAULT, emulatedTcBackward, emulatedTcForward, type EmulatedForm } from './tc_emulation.ts';
import { blockMask, maskArgs } from '../../src/attention/block_mask.ts';
import type { CpuRef } from '../../src/backend/cpu/host.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
const read = readWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

/** Shapes, φ's walk, and the emulated passes' form where it is not the default (`form`: 32 keys a DQ step with 2 subgroups, the PREFETCH flags flipped). */
const CASES: (FoxShape & { walk: Walk; form?: EmulatedForm })[] = [
  { b: 1, h: 2, hkv: 2, tq: 150, tk: 150, d: 16, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 77, tk: 130, d: 16, kvLength: 120, walk: 'smooth' },
  { b: 2, h: 2, hkv: 1, tq: 66, tk: 80, d: 16, kvLength: 75, walk: 'rise' },
  { b: 1, h: 2, hkv: 1, tq: 40, tk: 200, d: 16, walk: 'ties' },
  { b: 1, h: 2, hkv: 1, tq: 100, tk: 110, d: 16, kvLength: 105, walk: 'kill', form: { dqNsg: 2, dqKeys: 32, dqPrefetch: false, kvPrefetch: true } },
];

/** delta = rowsum(dO∘O): per row of o and g (rows × d), their dot product. */
function rowDots(o: Float32Array, g: Float32Array, rows: number, d: number): Float32Array {
  return Float32Array.from({ length: rows }, (_, r) => { let s = 0; for (let t = 0; t < d; t++) s += o[r * d + t] * g[r * d + t]; return s; });
}

const concat = (...xs: Float32Array[]) => { const out = new Float32Array(xs.reduce((n, x) => n + x.length, 0)); let at = 0; for (const x of xs) { out.set(x, at); at += x.length; } return out; };

for (const mod of ['none', 'fox', 'fpa'] as const) {
  test(`tensor-core backward skeleton with ${mod === 'none' ? 'no modifier' : `${mod === 'fox' ? 'FoX' : 'FPA'}'s hooks`}, its MMAs emulated, vs CPU: dq, dk, dv${mod === 'fox' ? ', dc' : mod === 'fpa' ? ', dφ, dℓ, dλ' : ''}; cut-off blocks, GQA, Tq < Tk, kvLength < Tk [webgpu]`, { skip }, async () => {
    let seed = 900;
    for (const c of CASES) {
      seed += 10;
      const fa = foxArgs(c), what = `${mod} ${JSON.stringify(c)}`;
      const a: AttentionArgs = { ...fa, causal: true, window: 0 };
      const rows = c.b * c.h * c.tq, nkv = c.b * c.hkv * c.tk;
      const n = [rows * c.d, nkv * c.d, nkv * c.d, rows * c.d];
      const host = n.map((len, i) => f32ToHost(randomF32(len, seed + i, i === 0 ? 2 : 1), 'f16'));
      const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
      const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
      const cv = forgetCumsum(c.b * c.h, c.tk, seed + 7);
      const [o, l] = mod === 'none' ? cpuAttn.attention(q, k, v, a) : mod === 'fox' ? cpuFox.foxAttention(q, k, v, cref(cv, 'f32'), fa)
        : cpuFpa.fpaAttention(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'), fa);
      const o16 = cref(o as AnyHostArray, 'f16'), lse = l as Float32Array;
      const want = (mod === 'none' ? cpuAttn.attentionBackward(q, k, v, o16, cref(lse, 'f32'), g, a)
        : mod === 'fox' ? cpuFox.foxAttentionBackward(q, k, v, cref(cv, 'f32'), o16, cref(lse, 'f32'), g, fa)
          : cpuFpa.fpaAttentionBackward(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'), o16, cref(lse, 'f32'), g, fa)) as AnyHostArray[];
      const delta = rowDots(hostToF32(o as AnyHostArray, 'f16'), hostToF32(host[3], 'f16'), rows, c.d);
      const [hq, hk, hv, hg] = host.map((x) => gpu!.upload(x, 'f16'));
      const form = c.form ?? EMULATED_DEFAULT;
      const nqb = Math.ceil(c.tq / (16 * form.dqNsg));
      const made: { lse: GpuHandle; delta: GpuHandle } | { mod: 'fox' | 'fpa'; ex: GpuHandle; auxWords: number } = mod === 'none' ? { lse: gpu!.upload(lse, 'f32'), delta: gpu!.upload(delta, 'f32') }
        : { mod, ex: gpu!.upload(concat(lse, delta, ...(mod === 'fox' ? [cv] : [phi, level, lam])), 'f32'), auxWords: mod === 'fox' ? rows + c.b * c.h * c.tk : rows + nkv + c.b * c.h * nqb * c.tk };
      const got = emulatedTcBackward(gpu!, { q: hq, k: hk, v: hv, g: hg }, a, made, form);
      const names = ['dq', 'dk', 'dv'];
      for (let i = 0; i < 3; i++) await compare([got.dq, got.dk, got.dv][i], 'f32', hostToF32(want[i], 'f16'), 2e-3, `${what} ${names[i]}`);
      if (got.aux && 'mod' in made) {
        const ax = await read(got.aux, 'f32', made.auxWords);
        const group = c.h / c.hkv;
        if (mod === 'fox') {
          // COMBINE: dc[(b, h), t] = row sums at query t − qoff minus column sums at key t.
          const dc = Float32Array.from({ length: c.b * c.h * c.tk }, (_, e) => {
            const bh = Math.floor(e / c.tk), i = (e % c.tk) - fa.qOffset;
            return -ax[rows + e] + (i >= 0 && i < c.tq ? ax[bh * c.tq + i] : 0);
          });
          compareHost(dc, want[3] as Float32Array, 1e-3, `${what} dc`);
        } else {
          // REDUCE: dφ sums the group's query-block cells, dℓ is copied, dλ sums the group's row partials.
          const dphi = new Float32Array(nkv), dlevel = ax.slice(rows, rows + nkv), dlam = new Float32Array(c.hkv);
          for (let e = 0; e < nkv; e++) {
            const bg = Math.floor(e / c.tk), t = e % c.tk, b = Math.floor(bg / c.hkv), gg = bg % c.hkv;
            for (let hh = 0; hh < group; hh++) for (let qb = 0; qb < nqb; qb++) dphi[e] += ax[rows + nkv + ((b * c.h + gg * group + hh) * nqb + qb) * c.tk + t];
          }
          for (let r = 0; r < rows; r++) dlam[Math.floor((Math.floor(r / c.tq) % c.h) / group)] += ax[r];
          compareHost(dphi, want[3] as Float32Array, 1e-3, `${what} dphi`);
          compareHost(dlevel, want[4] as Float32Array, 1e-3, `${what} dlevel`);
          compareHost(dlam, want[5] as Float32Array, 1e-3, `${what} dlambda`);
        }
      }
      for (const x of [got.dq, got.dk, got.dv, got.aux, hq, hk, hv, hg, ...('mod' in made ? [made.ex] : [made.lse, made.delta])]) if (x) gpu!.free(x);
    }
  });
}

/** Asserts the worst |got − want| / (1 + |want|) is at most tol (host arrays: aux's reductions). */
function compareHost(got: Float32Array, want: Float32Array, tol: number, what: string): void {
  let worst = 0, at = -1;
  for (let i = 0; i < want.length; i++) { const err = Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])); if (!(err <= worst)) { worst = err; at = i; } }
  assert.ok(worst <= tol, `${what}: worst error ${worst} at ${at} (emulated ${got[at]}, cpu ${want[at]}) above ${tol}`);
}

for (const mod of ['none', 'fox', 'fpa'] as const) {
  test(`tensor-core forward skeleton with ${mod === 'none' ? 'no modifier' : `${mod === 'fox' ? 'FoX' : 'FPA'}'s hooks`}, its MMAs emulated, vs CPU: out, lse; cut-off blocks, GQA, Tq < Tk, kvLength < Tk, with and without PREFETCH [webgpu]`, { skip }, async () => {
    let seed = 1200;
    for (const c of CASES) {
      seed += 10;
      const fa = foxArgs(c), a: AttentionArgs = { ...fa, causal: true, window: 0 };
      const rows = c.b * c.h * c.tq, nkv = c.b * c.hkv * c.tk;
      const host = [rows * c.d, nkv * c.d, nkv * c.d].map((len, i) => f32ToHost(randomF32(len, seed + i, i === 0 ? 2 : 1), 'f16'));
      const [q, k, v] = host.map((x) => cref(x, 'f16'));
      const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
      const cv = forgetCumsum(c.b * c.h, c.tk, seed + 7);
      const [o, l] = mod === 'none' ? cpuAttn.attention(q, k, v, a) : mod === 'fox' ? cpuFox.foxAttention(q, k, v, cref(cv, 'f32'), fa)
        : cpuFpa.fpaAttention(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'), fa);
      const [hq, hk, hv] = host.map((x) => gpu!.upload(x, 'f16'));
      const ex = mod === 'none' ? null : gpu!.upload(mod === 'fox' ? cv : concat(phi, level, lam), 'f32');
      for (const prefetch of [true, false]) {
        const what = `${mod} ${JSON.stringify(c)} prefetch ${prefetch}`;
        const got = emulatedTcForward(gpu!, { q: hq, k: hk, v: hv }, a, { modifier: ex && mod !== 'none' ? { kind: mod, ex } : undefined, prefetch });
        await compare(got.out, 'f32', hostToF32(o as AnyHostArray, 'f16'), 2e-3, `${what} out`);
        await compare(got.lse, 'f32', l as Float32Array, 1e-4, `${what} lse`);
        gpu!.free(got.out); gpu!.free(got.lse);
      }
      for (const x of [hq, hk, hv, ex]) if (x) gpu!.free(x);
    }
  });
}

test('tensor-core forward and backward skeletons with a block mask, their MMAs emulated, vs CPU: out, lse, dq, dk, dv; a shared and a per-head mask, GQA, ragged ends, packed documents; the dropped key blocks hold NaN [webgpu]', { skip }, async () => {
  const docs = (lengths: number[]) => lengths.flatMap((n, i) => new Array<number>(n).fill(i));
  const cases = [
    { b: 1, h: 2, hkv: 1, t: 300, heads: 1, keep: (_b: number, _h: number, qb: number, kb: number) => kb !== 1 && (kb === 2 * qb || (qb + kb) % 2 === 0) },
    { b: 2, h: 4, hkv: 2, t: 270, heads: 4, keep: (b: number, h: number, qb: number, kb: number) => kb !== 1 && ((kb + h + b) % 3 !== 1 || kb === 2 * qb) },
    { b: 1, h: 2, hkv: 2, t: 333, heads: 1, keep: (_b: number, _h: number, _qb: number, kb: number) => kb !== 1, segments: docs([70, 150, 113]) },
  ];
  let seed = 1500;
  for (const c of cases) {
    seed += 10;
    const d = 16, tq = c.t, tk = c.t;
    const m = blockMask({ batch: c.b, heads: c.heads, tq, tk, kvLength: tk, causal: true, window: 0, segments: c.segments }, c.keep);
    const a: AttentionArgs = { batch: c.b, heads: c.h, kvHeads: c.hkv, tq, tk, d, kvLength: tk, qOffset: 0, causal: true, window: 0, scale: 1 / Math.sqrt(d),
      mask: maskArgs(m) };
    const what = JSON.stringify({ ...c, keep: undefined, segments: c.segments ? 'docs' : undefined });
    const rows = c.b * c.h * tq, nkv = c.b * c.hkv * tk;
    // Keys 64…127 (key block 1, dropped everywhere) are NaN: a kernel that read them would spread it.
    const kvHost = (s: number) => { const x = randomF32(nkv * d, s); for (let bh = 0; bh < c.b * c.hkv; bh++) x.fill(NaN, (bh * tk + 64) * d, (bh * tk + 128) * d); return f32ToHost(x, 'f16'); };
    const host = [f32ToHost(randomF32(rows * d, seed, 2), 'f16'), kvHost(seed + 1), kvHost(seed + 2), f32ToHost(randomF32(rows * d, seed + 3), 'f16')];
    const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
    const mref: CpuRef = { h: m.table, shape: [m.table.length], dtype: 'i32' };
    const [o, l] = cpuAttn.attention(q, k, v, a, mref);
    const want = cpuAttn.attentionBackward(q, k, v, cref(o as AnyHostArray, 'f16'), cref(l as Float32Array, 'f32'), g, a, mref) as AnyHostArray[];
    const [hq, hk, hv, hg] = host.map((x) => gpu!.upload(x, 'f16'));
    const hm = gpu!.upload(m.table, 'i32');
    const fwd = emulatedTcForward(gpu!, { q: hq, k: hk, v: hv }, a, { mask: hm });
    await compare(fwd.out, 'f32', hostToF32(o as AnyHostArray, 'f16'), 2e-3, `${what} out`);
    await compare(fwd.lse, 'f32', l as Float32Array, 1e-4, `${what} lse`);
    const delta = rowDots(hostToF32(o as AnyHostArray, 'f16'), hostToF32(host[3], 'f16'), rows, d);
    const st = { lse: gpu!.upload(l as Float32Array, 'f32'), delta: gpu!.upload(delta, 'f32') };
    const got = emulatedTcBackward(gpu!, { q: hq, k: hk, v: hv, g: hg }, a, st, EMULATED_DEFAULT, hm);
    const names = ['dq', 'dk', 'dv'];
    for (let i = 0; i < 3; i++) await compare([got.dq, got.dk, got.dv][i], 'f32', hostToF32(want[i], 'f16'), 2e-3, `${what} ${names[i]}`);
    for (const x of [fwd.out, fwd.lse, got.dq, got.dk, got.dv, hq, hk, hv, hg, hm, st.lse, st.delta]) gpu!.free(x);
  }
});

test('tensor-core forward and backward skeletons with a sliding window and without causal masking, their MMAs emulated, vs CPU: out, lse, dq, dk, dv; GQA, ragged ends, Tq < Tk [webgpu]', { skip }, async () => {
  const cases = [
    { b: 1, h: 2, hkv: 1, tq: 150, tk: 150, window: 40, causal: true },
    { b: 1, h: 4, hkv: 2, tq: 90, tk: 130, window: 70, causal: true },
    { b: 2, h: 2, hkv: 2, tq: 70, tk: 100, window: 0, causal: false },
  ];
  let seed = 1700;
  for (const c of cases) {
    seed += 10;
    const d = 16, rows = c.b * c.h * c.tq, nkv = c.b * c.hkv * c.tk;
    const a: AttentionArgs = { batch: c.b, heads: c.h, kvHeads: c.hkv, tq: c.tq, tk: c.tk, d, kvLength: c.tk, qOffset: c.tk - c.tq, causal: c.causal, window: c.window, scale: 1 / Math.sqrt(d) };
    const what = JSON.stringify(c);
    const host = [rows * d, nkv * d, nkv * d, rows * d].map((len, i) => f32ToHost(randomF32(len, seed + i, i === 0 ? 2 : 1), 'f16'));
    const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
    const [o, l] = cpuAttn.attention(q, k, v, a);
    const want = cpuAttn.attentionBackward(q, k, v, cref(o as AnyHostArray, 'f16'), cref(l as Float32Array, 'f32'), g, a) as AnyHostArray[];
    const [hq, hk, hv, hg] = host.map((x) => gpu!.upload(x, 'f16'));
    const fwd = emulatedTcForward(gpu!, { q: hq, k: hk, v: hv }, a);
    await compare(fwd.out, 'f32', hostToF32(o as AnyHostArray, 'f16'), 2e-3, `${what} out`);
    await compare(fwd.lse, 'f32', l as Float32Array, 1e-4, `${what} lse`);
    const delta = rowDots(hostToF32(o as AnyHostArray, 'f16'), hostToF32(host[3], 'f16'), rows, d);
    const st = { lse: gpu!.upload(l as Float32Array, 'f32'), delta: gpu!.upload(delta, 'f32') };
    const got = emulatedTcBackward(gpu!, { q: hq, k: hk, v: hv, g: hg }, a, st);
    for (let i = 0; i < 3; i++) await compare([got.dq, got.dk, got.dv][i], 'f32', hostToF32(want[i], 'f16'), 2e-3, `${what} ${['dq', 'dk', 'dv'][i]}`);
    for (const x of [fwd.out, fwd.lse, got.dq, got.dk, got.dv, hq, hk, hv, hg, st.lse, st.delta]) gpu!.free(x);
  }
});
