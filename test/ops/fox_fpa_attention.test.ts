/**
 * foxAttention and fpaAttention on the CPU backend, against the invariants of specs/fpa_depth.md §5:
 * - FoX forward and gradients against a dense masked composition (scores + c[p] − c[j] bias,
 *   softmax, matmul) and central differences for q, k, v and c;
 * - FPA forward against a direct O(T³) evaluation of the definition, central differences for all
 *   six inputs (inputs on a grid: no tie, no relu at its kink), and deliberate ties in φ checking the
 *   documented rule (the gradient goes to the latest argmin; a relu at exactly 0 passes nothing);
 * - FPA with FoX parameters (λ = 1, φ = ℓ = W = cumsum(log σ(a))) equals FoX with c = W, forward
 *   and every gradient (dφ + dℓ = dc, and d a through the walk);
 * - a non-decreasing shared walk equals plain causal attention(), forward and backward;
 * - the penalty, read back from the op's own output, never decreases down a key's column;
 * - f16/bf16 storage, rows that see no key, the error types and messages, and the WebGPU stubs.
 * Shapes are small and ragged, with GQA, kvLength < Tk and Tq < Tk.
 * Run: node --import tsx --test test/ops/fox_fpa_attention.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ArgumentError, DTypeError, ShapeError, UnsupportedError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { foxAttention } from '../../src/ops/fox_attention.ts';
import { fpaAttention } from '../../src/ops/fpa_attention.ts';
import { attention } from '../../src/ops/attention.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { normalArray, uniformArray } from '../../src/ops/random.ts';
import { checkGradient, type OpCase } from '../parity/run.ts';
import type { Gen, InputSpec } from '../parity/cases.ts';

const backend = new CpuBackend();
fon.setBackend(backend);

const vals = (t: Tensor): Float32Array => hostToF32(t.dataSync(), t.dtype);

/** |a − b| ≤ atol + rtol·|b| everywhere; names the first bad index. */
function close(a: ArrayLike<number>, b: ArrayLike<number>, what: string, rtol = 1e-5, atol = 1e-5): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < b.length; i++) {
    assert.ok(Number.isFinite(a[i]), `${what}[${i}]: got ${a[i]}`);
    assert.ok(Math.abs(a[i] - b[i]) <= atol + rtol * Math.abs(b[i]), `${what}[${i}]: got ${a[i]}, want ${b[i]}`);
  }
}

const maxAbs = (a: ArrayLike<number>) => Array.from(a).reduce((m, x) => Math.max(m, Math.abs(x)), 0);

/** Attention geometry: q (b, h, tq, d), k and v (b, hkv, tk, d), query i at kvLength − tq + i. */
interface Geo { name: string; b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; scale?: number }

const GEOS: Geo[] = [
  { name: 'self-attention, GQA 4/2', b: 1, h: 4, hkv: 2, tq: 7, tk: 7, d: 5 },
  { name: 'Tq < Tk, kvLength 8 < Tk 11, two batches, scale', b: 2, h: 2, hkv: 2, tq: 3, tk: 11, d: 4, kvLength: 8, scale: 0.6 },
  { name: 'decode into a longer cache, GQA 3/1', b: 1, h: 3, hkv: 1, tq: 1, tk: 9, d: 6, kvLength: 6 },
  { name: 'Tq 6 < kvLength 9 < Tk 10, GQA 2/1', b: 1, h: 2, hkv: 1, tq: 6, tk: 10, d: 3, kvLength: 9 },
];
/** kvLength < Tq: the first rows see no key at all. */
const EARLY: Geo = { name: 'kvLength 3 < Tq 5: rows before the first key', b: 1, h: 2, hkv: 1, tq: 5, tk: 6, d: 3, kvLength: 3 };

const kvLen = (g: Geo) => g.kvLength ?? g.tk;
const offset = (g: Geo) => kvLen(g) - g.tq;
const scaleOf = (g: Geo) => g.scale ?? 1 / Math.sqrt(g.d);
const optsOf = (g: Geo) => ({ kvLength: g.kvLength, scale: g.scale });
const qShape = (g: Geo) => [g.b, g.h, g.tq, g.d];
const kvShape = (g: Geo) => [g.b, g.hkv, g.tk, g.d];

/** (B, Hkv, Tk, D) → (B, H, Tk, D), each kv head repeated for its query group. */
function expandKv(x: Tensor, g: Geo): Tensor {
  const r = g.h / g.hkv;
  if (r === 1) return x;
  const [b, hkv, tk, d] = x.shape;
  return fon.reshape(fon.broadcastTo(fon.reshape(x, [b, hkv, 1, tk, d]), [b, hkv, r, tk, d]), [b, g.h, tk, d]);
}

