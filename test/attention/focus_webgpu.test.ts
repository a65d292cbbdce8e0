/**
 * Focus on the WebGPU backend (SwiftShader in CI) against the CPU: the same tiny Focus model
 * (weights from one seed, drawn on the host) gives the same logits in the soft training forward
 * and the same gradients of W_g and C; the hard forward, which on webgpu plans the sparse path on
 * the device (device_plan.ts: no read-back), gives the CPU's result for k = 1 and 2; the device
 * plan equals the host plan entry for entry;
 * decoding through the KV cache on webgpu equals its own prefill; the pairs-kept counts agree; the
 * exact sparse prefill (row gathers, masked kernels, the fused merge) equals the CPU's.
 * Run: FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/focus_webgpu.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { focusLayers, setFocusInference } from '../../src/attention/focus/index.ts';
import { focusSparseAttention } from '../../src/attention/focus/sparse.ts';
import { checkDevicePlan } from './focus_device_plan.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const cfg = parseModelConfig({ vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 160, attention: [{ type: 'focus', groups: 4, topK: 2, window: 10 }, { type: 'full' }] });
const model = (b: Backend) => new Decoder(cfg, new ParamFactory({ backend: b, seed: 21 }));
const host = async (t: fon.Tensor) => Array.from((await t.data()) as Float32Array);
function close(a: number[], b: number[], tol: number, what: string): void {
  assert.equal(a.length, b.length, what);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  assert.ok(worst <= tol, `${what}: max |Δ| ${worst}`);
}

test('Focus on webgpu equals the CPU: soft logits and the gradients of W_g and C, hard logits for k = 1 and 2 (dense masked form on the device), pairs kept [webgpu]', { skip }, async () => {
  const mc = model(cpu), mg = model(gpu!);
  const idsOf = (b: Backend) => fon.tensor(Int32Array.from({ length: 2 * 70 }, (_, i) => (i * 7 + 3) % 40), [2, 70], { dtype: 'i32', backend: b });
  const [[, fc]] = focusLayers(mc), [[, fg]] = focusLayers(mg);
  // Soft (gradients on): logits and the centroid gradients.
  const lc = mc.loss(fon.narrow(idsOf(cpu), 1, 0, 69), fon.narrow(idsOf(cpu), 1, 1, 69));
  const lg = mg.loss(fon.narrow(idsOf(gpu!), 1, 0, 69), fon.narrow(idsOf(gpu!), 1, 1, 69));
  close(await host(lg), await host(lc), 1e-4, 'soft loss');
  fon.backward(lc); fon.backward(lg);
  close(await host(fg.centroids.grad!), await host(fc.centroids.grad!), 1e-4, 'dC');
  close(await host(fg.proj.weight.grad!), await host(fc.proj.weight.grad!), 1e-4, 'dW_g');
  for (const topK of [1, 2]) {
    setFocusInference(mc, { topK }); setFocusInference(mg, { topK });
    fc.resetStats(); fg.resetStats();
    const want = fon.noGrad(() => mc.forward(idsOf(cpu)));
    const got = fon.noGrad(() => mg.forward(idsOf(gpu!)));
    close(await host(got), await host(want), 1e-4, `hard k=${topK} logits`);
    assert.deepEqual(await host(fg.stats.pairs!), await host(fc.stats.pairs!), `k=${topK} pairs kept`);
  }
});

test('Focus decoding through the KV cache on webgpu equals its prefill logits [webgpu]', { skip }, async () => {
  const m = model(gpu!);
  const ids = fon.tensor(Int32Array.from({ length: 60 }, (_, i) => (i * 11 + 5) % 40), [1, 60], { dtype: 'i32', backend: gpu! });
  const want = await host(fon.noGrad(() => m.forward(ids)));
  const cache = new KvCache(cfg, 1, 60, gpu!);
  const parts: number[] = [];
  for (const [p, n] of [[0, 30], [30, 1], [31, 1], [32, 28]] as const) {
    parts.push(...(await host(fon.noGrad(() => m.forward(fon.narrow(ids, 1, p, n), { cache: cache.layers, pos: p })))));
    cache.length = p + n;
  }
  close(parts, want, 1e-4, 'decode');
  cache.dispose();
});

test('the sparse prefill (gathers, sorted segments, band, fused merge) on webgpu equals the CPU for every k of K = 4, batch 2, GQA, f32 and f16 [webgpu]', { skip }, async () => {
  const [b, h, hkv, t, d, groups, window] = [2, 4, 2, 150, 8, 4, 12];
  for (const dtype of ['f32', 'f16'] as const) {
    const inputs = (be: Backend) => [[b, h, t, d, 31], [b, hkv, t, d, 32], [b, hkv, t, d, 33]].map(([n0, n1, n2, n3, seed]) => {
      const x = fon.tensor(fon.randn([n0, n1, n2, n3], { seed, backend: cpu }).dataSync(), [n0, n1, n2, n3], { backend: be });
      return dtype === 'f32' ? x : fon.cast(x, dtype);
    });
    const [qc, kc, vc] = inputs(cpu), [qg, kg, vg] = inputs(gpu!);
    for (let topK = 1; topK < groups; topK++) {
      // Each token in topK distinct groups (a fixed pattern that covers every group).
      const bits = Uint32Array.from({ length: b * t }, (_, i) => { let w = 0; for (let j = 0; j < topK; j++) w |= 1 << ((i * 7 + j * 3 + (i >> 4)) % groups); while (popcount(w) < topK) w |= 1 << (31 - Math.clz32(~w & (2 ** groups - 1))); return w >>> 0; });
      const o = { groups, topK, window };
      const want = await host(fon.cast(focusSparseAttention(qc, kc, vc, bits, o), 'f32'));
      const got = focusSparseAttention(qg, kg, vg, bits, o);
      assert.equal(got.dtype, dtype);
      close(await host(fon.cast(got, 'f32')), want, dtype === 'f32' ? 1e-5 : 4e-3, `${dtype} k=${topK}`);
    }
  }
});

function popcount(w: number): number { let n = 0; for (; w; w &= w - 1) n++; return n; }

test('the device plan on webgpu equals the host plan (positions, copy rows, set A\'s entries, segment ids and words, set B\'s table) and its prefill the host path\'s, k = 1 and 2 [webgpu]', { skip }, async () => {
  for (const topK of [1, 2]) await checkDevicePlan(gpu!, { batch: 2, t: 200, groups: 4, topK, window: 9, heads: 2, kvHeads: 1, d: 8 });
  await checkDevicePlan(gpu!, { batch: 1, t: 700, groups: 2, topK: 1, window: 30, heads: 1, kvHeads: 1, d: 8 });
});
