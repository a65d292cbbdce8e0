/**
 * WebGPU GEMM against the CPU reference (src/backend/cpu/matmul.ts) on random inputs whose sizes
 * are multiples of no tile, every transA/transB combination, batch broadcasting (batchA = 1 or
 * batchB = 1), f32/f16/bf16 inputs. Where the device has f16 subgroup matrices the f16 cases run
 * the tensor-core kernel; elsewhere the plain one.
 *
 * Tolerance: |gpu − ref| ≤ tol·(1 + |ref|), ref computed in f32 from the same (rounded) inputs;
 * tol = 1e-4 for an f32 output (accumulation order only), 4e-3 for f16 (one rounding of the
 * output, 2^-11 relative, plus order), 2e-2 for bf16 (2^-8). Inputs are uniform in [−1, 1].
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_matmul.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { MatmulArgs } from '../../src/backend/backend.ts';
import { matmul as cpuMatmul } from '../../src/backend/cpu/matmul.ts';
import { bf16BitsToF32, f32ToBf16Bits, f32ToF16Bits, hostToF32, type FloatDType } from '../../src/tensor/dtype.ts';
import type { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { matmulMany, matmulPlain, matmulRows, matmulTc, PLAIN_TILE, pickTcTile, rowsEligible, rowsVecEligible, tcEligible, type RowsTune, type TcTile } from '../../src/backend/webgpu/kernels/matmul.ts';
import type { GpuHandle } from '../../src/backend/webgpu/backend.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = (await webgpuOrSkip()) as WebGpuBackend | null;
exitAfterWebgpu();
const skip = webgpuSkipReason();

const TOL: Record<FloatDType, number> = { f32: 1e-4, f16: 4e-3, bf16: 2e-2 };

let seed = 12345;
function rand(): number {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return (seed / 2 ** 32) * 2 - 1;
}

/** Random host data of `dtype` (16-bit floats as bit patterns). */
function randomHost(n: number, dtype: FloatDType): Float32Array | Uint16Array {
  if (dtype === 'f32') return Float32Array.from({ length: n }, rand);
  const bits = new Uint16Array(n);
  for (let i = 0; i < n; i++) bits[i] = dtype === 'f16' ? f32ToF16Bits(rand()) : f32ToBf16Bits(rand());
  return bits;
}

interface Case { m: number; n: number; k: number; batch: number; batchA: number; batchB: number; transA: boolean; transB: boolean; dtype: FloatDType; out: FloatDType }

async function check(c: Case, run: (a: { h: GpuHandle; shape: number[]; dtype: FloatDType }, b: { h: GpuHandle; shape: number[]; dtype: FloatDType }, args: MatmulArgs) => GpuHandle): Promise<void> {
  const g = gpu!;
  const { m, n, k, transA, transB, dtype } = c;
  const aShape = [c.batchA, ...(transA ? [k, m] : [m, k])];
  const bShape = [c.batchB, ...(transB ? [n, k] : [k, n])];
  const ah = randomHost(c.batchA * m * k, dtype), bh = randomHost(c.batchB * k * n, dtype);
  const args: MatmulArgs = { batch: c.batch, m, n, k, transA, transB, batchA: c.batchA, batchB: c.batchB, outDType: c.out };
  const ref = cpuMatmul({ h: ah, shape: aShape, dtype }, { h: bh, shape: bShape, dtype }, { ...args, outDType: 'f32' }) as Float32Array;
  const a = { h: g.upload(ah, dtype), shape: aShape, dtype }, b = { h: g.upload(bh, dtype), shape: bShape, dtype };
  const outH = run(a, b, args);
  const raw = await g.read(outH, c.out, c.batch * m * n);
  g.free(a.h); g.free(b.h); g.free(outH);
  const out = c.out === 'bf16' ? Float32Array.from(raw as Uint16Array, bf16BitsToF32) : hostToF32(raw, c.out);
  const tol = TOL[c.out];
  let worst = 0, at = -1;
  for (let i = 0; i < ref.length; i++) {
    const err = Math.abs(out[i] - ref[i]) / (1 + Math.abs(ref[i]));
    if (!(err <= worst)) { worst = err; at = i; }
  }
  assert.ok(worst <= tol, `${JSON.stringify(c)}: worst error ${worst} at ${at} (gpu ${out[at]}, cpu ${ref[at]}) above ${tol}`);
}

