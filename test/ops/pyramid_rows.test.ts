/**
 * pyramidGather and pyramidScatter on the CPU (ops/pyramid_rows.ts; Lighthouse's pooled gather and
 * scatter-back): the gather against the pyramid built whole (mean-pooled levels, concatenated) and
 * gathered by rows, the scatter against its definition by loops, the two adjoint (⟨G x, y⟩ = ⟨x, S y⟩),
 * and bad levels and shapes refused by name. Cross-backend parity and the finite-difference
 * gradients are in test/parity/cases.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, ShapeError } from '../../src/errors.ts';
import type { PyramidLevel } from '../../src/ops/pyramid_rows.ts';

const [B, H, N, D, P] = [2, 3, 37, 4, 4];
const NP = 48; // padded to a multiple of 16
const spans = [1, 4, 16];
const counts = spans.map((c) => NP / c);
const offsets = [0, counts[0], counts[0] + counts[1]];
const TOTAL = counts.reduce((a, b) => a + b, 0);
const level = (i: number, use: 'pool' | 'deliver'): PyramidLevel => ({ offset: offsets[i], count: counts[i], span: spans[i], shift: use === 'pool' ? 0 : spans[i] - 1, scale: use === 'pool' ? 1 / spans[i] : 1 });
const levels = (use: 'pool' | 'deliver') => spans.map((_, i) => level(i, use));
const M = 20;

/** A shuffle of [0, TOTAL) per list, cut to M rows. */
function rowsFor(lists: number): fon.Tensor {
  const out = new Int32Array(lists * M);
  for (let s = 0; s < lists; s++) for (let j = 0; j < M; j++) out[s * M + j] = (s * 11 + j * 13) % TOTAL;
  return fon.tensor(out, [lists, M], { dtype: 'i32' });
}

test('pyramidGather equals the mean-pooled pyramid built whole and gathered by rows (tokens past N pooled as zeros)', () => {
  const x = fon.randn([B, H, N, D], { seed: 1 });
  const rows = rowsFor(B * H), inv = fon.invertRows(rows, TOTAL);
  const padded = fon.concat([x, fon.zeros([B, H, NP - N, D])], 2);
  const l2 = fon.mean(fon.reshape(padded, [B, H, counts[1], P, D]), 3);
  const l3 = fon.mean(fon.reshape(l2, [B, H, counts[2], P, D]), 3);
  const want = fon.gatherDistinctRows(fon.concat([padded, l2, l3], 2), rows, inv, 2).dataSync() as Float32Array;
  const got = fon.pyramidGather(x, rows, inv, levels('pool')).dataSync() as Float32Array;
  assert.equal(got.length, B * H * M * D);
  for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - want[i]) < 1e-6, `value ${i}: ${got[i]} against ${want[i]}`);
});

test('pyramidScatter delivers each listed row to its range [c(j+1) − 1, c(j+2) − 1) ∩ [0, N), summed over levels, zero where nothing arrives', () => {
  const y = fon.randn([B, H, M, D], { seed: 2 });
  const rows = rowsFor(B * H), inv = fon.invertRows(rows, TOTAL);
  const got = fon.pyramidScatter(y, rows, inv, levels('deliver'), N).dataSync() as Float32Array;
  const yv = y.dataSync() as Float32Array, rv = rows.dataSync() as Int32Array;
  const want = new Float32Array(B * H * N * D);
  for (let s = 0; s < B * H; s++) for (let j = 0; j < M; j++) {
    const r = rv[s * M + j], l = offsets.filter((o) => o <= r).length - 1, e = r - offsets[l], c = spans[l];
    for (let t = c * (e + 1) - 1; t < Math.min(N, c * (e + 2) - 1); t++) for (let k = 0; k < D; k++) want[(s * N + t) * D + k] += yv[(s * M + j) * D + k];
  }
  let touched = 0;
  for (let i = 0; i < got.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) < 1e-5, `value ${i}: ${got[i]} against ${want[i]}`);
    if (want[i] !== 0) touched++;
  }
  assert.ok(touched > 0 && touched < got.length, `${touched} of ${got.length} values receive something`);
});

test('pyramidGather and pyramidScatter with the same levels are adjoint: ⟨G x, y⟩ = ⟨x, S y⟩, pool and deliver alike', () => {
  const rows = rowsFor(B * H), inv = fon.invertRows(rows, TOTAL);
  for (const use of ['pool', 'deliver'] as const) {
    const x = fon.randn([B, H, N, D], { seed: 3 }), y = fon.randn([B, H, M, D], { seed: 4 });
    const left = fon.sum(fon.mul(fon.pyramidGather(x, rows, inv, levels(use)), y)).dataSync()[0];
    const right = fon.sum(fon.mul(x, fon.pyramidScatter(y, rows, inv, levels(use), N))).dataSync()[0];
    assert.ok(Math.abs(left - right) < 1e-4 * Math.max(1, Math.abs(left)), `${use}: ${left} against ${right}`);
  }
});

test('bad levels and shapes are refused by name', () => {
  const x = fon.randn([1, 1, 8, 2]);
  const rows = fon.tensor(Int32Array.of(0, 9), [1, 2], { dtype: 'i32' }), inv = fon.invertRows(rows, 10);
  const ok: PyramidLevel[] = [{ offset: 0, count: 8, span: 1, shift: 0, scale: 1 }, { offset: 8, count: 2, span: 4, shift: 0, scale: 0.25 }];
  assert.equal(fon.pyramidGather(x, rows, inv, ok).shape.join(','), '1,1,2,2');
  assert.throws(() => fon.pyramidGather(x, rows, inv, [ok[0], { ...ok[1], offset: 9 }]), (e) => e instanceof ArgumentError && e.message === 'pyramidGather: level 2 starts at row 9; the levels before it end at 8');
  assert.throws(() => fon.pyramidGather(x, rows, inv, [ok[0], { ...ok[1], shift: 4 }]), (e) => e instanceof ArgumentError && e.message === 'pyramidGather: level 2 has span 4 and shift 4; expected span ≥ 1 and 0 ≤ shift < span');
  assert.throws(() => fon.pyramidGather(x, rows, inv, []), (e) => e instanceof ArgumentError && e.message === 'pyramidGather: no levels');
  assert.throws(() => fon.pyramidGather(x, rows, fon.invertRows(rows, 11), ok), (e) => e instanceof ShapeError && e.message === 'pyramidGather: tokens [1, 1, 8, 2], rows [1, 2] and inverse [1, 11] must be (B, H, N, D), (B·H, M) and (B·H, 10)');
  assert.throws(() => fon.pyramidScatter(fon.randn([1, 1, 3, 2]), rows, inv, ok, 8), (e) => e instanceof ShapeError && /pyramidScatter: tokens \[1, 1, 8, 2\], rows \[1, 2\]/.test(e.message));
  assert.throws(() => fon.pyramidScatter(fon.randn([1, 1, 2, 2]), rows, inv, ok, -1), (e) => e instanceof ArgumentError && e.message === 'pyramidScatter: n -1 must be an integer ≥ 0');
});
