/**
 * SpotAttention on WebGPU (SwiftShader in CI) against the CPU: the same layer (weights from one
 * seed, drawn on the host) over the same inputs: the dense prompt, decoding steps whose selection
 * runs on the device (Backend.selectOpen, a fine mask of 16-key blocks read by the split-K decode
 * kernel: spot/device_select.ts) under
 * top-K and top-p, and a verify pass of several rows; outputs, the tokens read and the recall agree.
 * Run: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/spot_webgpu.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { SPOT_DEFAULTS, SpotAttention } from '../../src/attention/spot/index.ts';
import { SpotKeyCache } from '../../src/attention/spot/key_cache.ts';
import type { SpotRule } from '../../src/attention/spot/selection.ts';
import type { LayerKv } from '../../src/attention/mechanism.ts';
import { noGrad } from '../../src/tensor/scope.ts';
import { topKBlocks } from '../../src/attention/spot/device_select.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const [H, HKV, D, C, T, PROMPT] = [4, 2, 8, 16, 760, 740];
const dims = { dModel: C, nLayers: 1, nHeads: H, nKvHeads: HKV, headDim: D, normEps: 1e-5 };
const host = async (t: Tensor) => Array.from((await t.data()) as Float32Array);

function setup(be: Backend, rule: SpotRule, keys: 'f16' | 'int4' = 'f16') {
  const m = new SpotAttention({ type: 'spot', ...SPOT_DEFAULTS, heads: 2, dim: 32, keys }, { f: new ParamFactory({ backend: be, seed: 3 }), name: 'layers.0.attn', dims });
  m.setRule(rule);
  m.measureRecall = true;
  m.measureBudget = true;
  const up = (shape: number[], seed: number) => fon.tensor(fon.randn(shape, { seed }).dataSync(), shape, { backend: be });
  const inp = { x: up([2, T, C], 1), q: up([2, H, T, D], 2), k: up([2, HKV, T, D], 3), v: up([2, HKV, T, D], 4) };
  const s: LayerKv = { k: fon.zeros([2, HKV, T, D], { backend: be }), v: fon.zeros([2, HKV, T, D], { backend: be }) };
  s.side = { spot: SpotKeyCache.forSlot(s, 32, keys) };
  const call = (from: number, to: number) => noGrad(() => m.forwardCached(
    fon.narrow(inp.q, 2, from, to - from), fon.narrow(inp.k, 2, from, to - from), fon.narrow(inp.v, 2, from, to - from), { x: fon.narrow(inp.x, 1, from, to - from) }, s, from));
  return { m, call, inp, slot: s };
}

function close(a: number[], b: number[], tol: number, what: string): void {
  assert.equal(a.length, b.length, what);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  assert.ok(worst <= tol, `${what}: max |Δ| ${worst}`);
}

test('Spot decoding on webgpu equals the CPU: device selection under top-K 0.6 and top-p 0.5 with f16 keys, top-K 0.6 with INT4 keys; steps and a verify pass, B = 2 [webgpu]', { skip }, async () => {
  for (const [rule, keys] of [[{ kind: 'top-k', fraction: 0.6 }, 'f16'], [{ kind: 'top-p', p: 0.5 }, 'f16'], [{ kind: 'top-k', fraction: 0.6 }, 'int4']] as [SpotRule, 'f16' | 'int4'][]) {
    const c = setup(cpu, rule, keys), g = setup(gpu!, rule, keys);
    close(await host(g.call(0, PROMPT)), await host(c.call(0, PROMPT)), 1e-4, `${rule.kind}: prompt`);
    for (let p = PROMPT; p < T - 5; p++) close(await host(g.call(p, p + 1)), await host(c.call(p, p + 1)), 1e-4, `${rule.kind}: step at ${p}`);
    // The step runs the split-K decode kernel with a fine mask (16-key blocks, no segment test), in 17 dispatches.
    const rt = (gpu as unknown as { rt: { recordDispatches<T>(fn: () => T): { result: T; dispatches: { kernel: string; variant: Record<string, unknown> }[] } } }).rt;
    const { result, dispatches } = rt.recordDispatches(() => g.call(T - 5, T - 4));
    close(await host(result), await host(c.call(T - 5, T - 4)), 1e-4, `${rule.kind}: step at ${T - 5}`);
    const decode = dispatches.filter((d) => d.kernel === 'attention_decode');
    assert.equal(decode.length, 1);
    assert.equal(decode[0].variant.FINE, true);
    assert.equal(decode[0].variant.MASK_KB, 16);
    assert.ok(!decode[0].variant.SEG, 'no segment test');
    close(await host(g.call(T - 4, T)), await host(c.call(T - 4, T)), 1e-4, `${rule.kind}: verify pass`);
    const [gc, gt] = await host(g.m.stats.tokens!), [cc, ct] = await host(c.m.stats.tokens!);
    assert.equal(gt, ct);
    assert.equal(gc, cc, `${rule.kind}: tokens read`);
    assert.ok(cc < 0.9 * ct, `${rule.kind}: the selection kept ${cc} of ${ct} tokens`);
    close(await host(g.m.stats.recall!), await host(c.m.stats.recall!), 1e-4, `${rule.kind}: recall`);
  }
});

test('a cached Spot step on webgpu with gradients on is refused by the layer\'s name (its device mask is forward-only); under noGrad it runs [webgpu]', { skip }, async () => {
  const g = setup(gpu!, { kind: 'top-k', fraction: 0.6 });
  g.call(0, PROMPT);
  const s = g.slot, q = fon.narrow(g.inp.q, 2, PROMPT, 1), k = fon.narrow(g.inp.k, 2, PROMPT, 1), v = fon.narrow(g.inp.v, 2, PROMPT, 1), x = fon.narrow(g.inp.x, 1, PROMPT, 1);
  q.requiresGrad = true;
  assert.throws(() => g.m.forwardCached(q, k, v, { x }, s, PROMPT), /spot\(top-p 0\.9, f16 keys\): Spot's cached steps on webgpu select their blocks on the device and carry no gradient; run them under noGrad \(as generation does\), or on the CPU/);
  assert.deepEqual(noGrad(() => g.m.forwardCached(q, k, v, { x }, s, PROMPT)).shape, [2, H, 1, D]);
});

test('Spot\'s gathered decode (decodePath gather) equals the CPU under top-K 0.2 and 0.6, steps and a verify pass, B = 2: one gather_blocks and a plain decode, no mask; top-p and recall-measuring steps keep the mask [webgpu]', { skip }, async () => {
  for (const fraction of [0.2, 0.6]) {
    const rule: SpotRule = { kind: 'top-k', fraction };
    const c = setup(cpu, rule), g = setup(gpu!, rule);
    g.m.decodePath = 'gather';
    g.m.measureRecall = false;
    c.m.measureRecall = false;
    close(await host(g.call(0, PROMPT)), await host(c.call(0, PROMPT)), 1e-4, `top-K ${fraction}: prompt`);
    for (let p = PROMPT; p < T - 5; p += 3) {
      // Steps the two write alike; only every third step is compared to keep SwiftShader's time down.
      for (let s = p; s < Math.min(p + 3, T - 5); s++) {
        const [a, b] = [g.call(s, s + 1), c.call(s, s + 1)];
        if (s === p) close(await host(a), await host(b), 1e-4, `top-K ${fraction}: step at ${s}`);
      }
    }
    const rt = (gpu as unknown as { rt: { recordDispatches<T>(fn: () => T): { result: T; dispatches: { kernel: string; variant: Record<string, unknown> }[] } } }).rt;
    const { result, dispatches } = rt.recordDispatches(() => g.call(T - 5, T - 4));
    close(await host(result), await host(c.call(T - 5, T - 4)), 1e-4, `top-K ${fraction}: step at ${T - 5}`);
    assert.equal(dispatches.filter((d) => d.kernel === 'gather_blocks').length, 1);
    const decode = dispatches.filter((d) => d.kernel === 'attention_decode');
    assert.equal(decode.length, 1);
    assert.ok(!decode[0].variant.MASK, 'a plain decode');
    assert.equal(dispatches.filter((d) => d.kernel === 'gather_blocks').length, 1, 'gathered from the selection\'s list (the kernel reads only lists)');
    assert.equal(dispatches.filter((d) => d.kernel === 'rows_select_mask').length, 0, 'no mask table of its own');
    close(await host(g.call(T - 4, T)), await host(c.call(T - 4, T)), 1e-4, `top-K ${fraction}: verify pass`);
    const [gc, gt] = await host(g.m.stats.tokens!), [cc, ct] = await host(c.m.stats.tokens!);
    assert.equal(gt, ct);
    assert.equal(gc, cc, `top-K ${fraction}: tokens read`);
  }
  // Top-p's count is the device's: the mask path, whatever decodePath says; so is a step that measures recall.
  for (const [rule, recall] of [[{ kind: 'top-p', p: 0.5 }, false], [{ kind: 'top-k', fraction: 0.6 }, true]] as [SpotRule, boolean][]) {
    const g = setup(gpu!, rule);
    g.m.decodePath = 'gather';
    g.m.measureRecall = recall;
    g.call(0, PROMPT);
    const rt = (gpu as unknown as { rt: { recordDispatches<T>(fn: () => T): { result: T; dispatches: { kernel: string; variant: Record<string, unknown> }[] } } }).rt;
    const { dispatches } = rt.recordDispatches(() => g.call(PROMPT, PROMPT + 1));
    assert.equal(dispatches.filter((d) => d.kernel === 'gather_blocks').length, 0, `${rule.kind}, recall ${recall}`);
    // The mask path: the selection writes its mask table in the same dispatch (selectBlockList).
    assert.equal(dispatches.filter((d) => d.kernel === 'rows_select' && d.variant.LIST).length, 1);
    assert.equal(dispatches.filter((d) => d.kernel === 'rows_select_mask').length, 0);
  }
});

test('Spot\'s decodePath auto (the default) gathers the rows whose top-K selection holds at least gatherFromTokens tokens and masks the others, within one verify pass; outputs and tokens read equal the CPU [webgpu]', { skip }, async () => {
  const rule: SpotRule = { kind: 'top-k', fraction: 0.6 };
  const c = setup(cpu, rule), g = setup(gpu!, rule);
  assert.equal(g.m.decodePath, 'auto');
  for (const x of [c, g]) x.m.measureRecall = false;
  close(await host(g.call(0, PROMPT)), await host(c.call(0, PROMPT)), 1e-4, 'prompt');
  for (let p = PROMPT; p < T - 6; p++) { g.call(p, p + 1); c.call(p, p + 1); }
  // Rows T − 6 … T − 1 select these many tokens; the threshold splits them.
  const tokens = Array.from({ length: 6 }, (_, i) => topKBlocks(T - 6 + i, rule).tokens);
  const sorted = [...new Set(tokens)].sort((a, b) => a - b);
  assert.ok(sorted.length >= 2, `rows ${T - 6} … ${T - 1} select ${tokens.join(', ')} tokens: the test needs two counts`);
  g.m.gatherFromTokens = sorted[sorted.length - 1];
  const rt = (gpu as unknown as { rt: { recordDispatches<T>(fn: () => T): { result: T; dispatches: { kernel: string; variant: Record<string, unknown> }[] } } }).rt;
  const { result, dispatches } = rt.recordDispatches(() => g.call(T - 6, T));
  close(await host(result), await host(c.call(T - 6, T)), 1e-4, 'verify pass');
  const gathers = tokens.filter((t) => t >= g.m.gatherFromTokens).length;
  assert.ok(gathers > 0 && gathers < 6);
  assert.equal(dispatches.filter((d) => d.kernel === 'gather_blocks').length, gathers, `rows gathered (tokens ${tokens.join(', ')}, from ${g.m.gatherFromTokens})`);
  assert.equal(dispatches.filter((d) => d.kernel === 'attention_decode' && d.variant.MASK).length, 6 - gathers, 'rows masked');
  const [gc, gt] = await host(g.m.stats.tokens!), [cc, ct] = await host(c.m.stats.tokens!);
  assert.equal(gt, ct);
  assert.equal(gc, cc, 'tokens read');
});
