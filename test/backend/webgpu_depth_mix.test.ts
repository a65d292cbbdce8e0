/**
 * WebGPU Depth-Attention mixing (src/backend/webgpu/kernels/depth_mix.ts) against the CPU reference
 * (src/backend/cpu/depth_mix.ts) on small random inputs: GQA and MHA, one to five candidates, odd
 * head dims and odd element counts (so 16-bit slots of the stacked candidates need padding), rows
 * past one 64-row workgroup, f32, f16 and bf16 storage. Every output is compared: ṽ, α, dq, every dk
 * and dv; the single-candidate case returns v bit for bit; the op through autograd on the webgpu
 * backend gives the CPU's gradients; a 3-layer depth model (full, fox, fpa layers) trains on webgpu
 * along the CPU's loss curve and decodes through its KV cache to its own prefill logits.
 *
 * Tolerance: |gpu − cpu| ≤ tol·(1 + |cpu|), 2e-5 for f32 outputs and α, 1e-4 for f32 gradients,
 * 4e-3 f16, 2e-2 bf16 (one rounding of the stored output plus summation order).
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/backend/webgpu_depth_mix.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { DepthMixArgs } from '../../src/backend/backend.ts';
import * as cpuMix from '../../src/backend/cpu/depth_mix.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { depthMix, depthMixBackward } from '../../src/backend/webgpu/kernels/depth_mix.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { DEFAULT_TRAIN, Trainer } from '../../src/train/trainer.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { f32ToHost, hostToF32, type AnyHostArray, type FloatDType } from '../../src/tensor/dtype.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
exitAfterWebgpu();
const skip = webgpuSkipReason();

const TOL: Record<FloatDType, number> = { f32: 2e-5, f16: 4e-3, bf16: 2e-2 };
const gradTol = (dtype: FloatDType) => (dtype === 'f32' ? 1e-4 : TOL[dtype]);

interface Case { b: number; h: number; hkv: number; t: number; d: number; m: number; dtype?: FloatDType; scale?: number }
const CASES: Case[] = [
  { b: 1, h: 4, hkv: 2, t: 7, d: 8, m: 3 },
  { b: 2, h: 3, hkv: 3, t: 5, d: 5, m: 2, scale: 0.7 },
  { b: 1, h: 2, hkv: 1, t: 70, d: 12, m: 5 },
  { b: 1, h: 2, hkv: 1, t: 1, d: 129, m: 4 },
  { b: 1, h: 4, hkv: 2, t: 7, d: 8, m: 1 },
  { b: 1, h: 2, hkv: 1, t: 3, d: 7, m: 3, dtype: 'f16' },
  { b: 1, h: 4, hkv: 2, t: 9, d: 5, m: 2, dtype: 'bf16' },
];
const name = (c: Case) => JSON.stringify(c);

function argsOf(c: Case): DepthMixArgs {
  return { batch: c.b, heads: c.h, kvHeads: c.hkv, t: c.t, d: c.d, m: c.m, scale: c.scale ?? 1 / Math.sqrt(c.d) };
}

function randomF32(n: number, seed: number): Float32Array {
  const r = uniformStream(seed);
  return Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * 2);
}

type HostRef = { h: AnyHostArray; shape: number[]; dtype: FloatDType };

async function read(be: WebGpuBackend, h: GpuHandle, dtype: FloatDType | 'f32', n: number): Promise<Float32Array> {
  const raw = await be.read(h, dtype, n);
  be.free(h);
  return hostToF32(raw, dtype);
}

function compare(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= tol * (1 + Math.abs(want[i])), `${what}[${i}]: gpu ${got[i]}, cpu ${want[i]}`);
  }
}

for (const c of CASES) {
  test(`depthMix forward and backward [webgpu] = cpu: ${name(c)}`, { skip }, async () => {
    const be = gpu!;
    const dtype = c.dtype ?? 'f32', a = argsOf(c);
    const qShape = [c.b, c.h, c.t, c.d], kvShape = [c.b, c.hkv, c.t, c.d];
    const n = c.b * c.hkv * c.t * c.d, nq = c.b * c.h * c.t * c.d;
    const host = (x: Float32Array, shape: number[]): HostRef => ({ h: f32ToHost(x, dtype), shape, dtype });
    const q = host(randomF32(nq, 1), qShape);
    const ks = Array.from({ length: c.m }, (_, i) => host(randomF32(n, 10 + i), kvShape));
    const vs = Array.from({ length: c.m }, (_, i) => host(randomF32(n, 20 + i), kvShape));
    const dout = host(randomF32(n, 3), kvShape);
    const up = (r: HostRef) => ({ h: be.upload(r.h, dtype), shape: r.shape, dtype });
    const gq = up(q), gks = ks.map(up), gvs = vs.map(up), gg = up(dout);

    const [cOut, cAlpha] = cpuMix.depthMix(q, ks, vs, a);
    const [oh, ah] = depthMix(be, gq, gks, gvs, a);
    const out = await read(be, oh, dtype, n);
    compare(out, hostToF32(cOut, dtype), TOL[dtype], 'out');
    if (c.m === 1) assert.deepEqual(Array.from(out), Array.from(hostToF32(vs[0].h, dtype)), 'one candidate: v exactly');
    const alphaRef = { h: cAlpha, shape: [c.b, c.hkv, c.t, c.m], dtype: 'f32' as const };
    compare(await read(be, ah, 'f32', c.b * c.hkv * c.t * c.m), cAlpha as Float32Array, dtype === 'f32' ? TOL.f32 : 1e-3, 'alpha');

    // The backward from the CPU's α, so both sides start from the same saved statistics.
    const galpha = { h: be.upload(alphaRef.h, 'f32'), shape: alphaRef.shape, dtype: 'f32' as const };
    const [cdq, cdk, cdv] = cpuMix.depthMixBackward(q, ks, vs, alphaRef, dout, a);
    const [dq, dk, dv] = depthMixBackward(be, gq, gks, gvs, galpha, gg, a);
    compare(await read(be, dq, dtype, nq), hostToF32(cdq, dtype), gradTol(dtype), 'dq');
    for (let i = 0; i < c.m; i++) {
      compare(await read(be, dk[i], dtype, n), hostToF32(cdk[i], dtype), gradTol(dtype), `dk[${i}]`);
      compare(await read(be, dv[i], dtype, n), hostToF32(cdv[i], dtype), gradTol(dtype), `dv[${i}]`);
    }
    for (const r of [gq, ...gks, ...gvs, gg, galpha]) be.free(r.h);
  });
}

test('depthMix through autograd on webgpu gives the CPU\'s output and gradients', { skip }, async () => {
  const cpu = new CpuBackend();
  const run = async (backend: fon.Backend) => {
    const q = fon.randn([1, 4, 6, 8], { seed: 1, backend, requiresGrad: true });
    const ks = [2, 3, 4].map((s) => fon.randn([1, 2, 6, 8], { seed: s, backend, requiresGrad: true }));
    const vs = [5, 6, 7].map((s) => fon.randn([1, 2, 6, 8], { seed: s, backend, requiresGrad: true }));
    const out = fon.depthMix(q, ks, vs);
    fon.backward(fon.sum(fon.mul(out, fon.randn(out.shape, { seed: 8, backend }))));
    const all = [out, q.grad!, ...ks.map((k) => k.grad!), ...vs.map((v) => v.grad!)];
    return Promise.all(all.map(async (t) => hostToF32(await t.data(), t.dtype)));
  };
  const want = await run(cpu), got = await run(gpu!);
  want.forEach((w, i) => compare(got[i], w, 1e-4, `tensor ${i}`));
});

test('a depth model (stride 1; full, fox, fpa layers) trains on webgpu along the CPU loss curve and decodes to its prefill logits', { skip }, async () => {
  const cfg = parseModelConfig({ vocabSize: 50, dModel: 16, nLayers: 3, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16,
    attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa' }], depth: { stride: 1 } });
  const batches = {
    batchAt(i: number) {
      const inputs = new Int32Array(2 * 12), targets = new Int32Array(2 * 12);
      for (let j = 0; j < inputs.length; j++) { inputs[j] = (i * 31 + j * 7) % 50; targets[j] = (i * 13 + j * 5 + 1) % 50; }
      return { inputs, targets };
    },
  };
  const train = async (b: fon.Backend) => {
    const m = new Decoder(cfg, new ParamFactory({ backend: b, seed: 3 }));
    const tr = new Trainer(m, batches, { ...DEFAULT_TRAIN, steps: 4, batchSize: 2, context: 12, warmup: 1 });
    const losses: number[] = [];
    for (let s = 0; s < 4; s++) losses.push((await tr.trainStep()).loss);
    tr.dispose();
    return { m, losses };
  };
  const want = await train(new CpuBackend()), got = await train(gpu!);
  got.losses.forEach((l, i) => assert.ok(Math.abs(l - want.losses[i]) <= 1e-3 * Math.abs(want.losses[i]), `step ${i}: webgpu ${l} vs cpu ${want.losses[i]}`));
  const ids = Int32Array.from({ length: 9 }, (_, i) => (i * 11 + 3) % 50);
  const full = got.m.forward(fon.tensor(ids, [1, 9], { dtype: 'i32', backend: gpu! }));
  const cache = new KvCache(cfg, 1, 12, gpu!);
  const rows = [got.m.forward(fon.tensor(ids.slice(0, 3), [1, 3], { dtype: 'i32', backend: gpu! }), { cache: cache.layers, pos: 0 })];
  for (let p = 3; p < 9; p++) rows.push(got.m.forward(fon.tensor([ids[p]], [1, 1], { dtype: 'i32', backend: gpu! }), { cache: cache.layers, pos: p }));
  const a = hostToF32(await fon.concat(rows, 1).data(), 'f32'), b = hostToF32(await full.data(), 'f32');
  compare(a, b, 5e-5, 'decode vs prefill logits');
  cache.dispose();
  want.m.dispose(); got.m.dispose();
});