/** (Tq, Tk) additive mask: 0 where key j ≤ p_i and j < kvLength, −∞ elsewhere. */
function causalMask(g: Geo): Tensor {
  const m = new Float32Array(g.tq * g.tk);
  for (let i = 0; i < g.tq; i++) for (let j = 0; j < g.tk; j++) m[i * g.tk + j] = j <= offset(g) + i && j < kvLen(g) ? 0 : -Infinity;
  return fon.tensor(m, [g.tq, g.tk]);
}

/** The dense FoX reference: softmax(scale·q·kᵀ + c[p_i] − c[j] + mask)·v. Needs kvLength ≥ Tq (every row sees a key). */
function denseFox(q: Tensor, k: Tensor, v: Tensor, c: Tensor, g: Geo): Tensor {
  const s = fon.mul(fon.matmul(q, expandKv(k, g), { transB: true }), scaleOf(g)); // (B, H, Tq, Tk)
  const cq = fon.narrow(c, 2, offset(g), g.tq); // (B, H, Tq): c at each query's position
  const bias = fon.sub(fon.unsqueeze(cq, 3), fon.unsqueeze(c, 2)); // (B, H, Tq, Tk)
  const p = fon.softmax(fon.add(fon.add(s, bias), causalMask(g)), -1);
  return fon.matmul(p, expandKv(v, g)); // (B, H, Tq, D)
}

// ---------------------------------------------------------------------------------------------
// FPA: a direct evaluation of the definition, O(T³), in f64 on the host

interface FpaHost { q: Float32Array; k: Float32Array; v: Float32Array; phi: Float32Array; level: Float32Array; lam: Float32Array }

interface FpaDirect {
  out: Float64Array;
  /** pen(b, h, i, j) for j ≤ p_i. */
  pen: (b: number, h: number, i: number, j: number) => number;
  /** Penalty gradients of L = Σ out ⊙ dO, with the argmin tie rule given. */
  dphi: Float64Array; dlevel: Float64Array; dlam: Float64Array;
  active: number;
}

/** M_ij = min φ over (j, p] by scanning the span; ties resolved to the latest or the earliest t. */
function spanMin(phi: Float32Array, base: number, j: number, p: number, tie: 'latest' | 'earliest'): [number, number] {
  let m = Infinity, at = -1;
  for (let t = j + 1; t <= p; t++) {
    const f = phi[base + t];
    if (f < m || (tie === 'latest' && f === m)) { m = f; at = t; }
  }
  return [m, at];
}

function fpaDirect(x: FpaHost, g: Geo, dO: Float32Array | null = null, tie: 'latest' | 'earliest' = 'latest'): FpaDirect {
  const { b: B, h: H, hkv: Hkv, tq: Tq, tk: Tk, d: D } = g;
  const group = H / Hkv, off = offset(g), sc = scaleOf(g);
  const out = new Float64Array(B * H * Tq * D);
  const dphi = new Float64Array(B * Hkv * Tk), dlevel = new Float64Array(B * Hkv * Tk), dlam = new Float64Array(Hkv);
  const penOf = (b: number, h: number, i: number, j: number): [number, number, number] => {
    const kvh = Math.floor(h / group), base = (b * Hkv + kvh) * Tk;
    const [m, at] = spanMin(x.phi, base, j, off + i, tie);
    const gap = x.level[base + j] - m;
    return [gap > 0 ? x.lam[kvh] * gap : 0, gap, at];
  };
  let active = 0;
  for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let i = 0; i < Tq; i++) {
    const p = off + i;
    if (p < 0) continue;
    const kvh = Math.floor(h / group), base = (b * Hkv + kvh) * Tk;
    const qo = ((b * H + h) * Tq + i) * D;
    const s: number[] = [], info: [number, number, number][] = [];
    for (let j = 0; j <= p; j++) {
      info.push(penOf(b, h, i, j));
      let dotv = 0;
      for (let c = 0; c < D; c++) dotv += x.q[qo + c] * x.k[(base + j) * D + c];
      s.push(sc * dotv - info[j][0]);
      if (info[j][1] > 0) active++;
    }
    const mx = Math.max(...s);
    const e = s.map((z) => Math.exp(z - mx));
    const z = e.reduce((a, c) => a + c, 0);
    const P = e.map((y) => y / z);
    for (let j = 0; j <= p; j++) for (let c = 0; c < D; c++) out[qo + c] += P[j] * x.v[(base + j) * D + c];
    if (!dO) continue;
    let delta = 0;
    for (let c = 0; c < D; c++) delta += dO[qo + c] * out[qo + c];
    for (let j = 0; j <= p; j++) {
      let dp = 0;
      for (let c = 0; c < D; c++) dp += dO[qo + c] * x.v[(base + j) * D + c];
      const gij = P[j] * (dp - delta);
      const [, gap, at] = info[j];
      if (gap > 0) {
        dlevel[base + j] -= x.lam[kvh] * gij;
        dphi[base + at] += x.lam[kvh] * gij;
        dlam[kvh] -= gij * gap;
      }
    }
  }
  return { out, pen: (b, h, i, j) => penOf(b, h, i, j)[0], dphi, dlevel, dlam, active };
}

