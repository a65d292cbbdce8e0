/**
 * WebGPU row kernels (src/backend/webgpu/kernels/rows.ts) against the CPU reference
 * (src/backend/cpu/reduce.ts, fused.ts): reduce, softmax, logsumexp, RMSNorm, LayerNorm, RoPE,
 * cross-entropy, scans and sort, forward on every float dtype at row lengths and counts that are
 * not multiples of any workgroup (1, 7, 33, 257, 1000, 5000), and the backward passes through the
 * ops API (input gradients compared with the CPU's). Sort and scan indices must match exactly
 * (stability, latest index on ties), max/min/sort values bit for bit, the rest to f32 rounding
 * plus the output dtype's own rounding.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_rows.test.ts
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as fon from '../../src/index.ts';
import type { Backend, DType, FloatDType, Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { normalArray, uniformArray } from '../../src/ops/random.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const maybeGpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();
const cpu = new CpuBackend();
const gpu = (): Backend => maybeGpu ?? assert.fail('no webgpu backend');
/** SwiftShader and other CPU adapters: correct but slow, so the large-grid case is left to GPUs. */
const software = () => !!(maybeGpu as { caps?: { software?: boolean } } | null)?.caps?.software;

const FLOATS: readonly FloatDType[] = ['f32', 'f16', 'bf16'];
/** (rows, cols): every length in 1, 7, 33, 257, 1000, 5000, and few-rows-many-columns. */
const SHAPES: readonly (readonly [number, number])[] = [[1, 1], [7, 33], [33, 7], [3, 257], [2, 1000], [1, 5000]];

interface Tol { rtol: number; atol: number }
/** Rounding of the output dtype dominates for f16/bf16 (a flip of one unit in the last place). */
const TOL: Record<FloatDType, Tol> = { f32: { rtol: 1e-4, atol: 1e-5 }, f16: { rtol: 2e-3, atol: 1e-4 }, bf16: { rtol: 1.6e-2, atol: 1e-3 } };
const EXACT: Tol = { rtol: 0, atol: 0 };

async function values(t: Tensor): Promise<Float32Array> {
  return hostToF32(await t.data(), t.dtype);
}

/** Asserts got ≈ want elementwise (NaN = NaN, ±inf exact), naming the first mismatch. */
async function expectClose(what: string, got: Tensor, want: Tensor, tol: Tol): Promise<void> {
  assert.deepEqual(got.shape, want.shape, `${what}: shape`);
  assert.equal(got.dtype, want.dtype, `${what}: dtype`);
  const [g, w] = [await values(got), await values(want)];
  for (let i = 0; i < w.length; i++) {
    if (Number.isNaN(w[i]) && Number.isNaN(g[i])) continue;
    if (g[i] === w[i]) continue;
    if (!(Math.abs(g[i] - w[i]) <= tol.atol + tol.rtol * Math.abs(w[i]))) {
      assert.fail(`${what}: element ${i} is ${g[i]}, the CPU gives ${w[i]} (rtol ${tol.rtol}, atol ${tol.atol})`);
    }
  }
}

/** The same host values as a tensor on the CPU and on the GPU. */
function pair(v: Float32Array | Int32Array, shape: readonly number[], dtype: DType, requiresGrad = false): [Tensor, Tensor] {
  return [fon.tensor(v, shape, { dtype, backend: cpu, requiresGrad }), fon.tensor(v, shape, { dtype, backend: gpu(), requiresGrad })];
}

/** A kernel's view of a tensor, for calling a backend's kernel directly. */
const ref = (t: Tensor) => ({ h: t.handle, shape: t.shape, dtype: t.dtype }) as never;

const randn = (n: number, seed: number, std = 1) => normalArray(seed, n, 0, std);
/** Small integers as floats: many ties on purpose. */
const ties = (n: number, seed: number, k = 6) => uniformArray(seed, n, 0, k).map(Math.floor);

