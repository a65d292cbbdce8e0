/**
 * SpotAttention's selector and distillation (attention/spot/selector.ts, distill.ts; specs
 * focus_spot.md B2, B3): token scores against a plain loop; decoding's block scores against them
 * (max-pooled, masses summing to one); the teacher rebuilt in chunks from the flash pass's
 * logsumexp against per-head softmaxes averaged by hand (GQA); SparseKL's set, its limits (equal to
 * DenseKL when the set is everything, 0 when the student is the teacher); the gradients of the
 * selector's three weights against central differences; and distillation lowering the KL.
 * Run: node --import tsx --test test/attention/spot_selector.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Tensor } from '../../src/index.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { decodeBlockScores, SPOT_MASKED, SpotSelector } from '../../src/attention/spot/selector.ts';
import { denseKL, klOnSet, sparseKL, sparseSet, teacherDistribution } from '../../src/attention/spot/distill.ts';

const cpu = await fon.initBackend('cpu');
const vals = (t: Tensor) => Array.from(t.dataSync() as Float32Array);
const shape = { heads: 2, dim: 4 };
const selector = (seed: number, c = 6) => new SpotSelector(new ParamFactory({ backend: cpu, seed }), 'layers.0.attn', c, shape);

test('selector scores: Σ_h w_h · ReLU(q_h·k/√d) against a plain loop, masked past the diagonal; keys one per token', () => {
  const sel = selector(3);
  const [b, t, c] = [2, 7, 6];
  const x = fon.randn([b, t, c], { seed: 4 });
  const keys = sel.keys(x);
  assert.deepEqual(keys.shape, [b, t, shape.dim]);
  const s = vals(sel.scores(x, keys));
  const X = vals(x), Wq = vals(sel.q.weight), Wk = vals(sel.k.weight), Ww = vals(sel.w.weight);
  const dot = (w: number[], row: number, xi: number) => { let a = 0; for (let j = 0; j < c; j++) a += w[row * c + j] * X[xi * c + j]; return a; };
  for (let bb = 0; bb < b; bb++) for (let i = 0; i < t; i++) for (let j = 0; j < t; j++) {
    const got = s[(bb * t + i) * t + j];
    if (j > i) { assert.equal(got, Math.fround(SPOT_MASKED)); continue; }
    let want = 0;
    for (let h = 0; h < shape.heads; h++) {
      let qk = 0;
      for (let e = 0; e < shape.dim; e++) qk += dot(Wq, h * shape.dim + e, bb * t + i) * dot(Wk, e, bb * t + j);
      want += dot(Ww, h, bb * t + i) * Math.max(0, qk / Math.sqrt(shape.dim));
    }
    assert.ok(Math.abs(got - want) <= 1e-5 * Math.max(1, Math.abs(want)), `(${bb}, ${i}, ${j}): ${got} against ${want}`);
  }
  // Decoding queries at positions 5 and 6 against the same keys give rows 5 and 6.
  const tail = vals(sel.scores(fon.narrow(x, 1, 5, 2), keys, 5));
  for (let bb = 0; bb < b; bb++) assert.deepEqual(tail.slice(bb * 2 * t, (bb + 1) * 2 * t), s.slice((bb * t + 5) * t, (bb * t + 7) * t));
});

test('decoding\'s block scores (decodeBlockScores, one pass over the keys) max-pool the token scores training distils over 16 tokens; their masses, the softmax summed per block, add up to one', () => {
  const sel = selector(5);
  const [b, n, l, pos] = [2, 3, 37, 31]; // queries at 31, 32, 33 over 37 keys: the last block partial, some keys past each query
  const x = fon.randn([b, l, 6], { seed: 6 });
  const keys = sel.keys(x);
  const xq = fon.narrow(x, 1, pos, n);
  const s = vals(sel.scores(xq, keys, pos)); // (B, n, L), SPOT_MASKED past each query
  const { max, logMass } = decodeBlockScores(sel, xq, { keys }, { l, pos });
  assert.deepEqual(max.shape, [b, n, 3]);
  const bs = vals(max), lm = vals(logMass);
  for (let r = 0; r < b * n; r++) {
    const row = s.slice(r * l, (r + 1) * l).filter((v) => v > SPOT_MASKED / 2);
    const z = row.reduce((a, v) => a + Math.exp(v), 0);
    const seen = lm.slice(r * 3, r * 3 + 3);
    const lz = Math.log(seen.reduce((a, v) => a + Math.exp(v), 0));
    let total = 0;
    for (let blk = 0; blk < 3; blk++) {
      const part = row.slice(blk * 16, blk * 16 + 16);
      if (part.length === 0) { assert.equal(bs[r * 3 + blk], Math.fround(SPOT_MASKED), `row ${r}, block ${blk}: no key seen`); continue; }
      assert.ok(Math.abs(bs[r * 3 + blk] - Math.max(...part)) < 1e-5, `row ${r}, block ${blk}: max`);
      const mass = Math.exp(lm[r * 3 + blk] - lz);
      assert.ok(Math.abs(mass - part.reduce((a, v) => a + Math.exp(v), 0) / z) < 1e-5, `row ${r}, block ${blk}: mass`);
      total += mass;
    }
    assert.ok(Math.abs(total - 1) < 1e-6, 'masses sum to one');
  }
});

test('the teacher, rebuilt in chunks from the flash pass\'s logsumexp, is the head-average of each head\'s causal softmax (GQA)', () => {
  const [b, h, hkv, t, d] = [2, 4, 2, 10, 8];
  const q = fon.randn([b, h, t, d], { seed: 1 }), k = fon.randn([b, hkv, t, d], { seed: 2 }), v = fon.randn([b, hkv, t, d], { seed: 3 });
  const got = vals(teacherDistribution(q, k, v, { chunk: 3 }));
  const Q = vals(q), K = vals(k);
  for (let bb = 0; bb < b; bb++) for (let i = 0; i < t; i++) {
    const avg = new Float64Array(t);
    for (let hh = 0; hh < h; hh++) {
      const kv = Math.floor(hh / (h / hkv));
      const logits = Array.from({ length: i + 1 }, (_, j) => { let a = 0; for (let e = 0; e < d; e++) a += Q[((bb * h + hh) * t + i) * d + e] * K[((bb * hkv + kv) * t + j) * d + e]; return a / Math.sqrt(d); });
      const m = Math.max(...logits), z = logits.reduce((a, x) => a + Math.exp(x - m), 0);
      logits.forEach((x, j) => { avg[j] += Math.exp(x - m) / z / h; });
    }
    for (let j = 0; j < t; j++) assert.ok(Math.abs(got[(bb * t + i) * t + j] - avg[j]) < 1e-5, `(${bb}, ${i}, ${j}): ${got[(bb * t + i) * t + j]} against ${avg[j]}`);
  }
});

test('SparseKL\'s set is the top K_train causal tokens of each row; with every token it is DenseKL; a student equal to the teacher scores 0', () => {
  const t = 9;
  const s = fon.tensor(Float32Array.from({ length: t * t }, (_, e) => (e % t <= Math.floor(e / t) ? Math.cos(e * 0.9) : SPOT_MASKED)), [1, t, t]);
  const set = vals(sparseSet(s, 4));
  for (let i = 0; i < t; i++) assert.equal(set.slice(i * t, (i + 1) * t).reduce((a, x) => a + x, 0), Math.min(4, i + 1), `row ${i}`);
  const teacher = fon.softmax(fon.mul(s, 0.7), -1);
  const dense = vals(denseKL(s, teacher))[0];
  assert.ok(dense > 1e-3);
  assert.ok(Math.abs(vals(sparseKL(s, teacher, t))[0] - dense) < 1e-6, 'K_train ≥ T: SparseKL = DenseKL');
  assert.ok(vals(sparseKL(s, teacher, 3))[0] >= -1e-7);
  assert.ok(Math.abs(vals(denseKL(s, fon.softmax(s, -1)))[0]) < 1e-6, 'student = teacher: 0');
  assert.throws(() => sparseSet(s, 0), /spot: K_train 0 must be an integer ≥ 1/);
});

test('the KL gradients for the selector\'s three weights against central differences: DenseKL, and SparseKL with its set held (it is chosen without gradient)', () => {
  const sel = selector(8);
  const x = fon.randn([1, 12, 6], { seed: 9 });
  const causal = fon.tensor(Float32Array.from({ length: 144 }, (_, e) => (e % 12 <= Math.floor(e / 12) ? 1 : 0)), [1, 12, 12]);
  const teacher = fon.mul(fon.softmax(fon.randn([1, 12, 12], { seed: 10, std: 2 }), -1), causal);
  const scores = () => sel.scores(x, sel.keys(x));
  const set = sparseSet(scores(), 6);
  let checked = 0;
  for (const loss of [() => denseKL(scores(), teacher), () => klOnSet(scores(), teacher, set)]) {
    for (const p of sel.parameters()) p.grad = null;
    fon.backward(loss());
    for (const p of [sel.q.weight, sel.k.weight, sel.w.weight]) {
      const g = vals(p.grad!), data = Float32Array.from(vals(p));
      for (const at of [0, Math.floor(data.length / 2), data.length - 1]) {
        const eps = 1e-2, at0 = data[at];
        const f = (v: number) => { data[at] = v; fon.kvWrite(fon.reshape(p, [1, 1, data.length, 1]), fon.tensor(data, [1, 1, data.length, 1]), 0); return fon.noGrad(() => vals(loss())[0]); };
        const num = (f(at0 + eps) - f(at0 - eps)) / (2 * eps);
        f(at0);
        assert.ok(Math.abs(num - g[at]) <= 2e-3 + 5e-2 * Math.abs(num), `check ${checked}, [${at}]: autograd ${g[at]}, central ${num}`);
        checked++;
      }
    }
  }
  assert.equal(checked, 18);
  // sparseKL is klOnSet on its own set: the same value.
  assert.ok(Math.abs(vals(sparseKL(scores(), teacher, 6))[0] - vals(klOnSet(scores(), teacher, set))[0]) < 1e-7);
});

test('distillation: AdamW on the selector alone lowers SparseKL against a frozen layer\'s attention', () => {
  const [t, c, h, d] = [32, 16, 2, 8];
  const sel = new SpotSelector(new ParamFactory({ backend: cpu, seed: 2 }), 'layers.0.attn', c, { heads: 2, dim: 8 });
  const x = fon.randn([2, t, c], { seed: 5 });
  // The frozen layer: fixed projections of x, its attention the teacher.
  const wq = fon.randn([c, h * d], { seed: 6, std: 0.5 }), wk = fon.randn([c, h * d], { seed: 7, std: 0.5 });
  const heads = (w: Tensor) => fon.permute(fon.reshape(fon.matmul(x, w), [2, t, h, d]), [0, 2, 1, 3]);
  const teacher = teacherDistribution(heads(wq), heads(wk), heads(wk), { chunk: 8 });
  const opt = new fon.AdamW(sel.parameters(), { lr: 3e-2, weightDecay: 0 });
  const losses: number[] = [];
  for (let step = 0; step < 40; step++) {
    const l = sparseKL(sel.scores(x, sel.keys(x)), teacher, t / 2);
    losses.push(vals(l)[0]);
    fon.backward(l);
    opt.step();
    opt.zeroGrad();
  }
  assert.ok(losses[39] < 0.6 * losses[0], `SparseKL ${losses[0].toFixed(4)} → ${losses[39].toFixed(4)}`);
});