const fpaTensors = (x: FpaHost, g: Geo, requiresGrad = false): Tensor[] => [
  fon.tensor(x.q, qShape(g), { requiresGrad }), fon.tensor(x.k, kvShape(g), { requiresGrad }), fon.tensor(x.v, kvShape(g), { requiresGrad }),
  fon.tensor(x.phi, [g.b, g.hkv, g.tk], { requiresGrad }), fon.tensor(x.level, [g.b, g.hkv, g.tk], { requiresGrad }), fon.tensor(x.lam, [g.hkv], { requiresGrad }),
];

/** A random FPA input: q, k, v normal; φ = W + u and ℓ = W + w around a signed random walk W; λ in [0.5, 1.5). */
function randomFpa(g: Geo, seed: number, stepStd = 0.7, offsetStd = 0.3): FpaHost {
  const n = g.b * g.hkv * g.tk;
  const steps = normalArray(seed + 3, n, 0, stepStd), u = normalArray(seed + 4, n, 0, offsetStd), w = normalArray(seed + 5, n, 0, offsetStd);
  const phi = new Float32Array(n), level = new Float32Array(n);
  for (let r = 0; r < g.b * g.hkv; r++) {
    let walk = 0;
    for (let t = 0; t < g.tk; t++) {
      const o = r * g.tk + t;
      walk += steps[o];
      phi[o] = walk + u[o];
      level[o] = walk + w[o];
    }
  }
  return {
    q: normalArray(seed, g.b * g.h * g.tq * g.d), k: normalArray(seed + 1, g.b * g.hkv * g.tk * g.d), v: normalArray(seed + 2, g.b * g.hkv * g.tk * g.d),
    phi, level, lam: uniformArray(seed + 6, g.hkv, 0.5, 1.5),
  };
}

/** The op as a parity case, for the central-difference check of test/parity/run.ts. */
function gradCase(name: string, shapes: number[][], gens: Gen[], run: OpCase['run'], seed: number): OpCase {
  const inputs = shapes.map((shape, i): InputSpec => ({ shape, dtype: 'f32', gen: gens[i], seed: seed + i }));
  return { name, op: name, dtype: 'f32', inputs, run, grad: inputs.map((_, i) => i), tol: { rtol: 1e-4, atol: 1e-4 } };
}

const RANDN: Gen = { kind: 'randn', std: 1, mean: 0 };

// ---------------------------------------------------------------------------------------------
// FoX

for (const g of GEOS) {
  test(`foxAttention forward = dense masked composition: ${g.name}`, () => fon.tidy(() => {
    const q = fon.randn(qShape(g), { seed: 1 }), k = fon.randn(kvShape(g), { seed: 2 }), v = fon.randn(kvShape(g), { seed: 3 });
    const c = fon.cumsum(fon.log(fon.sigmoid(fon.randn([g.b, g.h, g.tk], { seed: 4, std: 2 }))), -1);
    close(vals(foxAttention(q, k, v, c, optsOf(g))), vals(denseFox(q, k, v, c, g)), g.name);
  }));

  test(`foxAttention gradients of q, k, v and c = the dense composition's: ${g.name}`, () => fon.tidy(() => {
    const q = fon.randn(qShape(g), { seed: 5, requiresGrad: true }), k = fon.randn(kvShape(g), { seed: 6, requiresGrad: true });
    const v = fon.randn(kvShape(g), { seed: 7, requiresGrad: true }), c = fon.randn([g.b, g.h, g.tk], { seed: 8, requiresGrad: true });
    const w = fon.randn(qShape(g), { seed: 9 });
    const xs = [q, k, v, c];
    fon.backward(fon.sum(fon.mul(foxAttention(q, k, v, c, optsOf(g)), w)));
    const got = xs.map((t) => vals(t.grad!));
    for (const t of xs) { t.grad!.dispose(); t.grad = null; }
    fon.backward(fon.sum(fon.mul(denseFox(q, k, v, c, g), w)));
    ['dq', 'dk', 'dv', 'dc'].forEach((n, i) => close(got[i], vals(xs[i].grad!), `${g.name} ${n}`, 1e-4, 1e-5));
    assert.ok(maxAbs(got[3]) > 1e-3, 'dc is not trivially zero');
  }));
}

for (const g of [...GEOS, EARLY]) {
  test(`foxAttention gradients vs central differences (q, k, v, c): ${g.name}`, async () => {
    const c = gradCase(`foxAttention/${g.name}`, [qShape(g), kvShape(g), kvShape(g), [g.b, g.h, g.tk]], [RANDN, RANDN, RANDN, RANDN],
      ([q, k, v, cc]) => foxAttention(q, k, v, cc, optsOf(g)), 40);
    const r = await checkGradient(c, { backend });
    assert.ok(r.ok, r.detail);
    assert.ok(r.checks >= 24, `only ${r.checks} directions compared`);
  });
}

