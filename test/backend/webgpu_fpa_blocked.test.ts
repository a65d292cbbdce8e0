/**
 * The register-blocked FPA forward (attention_blocked.wgsl's FPA variant, dispatched by
 * src/backend/webgpu/kernels/fox_fpa_attention.ts when no tile is forced) against the CPU reference
 * (src/backend/cpu/fpa_attention.ts) and the tiled kernel: out and lse on ragged lengths (one key,
 * 31, 33, 100, 257: whole-visible 32-key blocks, the diagonal blocks and their corners), Tq < Tk
 * with qOffset > 0 and kvLength < Tk, GQA (φ, ℓ, λ per kv head), head dims 16, 32, 40, 64, f32,
 * bf16 and f16, and four kinds of walk: integer φ with many ties, a continuous walk, a large λ that
 * kills keys outright (penalty ≫ scores), and λ = 0 (no penalty: FoX with c = 0, i.e. plain NoPE
 * softmax). Every call must have gone through the blocked kernel (the dispatch counter says so),
 * and the tiled backward, fed the blocked forward's out and lse, must still match the CPU.
 *
 * Tolerance: |gpu − cpu| ≤ tol·(1 + |cpu|), as test/backend/webgpu_fox_fpa.test.ts.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_fpa_blocked.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cpuFox from '../../src/backend/cpu/fox_attention.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { fpaAttention, fpaAttentionBackward, fpaBlockedDispatches, fpaBlockedRows } from '../../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { f32ToHost, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { compareWith, cref, readWith } from './gpu_compare.ts';
import { foxArgs, gradTol, randomF32, statTol, TOL } from './fox_fpa_inputs.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
const compare = compareWith(() => gpu!);
const readF32 = readWith(() => gpu!);
exitAfterWebgpu();
const skip = webgpuSkipReason();

/**
 * How φ, ℓ and λ are drawn: `ties` an integer walk (φ values recur), `smooth` a continuous one,
 * `kill` the integer walk with λ = 1e4 (a penalised key's weight is exactly 0), `zero` λ = 0.
 */
type Walk = 'ties' | 'smooth' | 'kill' | 'zero';

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
];

/** φ, ℓ (rows × tk each) and λ (hkv) of one walk kind. */
function walks(rows: number, tk: number, hkv: number, kind: Walk, seed: number): [Float32Array, Float32Array, Float32Array] {
  const r = uniformStream(seed);
  const phi = new Float32Array(rows * tk), level = new Float32Array(rows * tk);
  for (let row = 0; row < rows; row++) {
    let w = 0;
    for (let t = 0; t < tk; t++) {
      const at = row * tk + t;
      if (kind === 'smooth') {
        w += (r() - 0.5) * 1.5;
        phi[at] = w + (r() - 0.5);
        level[at] = w + (r() - 0.7) * 2;
      } else {
        w += Math.floor(r() * 3) - 1;
        phi[at] = w + Math.floor(r() * 3) - 1;
        level[at] = w + Math.floor(r() * 4) - 3.5;
      }
    }
  }
  const lam = Float32Array.from({ length: hkv }, (_, g) => (kind === 'kill' ? 1e4 : kind === 'zero' ? 0 : 0.5 + 0.75 * g));
  return [phi, level, lam];
}

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

/** The blocked forward of one case against the CPU (and the tiled forward), then the tiled backward from its out and lse. */
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
  const before = fpaBlockedDispatches.fwd;
  const [out, lse] = fpaAttention(gpu!, rq, rk, rv, rphi, rlevel, rlam, a);
  assert.equal(fpaBlockedDispatches.fwd - before, 1, `${what}: the blocked forward ran`);
  await compare(out, dtype, wantOut as AnyHostArray, TOL[dtype], `${what} out`);
  await compare(lse, 'f32', wantLse as AnyHostArray, statTol(dtype), `${what} lse`);

  // The tiled forward gives the same (it does not count as blocked).
  const [tOut, tLse] = fpaAttention(gpu!, rq, rk, rv, rphi, rlevel, rlam, a, { bq: 16, bk: 16 });
  assert.equal(fpaBlockedDispatches.fwd - before, 1, `${what}: a forced tile ran the blocked forward`);
  await compare(out, dtype, await gpu!.read(tOut, dtype, wantOut.length), TOL[dtype], `${what} out vs tiled`);
  await compare(lse, 'f32', await gpu!.read(tLse, 'f32', wantLse.length), statTol(dtype), `${what} lse vs tiled`);

  // The tiled backward from the blocked forward's out and lse against the CPU's backward from its own (λ > 0 only).
  const handles = [out, lse, tOut, tLse, rq.h, rk.h, rv.h, rg.h, rphi.h, rlevel.h, rlam.h];
  if (c.walk !== 'zero') {
    const want = cpuFpa.fpaAttentionBackward(q, k, v, cref(phi, 'f32'), cref(level, 'f32'), cref(lam, 'f32'),
      cref(wantOut as AnyHostArray, dtype), cref(wantLse as AnyHostArray, 'f32'), g, a) as AnyHostArray[];
    const got = fpaAttentionBackward(gpu!, rq, rk, rv, rphi, rlevel, rlam, { h: out, shape: [], dtype }, { h: lse, shape: [], dtype: 'f32' }, rg, a);
    const names = ['dq', 'dk', 'dv', 'dphi', 'dlevel', 'dlambda'];
    for (let i = 0; i < names.length; i++) await compare(got[i], i < 3 ? dtype : 'f32', want[i], i < 3 ? gradTol(dtype) : statTol(dtype), `${what} ${names[i]}`);
    handles.push(...got);
  }
  for (const h of handles) gpu!.free(h);
}

test('FPA blocked forward vs CPU and the tiled forward: out, lse; T 1/31/33/100/257, qOffset > 0, kvLength < Tk, GQA, D 16/32/40/64, f32, bf16, f16, ties in φ, keys killed by λ = 1e4, λ = 0; the blocked path ran; the tiled backward from its out and lse matches [webgpu]', { skip }, async () => {
  // Head dims up to 64 take the blocked forward on any device with 32 KiB of workgroup memory (SwiftShader has that).
  assert.ok(fpaBlockedRows(gpu!.caps, 64) > 0, `fpaBlockedRows(${gpu!.caps.maxWorkgroupStorage} bytes, 64) = 0`);
  let seed = 31;
  for (const c of CASES) await check(c, seed += 10);
});

test('fpaBlockedRows: blockedRows with room for one block of φ and ℓ (256 bytes); none past head dim 128 [webgpu]', { skip }, () => {
  const caps = (bytes: number) => ({ ...gpu!.caps, maxWorkgroupStorage: bytes, maxInvocations: 256 });
  assert.equal(fpaBlockedRows(caps(49152), 64), 16);
  // TR = 16 at head dim 64 needs 46080 bytes for the softmax tiles: FPA's 256 more then pick TR = 8.
  assert.equal(fpaBlockedRows(caps(46080 + 255), 64), 8);
  assert.equal(fpaBlockedRows(caps(46080 + 256), 64), 16);
  assert.equal(fpaBlockedRows(caps(32768), 64), 8);
  assert.equal(fpaBlockedRows(caps(16384), 64), 0);
  assert.equal(fpaBlockedRows(caps(1 << 20), 200), 0);
});
