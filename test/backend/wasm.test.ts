/**
 * The wasm backend against the CPU reference: matmul on random inputs at sizes that are not
 * multiples of any tile or block (MR×NR = 4×8, KC = 256, MC = 128), every transA/transB pair,
 * batches with either side broadcast, f32/f16/bf16 outputs; the SIMD unary/binary ops and softmax
 * with NaN, ±∞, ±0, range ends and masked rows; the whole parity suite (test/parity) with every
 * threshold at 0 so each case goes through the kernels. Each on one thread and on the worker pool.
 *
 * Tolerances, elementwise against the CPU value r (stated once here):
 * - matmul: |wasm − cpu| ≤ 1e-5·√K·‖aᵢ‖·‖bⱼ‖ (f32 rounding of a K-term sum in another order:
 *   the GEMM adds K slabs of 256 and may fuse multiply-adds; ‖aᵢ‖·‖bⱼ‖ bounds (|A|·|B|)ᵢⱼ);
 * - add/sub/mul/div/max/min/comparisons and neg/abs/sqrt/relu/square/reciprocal/sign: the same bits;
 * - rsqrt, exp, tanh, sigmoid, silu, gelu: 4·2⁻²³·κ·|r| + 1e-12 with κ the condition number
 *   bound 1 + |x| (1 + |2u| for gelu's x·sigmoid(2u)): few-ulp polynomial exp/tanh on an f32
 *   argument; the absolute term covers subnormal results and the reference's own cancellation
 *   in gelu far below 0;
 * - softmax: (4 + √cols)·2⁻²³·|r| (f32 row sums where the reference sums in f64);
 * - f16/bf16 outputs: plus one rounding step of the output dtype (2⁻¹⁰ resp. 2⁻⁷ relative).
 *
 *   node --import tsx --test test/backend/wasm.test.ts
 *
 * On an engine without relaxed SIMD (Node 20) one test re-runs the matmul suite in a child
 * process with --experimental-wasm-relaxed-simd, so the fma kernel is checked too.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { MatmulArgs, Ref } from '../../src/backend/backend.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import type { CpuHandle } from '../../src/backend/cpu/host.ts';
import { GEMM_KC, GEMM_MC, planGemm } from '../../src/backend/wasm/gemm_job.ts';
import { GEMM_TILE } from '../../src/backend/wasm/gemm_micro_kernel.ts';
import { BINARY_OPS, UNARY_OPS, type BinaryOp, type UnaryOp } from '../../src/backend/backend.ts';
import { binaryWasm, softmaxWasm, unaryWasm } from '../../src/backend/wasm/elementwise.ts';
import { WASM_BINARY_OPS, WASM_UNARY_OPS } from '../../src/backend/wasm/elementwise_kernels.ts';
import { WasmBackend } from '../../src/backend/wasm/index.ts';
import { buildKernelModule } from '../../src/backend/wasm/kernel_module.ts';
import { nodeSpawner, nodeThreadCount } from '../../src/platform/wasm_threads.ts';
import { detectWasmFeatures } from '../../src/backend/wasm/wasm_features.ts';
import * as fon from '../../src/index.ts';
import { f32ToHost, hostToF32, type FloatDType } from '../../src/tensor/dtype.ts';
import { assertParity, formatReport, runParity } from '../parity/run.ts';
import { skipsFor } from '../parity/skips.ts';
import { uniformStream } from '../../src/ops/random.ts';

const features = detectWasmFeatures();
const onlyMatmul = process.env.FON_WASM_TEST_ONLY_MATMUL === '1';
const cpu = new CpuBackend();

/** Deterministic uniforms (FON's counter-based stream) so a failure reproduces. */
const rng = uniformStream;

function randomRef(length: number, shape: number[], dtype: FloatDType, next: () => number): Ref<CpuHandle> {
  const values = new Float32Array(length);
  for (let i = 0; i < length; i++) values[i] = next() * 2 - 1;
  return { h: f32ToHost(values, dtype), shape, dtype };
}