test('foxAttention: rows before the first key are zero with zero gradients; kvLength 0 gives zeros, not NaN', () => fon.tidy(() => {
  for (const g of [EARLY, { ...EARLY, kvLength: 0 }]) {
    const q = fon.randn(qShape(g), { seed: 1, requiresGrad: true }), k = fon.randn(kvShape(g), { seed: 2, requiresGrad: true });
    const v = fon.randn(kvShape(g), { seed: 3, requiresGrad: true }), c = fon.randn([g.b, g.h, g.tk], { seed: 4, requiresGrad: true });
    const out = vals(foxAttention(q, k, v, c, optsOf(g)));
    const dead = -offset(g) * g.d; // rows 0 … −offset−1 of every head see nothing
    for (let h = 0; h < g.h; h++) for (let e = 0; e < Math.min(dead, g.tq * g.d); e++) assert.equal(out[h * g.tq * g.d + e], 0, `head ${h} element ${e}`);
    assert.ok(out.every(Number.isFinite));
    fon.backward(fon.sum(fon.foxAttention(q, k, v, c, optsOf(g))));
    if (kvLen(g) === 0) for (const t of [q, k, v, c]) assert.ok(vals(t.grad!).every((x) => x === 0), 'gradient not zero');
    const dq = vals(q.grad!);
    for (let h = 0; h < g.h; h++) for (let e = 0; e < Math.min(dead, g.tq * g.d); e++) assert.equal(dq[h * g.tq * g.d + e], 0);
    const dc = vals(c.grad!);
    for (let h = 0; h < g.h; h++) for (let t = kvLen(g); t < g.tk; t++) assert.equal(dc[h * g.tk + t], 0, 'dc past kvLength');
  }
}));

// ---------------------------------------------------------------------------------------------
// FPA

for (const g of [...GEOS, EARLY]) {
  test(`fpaAttention forward = direct O(T³) evaluation of the definition: ${g.name}`, () => fon.tidy(() => {
    const x = randomFpa(g, 100);
    const want = fpaDirect(x, g);
    assert.ok(want.active > 0, 'the penalty is active somewhere');
    const [q, k, v, phi, level, lam] = fpaTensors(x, g);
    close(vals(fpaAttention(q, k, v, phi, level, lam, optsOf(g))), want.out, g.name, 1e-5, 1e-6);
  }));
}

const PHI_GRID: Gen = { kind: 'distinct', step: 0.1 };
const LEVEL_GRID: Gen = { kind: 'distinct', step: 0.1, offset: 0.05 };
const LAMBDA: Gen = { kind: 'rand', low: 0.5, high: 1.5 };

for (const g of [...GEOS, EARLY]) {
  test(`fpaAttention gradients vs central differences (q, k, v, phi, level, lambda), no ties: ${g.name}`, async () => {
    const pl = [g.b, g.hkv, g.tk];
    const c = gradCase(`fpaAttention/${g.name}`, [qShape(g), kvShape(g), kvShape(g), pl, pl, [g.hkv]], [RANDN, RANDN, RANDN, PHI_GRID, LEVEL_GRID, LAMBDA],
      ([q, k, v, f, l, lam]) => fpaAttention(q, k, v, f, l, lam, optsOf(g)), 60);
    const r = await checkGradient(c, { backend });
    assert.ok(r.ok, r.detail);
    assert.ok(r.checks >= 30, `only ${r.checks} directions compared`);
  });
}

test('fpaAttention penalty gradients match the direct evaluation and are non-zero (random walks, GQA)', () => fon.tidy(() => {
  for (const g of GEOS.slice(0, 2)) {
    const x = randomFpa(g, 200);
    const dO = normalArray(201, g.b * g.h * g.tq * g.d);
    const want = fpaDirect(x, g, dO);
    const ts = fpaTensors(x, g, true);
    fon.backward(fon.sum(fon.mul(fpaAttention(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], optsOf(g)), fon.tensor(dO, qShape(g)))));
    const [dphi, dlevel, dlam] = [ts[3], ts[4], ts[5]].map((t) => vals(t.grad!));
    close(dphi, want.dphi, `${g.name} dphi`, 1e-4, 1e-5);
    close(dlevel, want.dlevel, `${g.name} dlevel`, 1e-4, 1e-5);
    close(dlam, want.dlam, `${g.name} dlambda`, 1e-4, 1e-5);
    for (const [n, a] of [['dphi', dphi], ['dlevel', dlevel], ['dlambda', dlam]] as const) assert.ok(maxAbs(a) > 1e-3, `${n} is trivially zero`);
  }
}));

