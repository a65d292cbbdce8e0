/**
 * Lighthouse's `dilated` scorer (attention/lighthouse/dilated.ts, specs/lighthouse_fon.md §1.4)
 * against plain loops: pseudo-head (r, h) attends causally over tokens r, r + δ, … of head h, as
 * (q, k, v) for s^QK and as (k, q, v) for s^KQ, and each token scores the L2 norm of its output;
 * a length that is not a multiple of δ (padded) gives the same scores for the real tokens as the
 * loops over them alone; the scores carry no gradient; the layer's selection under this scorer is
 * the cascade over these scores (squared, as the op ranks), with GQA's kv heads repeated.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { dilatedTokenScores } from '../../src/attention/lighthouse/dilated.ts';
import { lighthouseGeometry, type LighthouseOptions } from '../../src/attention/lighthouse/geometry.ts';
import { LighthouseAttention, lighthouseSelection } from '../../src/attention/lighthouse/lighthouse.ts';
import { levelScores, selectRows } from '../../src/backend/cpu/lighthouse.ts';
import { parseLayerAttention } from '../../src/attention/table.ts';
import type { LighthouseSpec } from '../../src/attention/lighthouse/index.ts';

const cpu = await fon.initBackend('cpu');

/** Loops: the scores of (a, b, v) (B, H, N, D) flattened, a the queries and b the keys of each pseudo-head. */
function reference(a: Float32Array, bk: Float32Array, v: Float32Array, [B, H, N, D]: number[], delta: number): Float32Array {
  const out = new Float32Array(B * H * N);
  const at = (x: Float32Array, b: number, h: number, t: number, e: number) => x[((b * H + h) * N + t) * D + e];
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let t = 0; t < N; t++) {
    const seen: number[] = [];
    for (let j = t % delta; j <= t; j += delta) seen.push(j);
    const logits = seen.map((j) => { let s = 0; for (let e = 0; e < D; e++) s += at(a, b, h, t, e) * at(bk, b, h, j, e); return s / Math.sqrt(D); });
    const m = Math.max(...logits), w = logits.map((x) => Math.exp(x - m)), z = w.reduce((x, y) => x + y, 0);
    let norm = 0;
    for (let e = 0; e < D; e++) { let o = 0; seen.forEach((j, i) => { o += (w[i] / z) * at(v, b, h, j, e); }); norm += o * o; }
    out[(b * H + h) * N + t] = Math.sqrt(norm);
  }
  return out;
}

for (const [shape, delta] of [[[1, 2, 16, 8], 4], [[2, 1, 13, 4], 4], [[1, 3, 9, 6], 2]] as const) {
  test(`the dilated scorer equals loops over pseudo-heads: shape ${shape.join('×')}, δ ${delta}${shape[2] % delta ? ' (padded)' : ''}`, () => {
    const q = fon.randn([...shape], { seed: 1, backend: cpu }), k = fon.randn([...shape], { seed: 2, backend: cpu }), v = fon.randn([...shape], { seed: 3, backend: cpu });
    const [Q, K, V] = [q, k, v].map((x) => x.dataSync() as Float32Array);
    const { qk, kq } = dilatedTokenScores(q, k, v, delta);
    assert.deepEqual(qk.shape, [shape[0], shape[1], shape[2]]);
    for (const [got, want, what] of [[qk, reference(Q, K, V, [...shape], delta), 'qk'], [kq, reference(K, Q, V, [...shape], delta), 'kq']] as const) {
      const g = got.dataSync() as Float32Array;
      for (let i = 0; i < g.length; i++) assert.ok(Math.abs(g[i] - want[i]) < 1e-5, `${what}[${i}]: ${g[i]} against ${want[i]}`);
    }
  });
}

test('the dilated scores carry no gradient', () => {
  const q = fon.randn([1, 1, 8, 4], { seed: 1, backend: cpu, requiresGrad: true });
  const { qk } = dilatedTokenScores(q, q, q);
  assert.equal(qk.requiresGrad, false);
});

