/**
 * The SpotAttention layer (attention/spot/spot.ts) on the host backend: a prompt is attended
 * densely; each decoding step selects its blocks (its selector over the cached selector keys, the
 * rule of selection.ts) and equals masked dense attention over exactly those blocks, computed here
 * by plain loops from the selector's weights with the sort-based selection; selecting every block
 * equals dense decoding; a verify pass of several rows equals the steps one by one; truncating the
 * cache and writing other rows keeps the selector keys exact (draft–revise); INT4 keys decode as
 * the reference over their dequantized values (read in f16); under a training-terms collection the layer adds
 * SparseKL (DenseKL) of its selector against its own attention, and only then.
 * Run: node --import tsx --test test/attention/spot_layer.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Tensor } from '../../src/index.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { SpotAttention, type SpotSpec } from '../../src/attention/spot/index.ts';
import { SPOT_DEFAULTS } from '../../src/attention/spot/index.ts';
import { SpotKeyCache } from '../../src/attention/spot/key_cache.ts';
import { selectBySort, SPOT_BLOCK, type SpotRule } from '../../src/attention/spot/selection.ts';
import { dequantizeKeysInt4, quantizeKeysInt4 } from '../../src/attention/spot/int4_keys.ts';
import { denseKL, sparseKL, teacherDistribution } from '../../src/attention/spot/distill.ts';
import { collectTrainingTerms } from '../../src/nn/training_terms.ts';
import { f16BitsToF32, f32ToF16Bits } from '../../src/tensor/dtype.ts';
import { noGrad } from '../../src/tensor/scope.ts';
import type { LayerKv } from '../../src/attention/mechanism.ts';

const cpu = await fon.initBackend('cpu');
const vals = (t: Tensor) => Float64Array.from(t.dataSync() as Float32Array);
const [H, HKV, D, C] = [2, 1, 8, 16];
const dims = { dModel: C, nLayers: 1, nHeads: H, nKvHeads: HKV, headDim: D, normEps: 1e-5 };

function layer(spec: Partial<SpotSpec> = {}, seed = 1): SpotAttention {
  return new SpotAttention({ type: 'spot', ...SPOT_DEFAULTS, heads: 2, dim: 32, ...spec }, { f: new ParamFactory({ backend: cpu, seed }), name: 'layers.0.attn', dims });
}

function slot(b: number, tmax: number, spec: SpotSpec): LayerKv {
  const k = fon.zeros([b, HKV, tmax, D]), v = fon.zeros([b, HKV, tmax, D]);
  const s: LayerKv = { k, v };
  s.side = { spot: SpotKeyCache.forSlot(s, spec.dim, spec.keys) };
  return s;
}

/** Random layer inputs: x (B, T, C), q (B, H, T, D), k and v (B, Hkv, T, D). */
function inputs(b: number, t: number, seed: number) {
  return { x: fon.randn([b, t, C], { seed }), q: fon.randn([b, H, t, D], { seed: seed + 1 }), k: fon.randn([b, HKV, t, D], { seed: seed + 2 }), v: fon.randn([b, HKV, t, D], { seed: seed + 3 }) };
}
type Inputs = ReturnType<typeof inputs>;
const rows = (inp: Inputs, from: number, n: number) => ({ x: fon.narrow(inp.x, 1, from, n), q: fon.narrow(inp.q, 2, from, n), k: fon.narrow(inp.k, 2, from, n), v: fon.narrow(inp.v, 2, from, n) });

/** Runs the layer over positions [from, to) of inp in one cached call. */
const call = (m: SpotAttention, s: LayerKv, inp: Inputs, from: number, to: number) => {
  const r = rows(inp, from, to - from);
  return noGrad(() => m.forwardCached(r.q, r.k, r.v, { x: r.x }, s, from));
};

const f16 = (x: number) => f16BitsToF32(f32ToF16Bits(x));

/**
 * The reference of batch entry b's query at position p: the selector's token scores from its
 * weights by plain loops (keys rounded to f16 as the cache keeps them, or through INT4), block max
 * and mass, selectBySort, then each head's softmax attention over the keys of the selected blocks.
 * Returns the (H, D) output and the selected blocks.
 */