test('fpaAttention ties in phi: the gradient goes to the latest argmin; a relu at exactly 0 passes nothing', () => fon.tidy(() => {
  // One head, T = 6. φ has a tie at positions 1 and 3 (both 0). Every level is 2 except key 4,
  // whose level equals its only span min φ_5 = 6 exactly (gap 0 at query 5).
  const g: Geo = { name: 'ties', b: 1, h: 1, hkv: 1, tq: 6, tk: 6, d: 4 };
  const x: FpaHost = {
    q: normalArray(1, 24), k: normalArray(2, 24), v: normalArray(3, 24),
    phi: Float32Array.from([5, 0, 3, 0, 4, 6]), level: Float32Array.from([2, 2, 2, 2, 6, 2]), lam: Float32Array.from([0.8]),
  };
  const dO = normalArray(4, 24);
  const latest = fpaDirect(x, g, dO, 'latest'), earliest = fpaDirect(x, g, dO, 'earliest');
  const ts = fpaTensors(x, g, true);
  const lossOf = (phi: Tensor) => fon.sum(fon.mul(fpaAttention(ts[0], ts[1], ts[2], phi, ts[4], ts[5]), fon.tensor(dO, [1, 1, 6, 4])));
  fon.backward(lossOf(ts[3]));
  const dphi = vals(ts[3].grad!), dlevel = vals(ts[4].grad!);
  close(dphi, latest.dphi, 'dphi (latest-argmin rule)', 1e-4, 1e-6);
  close(dlevel, latest.dlevel, 'dlevel', 1e-4, 1e-6);
  // The rule matters here: the earliest-argmin rule moves keys 0's mass for queries 3…5 to position 1.
  assert.ok(Math.abs(latest.dphi[1] - earliest.dphi[1]) > 1e-3 && Math.abs(latest.dphi[3] - earliest.dphi[3]) > 1e-3, 'the tie does not matter for these inputs');
  // Position 1 gets only the pairs (query 1, key 0) and (query 2, key 0), where it is the unique min.
  const only1 = fpaDirect({ ...x, phi: Float32Array.from([5, 0, 3, 0.5, 4, 6]) }, { ...g, tq: 3, tk: 6, kvLength: 3 }, dO.subarray(0, 12), 'latest');
  close([dphi[1]], [only1.dphi[1]], 'dphi[1] from queries 1 and 2 only', 1e-4, 1e-6);
  // Relu at exactly 0: key 4's level equals φ_5 at query 5, its only query with a span.
  assert.equal(dlevel[4], 0);
  assert.equal(dphi[5], 0);
  // Moving both tied values together keeps the tie: that direction is smooth, and its derivative is dφ₁ + dφ₃.
  const eps = 1e-3;
  const at = (delta: number) => fon.noGrad(() => vals(lossOf(fon.tensor(Float32Array.from(x.phi, (f, i) => (i === 1 || i === 3 ? f + delta : f)), [1, 1, 6])))[0]);
  const numeric = (at(eps) - at(-eps)) / (2 * eps);
  assert.ok(Math.abs(numeric - (dphi[1] + dphi[3])) <= 2e-3 + 2e-2 * Math.abs(numeric), `numeric ${numeric} vs dphi1 + dphi3 ${dphi[1] + dphi[3]}`);
}));

test('fpaAttention with FoX parameters (λ = 1, φ = ℓ = W = cumsum(log σ(a))) equals foxAttention with c = W, forward and every gradient', () => fon.tidy(() => {
  for (const g of [GEOS[1], { ...GEOS[3], h: 2, hkv: 2 }, { name: 'self', b: 1, h: 3, hkv: 3, tq: 7, tk: 7, d: 5 } as Geo]) {
    const q = fon.randn(qShape(g), { seed: 11, requiresGrad: true }), k = fon.randn(kvShape(g), { seed: 12, requiresGrad: true });
    const v = fon.randn(kvShape(g), { seed: 13, requiresGrad: true });
    const a = fon.randn([g.b, g.h, g.tk], { seed: 14, std: 2, requiresGrad: true });
    const w = fon.randn(qShape(g), { seed: 15 });
    const walk = () => fon.cumsum(fon.log(fon.sigmoid(a)), -1); // (B, H, Tk), strictly decreasing
    const lam = fon.ones([g.hkv]);
    const grads = (): Float32Array[] => {
      const gs = [q, k, v, a].map((t) => vals(t.grad!));
      for (const t of [q, k, v, a]) { t.grad!.dispose(); t.grad = null; }
      return gs;
    };
    const fpaOut = fpaAttention(q, k, v, walk(), walk(), lam, optsOf(g));
    fon.backward(fon.sum(fon.mul(fpaOut, w)));
    const fpaGrads = grads();
    const foxOut = foxAttention(q, k, v, walk(), optsOf(g));
    fon.backward(fon.sum(fon.mul(foxOut, w)));
    const foxGrads = grads();
    close(vals(fpaOut), vals(foxOut), `${g.name} forward`, 1e-5, 1e-6);
    ['dq', 'dk', 'dv', 'da'].forEach((n, i) => close(fpaGrads[i], foxGrads[i], `${g.name} ${n}`, 1e-4, 1e-5));
    assert.ok(maxAbs(foxGrads[3]) > 1e-3, 'da is trivially zero');

    // Leaf φ, ℓ and c holding the same walk: dφ + dℓ = dc, dλ is the penalty's gradient.
    const W = vals(fon.noGrad(walk));
    const phi = fon.tensor(W, a.shape, { requiresGrad: true }), level = fon.tensor(W, a.shape, { requiresGrad: true }), c = fon.tensor(W, a.shape, { requiresGrad: true });
    fon.backward(fon.sum(fon.mul(fpaAttention(q, k, v, phi, level, lam, optsOf(g)), w)));
    fon.backward(fon.sum(fon.mul(foxAttention(q, k, v, c, optsOf(g)), w)));
    const sum = vals(fon.add(phi.grad!, level.grad!));
    close(sum, vals(c.grad!), `${g.name} dphi + dlevel = dc`, 1e-4, 1e-5);
  }
}));