/** Per list, the reference cascade (backend/cpu/lighthouse.ts selectRows) over the loops' dilated scores, squared as the op ranks them. */
function referenceRows(q: fon.Tensor, k: fon.Tensor, v: fon.Tensor, o: LighthouseOptions, delta = 4): Int32Array {
  const [b, h, n, d] = q.shape, g = lighthouseGeometry(n, o);
  const [Q, K, V] = [q, k, v].map((x) => x.dataSync() as Float32Array);
  const sq = reference(Q, K, V, [b, h, n, d], delta).map((x) => Math.fround(x * x)), sk = reference(K, Q, V, [b, h, n, d], delta).map((x) => Math.fround(x * x));
  const out = new Int32Array(b * h * g.gathered);
  for (let s = 0; s < b * h; s++) out.set(selectRows(levelScores(sq, s * n, g), levelScores(sk, s * n, g), g), s * g.gathered);
  return out;
}

test('Lighthouse with the dilated scorer selects what the cascade selects over the loops\' dilated scores; the layer runs it (GQA k and v repeated first); without v the selection says it needs v', () => {
  const o: LighthouseOptions = { levels: 2, pool: 2, topk: 8, tile: 4, qk: 2, scorer: 'dilated' };
  const q = fon.randn([1, 2, 24, 8], { seed: 4, backend: cpu }), k = fon.randn([1, 2, 24, 8], { seed: 5, backend: cpu }), v = fon.randn([1, 2, 24, 8], { seed: 6, backend: cpu });
  const sel = lighthouseSelection(q, k, o, v);
  assert.deepEqual(Array.from(sel.rows.dataSync() as Int32Array), Array.from(referenceRows(q, k, v, o)));
  const byNorm = lighthouseSelection(q, k, { ...o, scorer: 'norm' });
  assert.notDeepEqual(Array.from(byNorm.rows.dataSync() as Int32Array), Array.from(sel.rows.dataSync() as Int32Array), 'another scorer, another selection (else the check above proves nothing of the scorer)');
  sel.dispose();
  byNorm.dispose();
  // GQA: one kv head serving both query heads ranks as that head repeated.
  const k1 = fon.narrow(k, 1, 0, 1), v1 = fon.narrow(v, 1, 0, 1);
  const gqa = lighthouseSelection(q, k1, o, v1);
  const rep = (x: fon.Tensor) => fon.concat([x, x], 1);
  assert.deepEqual(Array.from(gqa.rows.dataSync() as Int32Array), Array.from(referenceRows(q, rep(k1), rep(v1), o)));
  gqa.dispose();
  const layer = new LighthouseAttention(o);
  assert.equal(layer.name, 'lighthouse(L=2, p=2, k=8, dilated)');
  const y = layer.forward(q, k1, v1);
  assert.deepEqual(y.shape, [1, 2, 24, 8]);
  assert.ok((y.dataSync() as Float32Array).every(Number.isFinite));
  assert.throws(() => lighthouseSelection(q, k, o), (e) => e instanceof fon.ArgumentError && /the dilated scorer reads v/.test(e.message));
});

test('the dilated scorer\'s fold as a config key: {"scorer": "dilated", "dilation": 2} selects with δ = 2; dilation on a norm layer, or below 1, is refused by name', () => {
  const spec = parseLayerAttention({ type: 'lighthouse', levels: 2, pool: 2, topk: 8, tile: 4, qk: 2, scorer: 'dilated', dilation: 2 }, 'c') as LighthouseSpec;
  assert.equal(spec.dilation, 2);
  const q = fon.randn([1, 1, 24, 8], { seed: 7, backend: cpu }), k = fon.randn([1, 1, 24, 8], { seed: 8, backend: cpu }), v = fon.randn([1, 1, 24, 8], { seed: 9, backend: cpu });
  const sel = lighthouseSelection(q, k, spec, v);
  assert.deepEqual(Array.from(sel.rows.dataSync() as Int32Array), Array.from(referenceRows(q, k, v, spec, 2)));
  sel.dispose();
  assert.throws(() => parseLayerAttention({ type: 'lighthouse', levels: 2, pool: 2, topk: 8, tile: 4, dilation: 2 }, 'c'), (e) => e instanceof fon.ConfigError && e.message === 'c: \'dilation\' = 2 is the dilated scorer\'s; this layer\'s scorer is "norm"');
  assert.throws(() => parseLayerAttention({ type: 'lighthouse', levels: 2, pool: 2, topk: 8, tile: 4, scorer: 'dilated', dilation: 0 }, 'c'), (e) => e instanceof fon.ConfigError && /'dilation' = 0/.test(e.message));
});
