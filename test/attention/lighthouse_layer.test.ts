/**
 * The Lighthouse layer (attention/lighthouse, specs/lighthouse_fon.md §1.6, §1.7, §1.14): with one
 * level it is dense causal attention; with every block refined it is the summed multi-level
 * attention of an independent float64 reference; with a frozen selection it is causal (and the
 * leak of a live selection is measured, not asserted); its gradients in q, k and v match central
 * differences; config errors name the value; decoding is refused; a model with a Lighthouse layer
 * trains on the CPU.
 * Run: node --import tsx --test test/attention/lighthouse_layer.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { LIGHTHOUSE_DEFAULTS, type LighthouseOptions } from '../../src/attention/lighthouse/geometry.ts';
import { lighthouseAttention, lighthouseSelection } from '../../src/attention/lighthouse/lighthouse.ts';
import { buildMechanism, describeMechanism, mechanismHfExport, parseLayerAttention } from '../../src/attention/table.ts';
import { modelDims, parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { DEFAULT_TRAIN, Trainer, type TrainConfig } from '../../src/train/trainer.ts';
import { formulaBatches } from '../train/fixtures.ts';

const cpu = await fon.initBackend('cpu');
const opts = (o: Partial<LighthouseOptions>): LighthouseOptions => ({ ...LIGHTHOUSE_DEFAULTS, ...o, qk: o.qk ?? Math.floor((o.tile ?? 128) / 2) });
const read = (t: fon.Tensor) => t.dataSync() as Float32Array;
function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** q (B, H, N, D), k and v (B, Hkv, N, D), seeded. */
function qkv(b: number, h: number, hkv: number, n: number, d: number, seed: number, requiresGrad = false): [fon.Tensor, fon.Tensor, fon.Tensor] {
  return [
    fon.randn([b, h, n, d], { seed, requiresGrad }),
    fon.randn([b, hkv, n, d], { seed: seed + 1, requiresGrad }),
    fon.randn([b, hkv, n, d], { seed: seed + 2, requiresGrad }),
  ];
}

/**
 * Summed multi-level attention in float64, by plain loops, every window of every level present:
 * entry (l, i) covers tokens [c·i, c·(i+1) − 1] (c = p^(l−1)), its q, k, v are the window's means;
 * it sees entry j when j ends before it, or at the same token on a level ≤ its own (§1.6); it
 * delivers its output to positions [end, end + c − 1] ∩ [0, N) (§1.7), summed. Windows past N are
 * left out: they end after the last position, so no position receives from them or from what they see.
 */
function multiLevelReference(q: Float32Array, k: Float32Array, v: Float32Array, shape: { b: number; h: number; hkv: number; n: number; d: number }, levels: number, pool: number): Float64Array {
  const { b, h, hkv, n, d } = shape;
  const y = new Float64Array(b * h * n * d);
  for (let bi = 0; bi < b; bi++) for (let hi = 0; hi < h; hi++) {
    const kh = Math.floor(hi / (h / hkv));
    const qAt = (t: number, j: number) => q[((bi * h + hi) * n + t) * d + j];
    const kAt = (t: number, j: number) => k[((bi * hkv + kh) * n + t) * d + j];
    const vAt = (t: number, j: number) => v[((bi * hkv + kh) * n + t) * d + j];
    type Entry = { level: number; start: number; end: number; q: number[]; k: number[]; v: number[] };
    const entries: Entry[] = [];
    for (let l = 1; l <= levels; l++) {
      const c = pool ** (l - 1);
      for (let i = 0; c * (i + 1) <= n; i++) {
        const pooled = (at: (t: number, j: number) => number) => Array.from({ length: d }, (_, j) => { let s = 0; for (let t = c * i; t < c * (i + 1); t++) s += at(t, j); return s / c; });
        entries.push({ level: l, start: c * i, end: c * (i + 1) - 1, q: pooled(qAt), k: pooled(kAt), v: pooled(vAt) });
      }
    }
    for (const m of entries) {
      const seen = entries.filter((j) => j.end < m.end || (j.end === m.end && j.level <= m.level));
      const logits = seen.map((j) => j.k.reduce((s, x, a) => s + x * m.q[a], 0) / Math.sqrt(d));
      const top = Math.max(...logits);
      const w = logits.map((x) => Math.exp(x - top)), z = w.reduce((s, x) => s + x, 0);
      const c = pool ** (m.level - 1);
      for (let t = m.end; t < Math.min(m.end + c, n); t++) {
        for (let a = 0; a < d; a++) y[((bi * h + hi) * n + t) * d + a] += seen.reduce((s, j, x) => s + (w[x] / z) * j.v[a], 0);
      }
    }
  }
  return y;
}