test('fpaAttention with a non-decreasing shared walk (δ ≥ 0, zero steps included) equals plain causal attention, forward and backward', () => fon.tidy(() => {
  for (const g of GEOS) {
    const n = g.b * g.hkv * g.tk;
    const steps = normalArray(21, n);
    const W = new Float32Array(n);
    for (let r = 0; r < g.b * g.hkv; r++) {
      let acc = 0;
      // |step|, every third one exactly 0: ties in the min and gaps of exactly 0 (relu at its kink).
      for (let t = 0; t < g.tk; t++) { acc = Math.fround(acc + (t % 3 === 2 ? 0 : Math.abs(steps[r * g.tk + t]))); W[r * g.tk + t] = acc; }
    }
    const q = fon.randn(qShape(g), { seed: 22, requiresGrad: true }), k = fon.randn(kvShape(g), { seed: 23, requiresGrad: true });
    const v = fon.randn(kvShape(g), { seed: 24, requiresGrad: true });
    const phi = fon.tensor(W, [g.b, g.hkv, g.tk], { requiresGrad: true }), level = fon.tensor(W, [g.b, g.hkv, g.tk], { requiresGrad: true });
    const lam = fon.rand([g.hkv], { seed: 25, low: 0.5, high: 3, requiresGrad: true });
    const w = fon.randn(qShape(g), { seed: 26 });
    const fpaOut = fpaAttention(q, k, v, phi, level, lam, optsOf(g));
    fon.backward(fon.sum(fon.mul(fpaOut, w)));
    const fpaGrads = [q, k, v].map((t) => vals(t.grad!));
    for (const t of [q, k, v]) { t.grad!.dispose(); t.grad = null; }
    const plain = attention(q, k, v, optsOf(g));
    fon.backward(fon.sum(fon.mul(plain, w)));
    close(vals(fpaOut), vals(plain), `${g.name} forward`, 1e-6, 1e-7);
    ['dq', 'dk', 'dv'].forEach((nm, i) => close(fpaGrads[i], vals([q, k, v][i].grad!), `${g.name} ${nm}`, 1e-5, 1e-6));
    for (const [nm, t] of [['dphi', phi], ['dlevel', level], ['dlambda', lam]] as const) assert.ok(vals(t.grad!).every((z) => z === 0), `${g.name} ${nm} must be exactly 0`);
  }
}));

test('the FPA penalty never decreases down a key column (read back from the op on random walks) and equals the definition', () => fon.tidy(() => {
  // q = 0 and v = the identity (D = Tk): out_i is row i of P, with P_ij ∝ exp(−pen_ij) and pen_ip = 0,
  // so pen_ij = log P_ip − log P_ij comes out of the op's own output.
  const g: Geo = { name: 'column', b: 2, h: 4, hkv: 2, tq: 12, tk: 12, d: 12 };
  let increases = 0;
  for (let seed = 300; seed < 305; seed++) {
    const x = randomFpa(g, seed);
    x.q.fill(0);
    x.v = new Float32Array(g.b * g.hkv * g.tk * g.d);
    for (let r = 0; r < g.b * g.hkv; r++) for (let j = 0; j < g.tk; j++) x.v[(r * g.tk + j) * g.d + j] = 1;
    const [q, k, v, phi, level, lam] = fpaTensors(x, g);
    const P = vals(fpaAttention(q, k, v, phi, level, lam)); // (B, H, Tq, Tk)
    const direct = fpaDirect(x, g);
    for (let b = 0; b < g.b; b++) for (let h = 0; h < g.h; h++) for (let j = 0; j < g.tk; j++) {
      let prev = 0;
      for (let i = j; i < g.tq; i++) {
        const row = ((b * g.h + h) * g.tq + i) * g.tk;
        const pen = Math.log(P[row + i]) - Math.log(P[row + j]);
        assert.ok(Math.abs(pen - direct.pen(b, h, i, j)) <= 1e-4 * (1 + pen), `pen(${b}, ${h}, ${i}, ${j}) = ${pen}, the definition gives ${direct.pen(b, h, i, j)}`);
        assert.ok(pen >= prev - 1e-4, `seed ${seed} (${b}, ${h}) key ${j}: penalty fell from ${prev} to ${pen} at query ${i}`);
        if (pen > prev + 1e-3) increases++;
        prev = pen;
      }
    }
  }
  assert.ok(increases > 50, `only ${increases} strict increases: the walks never cross a level`);
}));