/** Runs f on both backends and compares every output. */
async function parity(what: string, inputs: [Tensor, Tensor][], f: (xs: Tensor[]) => Tensor | Tensor[], tol: Tol | Tol[]): Promise<void> {
  const outC = [f(inputs.map((p) => p[0]))].flat();
  const outG = [f(inputs.map((p) => p[1]))].flat();
  for (let i = 0; i < outC.length; i++) await expectClose(`${what} output ${i}`, outG[i], outC[i], Array.isArray(tol) ? tol[i] : tol);
  for (const t of [...outC, ...outG, ...inputs.flat()]) t.dispose();
}

/** Backward through the ops API with a random output gradient; compares the inputs' gradients. */
async function gradParity(what: string, inputs: [Tensor, Tensor][], f: (xs: Tensor[]) => Tensor, tol: Tol, seed = 99): Promise<void> {
  const run = (xs: Tensor[], backend: Backend) => {
    const y = f(xs);
    const g = fon.tensor(randn(y.size, seed), y.shape, { dtype: y.dtype, backend });
    y.backward(g);
    g.dispose();
    y.dispose();
  };
  run(inputs.map((p) => p[0]), cpu);
  run(inputs.map((p) => p[1]), gpu());
  for (let i = 0; i < inputs.length; i++) {
    const [c, g] = inputs[i];
    if (!c.requiresGrad) continue;
    assert.ok(c.grad && g.grad, `${what}: input ${i} has no gradient`);
    await expectClose(`${what} d(input ${i})`, g.grad, c.grad, tol);
  }
  for (const t of inputs.flat()) t.dispose();
}