const RELATIVE_ROUNDING: Record<FloatDType, number> = { f32: 0, f16: 2 ** -10, bf16: 2 ** -7 };

/** Euclidean norms of the K-vectors of op(X): rows of A (m of them) or columns of B (n of them). */
function kNorms(x: Float32Array, offset: number, count: number, k: number, kContiguous: boolean): Float64Array {
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    let s = 0;
    for (let l = 0; l < k; l++) { const v = kContiguous ? x[offset + i * k + l] : x[offset + l * count + i]; s += v * v; }
    out[i] = Math.sqrt(s);
  }
  return out;
}

/**
 * Runs one matmul on each backend and once on the CPU reference and checks the header's bound,
 * with Σₗ|aᵢₗ·bₗⱼ| ≤ ‖aᵢ‖·‖bⱼ‖ (Cauchy–Schwarz) standing in for (|A|·|B|)ᵢⱼ.
 */
function checkMatmul(backends: readonly WasmBackend[], args: MatmulArgs, inDType: FloatDType, seed: number): void {
  const next = rng(seed);
  const { batch, m, n, k, batchA, batchB, transA, transB } = args;
  const a = randomRef(batchA * m * k, transA ? [batchA, k, m] : [batchA, m, k], inDType, next);
  const b = randomRef(batchB * k * n, transB ? [batchB, n, k] : [batchB, k, n], inDType, next);
  const want = hostToF32(cpu.matmul(a, b, args), args.outDType);
  const av = hostToF32(a.h, inDType), bv = hostToF32(b.h, inDType);
  const bound = new Float64Array(want.length);
  for (let p = 0; p < batch; p++) {
    const aNorms = kNorms(av, (batchA === 1 ? 0 : p) * m * k, m, k, !transA);
    const bNorms = kNorms(bv, (batchB === 1 ? 0 : p) * k * n, n, k, transB);
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        const at = (p * m + i) * n + j;
        bound[at] = 1e-5 * Math.sqrt(k) * aNorms[i] * bNorms[j] + RELATIVE_ROUNDING[args.outDType] * Math.abs(want[at]) + 1e-30;
      }
    }
  }
  for (const backend of backends) {
    const got = hostToF32(backend.matmul(a, b, args), args.outDType);
    assert.equal(got.length, want.length);
    const label = `${batch}×(${m}×${k})·(${k}×${n}) batchA=${batchA} batchB=${batchB} transA=${transA} transB=${transB} ${inDType}→${args.outDType} threads=${backend.threads}`;
    for (let i = 0; i < want.length; i++) {
      if (!(Math.abs(got[i] - want[i]) <= bound[i])) assert.fail(`${label}: element ${i}: wasm ${got[i]} vs cpu ${want[i]} (bound ${bound[i]})`);
    }
  }
}

const SHAPES: readonly [number, number, number][] = [
  [1, 1, 1], [3, 5, 7], [1, 17, 1], [17, 17, 17], [33, 65, 31], [130, 70, 129],
  [4, 8, 256], [5, 9, 300], [1, 300, 40], [300, 1, 40], [64, 24, 513],
];
const BATCHES: readonly [number, number, number][] = [[1, 1, 1], [3, 3, 1], [3, 1, 3], [2, 2, 2]];
const TRANSPOSES: readonly [boolean, boolean][] = [[false, false], [true, false], [false, true], [true, true]];