function reference(m: SpotAttention, inp: Inputs, b: number, p: number, rule: SpotRule, keys: 'f16' | 'int4' = 'f16'): { out: number[]; blocks: number[]; recall: number } {
  const { heads, dim } = m.selector.shape;
  const X = vals(inp.x), Q = vals(inp.q), K = vals(inp.k), V = vals(inp.v);
  const Wq = vals(m.selector.q.weight), Wk = vals(m.selector.k.weight), Ww = vals(m.selector.w.weight);
  const t = inp.x.shape[1];
  const proj = (w: Float64Array, row: number, pos: number) => { let a = 0; for (let j = 0; j < C; j++) a += w[row * C + j] * X[(b * t + pos) * C + j]; return a; };
  const rawKeys = Float32Array.from({ length: (p + 1) * dim }, (_, i) => proj(Wk, i % dim, Math.floor(i / dim)));
  // The cache reads its keys in f16: as stored, or dequantized from INT4 into f16.
  const kk = keys === 'f16' ? Array.from(rawKeys, f16) : Array.from(dequantizeKeysInt4(quantizeKeysInt4(rawKeys, dim)), f16);
  const s = Array.from({ length: p + 1 }, (_, j) => {
    let sc = 0;
    for (let h = 0; h < heads; h++) {
      let qk = 0;
      for (let e = 0; e < dim; e++) qk += proj(Wq, h * dim + e, p) * kk[j * dim + e];
      sc += proj(Ww, h, p) * Math.max(0, qk / Math.sqrt(dim));
    }
    return sc;
  });
  const nb = Math.floor(p / SPOT_BLOCK) + 1;
  const top = Math.max(...s), z = s.reduce((a, x) => a + Math.exp(x - top), 0);
  const scores = Array.from({ length: nb }, (_, blk) => Math.max(...s.slice(blk * SPOT_BLOCK, (blk + 1) * SPOT_BLOCK)));
  const mass = Array.from({ length: nb }, (_, blk) => s.slice(blk * SPOT_BLOCK, (blk + 1) * SPOT_BLOCK).reduce((a, x) => a + Math.exp(x - top) / z, 0));
  const blocks = Array.from(selectBySort(p, scores, mass, rule).blocks);
  const keep = new Set(blocks);
  const out: number[] = [];
  let recall = 0;
  for (let h = 0; h < H; h++) {
    const kvh = Math.floor(h / (H / HKV));
    // The recall: this head's softmax over every causal key, its mass on the selected blocks.
    const all = Array.from({ length: p + 1 }, (_, j) => { let a = 0; for (let e = 0; e < D; e++) a += Q[((b * H + h) * t + p) * D + e] * K[((b * HKV + kvh) * t + j) * D + e]; return a / Math.sqrt(D); });
    const amx = Math.max(...all), az = all.reduce((acc, a) => acc + Math.exp(a - amx), 0);
    all.forEach((a, j) => { if (keep.has(Math.floor(j / SPOT_BLOCK))) recall += Math.exp(a - amx) / az / H; });
    const logits: [number, number][] = [];
    for (let j = 0; j <= p; j++) {
      if (!keep.has(Math.floor(j / SPOT_BLOCK))) continue;
      let a = 0;
      for (let e = 0; e < D; e++) a += Q[((b * H + h) * t + p) * D + e] * K[((b * HKV + kvh) * t + j) * D + e];
      logits.push([j, a / Math.sqrt(D)]);
    }
    const mx = Math.max(...logits.map(([, a]) => a));
    const w = logits.map(([j, a]) => [j, Math.exp(a - mx)] as const), zz = w.reduce((acc, [, e]) => acc + e, 0);
    for (let e = 0; e < D; e++) out.push(w.reduce((acc, [j, x]) => acc + (x / zz) * V[((b * HKV + kvh) * t + j) * D + e], 0));
  }
  return { out, blocks, recall };
}