test('one level: the layer is dense causal attention (GQA, and a tail padded to the tiles)', () => {
  for (const [n, o] of [[12, { levels: 1, pool: 2, topk: 4, tile: 4 }], [13, { levels: 1, pool: 2, topk: 8, tile: 4 }]] as const) {
    const [q, k, v] = qkv(2, 4, 2, n, 4, n);
    const got = read(lighthouseAttention(q, k, v, opts(o)));
    const want = read(fon.denseAttention(q, k, v, { causal: true }));
    assert.ok(maxDiff(got, want) < 1e-5, `N=${n}: ${maxDiff(got, want)}`);
  }
});

test('every block refined: the layer equals the summed multi-level reference (float64 loops), with GQA and a padded tail', () => {
  for (const [n, o] of [[16, { levels: 3, pool: 2, topk: 8, tile: 8 }], [13, { levels: 3, pool: 2, topk: 8, tile: 8 }], [17, { levels: 2, pool: 2, topk: 16, tile: 16 }]] as const) {
    const shape = { b: 2, h: 2, hkv: 1, n, d: 4 };
    const [q, k, v] = qkv(shape.b, shape.h, shape.hkv, n, shape.d, 5 * n);
    const got = read(lighthouseAttention(q, k, v, opts(o)));
    const want = multiLevelReference(read(q), read(k), read(v), shape, o.levels, o.pool);
    assert.ok(maxDiff(got, want) < 1e-5, `N=${n}, L=${o.levels}: ${maxDiff(got, want)}`);
    const first = (o.pool ** (o.levels - 1)) - 1;
    assert.ok(first === 0 || Math.abs(got[0]) > 0, 'position 0 gets its token even before the coarsest window ends');
  }
});

test('causality: with the selection frozen, perturbing token t changes no output before t; the live selection\'s leak is measured', (t) => {
  const o = opts({ levels: 3, pool: 2, topk: 4, tile: 4 }); // N = 32: Cc = 8 > 4, so only part is refined
  const [b, h, hkv, n, d] = [1, 2, 2, 32, 4];
  const [q, k, v] = qkv(b, h, hkv, n, d, 11);
  const sel = lighthouseSelection(q, k, o);
  assert.equal(sel.geometry.gathered, 8 + 2 * 2 * 4);
  const base = read(lighthouseAttention(q, k, v, o, sel));
  let leak = 0;
  for (const at of [1, 7, 13, 20, 31]) {
    const bump = (x: fon.Tensor, scale: number) => {
      const host = Float32Array.from(read(x));
      const [xb, xh, , xd] = x.shape;
      for (let bi = 0; bi < xb; bi++) for (let hi = 0; hi < xh; hi++) for (let a = 0; a < xd; a++) host[((bi * xh + hi) * n + at) * xd + a] = host[((bi * xh + hi) * n + at) * xd + a] * scale + 0.5;
      return fon.tensor(host, x.shape);
    };
    const [q2, k2, v2] = [bump(q, 3), bump(k, 3), bump(v, -2)];
    const frozen = read(lighthouseAttention(q2, k2, v2, o, sel));
    const live = read(lighthouseAttention(q2, k2, v2, o));
    for (let hi = 0; hi < h; hi++) for (let s = 0; s < at; s++) for (let a = 0; a < d; a++) {
      const i = (hi * n + s) * d + a;
      assert.equal(frozen[i], base[i], `frozen selection: head ${hi}, position ${s} < ${at} changed`);
      leak = Math.max(leak, Math.abs(live[i] - base[i]));
    }
    assert.ok(maxDiff(frozen, base) > 0, `perturbing token ${at} changes something`);
  }
  t.diagnostic(`live selection: the largest change of an output before the perturbed token = ${leak.toExponential(3)} (the ranking spans a tile, §1.6; harmless for training)`);
});