describe(`wasm matmul vs cpu${features.relaxedSimd ? ' (relaxed-SIMD fma)' : ''}`, () => {
  let single: WasmBackend;
  let threaded: WasmBackend;
  before(async () => {
    single = await WasmBackend.create({ threads: 1 });
    threaded = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, minParallelFlops: 0 });
  });
  after(() => { single.destroy(); threaded.destroy(); });

  test('the threaded backend really has a worker', () => {
    assert.equal(single.threads, 1);
    assert.equal(threaded.threads, features.sharedMemory ? 2 : 1);
    assert.equal(threaded.name, 'wasm');
  });

  for (const [m, n, k] of SHAPES) {
    test(`f32 ${m}×${k}·${k}×${n}, every transpose and batch broadcast`, () => {
      let seed = m * 10007 + n * 101 + k;
      for (const [transA, transB] of TRANSPOSES) {
        for (const [batch, batchA, batchB] of BATCHES) {
          const args: MatmulArgs = { batch, m, n, k, transA, transB, batchA, batchB, outDType: 'f32' };
          checkMatmul([single, threaded], args, 'f32', seed++);
        }
      }
    });
  }

  for (const dtype of ['f16', 'bf16'] as const) {
    test(`${dtype} inputs and output`, () => {
      let seed = 7;
      for (const [m, n, k] of [[33, 65, 31], [130, 70, 129], [5, 9, 300]] as const) {
        for (const [transA, transB] of TRANSPOSES) {
          const args: MatmulArgs = { batch: 2, m, n, k, transA, transB, batchA: 2, batchB: 1, outDType: dtype };
          checkMatmul([single, threaded], args, dtype, seed++);
        }
      }
    });
  }

  test('a larger square GEMM spans several row items and K slabs', () => {
    const args: MatmulArgs = { batch: 1, m: 257, n: 263, k: 600, transA: false, transB: true, batchA: 1, batchB: 1, outDType: 'f32' };
    checkMatmul([threaded], args, 'f32', 99);
  });

  test('freed f32 outputs are reused, once, and never while live', () => {
    const args: MatmulArgs = { batch: 1, m: 128, n: 128, k: 8, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' };
    const next = rng(11);
    const a = randomRef(128 * 8, [128, 8], 'f32', next), b = randomRef(8 * 128, [8, 128], 'f32', next);
    const want = cpu.matmul(a, b, args) as Float32Array;
    const baseline = threaded.memory().liveHandles;
    const first = threaded.matmul(a, b, args);
    threaded.free(first);
    threaded.free(first); // a double free must not put it in the pool twice
    assert.ok(threaded.memory().pooledBytes >= first.byteLength);
    const second = threaded.matmul(a, b, args), third = threaded.matmul(a, b, args);
    assert.ok(second === first, 'the freed array is handed out again');
    assert.ok(third !== second, 'and only once');
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(third[i] - want[i]) <= 1e-4 && Math.abs(second[i] - want[i]) <= 1e-4);
    threaded.free(second);
    threaded.free(third);
    assert.equal(threaded.memory().liveHandles, baseline);
  });

  test('empty products: K = 0 gives zeros, M = 0 gives nothing', () => {
    const a = { h: new Float32Array(0), shape: [3, 0], dtype: 'f32' as const };
    const b = { h: new Float32Array(0), shape: [0, 4], dtype: 'f32' as const };
    const zeros = threaded.matmul(a, b, { batch: 1, m: 3, n: 4, k: 0, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' });
    assert.deepEqual(Array.from(zeros), new Array(12).fill(0));
    const none = threaded.matmul({ h: new Float32Array(0), shape: [0, 2], dtype: 'f32' }, { h: new Float32Array(8), shape: [2, 4], dtype: 'f32' },
      { batch: 1, m: 0, n: 4, k: 2, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' });
    assert.equal(none.length, 0);
  });
});

/** Inputs for elementwise checks: special values first, then a spread of magnitudes. */
function elementwiseInput(count: number, seed: number): Float32Array {
  const specials = [NaN, Infinity, -Infinity, 0, -0, 1e-30, -1e-30, 88.7, 88.73, -87.3, -103, -104, -200, 200, 0.624, 0.626, -0.625, 1e-8, 3.4e38, -3.4e38, 1e-45, 2, -2];
  const next = rng(seed);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = i < specials.length ? specials[i] : (next() * 2 - 1) * [100, 5, 0.5][i % 3];
  return out;
}

const EXACT_UNARY = new Set<UnaryOp>(['neg', 'abs', 'sqrt', 'relu', 'square', 'reciprocal', 'sign']);

/** How much an f32 rounding of the argument can be amplified in the result (see the header). */
function conditionBound(op: UnaryOp, x: number): number {
  if (op === 'gelu') return 1 + Math.abs(2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3));
  return 1 + Math.abs(x);
}

/** The header's unary tolerance for `op` at input x, cpu value w. */
function unaryBound(op: UnaryOp, x: ArrayLike<number>): (w: number, i: number) => number {
  if (EXACT_UNARY.has(op)) return () => 0;
  return (w, i) => 4 * 2 ** -23 * conditionBound(op, x[i]) * Math.abs(w) + 1e-12;
}

/** NaN matches NaN; otherwise |got − want| ≤ bound(want, i). */
function assertClose(got: Float32Array, want: Float32Array, bound: (want: number, i: number) => number, label: string): void {
  assert.equal(got.length, want.length, label);
  for (let i = 0; i < want.length; i++) {
    if (Number.isNaN(want[i]) && Number.isNaN(got[i])) continue;
    if (got[i] === want[i] || Math.abs(got[i] - want[i]) <= bound(want[i], i)) continue;
    assert.fail(`${label}: element ${i}: wasm ${got[i]} vs cpu ${want[i]}`);
  }
}

describe('wasm elementwise and softmax vs cpu', { skip: onlyMatmul }, () => {
  const everyCase = { minElements: 0, minParallelElements: 0 };
  let single: WasmBackend;
  let threaded: WasmBackend;
  before(async () => {
    single = await WasmBackend.create({ threads: 1, elementwise: everyCase });
    threaded = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, elementwise: everyCase });
  });
  after(() => { single.destroy(); threaded.destroy(); });

  test('every op without a SIMD kernel is named, and the kernels run (no silent fallback)', () => {
    assert.deepEqual(UNARY_OPS.filter((op) => !WASM_UNARY_OPS.includes(op)), ['log', 'softplus', 'sin', 'cos']);
    assert.deepEqual(BINARY_OPS.filter((op) => !WASM_BINARY_OPS.includes(op)), ['pow']);
    const x = { h: new Float32Array(300), shape: [300], dtype: 'f32' as const };
    assert.ok(unaryWasm(single.runtime, x, 'exp') !== null);
    assert.ok(binaryWasm(single.runtime, x, x, 'add', [300]) !== null);
    assert.ok(softmaxWasm(single.runtime, x, 3, 100) !== null);
    assert.equal(unaryWasm(single.runtime, x, 'log'), null);
    assert.equal(unaryWasm(single.runtime, { h: new Int32Array(300), shape: [300], dtype: 'i32' }, 'neg'), null);
  });

  for (const count of [1, 7, 33, 1000, 70_001]) {
    test(`unary ops on ${count} elements`, () => {
      const x = { h: elementwiseInput(count, count), shape: [count], dtype: 'f32' as const };
      for (const op of WASM_UNARY_OPS) {
        const want = cpu.unary(x, op) as Float32Array;
        for (const backend of [single, threaded]) assertClose(backend.unary(x, op) as Float32Array, want, unaryBound(op, x.h), `${op} threads=${backend.threads}`);
      }
    });

    test(`binary ops on ${count} elements: both full, scalar right, scalar left`, () => {
      const a = { h: elementwiseInput(count, count + 1), shape: [count], dtype: 'f32' as const };
      const b = { h: elementwiseInput(count, count + 2).reverse(), shape: [count], dtype: 'f32' as const };
      const s = { h: new Float32Array([0.75]), shape: [1], dtype: 'f32' as const };
      for (const op of WASM_BINARY_OPS as BinaryOp[]) {
        for (const [x, y] of [[a, b], [a, s], [s, b]] as const) {
          const want = cpu.binary(x, y, op, [count]) as Float32Array;
          for (const backend of [single, threaded]) {
            const got = backend.binary(x, y, op, [count]) as Float32Array;
            for (let i = 0; i < count; i++) if (!Object.is(got[i], want[i])) assert.fail(`${op} (${x.h.length}, ${y.h.length}) threads=${backend.threads}: element ${i}: ${got[i]} vs ${want[i]}`);
          }
        }
      }
    });
  }

  test('f16 and bf16 elementwise round like the reference', () => {
    for (const dtype of ['f16', 'bf16'] as const) {
      const x = { h: f32ToHost(elementwiseInput(999, 3).map((v) => (Math.abs(v) > 60000 ? 1 : v)), dtype), shape: [999], dtype };
      const xs = hostToF32(x.h, dtype);
      const step = RELATIVE_ROUNDING[dtype];
      for (const op of ['exp', 'gelu', 'neg', 'silu'] as const) {
        const want = hostToF32(cpu.unary(x, op), dtype), got = hostToF32(threaded.unary(x, op), dtype);
        const f32Bound = unaryBound(op, xs);
        assertClose(got, want, (w, i) => step * Math.abs(w) + f32Bound(w, i), `${op} ${dtype}`);
      }
      const want = hostToF32(cpu.binary(x, x, 'mul', [999]), dtype), got = hostToF32(threaded.binary(x, x, 'mul', [999]), dtype);
      assertClose(got, want, () => 0, `mul ${dtype}`);
    }
  });

  test('softmax: odd sizes, masked (−∞) entries, an all-masked row and a NaN', () => {
    for (const [rows, cols] of [[1, 1], [3, 5], [7, 33], [129, 257], [2, 5000]]) {
      const next = rng(rows * cols);
      const h = new Float32Array(rows * cols).map(() => next() * 20 - 10);
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) if (c > r + 2) h[r * cols + c] = -Infinity;
      if (rows > 3) { h.fill(-Infinity, 2 * cols, 3 * cols); h[3 * cols] = NaN; }
      const x = { h, shape: [rows, cols], dtype: 'f32' as const };
      const want = cpu.softmax(x, rows, cols) as Float32Array;
      for (const backend of [single, threaded]) {
        assertClose(backend.softmax(x, rows, cols) as Float32Array, want, (w) => (4 + Math.sqrt(cols)) * 2 ** -23 * Math.abs(w), `softmax ${rows}×${cols} threads=${backend.threads}`);
      }
    }
  });

  test('the parity suite passes with every case through the wasm kernels and the pool', async (t) => {
    const backend = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, minParallelFlops: 0, elementwise: everyCase });
    try {
      const report = await runParity(backend, { skip: skipsFor('wasm') });
      t.diagnostic(`threads=${backend.threads}: ${formatReport(report)}`);
      assertParity(report);
    } finally {
      backend.destroy();
    }
  });
});