function assertClose(got: ArrayLike<number>, want: ArrayLike<number>, tol: number, what: string): void {
  assert.equal(got.length, want.length, what);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  assert.ok(worst <= tol, `${what}: max error ${worst}`);
}

const T = 1000, PROMPT = 990;

test('decoding steps read the selected blocks only and equal masked dense attention over them (top-K 0.6 and top-p 0.5, B = 2)', () => {
  const inp = inputs(2, T, 11);
  for (const rule of [{ kind: 'top-k', fraction: 0.6 }, { kind: 'top-p', p: 0.5 }] as SpotRule[]) {
    const m = layer();
    m.setRule(rule);
    m.measureRecall = true;
    m.measureBudget = true;
    let recall = 0;
    const s = slot(2, T, m.spec);
    // The prompt is dense.
    const dense = noGrad(() => fon.attention(inp.q, inp.k, inp.v));
    assertClose(vals(call(m, s, inp, 0, PROMPT)), vals(fon.narrow(dense, 2, 0, PROMPT)), 1e-5, 'prompt');
    let partial = 0;
    for (let p = PROMPT; p < T; p++) {
      const got = vals(call(m, s, inp, p, p + 1)); // (2, H, 1, D)
      for (let b = 0; b < 2; b++) {
        const ref = reference(m, inp, b, p, rule);
        assertClose(got.slice(b * H * D, (b + 1) * H * D), ref.out, 2e-5, `${rule.kind}, batch ${b}, position ${p}`);
        recall += ref.recall / 2;
        if (ref.blocks.length < Math.floor(p / SPOT_BLOCK) + 1) partial++;
      }
    }
    assert.ok(partial >= 15, `${rule.kind}: only ${partial} of 20 steps left blocks out`);
    // The budget recorded: tokens of the selected blocks over the causal tokens of the steps.
    const [chosen, causal] = vals(m.stats.tokens!);
    assert.equal(causal, 2 * Array.from({ length: T - PROMPT }, (_, i) => PROMPT + i + 1).reduce((a, x) => a + x, 0));
    assert.ok(chosen < causal && chosen > 0.3 * causal, `${chosen} of ${causal}`);
    assert.equal(m.stats.rows, 2 * (T - PROMPT));
    // The recall: the layer's own attention mass on the selected blocks, per step averaged over the batch.
    const [got, steps] = vals(m.stats.recall!);
    assert.equal(steps, T - PROMPT);
    assert.ok(Math.abs(got - recall) < 1e-4, `recall ${got} against ${recall}`);
    assert.ok(recall / steps > 0.3 && recall / steps < 1, `mean recall ${recall / steps}`);
  }
});

test('selecting every block (top-K 1) equals dense decoding; a verify pass of several rows equals the steps one by one', () => {
  const inp = inputs(1, T, 21);
  const m = layer({ rule: 'top-k', fraction: 1 });
  const s = slot(1, T, m.spec);
  call(m, s, inp, 0, PROMPT);
  const dense = vals(fon.narrow(noGrad(() => fon.attention(inp.q, inp.k, inp.v)), 2, PROMPT, T - PROMPT));
  const steps: number[][] = Array.from({ length: H }, () => []);
  for (let p = PROMPT; p < T; p++) {
    const o = vals(call(m, s, inp, p, p + 1));
    for (let h = 0; h < H; h++) steps[h].push(...o.slice(h * D, (h + 1) * D));
  }
  assertClose(steps.flat(), dense, 1e-5, 'top-K 1 against dense');
  // Top-p 0.7: the rows of one verify pass equal the same rows decoded one at a time.
  const m2 = layer({ p: 0.7 }, 5), s1 = slot(1, T, m2.spec), s2 = slot(1, T, m2.spec);
  call(m2, s1, inp, 0, PROMPT);
  call(m2, s2, inp, 0, PROMPT);
  const pass = vals(call(m2, s1, inp, PROMPT, T)); // (1, H, 10, D)
  for (let p = PROMPT; p < T; p++) {
    const one = vals(call(m2, s2, inp, p, p + 1));
    for (let h = 0; h < H; h++) assertClose(pass.slice((h * (T - PROMPT) + p - PROMPT) * D, (h * (T - PROMPT) + p - PROMPT + 1) * D), one.slice(h * D, (h + 1) * D), 1e-6, `row ${p}, head ${h}`);
  }
});