test('gradients in q, k and v match central differences (frozen selection, partial refinement, GQA)', (t) => {
  const o = opts({ levels: 2, pool: 2, topk: 2, tile: 2, qk: 1 }); // N = 10: padded to 10, Cc = 5 > 2
  const [b, h, hkv, n, d] = [1, 2, 1, 10, 3];
  const [q, k, v] = qkv(b, h, hkv, n, d, 21, true);
  const w = fon.randn([b, h, n, d], { seed: 24 });
  const sel = lighthouseSelection(q, k, o);
  const lossOf = (qq: fon.Tensor, kk: fon.Tensor, vv: fon.Tensor) => fon.noGrad(() => read(fon.sum(fon.mul(lighthouseAttention(qq, kk, vv, o, sel), w)))[0]);
  fon.backward(fon.sum(fon.mul(lighthouseAttention(q, k, v, o, sel), w)));
  const inputs = [q, k, v];
  for (let which = 0; which < 3; which++) {
    const x = inputs[which], grad = read(x.grad!), host = Float32Array.from(read(x));
    const eps = 1e-2;
    let worst = 0, scale = 0;
    for (let i = 0; i < host.length; i++) {
      const at = (delta: number) => {
        const moved = Float32Array.from(host); moved[i] += delta;
        const args = inputs.map((t, j) => (j === which ? fon.tensor(moved, x.shape) : t));
        return lossOf(args[0], args[1], args[2]);
      };
      const fd = (at(eps) - at(-eps)) / (2 * eps);
      worst = Math.max(worst, Math.abs(fd - grad[i]));
      scale = Math.max(scale, Math.abs(grad[i]));
    }
    t.diagnostic(`${'qkv'[which]}: largest |central difference − autograd| ${worst.toExponential(2)}, largest gradient ${scale.toFixed(3)}`);
    assert.ok(scale > 0.1, `${'qkv'[which]} has a gradient`);
    assert.ok(worst < 1e-3 * Math.max(1, scale), `${'qkv'[which]}: |fd − autograd| ≤ ${worst} (largest gradient ${scale})`);
  }
});