// [37, 70, 48]: K a multiple of 16 (the tensor-core kernel's fragment staging) with M, N off every tile.
const SIZES: [number, number, number][] = [[1, 1, 1], [7, 5, 3], [33, 65, 17], [130, 70, 129], [37, 70, 48]];
const TRANS: [boolean, boolean][] = [[false, false], [false, true], [true, false], [true, true]];
const BATCHES: [number, number, number][] = [[1, 1, 1], [2, 1, 2], [3, 3, 1]];

for (const dtype of ['f32', 'f16', 'bf16'] as const) {
  test(`matmul ${dtype} vs CPU: sizes × transposes × batch broadcast [webgpu]`, { skip }, async () => {
    for (const [m, n, k] of SIZES) {
      for (const [transA, transB] of TRANS) {
        for (const [batch, batchA, batchB] of BATCHES) {
          await check({ m, n, k, batch, batchA, batchB, transA, transB, dtype, out: dtype }, (a, b, args) => gpu!.matmul(a, b, args));
        }
      }
    }
  });
}

test('matmul 16-bit inputs into an f32 output [webgpu]', { skip }, async () => {
  for (const dtype of ['f16', 'bf16'] as const) {
    for (const [transA, transB] of TRANS) {
      await check({ m: 33, n: 65, k: 17, batch: 2, batchA: 2, batchB: 1, transA, transB, dtype, out: 'f32' }, (a, b, args) => gpu!.matmul(a, b, args));
    }
  }
});

test('matmul plain kernel with 128×128 blocks (the large-problem tile) [webgpu]', { skip }, async () => {
  for (const dtype of ['f32', 'f16'] as const) {
    for (const [transA, transB] of [[false, false], [true, true]] as const) {
      await check({ m: 130, n: 70, k: 129, batch: 2, batchA: 1, batchB: 2, transA, transB, dtype, out: dtype },
        (a, b, args) => matmulPlain(gpu!, a, b, args, PLAIN_TILE));
    }
  }
});

test('matmul plain kernel: the bounds-check-free variant (sizes multiples of the tile) and grouped block order [webgpu]', { skip }, async () => {
  // [256, 128, 64] is a multiple of the 128×128×8 tile (aligned variant); [300, 260, 40] with groups
  // of 2 block rows leaves a last group of one row.
  // Every transpose for the aligned variant (its loads differ by layout); the block order does not depend on them.
  for (const [tile, [m, n, k], trans] of [[PLAIN_TILE, [256, 128, 64], TRANS], [{ ...PLAIN_TILE, group: 2 }, [300, 260, 40], [[false, false]]], [{ ...PLAIN_TILE, group: 2 }, [384, 256, 16], [[true, true]]]] as const) {
    for (const [transA, transB] of trans) {
      await check({ m, n, k, batch: 2, batchA: 1, batchB: 2, transA, transB, dtype: 'f32', out: 'f32' }, (a, b, args) => matmulPlain(gpu!, a, b, args, tile));
    }
  }
});

test('matmul tensor-core kernel: geometries, K-slices, double buffering, grouped order, both load forms, fragment staging [webgpu]', { skip }, async (t) => {
  const g = gpu!;
  const f16ref = { h: null as unknown as GpuHandle, shape: [1, 1], dtype: 'f16' as const };
  if (!tcEligible(g, f16ref, f16ref)) { t.skip('no f16 subgroup matrices on this device'); return; }
  const big = pickTcTile(g);
  // coop is taken only when M, N, K are multiples of 16: [48, 80, 64], [128, 256, 96] and [256, 256, 64]
  // run it. [256, 256, 64] is a multiple of every geometry's block and K-slice (the aligned variant).
  const tiles: TcTile[] = [big, { ...big, sgm: 4 }, { ...big, bk: 16 }, { ...big, db: true }, { ...big, group: 2 }, { ...big, aligned: false }, { ...big, loadForm: 'arg' }, { ...big, coop: true }];
  for (const tile of tiles) {
    if (!tcEligible(g, f16ref, f16ref, tile)) continue;
    for (const [m, n, k] of [[130, 70, 129], [37, 70, 48], [48, 80, 64], [128, 256, 96], [256, 256, 64], [600, 300, 32]]) {
      for (const [transA, transB] of TRANS) {
        await check({ m, n, k, batch: 2, batchA: 1, batchB: 2, transA, transB, dtype: 'f16', out: 'f16' }, (a, b, args) => matmulTc(g, a, b, args, tile));
      }
    }
    // f32 output: stored straight from the accumulators where a block lies inside C.
    for (const [m, n, k] of [[256, 256, 64], [130, 70, 129]]) {
      await check({ m, n, k, batch: 1, batchA: 1, batchB: 1, transA: false, transB: true, dtype: 'f16', out: 'f32' }, (a, b, args) => matmulTc(g, a, b, args, tile));
    }
  }
});