describe('wasm backend pieces', { skip: onlyMatmul }, () => {
  test('the kernel module validates (plain, shared memory, and fma where the engine has it)', () => {
    assert.ok(features.simd, 'this engine has wasm SIMD');
    assert.ok(WebAssembly.validate(buildKernelModule({ fma: false, sharedMemory: false })));
    assert.ok(WebAssembly.validate(buildKernelModule({ fma: false, sharedMemory: true })));
    assert.equal(WebAssembly.validate(buildKernelModule({ fma: true, sharedMemory: true })), features.relaxedSimd);
  });

  test('planGemm covers every row and column once and balances the threads', () => {
    const { mr, nr } = GEMM_TILE;
    for (const [batch, m, n, k, threads] of [[1, 1024, 1024, 1024, 2], [1, 300, 50, 64, 2], [1, 1, 4096, 4096, 2], [3, 5, 7, 9, 4], [8, 64, 64, 64, 3], [1, 2, 3, 4, 1]]) {
      const plan = planGemm(batch, m, n, k, threads, 0);
      assert.equal(plan.mChunk % mr, 0);
      assert.equal(plan.nChunk % nr, 0);
      assert.ok(plan.mChunk <= Math.max(GEMM_MC, mr * Math.ceil(m / mr)));
      assert.ok(plan.mItems * plan.mChunk >= m && (plan.mItems - 1) * plan.mChunk < m, `rows of ${m} in ${plan.mItems}×${plan.mChunk}`);
      assert.ok(plan.nItems * plan.nChunk >= n && (plan.nItems - 1) * plan.nChunk < n, `cols of ${n} in ${plan.nItems}×${plan.nChunk}`);
      assert.ok(plan.threads >= 1 && plan.threads <= threads);
      if (batch * plan.mItems * plan.nItems >= threads) assert.equal(plan.threads, threads);
    }
    assert.equal(planGemm(1, 1024, 1024, 1024, 2).mItems % 2, 0, 'row items split evenly over 2 threads');
    assert.equal(planGemm(1, 8, 8, 8, 2).threads, 1, 'tiny problems stay on one thread');
    assert.ok(GEMM_KC % 4 === 0);
  });

  test('FON_WASM_THREADS sets the thread count and is checked', () => {
    const saved = process.env.FON_WASM_THREADS;
    try {
      process.env.FON_WASM_THREADS = '3';
      assert.equal(nodeThreadCount(), 3);
      process.env.FON_WASM_THREADS = 'many';
      assert.throws(() => nodeThreadCount(), fon.ArgumentError);
      delete process.env.FON_WASM_THREADS;
      assert.ok(nodeThreadCount() >= 1);
    } finally {
      if (saved === undefined) delete process.env.FON_WASM_THREADS;
      else process.env.FON_WASM_THREADS = saved;
    }
  });

  test('public API: initBackend("wasm") matmul equals the cpu backend', async () => {
    const wasm = await fon.initBackend('wasm');
    assert.equal(wasm.name, 'wasm');
    assert.ok(wasm instanceof WasmBackend);
    const cpuBackend = await fon.initBackend('cpu');
    const next = rng(5);
    const values = (n: number) => Array.from({ length: n }, () => next() * 2 - 1);
    const av = values(2 * 37 * 45), bv = values(45 * 29);
    const on = (backend: fon.Backend) => {
      const a = fon.tensor(av, [2, 37, 45], { backend });
      const b = fon.tensor(bv, [29, 45], { backend });
      return fon.matmul(a, b, { transB: true }).dataSync() as Float32Array;
    };
    const got = on(wasm), want = on(cpuBackend);
    assert.equal(got.length, 2 * 37 * 29);
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) <= 1e-5 * Math.sqrt(45) * 45, `element ${i}: ${got[i]} vs ${want[i]}`);
  });

  test('a process with a live worker pool exits by itself', () => {
    const backendModule = new URL('../../src/backend/wasm/index.ts', import.meta.url).href;
    const spawnerModule = new URL('../../src/platform/wasm_threads.ts', import.meta.url).href;
    const code = `
      import { WasmBackend } from '${backendModule}';
      import { nodeSpawner } from '${spawnerModule}';
      const b = await WasmBackend.create({ threads: 2, spawner: nodeSpawner, minParallelFlops: 0 });
      const x = { h: new Float32Array(64 * 64).fill(1), shape: [64, 64], dtype: 'f32' };
      const y = b.matmul(x, x, { batch: 1, m: 64, n: 64, k: 64, transA: false, transB: false, batchA: 1, batchB: 1, outDType: 'f32' });
      console.log(b.threads, y[0]);`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(child.signal, null, `child was killed (hung at exit?): ${child.stderr}`);
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), `${features.sharedMemory ? 2 : 1} 64`);
  });

  test('the relaxed-SIMD fma kernel passes the matmul suite', { skip: features.relaxedSimd ? 'this engine has relaxed SIMD: the suite above ran the fma kernel' : false }, () => {
    const file = fileURLToPath(import.meta.url);
    const probe = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '-e', ''], { encoding: 'utf8' });
    if (probe.status !== 0) return; // this Node does not know the flag
    // NODE_TEST_CONTEXT would make the child report in the runner's binary protocol.
    const env: NodeJS.ProcessEnv = { ...process.env, FON_WASM_TEST_ONLY_MATMUL: '1' };
    delete env.NODE_TEST_CONTEXT;
    const child = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--import', 'tsx', '--test', '--test-reporter=spec', file], {
      encoding: 'utf8', timeout: 120_000, env,
    });
    assert.equal(child.status, 0, `fma suite failed:\n${child.stdout}\n${child.stderr}`);
    assert.match(child.stdout, /relaxed-SIMD fma/);
  });
});