test('config: defaults, every option checked with a message naming the value; fon info and export; levels longer than the sequence', () => {
  assert.deepEqual(parseLayerAttention('lighthouse', 'c'), { type: 'lighthouse', levels: 3, pool: 4, topk: 1536, scorer: 'norm', tile: 128, qk: 64 });
  assert.deepEqual(parseLayerAttention({ type: 'lighthouse', levels: 2, pool: 2, topk: 8, tile: 4 }, 'c'), { type: 'lighthouse', levels: 2, pool: 2, topk: 8, scorer: 'norm', tile: 4, qk: 2 });
  const bad: [Record<string, unknown>, string][] = [
    [{ pool: 3 }, `c: 'pool' = 3: expected a power of 2 ≥ 2`],
    [{ pool: 1 }, `c: 'pool' = 1: expected a power of 2 ≥ 2`],
    [{ pool: '4' }, `c: 'pool' = "4": expected a power of 2 ≥ 2`],
    [{ levels: 0 }, `c: 'levels' = 0: expected a positive integer`],
    [{ topk: 1000 }, `c: 'topk' = 1000: expected a multiple of 'tile' = 128 (T = topk / tile tiles)`],
    [{ topk: 4, tile: 4, pool: 4 }, `c: 'topk' = 4: expected topk / 2 ≥ 'pool' = 4`],
    [{ tile: 4, qk: 5, topk: 8 }, `c: 'qk' = 5: expected at most 'tile' = 4 (the query-norm share of each tile's budget)`],
    [{ scorer: 'gla' }, `c: 'scorer' = "gla": expected one of "norm", "dilated"`],
  ];
  for (const [o, message] of bad) assert.throws(() => parseLayerAttention({ type: 'lighthouse', ...o }, 'c'), (e: Error) => e instanceof fon.ConfigError && e.message === message, JSON.stringify(o));
  assert.throws(() => parseLayerAttention({ type: 'lighthouse', window: 4 }, 'c'), /c: unknown key 'window' for attention type "lighthouse"; expected levels, pool, topk, scorer, tile, qk, dilation$/);
  const spec = parseLayerAttention({ type: 'lighthouse', levels: 3, pool: 4 }, 'c');
  assert.equal(describeMechanism(spec).label, 'lighthouse(L=3, p=4, k=1536)');
  assert.match(String((mechanismHfExport(spec) as { unsupported: string }).unsupported), /training-only; switch them to "full"/);
  const [q, k, v] = qkv(1, 1, 1, 15, 2, 1);
  assert.throws(() => lighthouseAttention(q, k, v, opts({ levels: 3, pool: 4 })), /^ArgumentError: lighthouse: 3 levels with pool 4 need a coarsest window of 4\^2 = 16 tokens, longer than the sequence's 15/);
});

const cfg = parseModelConfig({
  vocabSize: 30, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 16,
  attention: [{ type: 'lighthouse', levels: 2, pool: 2, topk: 4, tile: 4 }, { type: 'full' }],
});

test('decoding is refused with a message that says to switch to full; the cache allocates as full attention\'s', () => {
  const m = buildMechanism(cfg.attention[0], { f: new ParamFactory({ backend: cpu, seed: 1 }), name: 'layers.0.attn', dims: modelDims(cfg) });
  const cache = new KvCache(cfg, 1, 8, cpu);
  const [q, k, v] = qkv(1, 2, 1, 1, 8, 3);
  assert.throws(() => m.forwardCached(q, k, v, { x: fon.zeros([1, 1, 16]) }, cache.layers[0], 0), (e: Error) => e instanceof fon.UnsupportedError && /training-only .*switch this layer to its recovery target \{"type": "full"\} for inference/.test(e.message));
  cache.dispose();
});

test('a model with a Lighthouse layer trains a few steps on the CPU (finite loss, gradients reach the layer\'s q, k, v projections)', async () => {
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const batches = formulaBatches(2, 16, (g) => (g * 7 + (g >> 3)) % 30, (g) => (g * 11 + 3) % 30);
  const tc: TrainConfig = { ...DEFAULT_TRAIN, steps: 3, batchSize: 2, context: 16, warmup: 1, lr: 1e-2, minLr: 1e-3 };
  const tr = new Trainer(m, batches, tc);
  const w0 = Float32Array.from(read(m.layers[0].attn.q.weight));
  const losses: number[] = [];
  for (let s = 0; s < 3; s++) losses.push((await tr.trainStep()).loss);
  assert.ok(losses.every(Number.isFinite), `losses ${losses}`);
  assert.ok(maxDiff(read(m.layers[0].attn.q.weight), w0) > 0, 'the Lighthouse layer\'s W_q trained');
  tr.dispose();
  m.dispose();
});

test('memory: a forward and backward outside any tidy leaves no buffer behind once the output and gradients are freed', () => {
  const o = opts({ levels: 3, pool: 2, topk: 4, tile: 4 });
  const [q, k, v] = qkv(1, 2, 1, 30, 4, 31, true); // 30 tokens: padded to 32, GQA repeat
  const before = cpu.memory().liveHandles;
  const y = lighthouseAttention(q, k, v, o);
  const loss = fon.sum(y);
  fon.backward(loss);
  for (const t of [y, loss]) t.dispose();
  for (const x of [q, k, v]) { x.grad!.dispose(); x.grad = null; }
  assert.equal(cpu.memory().liveHandles, before);
});

test('wasm: the layer\'s output and its gradients equal the cpu backend\'s', async () => {
  const wasm = await fon.initBackend('wasm');
  const o = opts({ levels: 3, pool: 2, topk: 4, tile: 4 });
  const run = async (backend: typeof cpu) => {
    const xs = [[2, 2, 29, 4], [2, 1, 29, 4], [2, 1, 29, 4]].map((shape, i) => fon.randn(shape, { seed: 41 + i, backend, requiresGrad: true }));
    const w = fon.randn([2, 2, 29, 4], { seed: 44, backend });
    const y = lighthouseAttention(xs[0], xs[1], xs[2], o);
    fon.backward(fon.sum(fon.mul(y, w)));
    return [await y.data(), ...(await Promise.all(xs.map((x) => x.grad!.data())))] as Float32Array[];
  };
  const [a, b] = [await run(cpu), await run(wasm)];
  a.forEach((x, i) => assert.ok(maxDiff(x, b[i]) < 1e-5, `${['y', 'dq', 'dk', 'dv'][i]}: ${maxDiff(x, b[i])}`));
});