test('fpaAttention: rows before the first key are zero, kvLength 0 gives zeros and zero gradients', () => fon.tidy(() => {
  for (const g of [EARLY, { ...EARLY, kvLength: 0 }]) {
    const x = randomFpa(g, 400);
    const ts = fpaTensors(x, g, true);
    const out = fpaAttention(ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], optsOf(g));
    const o = vals(out);
    assert.ok(o.every(Number.isFinite));
    const dead = Math.min(-offset(g), g.tq) * g.d;
    for (let h = 0; h < g.h; h++) for (let e = 0; e < dead; e++) assert.equal(o[h * g.tq * g.d + e], 0);
    fon.backward(fon.sum(out));
    if (kvLen(g) === 0) for (const t of ts) assert.ok(vals(t.grad!).every((z) => z === 0), 'gradient not zero');
  }
}));

// ---------------------------------------------------------------------------------------------
// Storage dtypes, errors, WebGPU

test('f16 and bf16 q, k, v: output in that dtype, close to the f32 result on the same rounded inputs', () => fon.tidy(() => {
  const g = GEOS[0];
  const x = randomFpa(g, 500);
  const c = fon.randn([g.b, g.h, g.tk], { seed: 501 });
  for (const [dtype, tol] of [['f16', 2e-3], ['bf16', 1.6e-2]] as const) {
    const [q, k, v, phi, level, lam] = fpaTensors(x, g);
    const [qh, kh, vh] = [q, k, v].map((t) => fon.cast(t, dtype));
    const [q32, k32, v32] = [qh, kh, vh].map((t) => fon.cast(t, 'f32'));
    const fox = foxAttention(qh, kh, vh, c);
    assert.equal(fox.dtype, dtype);
    close(vals(fox), vals(foxAttention(q32, k32, v32, c)), `foxAttention ${dtype}`, tol, tol);
    const fpa = fpaAttention(qh, kh, vh, phi, level, lam);
    assert.equal(fpa.dtype, dtype);
    close(vals(fpa), vals(fpaAttention(q32, k32, v32, phi, level, lam)), `fpaAttention ${dtype}`, tol, tol);
  }
}));

/** fn throws exactly `cls` with a message matching `re`, and leaves no handle alive. */
function throwsExactly(fn: () => unknown, cls: typeof ShapeError | typeof DTypeError | typeof ArgumentError | typeof UnsupportedError, re: RegExp): void {
  const before = backend.memory().liveHandles;
  fon.tidy(() => assert.throws(fn, (e: unknown) => (e as Error).constructor === cls && re.test((e as Error).message), `expected ${cls.name} matching ${re}`));
  assert.equal(backend.memory().liveHandles, before, 'the failed call left handles alive');
}

