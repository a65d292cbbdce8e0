/**
 * depthMix (ops/depth_mix.ts) on the CPU backend, against specs/fpa_depth.md §3.1 and §5 item 6:
 * - forward against the explicit formula written as plain loops here (group-mean query, f32
 *   softmax over the candidates, weighted sum of values), with GQA, two batches and a scale;
 * - GQA: one α per KV head — query heads of a group that differ only by a permutation give the same ṽ,
 *   and changing one query head changes the mix of its whole group only;
 * - one candidate (self only) returns v exactly, with gradient dout for v and zero for q and k;
 * - gradients of q, every key and every value against central differences, and the analytic
 *   formulas' relation dq_h = dq̄ / r (every head of a group gets the same gradient);
 * - f16 storage, and the error types and messages.
 * Run: node --import tsx --test test/ops/depth_mix.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, ShapeError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { depthMix } from '../../src/ops/depth_mix.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { checkGradient, type OpCase } from '../parity/run.ts';
import type { InputSpec } from '../parity/cases.ts';

const backend = new CpuBackend();
fon.setBackend(backend);

const vals = (t: Tensor): Float32Array => hostToF32(t.dataSync(), t.dtype);

function close(a: ArrayLike<number>, b: ArrayLike<number>, what: string, rtol = 1e-5, atol = 1e-6): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < b.length; i++) {
    assert.ok(Number.isFinite(a[i]), `${what}[${i}]: got ${a[i]}`);
    assert.ok(Math.abs(a[i] - b[i]) <= atol + rtol * Math.abs(b[i]), `${what}[${i}]: got ${a[i]}, want ${b[i]}`);
  }
}

interface Geo { name: string; b: number; h: number; hkv: number; t: number; d: number; m: number; scale?: number }
const GEOS: Geo[] = [
  { name: 'GQA 4/2, 3 candidates', b: 1, h: 4, hkv: 2, t: 5, d: 6, m: 3 },
  { name: 'MHA 3/3, two batches, 2 candidates, scale 0.4', b: 2, h: 3, hkv: 3, t: 4, d: 5, m: 2, scale: 0.4 },
  { name: 'GQA 3/1, one token, 4 candidates', b: 1, h: 3, hkv: 1, t: 1, d: 7, m: 4 },
];

/** The explicit formula in plain loops (f64): ṽ[b,g,t] = Σ_i softmax_i(scale·⟨q̄, k_i⟩)·v_i. */
function explicit(q: Float32Array, ks: Float32Array[], vs: Float32Array[], g: Geo): Float64Array {
  const r = g.h / g.hkv, scale = g.scale ?? 1 / Math.sqrt(g.d);
  const out = new Float64Array(g.b * g.hkv * g.t * g.d);
  for (let b = 0; b < g.b; b++) for (let kh = 0; kh < g.hkv; kh++) for (let t = 0; t < g.t; t++) {
    const qbar = new Float64Array(g.d);
    for (let j = 0; j < r; j++) for (let c = 0; c < g.d; c++) qbar[c] += q[((b * g.h + kh * r + j) * g.t + t) * g.d + c] / r;
    const o = ((b * g.hkv + kh) * g.t + t) * g.d;
    const e = ks.map((k) => { let s = 0; for (let c = 0; c < g.d; c++) s += qbar[c] * k[o + c]; return s * scale; });
    const z = e.reduce((acc, x) => acc + Math.exp(x), 0);
    for (let i = 0; i < g.m; i++) for (let c = 0; c < g.d; c++) out[o + c] += (Math.exp(e[i]) / z) * vs[i][o + c];
  }
  return out;
}

function inputs(g: Geo, seed: number, requiresGrad = false): { q: Tensor; ks: Tensor[]; vs: Tensor[] } {
  const kv = [g.b, g.hkv, g.t, g.d];
  return {
    q: fon.randn([g.b, g.h, g.t, g.d], { seed, requiresGrad }),
    ks: Array.from({ length: g.m }, (_, i) => fon.randn(kv, { seed: seed + 1 + i, std: 1.5, requiresGrad })),
    vs: Array.from({ length: g.m }, (_, i) => fon.randn(kv, { seed: seed + 101 + i, requiresGrad })),
  };
}