test('truncating the cache and decoding other tokens leaves the selector keys as a fresh run writes them (draft–revise)', () => {
  const a = inputs(1, T, 31), other = inputs(1, T, 41);
  const m = layer({ p: 0.6 });
  const s = slot(1, T, m.spec), fresh = slot(1, T, m.spec);
  call(m, s, a, 0, PROMPT);
  call(m, fresh, a, 0, PROMPT);
  // Drafted rows from another sequence, rejected: truncate back to the prompt.
  call(m, s, other, PROMPT, PROMPT + 6);
  (s.side!.spot as SpotKeyCache).truncate(PROMPT);
  assert.equal((s.side!.spot as SpotKeyCache).length, PROMPT);
  for (let p = PROMPT; p < T; p++) assert.deepEqual(vals(call(m, s, a, p, p + 1)), vals(call(m, fresh, a, p, p + 1)), `position ${p}`);
  assert.deepEqual(vals((s.side!.spot as SpotKeyCache).read(T)), vals((fresh.side!.spot as SpotKeyCache).read(T)));
  assert.throws(() => (s.side!.spot as SpotKeyCache).read(T + 1), /1001 selector keys asked for; the cache holds 1000/);
});

test('INT4 selector keys: 72 bytes a 128-wide key; decoding equals the reference over the dequantized keys', () => {
  const inp = inputs(1, T, 51);
  const m = layer({ keys: 'int4', rule: 'top-k', fraction: 0.55 });
  const s = slot(1, T, m.spec);
  assert.equal(s.side!.spot.bytes, T * (32 / 2 + 32 / 16));
  assert.equal(SpotKeyCache.forSlot({ k: fon.zeros([1, 1, 4, D]), v: fon.zeros([1, 1, 4, D]) }, 128, 'int4').bytes, 4 * 72);
  call(m, s, inp, 0, PROMPT);
  for (let p = PROMPT; p < PROMPT + 4; p++) {
    const ref = reference(m, inp, 0, p, { kind: 'top-k', fraction: 0.55 }, 'int4');
    assertClose(vals(call(m, s, inp, p, p + 1)), ref.out, 2e-5, `position ${p}`);
  }
});

test('the training term: SparseKL (DenseKL) of the selector against the layer\'s own attention, only under a collection, gradients into the selector only', () => {
  const t = 40;
  const inp = inputs(2, t, 61);
  for (const loss of ['sparse', 'dense'] as const) {
    const m = layer({ loss, trainFraction: 0.25 });
    const x = inp.x.detach();
    x.requiresGrad = true;
    // Outside a collection: plain attention, no term.
    const plain = m.forward(inp.q, inp.k, inp.v, { x });
    assertClose(vals(plain), vals(noGrad(() => fon.attention(inp.q, inp.k, inp.v))), 0, 'forward');
    const { value, terms } = collectTrainingTerms(() => m.forward(inp.q, inp.k, inp.v, { x }));
    assertClose(vals(value), vals(plain), 0, 'forward under a collection');
    assert.deepEqual(Object.keys(terms), ['spotKL']);
    const scores = noGrad(() => m.selector.scores(x, m.selector.keys(x)));
    const teacher = teacherDistribution(inp.q, inp.k, inp.v);
    const want = noGrad(() => (loss === 'sparse' ? sparseKL(scores, teacher, 10) : denseKL(scores, teacher)));
    assertClose(vals(terms.spotKL), vals(want), 1e-6, `${loss} KL`);
    assert.ok(vals(terms.spotKL)[0] > 0);
    terms.spotKL.backward();
    for (const p of m.parameters()) assert.ok(p.grad && vals(p.grad).some((g) => g !== 0), 'every selector weight gets a gradient');
    assert.equal(x.grad, null, 'the input is read detached: the term never trains the model it imitates');
  }
});