test('foxAttention errors name the op, the shapes and the bad values', () => fon.tidy(() => {
  const q = fon.randn([1, 4, 3, 8]), k = fon.randn([1, 2, 5, 8]), v = fon.randn([1, 2, 5, 8]), c = fon.randn([1, 4, 5]);
  throwsExactly(() => foxAttention(fon.randn([4, 3, 8]), k, v, c), ShapeError, /^foxAttention: q, k and v must have rank 4 \(B, H, T, D\), got q \[4, 3, 8\], k \[1, 2, 5, 8\], v \[1, 2, 5, 8\]$/);
  throwsExactly(() => foxAttention(q, k, fon.randn([1, 2, 4, 8]), c), ShapeError, /^foxAttention: v must have k's shape, got q \[1, 4, 3, 8\], k \[1, 2, 5, 8\], v \[1, 2, 4, 8\]$/);
  throwsExactly(() => foxAttention(fon.randn([1, 3, 3, 8]), k, v, c), ShapeError, /^foxAttention: query heads 3 must be a multiple of kv heads 2, got q \[1, 3, 3, 8\]/);
  throwsExactly(() => foxAttention(q, fon.cast(k, 'f16'), v, c), DTypeError, /^foxAttention: q, k and v must share one dtype, got f32, f16 and f32$/);
  throwsExactly(() => foxAttention(fon.zeros([1, 4, 3, 8], { dtype: 'i32' }), k, v, c), DTypeError, /^foxAttention: expected a float tensor \(f32, f16, bf16\), got i32$/);
  throwsExactly(() => foxAttention(q, k, v, fon.cast(c, 'f16')), DTypeError, /^foxAttention: c \(cumulative log forget gate\) must be f32, got f16$/);
  throwsExactly(() => foxAttention(q, k, v, fon.randn([1, 2, 5])), ShapeError,
    /^foxAttention: c \(cumulative log forget gate\) must have shape \[1, 4, 5\] \(B, H, Tk\) for q \[1, 4, 3, 8\], k \[1, 2, 5, 8\], v \[1, 2, 5, 8\], got \[1, 2, 5\]$/);
  throwsExactly(() => foxAttention(q, k, v, c, { kvLength: 6 }), ArgumentError, /^foxAttention: kvLength 6 must be an integer in \[0, 5\] \(k's T axis\)$/);
  throwsExactly(() => foxAttention(q, k, v, c, { kvLength: -1 }), ArgumentError, /^foxAttention: kvLength -1 must be an integer/);
  throwsExactly(() => foxAttention(q, k, v, c, { scale: NaN }), ArgumentError, /^foxAttention: scale NaN must be a finite number$/);
  const other = new CpuBackend();
  const cOther = fon.randn([1, 4, 5], { backend: other });
  throwsExactly(() => foxAttention(q, k, v, cOther), ArgumentError, /^foxAttention: tensors live on different backends/);
}));

test('fpaAttention errors name the op, the shapes and the bad values (lambda must be finite and > 0)', () => fon.tidy(() => {
  const q = fon.randn([1, 4, 3, 8]), k = fon.randn([1, 2, 5, 8]), v = fon.randn([1, 2, 5, 8]);
  const phi = fon.randn([1, 2, 5]), level = fon.randn([1, 2, 5]), lam = fon.tensor([1, 0.5], [2]);
  assert.deepEqual(fpaAttention(q, k, v, phi, level, lam).shape, [1, 4, 3, 8], 'the good call works');
  throwsExactly(() => fpaAttention(fon.randn([1, 4, 3]), k, v, phi, level, lam), ShapeError, /^fpaAttention: q, k and v must have rank 4 \(B, H, T, D\), got q \[1, 4, 3\]/);
  throwsExactly(() => fpaAttention(q, fon.randn([1, 2, 5, 7]), fon.randn([1, 2, 5, 7]), phi, level, lam), ShapeError, /^fpaAttention: k and v must be \(1, Hkv, Tk, 8\) for q \(B, H, Tq, D\), got q \[1, 4, 3, 8\], k \[1, 2, 5, 7\]/);
  throwsExactly(() => fpaAttention(q, k, v, fon.cast(phi, 'f16'), level, lam), DTypeError, /^fpaAttention: phi \(field\) must be f32, got f16$/);
  throwsExactly(() => fpaAttention(q, k, v, phi, fon.cast(level, 'bf16'), lam), DTypeError, /^fpaAttention: level must be f32, got bf16$/);
  throwsExactly(() => fpaAttention(q, k, v, phi, level, fon.tensor([1, 2], [2], { dtype: 'i32' })), DTypeError, /^fpaAttention: lambda must be f32, got i32$/);
  throwsExactly(() => fpaAttention(q, k, v, fon.randn([1, 4, 5]), level, lam), ShapeError,
    /^fpaAttention: phi \(field\) must have shape \[1, 2, 5\] \(B, Hkv, Tk\) for q \[1, 4, 3, 8\] and k \[1, 2, 5, 8\], got \[1, 4, 5\]$/);
  throwsExactly(() => fpaAttention(q, k, v, phi, fon.randn([1, 2, 4]), lam), ShapeError, /^fpaAttention: level must have shape \[1, 2, 5\] \(B, Hkv, Tk\) for q \[1, 4, 3, 8\] and k \[1, 2, 5, 8\], got \[1, 2, 4\]$/);
  throwsExactly(() => fpaAttention(q, k, v, phi, level, fon.ones([4])), ShapeError, /^fpaAttention: lambda must have shape \[2\] \(Hkv\) for k \[1, 2, 5, 8\], got \[4\]$/);
  for (const [bad, shown] of [[0, '0'], [-0.5, '-0.5'], [NaN, 'NaN'], [Infinity, 'Infinity']] as const) {
    throwsExactly(() => fpaAttention(q, k, v, phi, level, fon.tensor([1, bad], [2])), ArgumentError,
      new RegExp(`^fpaAttention: lambda\\[1\\] = ${shown} must be a finite number > 0 \\(the penalty scale of kv head 1\\)$`));
  }
  throwsExactly(() => fpaAttention(q, k, v, phi, level, lam, { kvLength: 2.5 }), ArgumentError, /^fpaAttention: kvLength 2.5 must be an integer in \[0, 5\]/);
  throwsExactly(() => fpaAttention(q, k, v, phi, level, lam, { scale: Infinity }), ArgumentError, /^fpaAttention: scale Infinity must be a finite number$/);
  const other = new CpuBackend();
  throwsExactly(() => fpaAttention(q, k, v, phi, level, fon.ones([2], { backend: other })), ArgumentError, /^fpaAttention: tensors live on different backends/);
}));