for (const g of GEOS) {
  test(`depthMix forward = the explicit formula: ${g.name}`, () => fon.tidy(() => {
    const { q, ks, vs } = inputs(g, 3);
    const got = vals(depthMix(q, ks, vs, { scale: g.scale }));
    close(got, explicit(vals(q), ks.map(vals), vs.map(vals), g), g.name);
  }));

  test(`depthMix gradients of q, every key and every value vs central differences: ${g.name}`, async () => {
    const shapes = [[g.b, g.h, g.t, g.d], ...Array.from({ length: 2 * g.m }, () => [g.b, g.hkv, g.t, g.d])];
    const specs = shapes.map((shape, i): InputSpec => ({ shape, dtype: 'f32', gen: { kind: 'randn', std: 1.5 }, seed: 50 + i }));
    const c: OpCase = {
      name: `depthMix/${g.name}`, op: 'depthMix', dtype: 'f32', inputs: specs, grad: specs.map((_, i) => i), tol: { rtol: 1e-4, atol: 1e-4 },
      run: (xs) => depthMix(xs[0], xs.slice(1, 1 + g.m), xs.slice(1 + g.m), { scale: g.scale }),
    };
    const r = await checkGradient(c, { backend });
    assert.ok(r.ok, r.detail);
    assert.ok(r.checks >= 2 * g.m + 1, `only ${r.checks} directions compared`);
  });
}

test('depthMix GQA: one α per KV head — the mix reads only the group mean of the query heads', () => fon.tidy(() => {
  const g = GEOS[0];
  const { q, ks, vs } = inputs(g, 7);
  const base = vals(depthMix(q, ks, vs));
  // Swap heads 0 and 1 (same group 0): the mean, and so every output, is unchanged.
  const qv = vals(q), swapped = qv.slice(), plane = g.t * g.d;
  swapped.set(qv.subarray(plane, 2 * plane), 0);
  swapped.set(qv.subarray(0, plane), plane);
  assert.deepEqual(Array.from(vals(depthMix(fon.tensor(swapped, q.shape), ks, vs))), Array.from(base));
  // Move head 0 by +δ and head 1 by −δ: the mean is the same up to rounding.
  const shifted = qv.slice();
  for (let i = 0; i < plane; i++) { shifted[i] += 0.5; shifted[plane + i] -= 0.5; }
  close(vals(depthMix(fon.tensor(shifted, q.shape), ks, vs)), base, 'mean-preserving change', 1e-5, 1e-5);
  // Change head 2 (group 1) only: group 0's rows stay bit-identical, group 1's move.
  const other = qv.slice();
  for (let i = 2 * plane; i < 3 * plane; i++) other[i] += 1;
  const moved = vals(depthMix(fon.tensor(other, q.shape), ks, vs));
  assert.deepEqual(Array.from(moved.subarray(0, plane)), Array.from(base.subarray(0, plane)));
  assert.ok(moved.subarray(plane).some((x, i) => Math.abs(x - base[plane + i]) > 1e-4), 'group 1 did not change');
}));

test('depthMix with one candidate returns v exactly; dv = dout, dq = dk = 0', () => fon.tidy(() => {
  const g: Geo = { name: 'self', b: 1, h: 4, hkv: 2, t: 3, d: 8, m: 1 };
  const { q, ks, vs } = inputs(g, 11, true);
  const out = depthMix(q, ks, vs);
  assert.deepEqual(Array.from(vals(out)), Array.from(vals(vs[0])));
  const w = fon.randn(out.shape, { seed: 12 });
  fon.backward(fon.sum(fon.mul(out, w)));
  assert.deepEqual(Array.from(vals(vs[0].grad!)), Array.from(vals(w)));
  assert.ok(vals(q.grad!).every((x) => x === 0));
  assert.ok(vals(ks[0].grad!).every((x) => x === 0));
}));