test('reduce sum/max/min over the last axis, one pass and split [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of SHAPES) {
    const v = randn(rows * cols, rows * 31 + cols);
    const sumTol = { rtol: TOL[dtype].rtol, atol: TOL[dtype].atol * Math.sqrt(cols) };
    await parity(`sum ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.sum(x, -1), sumTol);
    await parity(`max ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.max(x, -1), EXACT);
    await parity(`min ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.min(x, -1), EXACT);
  }
  // Integer sums and a reduction over every axis of a 3-D tensor (rows of one).
  await parity('sum i32', [pair(Int32Array.from(ties(7 * 300, 5, 100)), [7, 300], 'i32')], ([x]) => fon.sum(x, -1), EXACT);
  await parity('sum all', [pair(randn(2 * 3 * 5, 6), [2, 3, 5], 'f32')], ([x]) => fon.sum(x), TOL.f32);
});

test('reduce max/min propagate NaN and keep ±inf [webgpu]', { skip }, async () => {
  for (const cols of [5, 33, 5000]) {
    const v = randn(4 * cols, cols);
    v[3] = NaN; // row 0
    v[cols + cols - 1] = NaN; // row 1, last column
    for (let c = 0; c < cols; c++) v[2 * cols + c] = -Infinity; // row 2
    v[3 * cols + 5] = Infinity; // row 3
    for (const op of ['max', 'min', 'sum'] as const) {
      await parity(`${op} with NaN/inf, ${cols} cols`, [pair(v, [4, cols], 'f32')], ([x]) => fon[op](x, -1), TOL.f32);
    }
  }
});

test('softmax and logsumexp forward [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of SHAPES) {
    const v = randn(rows * cols, rows + cols * 7, 3);
    await parity(`softmax ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.softmax(x), TOL[dtype]);
    await parity(`logsumexp ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.logsumexp(x, -1), TOL[dtype]);
  }
  // Rows holding -inf (masked logits) and a row that is all -inf (logsumexp -inf, softmax NaN).
  const v = randn(3 * 9, 4);
  for (const i of [0, 4, 8, 10]) v[i] = -Infinity;
  for (let c = 0; c < 9; c++) v[18 + c] = -Infinity;
  await parity('softmax with -inf', [pair(v, [3, 9], 'f32')], ([x]) => fon.softmax(x), TOL.f32);
  await parity('logsumexp with -inf', [pair(v, [3, 9], 'f32')], ([x]) => fon.logsumexp(x, -1), TOL.f32);
});

test('softmax and logsumexp backward through the ops API [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of [[1, 1], [7, 33], [3, 1000]] as const) {
    const v = randn(rows * cols, rows * cols + 1, 2);
    await gradParity(`softmax ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype, true)], ([x]) => fon.softmax(x), TOL[dtype]);
    await gradParity(`logsumexp ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype, true)], ([x]) => fon.logsumexp(x, -1), TOL[dtype]);
  }
});

test('rmsnorm and layernorm forward [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of SHAPES) {
    const x = randn(rows * cols, rows * 3 + cols, 2);
    const w = randn(cols, cols + 1, 0.5).map((e) => e + 1);
    const b = randn(cols, cols + 2, 0.5);
    const tols = [TOL[dtype], TOL.f32, TOL.f32];
    await parity(`rmsnorm ${dtype} ${rows}x${cols}`, [pair(x, [rows, cols], dtype), pair(w, [cols], dtype)], ([xs, ws]) => fon.rmsnorm(xs, ws, 1e-5), TOL[dtype]);
    await parity(`layernorm ${dtype} ${rows}x${cols}`, [pair(x, [rows, cols], dtype), pair(w, [cols], dtype), pair(b, [cols], dtype)], ([xs, ws, bs]) => fon.layernorm(xs, ws, bs, 1e-5), tols);
  }
});

test('rmsnorm and layernorm statistics (rstd, mean) are f32 [webgpu]', { skip }, async () => {
  const rows = 5, cols = 257, args = { rows, cols, eps: 1e-6 };
  const [xc, xg] = pair(randn(rows * cols, 11, 3), [rows, cols], 'bf16');
  const [wc, wg] = pair(randn(cols, 12), [cols], 'bf16');
  const [bc, bg] = pair(randn(cols, 13), [cols], 'bf16');
  const g = gpu();
  const [, rstdC] = cpu.rmsnorm(ref(xc), ref(wc), args);
  const [, meanC2, rstdC2] = cpu.layernorm(ref(xc), ref(wc), ref(bc), args);
  const [y, rstd] = g.rmsnorm(ref(xg), ref(wg), args);
  const [y2, mean2, rstd2] = g.layernorm(ref(xg), ref(wg), ref(bg), args);
  for (const [what, h, want] of [['rms rstd', rstd, rstdC], ['ln mean', mean2, meanC2], ['ln rstd', rstd2, rstdC2]] as const) {
    const got = (await g.read(h, 'f32', rows)) as Float32Array;
    for (let i = 0; i < rows; i++) assert.ok(Math.abs(got[i] - want[i]) <= 1e-5 * Math.abs(want[i]) + 1e-6, `${what} row ${i}: ${got[i]} vs ${want[i]}`);
  }
  for (const h of [y, rstd, y2, mean2, rstd2]) g.free(h);
  for (const t of [xc, xg, wc, wg, bc, bg]) t.dispose();
});

test('rmsnorm and layernorm backward (dx, dw, db with the two-pass row sum) [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of [[1, 7], [7, 33], [300, 7], [2, 1000]] as const) {
    const x = randn(rows * cols, rows + cols, 2);
    const w = randn(cols, cols + 1, 0.5).map((e) => e + 1);
    const b = randn(cols, cols + 2, 0.5);
    // dw/db sum over rows: the error grows with the row count.
    const tol = { rtol: TOL[dtype].rtol, atol: TOL[dtype].atol * Math.sqrt(rows) * 4 };
    await gradParity(`rmsnorm ${dtype} ${rows}x${cols}`, [pair(x, [rows, cols], dtype, true), pair(w, [cols], dtype, true)], ([xs, ws]) => fon.rmsnorm(xs, ws, 1e-5), tol);
    await gradParity(`layernorm ${dtype} ${rows}x${cols}`, [pair(x, [rows, cols], dtype, true), pair(w, [cols], dtype, true), pair(b, [cols], dtype, true)], ([xs, ws, bs]) => fon.layernorm(xs, ws, bs, 1e-5), tol);
  }
});

test('rope both pairings, forward and inverse (backward) [webgpu]', { skip }, async () => {
  const ropeTables = (t: number, half: number): [Float32Array, Float32Array] => {
    const c = new Float32Array(t * half), s = new Float32Array(t * half);
    for (let p = 0; p < t; p++) for (let j = 0; j < half; j++) {
      const th = p / 10000 ** (j / half);
      c[p * half + j] = Math.cos(th);
      s[p * half + j] = Math.sin(th);
    }
    return [c, s];
  };
  for (const dtype of FLOATS) for (const interleaved of [false, true]) for (const shape of [[2, 5, 3, 8], [1, 33, 1, 2], [3, 7, 66]] as number[][]) {
    const d = shape[shape.length - 1], seqAxis = shape.length === 4 ? 1 : -2, t = shape[1];
    const [c, s] = ropeTables(t, d / 2);
    const n = shape.reduce((a, e) => a * e, 1);
    const mk = (grad: boolean) => [pair(randn(n, n + d), shape, dtype, grad), pair(c, [t, d / 2], 'f32'), pair(s, [t, d / 2], 'f32')] as [Tensor, Tensor][];
    const f = ([x, cs, sn]: Tensor[]) => fon.rope(x, cs, sn, { seqAxis, interleaved });
    const what = `rope ${dtype} ${shape.join('x')} ${interleaved ? 'interleaved' : 'half'}`;
    await parity(what, mk(false), f, TOL[dtype]);
    await gradParity(what, mk(true), f, TOL[dtype]);
  }
});

test('crossEntropy forward (ignore index, out-of-range targets) and backward [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [n, v] of [[1, 1], [7, 33], [5, 257], [3, 5000]] as const) {
    const logits = randn(n * v, n * v + 3, 2);
    const tg = Int32Array.from(uniformArray(n + v, n, 0, v), Math.floor);
    if (n > 1) { tg[1] = -100; }
    if (n > 3) { tg[2] = v; tg[3] = -5; }
    const mk = (grad: boolean) => [pair(logits, [n, v], dtype, grad), pair(tg, [n], 'i32')] as [Tensor, Tensor][];
    const what = `crossEntropy ${dtype} ${n}x${v}`;
    // Loss rows are f32, computed from the stored (rounded) logits on both sides.
    await parity(what, mk(false), ([l, t]) => fon.crossEntropy(l, t, { reduction: 'none' }), { rtol: 1e-4, atol: 1e-4 });
    await parity(`${what} mean`, mk(false), ([l, t]) => fon.crossEntropy(l, t), { rtol: 1e-4, atol: 1e-4 });
    await gradParity(what, mk(true), ([l, t]) => fon.crossEntropy(l, t, { reduction: 'none' }), TOL[dtype]);
  }
});

test('crossEntropy lse output is f32 and ignored rows give 0 [webgpu]', { skip }, async () => {
  const n = 4, v = 9;
  const [lc, lg] = pair(randn(n * v, 1), [n, v], 'bf16');
  const [tc, tg] = pair(Int32Array.from([3, -100, 9, -1]), [n], 'i32');
  const [lossC, lseC] = cpu.crossEntropy(ref(lc), ref(tc), n, v, -100) as Float32Array[];
  const g = gpu();
  const [lossH, lseH] = g.crossEntropy(ref(lg), ref(tg), n, v, -100);
  const lossG = (await g.read(lossH, 'f32', n)) as Float32Array, lseG = (await g.read(lseH, 'f32', n)) as Float32Array;
  assert.deepEqual([...lossG.slice(1)], [0, 0, 0]);
  for (let i = 0; i < n; i++) {
    assert.ok(Math.abs(lossG[i] - lossC[i]) <= 1e-5, `loss ${i}: ${lossG[i]} vs ${lossC[i]}`);
    assert.ok(Math.abs(lseG[i] - lseC[i]) <= 1e-5 * Math.abs(lseC[i]) + 1e-6, `lse ${i}: ${lseG[i]} vs ${lseC[i]}`);
  }
  g.free(lossH); g.free(lseH);
  for (const t of [lc, lg, tc, tg]) t.dispose();
});

test('scan sum/max/min with indices (latest index on ties, NaN as the CPU) [webgpu]', { skip }, async () => {
  for (const dtype of FLOATS) for (const [rows, cols] of SHAPES) {
    const v = randn(rows * cols, rows * 5 + cols);
    const tv = ties(rows * cols, rows + cols * 3);
    const sumTol = { rtol: TOL[dtype].rtol, atol: TOL[dtype].atol * Math.sqrt(cols) * 4 };
    await parity(`cumsum ${dtype} ${rows}x${cols}`, [pair(v, [rows, cols], dtype)], ([x]) => fon.cumsum(x, -1), sumTol);
    for (const op of ['cummax', 'cummin'] as const) for (const [kind, data] of [['normal', v], ['ties', tv]] as const) {
      await parity(`${op} ${kind} ${dtype} ${rows}x${cols}`, [pair(data, [rows, cols], dtype)], ([x]) => { const r = fon[op](x, -1); return [r.values, r.indices]; }, EXACT);
    }
  }
  // NaN first (sticks), NaN later (skipped), ±inf.
  const v = ties(4 * 300, 8);
  v[0] = NaN; v[300 + 17] = NaN; v[600 + 299] = NaN; v[900 + 3] = Infinity; v[900 + 4] = -Infinity;
  for (const op of ['cummax', 'cummin'] as const) {
    await parity(`${op} NaN`, [pair(v, [4, 300], 'f32')], ([x]) => { const r = fon[op](x, -1); return [r.values, r.indices]; }, EXACT);
  }
  await parity('cumsum i32', [pair(Int32Array.from(ties(3 * 700, 9, 50)), [3, 700], 'i32')], ([x]) => fon.cumsum(x, -1), EXACT);
});

test('i32 reduce and scan are exact and wrap as Int32Array, near ±2^30, one pass and split [webgpu]', { skip }, async () => {
  // Values within 2^20 of ±2^30 (f32 would round them), mostly positive so sums overflow and wrap;
  // 3×5000 takes the split reduce (i32 partials), 7×33 the one pass. Compared word for word.
  for (const [rows, cols] of [[3, 5000], [7, 33]] as const) {
    const u = uniformArray(rows + cols, rows * cols, 0, 1);
    const v = Int32Array.from(u, (r, i) => (i % 5 === 4 ? -1 : 1) * (2 ** 30) + Math.floor((r - 0.5) * 2 ** 21));
    v[1] = 2147483647; v[2] = -2147483648; // the i32 extremes
    const runs: [string, (x: Tensor) => Tensor[]][] = [
      ['sum', (x) => [fon.sum(x, -1)]], ['max', (x) => [fon.max(x, -1)]], ['min', (x) => [fon.min(x, -1)]],
      ['cumsum', (x) => [fon.cumsum(x, -1)]],
      ['cummax', (x) => { const r = fon.cummax(x, -1); return [r.values, r.indices]; }],
      ['cummin', (x) => { const r = fon.cummin(x, -1); return [r.values, r.indices]; }],
    ];
    for (const [name, f] of runs) {
      const [xc, xg] = pair(v, [rows, cols], 'i32');
      const [outC, outG] = [f(xc), f(xg)];
      for (let k = 0; k < outC.length; k++) {
        assert.equal(outG[k].dtype, 'i32');
        const [g, w] = [await outG[k].data(), await outC[k].data()];
        assert.ok(w instanceof Int32Array && g instanceof Int32Array, `${name}: i32 data`);
        const i = w.findIndex((e, j) => e !== g[j]);
        assert.equal(i, -1, `${name} ${rows}x${cols} output ${k}: element ${i} is ${g[i]}, the CPU gives ${w[i]}`);
      }
      if (name === 'sum') assert.ok(Array.from(await outC[0].data()).some((s, r) => s !== v.slice(r * cols, (r + 1) * cols).reduce((a, b) => a + b, 0)), 'sums wrap');
      for (const t of [...outC, ...outG, xc, xg]) t.dispose();
    }
  }
});

test('sort is stable, ascending and descending, in workgroup memory and across workgroups [webgpu]', { skip }, async () => {
  // Rows past one workgroup's block (256 slots on software adapters, 512–4096 on GPUs) take the
  // multi-pass path: 5000 and 4097 pad to 8192, 9000 to 16384.
  const cases: [FloatDType, number, number][] = [
    ...FLOATS.flatMap((d) => [[1, 1], [7, 33], [3, 257]].map(([r, c]): [FloatDType, number, number] => [d, r, c])),
    ['f32', 33, 7], ['f32', 2, 1000], ['f16', 2, 1000], ['f32', 1, 5000],
  ];
  const sorted = async (what: string, data: Float32Array, dtype: FloatDType, rows: number, cols: number, descending: boolean) =>
    parity(what, [pair(data, [rows, cols], dtype)], ([x]) => { const r = fon.sort(x, -1, { descending }); return [r.values, r.indices]; }, EXACT);
  for (const [dtype, rows, cols] of cases) for (const descending of [false, true]) {
    for (const [kind, data] of [['normal', randn(rows * cols, rows + cols)], ['ties', ties(rows * cols, rows * cols, 5)]] as const) {
      await sorted(`sort ${kind} ${dtype} ${rows}x${cols}${descending ? ' desc' : ''}`, data, dtype, rows, cols, descending);
    }
  }
  await sorted('sort ties bf16 2x4097 desc', ties(2 * 4097, 3, 5), 'bf16', 2, 4097, true);
  await sorted('sort ties f32 1x9000', ties(9000, 4, 50), 'f32', 1, 9000, false);
  // ±0 are equal (stable), ±inf at the ends; i32 rows.
  const z = Float32Array.from([0, -0, Infinity, 1, -Infinity, -0, 0, 1, -1]);
  for (const descending of [false, true]) {
    await parity(`sort ±0 ±inf${descending ? ' desc' : ''}`, [pair(z, [1, 9], 'f32')], ([x]) => { const r = fon.sort(x, -1, { descending }); return [r.values, r.indices]; }, EXACT);
  }
  await parity('sort i32', [pair(Int32Array.from(ties(3 * 100, 3, 20)), [3, 100], 'i32')], ([x]) => { const r = fon.sort(x, -1); return [r.values, r.indices]; }, EXACT);
});

test('more than 65535 rows use the second grid dimension [webgpu]', { skip: skip || (software() ? 'slow on a software adapter (checked by hand on SwiftShader)' : false) }, async () => {
  const rows = 70001, cols = 3;
  const v = randn(rows * cols, 77);
  const tg = Int32Array.from(uniformArray(78, rows, 0, cols), Math.floor);
  await parity('sum', [pair(v, [rows, cols], 'f32')], ([x]) => fon.sum(x, -1), TOL.f32);
  await parity('softmax', [pair(v, [rows, cols], 'f32')], ([x]) => fon.softmax(x), TOL.f32);
  await parity('rmsnorm', [pair(v, [rows, cols], 'f32'), pair(Float32Array.from([1, 2, 3]), [cols], 'f32')], ([x, w]) => fon.rmsnorm(x, w), TOL.f32);
  await parity('cummax', [pair(v, [rows, cols], 'f32')], ([x]) => { const r = fon.cummax(x, -1); return [r.values, r.indices]; }, EXACT);
  await parity('sort', [pair(v, [rows, cols], 'f32')], ([x]) => { const r = fon.sort(x, -1); return [r.values, r.indices]; }, EXACT);
  await parity('crossEntropy', [pair(v, [rows, cols], 'f32'), pair(tg, [rows], 'i32')], ([x, t]) => fon.crossEntropy(x, t, { reduction: 'none' }), TOL.f32);
  // dw sums 70001 rows in 256 blocks of 274.
  await gradParity('layernorm', [pair(v, [rows, cols], 'f32', true), pair(Float32Array.from([1, 2, 3]), [cols], 'f32', true), pair(Float32Array.from([0, 1, 0]), [cols], 'f32', true)],
    ([x, w, b]) => fon.layernorm(x, w, b), { rtol: 1e-4, atol: 1e-3 });
});

test('row kernels free their temporaries [webgpu]', { skip }, async () => {
  const g = gpu();
  await g.sync();
  const before = g.memory().liveHandles;
  const x = fon.tensor(randn(4100, 1), [1, 4100], { dtype: 'bf16', backend: g });
  const s = fon.sort(x, -1);
  const outs = [fon.sum(x, -1), fon.max(x, -1), fon.softmax(x), fon.cumsum(x, -1), s.values, s.indices];
  await outs[0].data();
  x.dispose();
  for (const t of outs) t.dispose();
  assert.equal(g.memory().liveHandles, before);
});