test('matmul few-rows kernel vs CPU: 1, 3 and 4 rows, N 1 … 130, K 64 … 2048, every transpose, batch broadcast, f32/f16/bf16, 16-bit and f32 outputs, scalar and vec forms [webgpu]', { skip }, async () => {
  const sizes: [number, number, number][] = [[1, 16, 2048], [3, 5, 64], [4, 130, 300], [1, 67, 97], [2, 1, 129]];
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    for (const [m, n, k] of sizes) {
      for (const [transA, transB] of TRANS) {
        for (const [batch, batchA, batchB] of BATCHES) {
          for (const out of dtype === 'f32' ? ['f32' as const] : [dtype, 'f32' as const]) {
            // The default, then the vec form where it applies (the default takes it from 2 rows).
            const forms: RowsTune[] = rowsVecEligible({ m, n, k, transA, transB, batch, batchA, batchB, outDType: out }) ? [{}, { form: 'vec' }] : [{}];
            for (const tune of forms) await check({ m, n, k, batch, batchA, batchB, transA, transB, dtype, out }, (a, b, args) => matmulRows(gpu!, a, b, args, tune));
          }
        }
      }
    }
  }
});

test('matmul few-rows vec form: lanes a column 2 … 256, summed by subgroup shuffles, by subgroup sums (SGT) and in workgroup memory, columns past N, every row count; refusals by name [webgpu]', { skip }, async () => {
  const g = gpu!;
  // With subgroups: a column within a subgroup sums by shuffles (SGR), a column of whole subgroups by
  // subgroup sums (SGT: 128 and 256 lanes on every device, 16 and 64 where subgroups are 4 wide);
  // without them, every column in workgroup memory.
  const tunes: RowsTune[] = [{ lanes: 2, wg: 64 }, { lanes: 4, wg: 32 }, { lanes: 16, wg: 256 }, { lanes: 64, wg: 64 }, { lanes: 128, wg: 256 }, { lanes: 256, wg: 256 }];
  const caps = g.caps as { subgroups: boolean };
  const has = caps.subgroups;
  const sums = new Set<string>();
  const run = g.rt.run.bind(g.rt);
  g.rt.run = (d) => { if (d.variant.VEC) sums.add(d.variant.SGR ? 'SGR' : d.variant.SGT ? 'SGT' : 'tree'); run(d); };
  try {
    for (const sg of has ? [true, false] : [false]) {
      caps.subgroups = sg;
      for (const tune of tunes) {
        if (tune.wg! > g.caps.maxInvocations) continue;
        for (const [m, n, k] of [[1, 37, 132], [2, 9, 64], [3, 33, 256], [4, 5, 1028]] as const) {
          for (const dtype of ['f32', 'f16', 'bf16'] as const) {
            await check({ m, n, k, batch: 2, batchA: 2, batchB: 1, transA: false, transB: true, dtype, out: 'f32' }, (a, b, args) => matmulRows(g, a, b, args, { form: 'vec', ...tune }));
          }
        }
      }
    }
  } finally {
    caps.subgroups = has;
    g.rt.run = run;
  }
  assert.deepEqual([...sums].sort(), has ? ['SGR', 'SGT', 'tree'] : ['tree']);
  const ref = (shape: number[]) => ({ h: g.alloc('f32', shape[0] * shape[1], 'test'), shape, dtype: 'f32' as const });
  const a = ref([1, 66]), b = ref([8, 66]);
  const args: MatmulArgs = { batch: 1, m: 1, n: 8, k: 66, transA: false, transB: true, batchA: 1, batchB: 1, outDType: 'f32' };
  assert.throws(() => matmulRows(g, a, b, args, { form: 'vec' }), /the few-rows matmul's vec form needs B stored \(N, K\), A not transposed and K a multiple of 4; got transA=false, transB=true, k=66/);
  const a2 = ref([1, 64]), b2 = ref([8, 64]);
  const args2 = { ...args, k: 64 };
  assert.throws(() => matmulRows(g, a2, b2, args2, { form: 'vec', lanes: 3 }), /vec form takes a power of two from 2 to 256 lanes a column and a workgroup of a multiple of them up to \d+; got 3 lanes, 128 invocations/);
  assert.throws(() => matmulRows(g, a2, b2, args2, { form: 'vec', lanes: 32, wg: 48 }), /got 32 lanes, 48 invocations/);
  for (const x of [a, b, a2, b2]) g.free(x.h);
});

test('matmul kernel choice: the few-rows kernel for 1 … 4 rows with K ≥ 64, through gpu.matmul too; refused by name outside that [webgpu]', { skip }, () => {
  const g = gpu!;
  const args = (m: number, k: number, n = 16, transB = true): MatmulArgs => ({ batch: 1, m, n, k, transA: false, transB, batchA: 1, batchB: 1, outDType: 'f32' });
  assert.equal(rowsEligible(args(1, 2048)), true);
  assert.equal(rowsEligible(args(4, 64)), true);
  assert.equal(rowsEligible(args(5, 2048)), false, '5 rows');
  assert.equal(rowsEligible(args(1, 63)), false, 'K below 64');
  assert.equal(rowsEligible(args(1, 64, 4 * 65536)), false, 'more than 65535 column blocks');
  assert.equal(rowsEligible(args(1, 64, 4 * 65536, false)), true, '64 columns a block without TRANS_B');
  const ref = (shape: number[]) => ({ h: g.alloc('f32', shape[0] * shape[1], 'test'), shape, dtype: 'f32' as const });
  const a = ref([1, 2048]), b = ref([16, 2048]), a2 = ref([2, 2048]);
  const names: string[] = [];
  const run = g.rt.run.bind(g.rt);
  g.rt.run = (d) => { names.push(`${d.kernel.name}${d.variant.VEC ? ' vec' : ''}`); run(d); };
  try {
    g.free(g.matmul(a, b, args(1, 2048)));
    g.free(g.matmul(a2, b, args(2, 2048)));
  } finally {
    g.rt.run = run;
  }
  // One row: the scalar form; two rows: the vec form (ROWS_DEFAULTS).
  assert.deepEqual(names, ['matmul_rows', 'matmul_rows vec']);
  g.free(a2.h);
  assert.throws(() => matmulRows(g, a, b, args(5, 2048)), /the few-rows matmul takes 1 … 4 rows and K ≥ 64, not m=5, k=2048 \(n=16\)/);
  g.free(a.h); g.free(b.h);
});

test('matmulMany (several weights of one input, one dispatch: matmul_rows.wgsl MANY) vs CPU: 2 and 3 weights, 1 … 4 rows, weights of 1 … 130 rows, K from 64 to 2048 (its four-group steps and a remainder), f32/f16/bf16 weights, outputs in f32, f16 and bf16 each (those the device does not store cast after); a weight not K long refused to the matmul each [webgpu]', { skip }, async () => {
  const g = gpu!;
  const cases: [number, number, number[], FloatDType, FloatDType[]][] = [
    [1, 256, [130, 4, 33], 'f32', ['f32', 'f32', 'f16']],
    [1, 2048, [64, 7], 'f16', ['f32', 'f16']],
    [3, 132, [5, 1, 67], 'bf16', ['f32', 'f32', 'f32']],
    [4, 64, [9, 16], 'f32', ['f16', 'f32']],
    [2, 516, [1, 1, 1], 'f16', ['f16', 'f16', 'f32']],
    [1, 128, [3, 40], 'f32', ['bf16', 'f32']],
    // K long enough for the loop's steps of four groups a lane, and a remainder after them (k/4 = 325).
    [2, 1300, [5, 9, 3], 'f32', ['f32', 'f32', 'f32']],
  ];
  // The default geometry (MANY_DEFAULTS: at these K, ROWS_DEFAULTS'), and 256 lanes a column (the
  // default from K = 4096: its sums by subgroup sums where the device has subgroups).
  for (const [m, k, ns, dtype, outDTypes, tune] of cases.flatMap((c) => [[...c, undefined], [...c, { lanes: 256, wg: 256 }]] as const)) {
    const ah = randomHost(m * k, dtype), bhs = ns.map((n) => randomHost(n * k, dtype));
    const a = { h: g.upload(ah, dtype), shape: [m, k], dtype }, bs = bhs.map((bh, i) => ({ h: g.upload(bh, dtype), shape: [ns[i], k], dtype }));
    const kernels: string[] = [];
    const run = g.rt.run.bind(g.rt);
    g.rt.run = (d) => { kernels.push(`${d.kernel.name}${d.variant.MANY ? ' many' : ''}`); run(d); };
    let hs: GpuHandle[];
    try {
      hs = matmulMany(g, a, bs, { m, k, ns, outDTypes }, tune);
    } finally {
      g.rt.run = run;
    }
    // The outputs the device does not store as they are: written in f32, then cast (pack).
    const casts = outDTypes.filter((d) => d === 'bf16' || (d === 'f16' && !g.caps.f16)).length;
    assert.deepEqual(kernels.filter((x) => x !== 'pack' && x !== 'unary'), ['matmul_rows many'], `${m} × ${k} against ${ns.join(', ')}`);
    assert.equal(kernels.length, 1 + casts);
    for (let i = 0; i < ns.length; i++) {
      const ref = cpuMatmul({ h: ah, shape: [m, k], dtype }, { h: bhs[i], shape: [ns[i], k], dtype }, { batch: 1, m, n: ns[i], k, transA: false, transB: true, batchA: 1, batchB: 1, outDType: 'f32' }) as Float32Array;
      const out = hostToF32(await g.read(hs[i], outDTypes[i], m * ns[i]), outDTypes[i]);
      let worst = 0;
      for (let x = 0; x < ref.length; x++) worst = Math.max(worst, Math.abs(out[x] - ref[x]) / (1 + Math.abs(ref[x])));
      assert.ok(worst <= TOL[outDTypes[i]], `${m} × ${k}, weight ${i} (${ns[i]} rows, ${dtype}) into ${outDTypes[i]}, ${JSON.stringify(tune)}: worst error ${worst}`);
      g.free(hs[i]);
    }
    g.free(a.h);
    for (const b of bs) g.free(b.h);
  }
  // K not a multiple of 4: one matmul a weight, the same products.
  const a = { h: g.upload(randomHost(66, 'f32'), 'f32'), shape: [1, 66], dtype: 'f32' as const };
  const bhs = [3, 5].map((n) => randomHost(n * 66, 'f32'));
  const bs = bhs.map((bh, i) => ({ h: g.upload(bh, 'f32'), shape: [[3, 5][i], 66], dtype: 'f32' as const }));
  const kernels: string[] = [];
  const run = g.rt.run.bind(g.rt);
  g.rt.run = (d) => { kernels.push(`${d.kernel.name}${d.variant.MANY ? ' many' : ''}`); run(d); };
  let hs: GpuHandle[];
  try {
    hs = g.matmulMany(a, bs, { m: 1, k: 66, ns: [3, 5], outDTypes: ['f32', 'f32'] });
  } finally {
    g.rt.run = run;
  }
  assert.deepEqual(kernels, ['matmul_rows', 'matmul_rows']);
  for (const h of hs) g.free(h);
  g.free(a.h);
  for (const b of bs) g.free(b.h);
});

test('matmul k = 0 gives zeros, m = 0 gives an empty result [webgpu]', { skip }, async () => {
  await check({ m: 3, n: 5, k: 0, batch: 1, batchA: 1, batchB: 1, transA: false, transB: false, dtype: 'f32', out: 'f32' }, (a, b, args) => gpu!.matmul(a, b, args));
  await check({ m: 0, n: 5, k: 4, batch: 1, batchA: 1, batchB: 1, transA: false, transB: false, dtype: 'f32', out: 'f32' }, (a, b, args) => gpu!.matmul(a, b, args));
});

test('matmul kernel choice: tensor cores only for f16 inputs with subgroup matrices [webgpu]', { skip }, () => {
  const g = gpu!;
  const ref = (dtype: FloatDType) => ({ h: null as unknown as GpuHandle, shape: [1, 1], dtype });
  assert.equal(tcEligible(g, ref('f32'), ref('f32')), false);
  assert.equal(tcEligible(g, ref('bf16'), ref('bf16')), false);
  assert.equal(tcEligible(g, ref('f16'), ref('f16')), g.caps.subgroupMatrix !== null && g.caps.subgroupMatrix.m === 16);
  if (!tcEligible(g, ref('f16'), ref('f16'))) console.log(`# [webgpu] no f16 subgroup matrices on ${g.caps.adapterName}: f16 cases ran the plain kernel`);
});