test('depthMix backward: every query head of a group gets the same gradient (dq_h = dq̄ / r)', () => fon.tidy(() => {
  const g = GEOS[0];
  const { q, ks, vs } = inputs(g, 21, true);
  fon.backward(fon.sum(fon.mul(depthMix(q, ks, vs), fon.randn([g.b, g.hkv, g.t, g.d], { seed: 22 }))));
  const dq = vals(q.grad!), plane = g.t * g.d;
  assert.deepEqual(Array.from(dq.subarray(0, plane)), Array.from(dq.subarray(plane, 2 * plane)));
  assert.deepEqual(Array.from(dq.subarray(2 * plane, 3 * plane)), Array.from(dq.subarray(3 * plane, 4 * plane)));
  assert.ok(dq.some((x) => Math.abs(x) > 1e-3), 'dq is not trivially zero');
}));

test('depthMix with f16 storage stays within f16 rounding of the f32 result', () => fon.tidy(() => {
  const g = GEOS[0];
  const { q, ks, vs } = inputs(g, 31);
  const h = (t: Tensor) => fon.cast(t, 'f16');
  const out = depthMix(h(q), ks.map(h), vs.map(h));
  assert.equal(out.dtype, 'f16');
  const ref = explicit(vals(h(q)), ks.map((k) => vals(h(k))), vs.map((v) => vals(h(v))), g);
  close(vals(out), ref, 'f16', 2e-3, 2e-3);
}));

function throwsExactly(fn: () => unknown, cls: typeof ShapeError | typeof DTypeError | typeof ArgumentError, re: RegExp): void {
  const before = backend.memory().liveHandles;
  fon.tidy(() => assert.throws(fn, (e: unknown) => (e as Error).constructor === cls && re.test((e as Error).message), `expected ${cls.name} matching ${re}`));
  assert.equal(backend.memory().liveHandles, before, 'the failed call left handles alive');
}

test('depthMix errors name the op, the shapes and the bad values', () => fon.tidy(() => {
  const q = fon.randn([1, 4, 3, 8]), k = fon.randn([1, 2, 3, 8]), v = fon.randn([1, 2, 3, 8]);
  throwsExactly(() => depthMix(q, [k, k], [v]), ArgumentError, /^depthMix: 2 keys but 1 values; expected one key and one value per candidate layer$/);
  throwsExactly(() => depthMix(q, [], []), ArgumentError, /^depthMix: no candidates; expected at least the current layer's own key and value$/);
  throwsExactly(() => depthMix(fon.randn([4, 3, 8]), [k], [v]), ShapeError, /^depthMix: q must have rank 4 \(B, H, T, D\), got q \[4, 3, 8\], keys \[\[1, 2, 3, 8\]\], values \[\[1, 2, 3, 8\]\]$/);
  throwsExactly(() => depthMix(q, [fon.randn([1, 2, 4, 8])], [v]), ShapeError, /^depthMix: keys and values must be \(1, Hkv, 3, 8\) for q \(B, H, T, D\), got q \[1, 4, 3, 8\], keys \[\[1, 2, 4, 8\]\], values \[\[1, 2, 3, 8\]\]$/);
  throwsExactly(() => depthMix(q, [k, k], [v, fon.randn([1, 1, 3, 8])]), ShapeError, /^depthMix: every key and value must have the first key's shape \[1, 2, 3, 8\], got .*values \[\[1, 2, 3, 8\], \[1, 1, 3, 8\]\]$/);
  throwsExactly(() => depthMix(q, [fon.randn([1, 3, 3, 8])], [fon.randn([1, 3, 3, 8])]), ShapeError, /^depthMix: query heads 4 must be a multiple of kv heads 3/);
  throwsExactly(() => depthMix(q, [fon.cast(k, 'f16')], [v]), DTypeError, /^depthMix: q, keys and values must share one dtype, got q f32, keys f16, values f32$/);
  throwsExactly(() => depthMix(fon.cast(q, 'i32'), [k], [v]), DTypeError, /^depthMix: expected a float tensor/);
  throwsExactly(() => depthMix(q, [k], [v], { scale: Infinity }), ArgumentError, /^depthMix: scale Infinity must be a finite number$/);
}));
