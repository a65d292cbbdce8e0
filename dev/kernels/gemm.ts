/**
 * GEMM kernel versions side by side (STYLE.md §7): each is checked against the CPU reference
 * (an odd-sized case and a 1024³ case) and timed at the given sizes, C = A·B, row-major, batch 1.
 *
 *   node --import tsx dev/kernels/gemm.ts [--sizes 1024,4096,8192] [--only v4,t10] [--toggles disable_robustness]
 *   python3 dev/kernels/gemm_torch.py 4096,8192        (PyTorch beside it: fp32 with TF32 off, bf16, fp16)
 *
 * TFLOP/s on one H200 (Dawn 0.6.2 through Vulkan, driver 580.159; default toggles unless noted),
 * 4096³ / 8192³. Runs of 2026-11-29: the first four (run 1 timed without a warm-up long enough for
 * the clocks, so only its 8192 figures are kept, and only where no later run repeated them) ran
 * with Dawn's robustness pass on, as node_gpu.ts then did, and `disable_robustness` only where
 * noted; PyTorch in those runs: fp32 (TF32 off) 49.7–50.7 / 50.7–50.9, bf16 672–720 / 758–787.
 * Runs 5 and 6 (marked [5], [6]; `--sizes 8192` and `--sizes 4096,8192`, groups of versions
 * through --only) ran with robustness off, node_gpu.ts's default since; PyTorch beside run 6
 * (bench/ops.ts in the same machine session): fp32 50.6 / 50.9, bf16 735 / 788.
 *
 * f32 inputs, plain ALUs (f32 output):
 *   v1  naive: one output per invocation, 16×16 workgroups, operands straight from global memory.    1.6 / 1.5
 *   v2  src kernel (matmul_f32.wgsl) with 64×64 blocks, 4×4 per invocation, K-slices of 16,
 *       k-major workgroup tiles read as vec4, double-buffered with the next slice's loads in flight.  — / 23.0 (run 1)
 *   v3  as v2 with 128×128 blocks and 8×8 per invocation (4 pieces of 4×4 spread apart).            17.6 / 16.6
 *   v4  as v3 with K-slices of 8 (half the workgroup memory and prefetch registers).
 *                                      26.5–26.7 / 26.3–27.6; disable_robustness: 29.2–30.8; [5] — / 29.1
 *   v5  as v4 with 128×256 blocks, 8×16 per invocation.                                              — / 19.6 (run 1)
 *   v6  as v4 with 128×64 blocks (128 invocations).                                                 24.7 / 24.7
 *   v7  as v4 with 64×64 blocks (64 invocations, 8×8 each).                      18.0 / 20.0; disable_robustness 19.1
 *   v8  as v4 with 64×128 blocks (128 invocations).                                       26.8–26.9 / 25.1–26.6
 *   v9  as v4 where M, N, K are multiples of the block and K-slice: the ALIGNED variant, no bounds
 *       check on any load or store.  ← src (PLAIN_TILE: v9 where the sizes allow, v4 otherwise;
 *       bench/ops.ts in run 6: 32.8 / 34.5)
 *                                                                           [5] — / 34.4; [6] 33.6 / 32.4
 *   v10 as v9 with the blocks walked in groups of 8 block rows (GROUP 8).                    [5] — / 31.3
 *   v11 as v9 with K-slices of 16.                                                           [5] — / 26.3
 *   v12 as v9 with 64×128 blocks (v8's geometry).                           [5] — / 34.5; [6] 35.5 / 35.6
 *   v13 as v9 with 128×64 blocks (v6's geometry).                                       [6] 34.6 / 34.6
 *   v14 as v12 with K-slices of 16.                                                     [6] 28.0 / 28.1
 * f16 inputs, tensor cores through chromium-experimental-subgroup-matrix (f32 accumulation):
 *   t1  naive: one 16×16 tile per 32-wide workgroup, fragments loaded straight from global memory
 *       (the DESIGN.md anchor, 43 TFLOP/s at 4096³); f32 output; needs multiples of 16.                — / 19.8 (run 1)
 *   t2  register-blocked straight from global: 2×2 subgroups per workgroup, each 4×4 tiles
 *       (128×128 block), no workgroup memory; f32 output; needs multiples of 128.                      — / 37.6 (run 1)
 *   t3  src kernel (matmul_tc.wgsl): 2×2 subgroups of 4×4 tiles (128×128 block), K-slices of 32
 *       staged global → registers → workgroup memory (rows padded by 8 halves), next slice's
 *       loads in flight during the MMAs, f16 output through a per-subgroup scratch; bounds
 *       checks everywhere; subgroupMatrixLoad/Store with the bool layout argument.
 *                                                    80.1 / 91.1; disable_robustness: 161.3; [5] — / 156.3
 *   t4  as t3 with 2×4 subgroups (128×256 block, 256 invocations).                                  — / 41.0 (run 1)
 *   t5  as t3 with K-slices of 64.                                                                  — / 23.3 (run 1)
 *   t6  as t3 with 4×2 subgroups of 2×4 tiles (128×128 block, 256 invocations).                     — / 36.5 (run 1)
 *   t7  as t3 with K-slices of 16.                                                                  77.2 / 78.6
 *   t8  as t2 with the next K-step's fragments loaded before the current step's MMAs.               69.4 / 72.5
 *   t9  as t3 without the register prefetch (load, store, multiply in turn; fewer registers).        80.8 / 82.0
 *   t10 as t3 with 4×2 subgroups of 4×4 tiles (256×128 block, 256 invocations).
 *                                      99.0–99.7 / 101.9–103.2; disable_robustness: 143.1; [5] — / 150.8
 *   t11 as t3 with 2×2 subgroups of 4×2 tiles (128×64 block, half the accumulators).                 62.3 / 62.2
 *   t12 as t3 with COOP staging: whole 16×16 fragments go global → subgroupMatrixLoad → registers →
 *       subgroupMatrixStore → workgroup memory, instead of 8 scalar halves a load. Wrong at 300×200×160
 *       under robustness (hence src takes it only for multiples of 16).     — / 52.1; disable_robustness: — / 68.6
 *   t13 as t10 with COOP staging.                                                 disable_robustness: — / 76.5
 *   t14 as t12 with K-slices of 16.                                               (wrong under robustness, as t12)
 *   t15 as t3 with the layout as a template argument (subgroupMatrixLoad<T, row_major>(p, offset,
 *       stride), the form Dawn 0.6.2 does not call deprecated; same speed).                     [5] — / 155.3
 *   t16 as t15 where M, N, K are multiples of the block and K-slice: the ALIGNED variant, no bounds
 *       check on any global load, the f16 output written 8 halves per vec4<u32> store.
 *       ← src (TC_TILE: t16 where the sizes allow, t15 otherwise; bench/ops.ts in run 6: 231 / 240)
 *                                                                        [5] — / 241.9; [6] 238.2 / 246.9
 *   t17 as t15 with double-buffered workgroup tiles (DB: one barrier per slice; 41 KiB).       [5] — / 89.8
 *   t18 as t17, ALIGNED.                                                                      [5] — / 150.6
 *   t19 as t18 with GROUP 8.                                                                  [5] — / 154.9
 *   t20 as t18 with K-slices of 16.                                                           [5] — / 95.8
 *   t21 as t20 with GROUP 8.                                                                  [5] — / 90.2
 *   t22 as t20 with t10's 4×2 subgroups (256×128 block).                                      [5] — / 154.2
 *   t23 as t22 with GROUP 8.                                                                  [5] — / 166.8
 *   t24 as t16 with t10's 4×2 subgroups (256×128 block).                                [6] 211.1 / 216.7
 *   t25 as t16 with GROUP 8.                                                            [6] 234.4 / 249.4
 *   t26 as t16 with K-slices of 16 (16 KiB of workgroup memory: TC_TILE_SMALL).         [6] 178.1 / 180.4
 *   t27 as t16 without the register prefetch.                                           [6] 203.2 / 215.4
 *   p16 the plain kernel (v4 geometry) on the same f16 inputs: the fallback without subgroup matrices.  — / 18.8 (run 1, BK 16)
 *
 * Findings: Dawn's robustness transform (index clamps on every workgroup access, a predicated
 * copy around every subgroupMatrixLoad/Store) cost ~10% on f32 and ~45% on the tensor-core kernel
 * (t3 91 → 161 TFLOP/s without it); node_gpu.ts now disables it. With it off, the bounds checks
 * of FON's own code were the next cost: the variant without them where the sizes are tile
 * multiples (for f16 output also storing 8 halves at a time; which of the two mattered more was
 * not separated) took t15 from 155 to 242–247 TFLOP/s (t16), and v4 from 29 to 32–34 (v9). Double-buffered
 * workgroup tiles lost (t17, t18: 41 KiB per workgroup, cause not established), as did K-slices
 * of 16 and the larger 256×128 block once the checks were gone; grouped block order is within
 * run-to-run spread (t25 vs t16, and it lost on f32: v10). Register pressure decides the rest:
 * K-slices of 16 (f32) or 64 (f16) lose badly.
 *
 * Each version runs in this process unless --only picks some; the GPU runs isolated groups of
 * versions in processes of their own with a timeout each (a staged subgroup-matrix variant once
 * hung, DESIGN.md). --toggles creates the Dawn instance with extra toggles (through navigator.gpu).
 * Timings: after ≥0.5 s of warm-up runs (the clocks ramp up from idle), the median of 5 batches
 * of back-to-back dispatches (≥0.15 s each), wall clock with one sync per batch; inputs are
 * random and shared by the versions of one process.
 */
import { matmul as cpuMatmul } from '../../src/backend/cpu/matmul.ts';
import type { MatmulArgs } from '../../src/backend/backend.ts';
import { f16BitsToF32, type FloatDType } from '../../src/tensor/dtype.ts';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import type { GpuHandle, GpuRef } from '../../src/backend/webgpu/backend.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';
import {
  matmulPlain, matmulTc, tcEligible, PLAIN_TILE, TC_TILE, type PlainTile, type TcTile,
} from '../../src/backend/webgpu/kernels/matmul.ts';

interface Version {
  name: string;
  dtype: 'f32' | 'f16';
  /** Multiple the sizes must be (checks and timings round their sizes to it). */
  multiple: number;
  run(be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs): GpuHandle;
}

// ---------------------------------------------------------------- dev-only kernels (v1, t1, t2)

const V1_WGSL = `
struct Params { m: u32, n: u32, k: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let row = g.y; let col = g.x;
  if (row >= P.m || col >= P.n) { return; }
  var s = 0.0;
  for (var k = 0u; k < P.k; k++) { s = fma(a[row * P.k + k], b[k * P.n + col], s); }
  c[row * P.n + col] = s;
}`;

const TC_HEAD = `diagnostic(off, chromium.subgroup_matrix_uniformity);
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
struct Params { m: u32, n: u32, k: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f16>;
@group(0) @binding(2) var<storage, read> b: array<f16>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
alias L = subgroup_matrix_left<f16, 16, 16>;
alias R = subgroup_matrix_right<f16, 16, 16>;
alias C = subgroup_matrix_result<f32, 16, 16>;`;

const T1_WGSL = `${TC_HEAD}
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) w: vec3<u32>) {
  let row = w.y * 16u; let col = w.x * 16u;
  var acc: C;
  for (var k = 0u; k < P.k; k += 16u) {
    let x = subgroupMatrixLoad<L>(&a, row * P.k + k, false, P.k);
    let y = subgroupMatrixLoad<R>(&b, k * P.n + col, false, P.n);
    acc = subgroupMatrixMultiplyAccumulate(x, y, acc);
  }
  subgroupMatrixStore(&c, row * P.n + col, acc, false, P.n);
}`;

function t2Wgsl(tm: number, tn: number): string {
  const acc: string[] = [], body: string[] = [], store: string[] = [];
  for (let i = 0; i < tm; i++) {
    body.push(`    let a${i} = subgroupMatrixLoad<L>(&a, (r0 + ${16 * i}u) * P.k + k, false, P.k);`);
    for (let j = 0; j < tn; j++) acc.push(`  var c${i}_${j}: C;`);
  }
  for (let j = 0; j < tn; j++) {
    body.push(`    let b${j} = subgroupMatrixLoad<R>(&b, k * P.n + c0 + ${16 * j}u, false, P.n);`);
    for (let i = 0; i < tm; i++) body.push(`    c${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}, b${j}, c${i}_${j});`);
  }
  for (let i = 0; i < tm; i++) for (let j = 0; j < tn; j++) store.push(`  subgroupMatrixStore(&c, (r0 + ${16 * i}u) * P.n + c0 + ${16 * j}u, c${i}_${j}, false, P.n);`);
  return `${TC_HEAD}
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(subgroup_id) sg: u32) {
  let r0 = w.y * ${32 * tm}u + (sg % 2u) * ${16 * tm}u;
  let c0 = w.x * ${32 * tn}u + (sg / 2u) * ${16 * tn}u;
${acc.join('\n')}
  for (var k = 0u; k < P.k; k += 16u) {
${body.join('\n')}
  }
${store.join('\n')}
}`;
}

function t8Wgsl(tm: number, tn: number): string {
  const acc: string[] = [], first: string[] = [], next: string[] = [], mma: string[] = [], swap: string[] = [], store: string[] = [];
  for (let i = 0; i < tm; i++) {
    first.push(`  var a${i} = subgroupMatrixLoad<L>(&a, (r0 + ${16 * i}u) * P.k, false, P.k);`);
    next.push(`    let na${i} = subgroupMatrixLoad<L>(&a, (r0 + ${16 * i}u) * P.k + k, false, P.k);`);
    swap.push(`    a${i} = na${i};`);
    for (let j = 0; j < tn; j++) acc.push(`  var c${i}_${j}: C;`);
  }
  for (let j = 0; j < tn; j++) {
    first.push(`  var b${j} = subgroupMatrixLoad<R>(&b, c0 + ${16 * j}u, false, P.n);`);
    next.push(`    let nb${j} = subgroupMatrixLoad<R>(&b, k * P.n + c0 + ${16 * j}u, false, P.n);`);
    swap.push(`    b${j} = nb${j};`);
    for (let i = 0; i < tm; i++) mma.push(`    c${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}, b${j}, c${i}_${j});`);
  }
  for (let i = 0; i < tm; i++) for (let j = 0; j < tn; j++) store.push(`  subgroupMatrixStore(&c, (r0 + ${16 * i}u) * P.n + c0 + ${16 * j}u, c${i}_${j}, false, P.n);`);
  return `${TC_HEAD}
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(subgroup_id) sg: u32) {
  let r0 = w.y * ${32 * tm}u + (sg % 2u) * ${16 * tm}u;
  let c0 = w.x * ${32 * tn}u + (sg / 2u) * ${16 * tn}u;
${acc.join('\n')}
${first.join('\n')}
  for (var k = 16u; k < P.k; k += 16u) {
${next.join('\n')}
${mma.join('\n')}
${swap.join('\n')}
  }
${mma.join('\n')}
${store.join('\n')}
}`;
}

const fixed = (name: string, code: string): Kernel => ({ name, source: () => code });
const v1Kernel = fixed('gemm_v1', V1_WGSL);
const t1Kernel = fixed('gemm_t1', T1_WGSL);
const t2Kernel = fixed('gemm_t2', t2Wgsl(4, 4));
const t8Kernel = fixed('gemm_t8', t8Wgsl(4, 4));

function runFixed(kernel: Kernel, groups: (args: MatmulArgs) => [number, number]) {
  return (be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs): GpuHandle => {
    const out = be.alloc('f32', args.m * args.n, kernel.name);
    be.rt.run({ kernel, variant: {}, uniforms: [args.m, args.n, args.k], buffers: [a.h.buffer, b.h.buffer, out.buffer], workgroups: groups(args) });
    return out;
  };
}

const plain = (tile: PlainTile) => (be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs) => matmulPlain(be, a, b, args, tile);
const tc = (tile: TcTile) => (be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs) => matmulTc(be, a, b, args, tile);

// The versions of the 2026-11-29 runs keep their code: no bounds-check-free variant, bool-argument loads.
const BK8: PlainTile = { ...PLAIN_TILE, bk: 8, group: 0, aligned: false };
const T3: TcTile = { sgm: 2, sgn: 2, tm: 4, tn: 4, bk: 32, pad: 8, prefetch: true, coop: false, db: false, group: 0, aligned: false, loadForm: 'arg' };
const T15: TcTile = { ...T3, loadForm: 'template' };
const T18: TcTile = { ...T15, db: true, aligned: true };
const VERSIONS: Version[] = [
  { name: 'v1', dtype: 'f32', multiple: 1, run: runFixed(v1Kernel, (x) => [Math.ceil(x.n / 16), Math.ceil(x.m / 16)]) },
  { name: 'v2', dtype: 'f32', multiple: 1, run: plain({ bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 }) },
  { name: 'v3', dtype: 'f32', multiple: 1, run: plain({ ...BK8, bk: 16 }) },
  { name: 'v4', dtype: 'f32', multiple: 1, run: plain(BK8) },
  { name: 'v5', dtype: 'f32', multiple: 1, run: plain({ ...BK8, bn: 256, tn: 16 }) },
  { name: 'v6', dtype: 'f32', multiple: 1, run: plain({ ...BK8, bn: 64 }) },
  { name: 'v7', dtype: 'f32', multiple: 1, run: plain({ ...BK8, bm: 64, bn: 64 }) },
  { name: 'v8', dtype: 'f32', multiple: 1, run: plain({ ...BK8, bm: 64 }) },
  { name: 'v9', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true }) },
  { name: 'v10', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true, group: 8 }) },
  { name: 'v11', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true, bk: 16 }) },
  { name: 'v12', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true, bm: 64 }) },
  { name: 'v13', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true, bn: 64 }) },
  { name: 'v14', dtype: 'f32', multiple: 1, run: plain({ ...BK8, aligned: true, bm: 64, bk: 16 }) },
  { name: 't1', dtype: 'f16', multiple: 16, run: runFixed(t1Kernel, (x) => [x.n / 16, x.m / 16]) },
  { name: 't2', dtype: 'f16', multiple: 128, run: runFixed(t2Kernel, (x) => [x.n / 128, x.m / 128]) },
  { name: 't3', dtype: 'f16', multiple: 1, run: tc(T3) },
  { name: 't4', dtype: 'f16', multiple: 1, run: tc({ ...T3, sgn: 4 }) },
  { name: 't5', dtype: 'f16', multiple: 1, run: tc({ ...T3, bk: 64 }) },
  { name: 't6', dtype: 'f16', multiple: 1, run: tc({ ...T3, sgm: 4, sgn: 2, tm: 2, tn: 4 }) },
  { name: 't7', dtype: 'f16', multiple: 1, run: tc({ ...T3, bk: 16 }) },
  { name: 't8', dtype: 'f16', multiple: 128, run: runFixed(t8Kernel, (x) => [x.n / 128, x.m / 128]) },
  { name: 't9', dtype: 'f16', multiple: 1, run: tc({ ...T3, prefetch: false }) },
  { name: 't10', dtype: 'f16', multiple: 1, run: tc({ ...T3, sgm: 4 }) },
  { name: 't11', dtype: 'f16', multiple: 1, run: tc({ ...T3, tn: 2 }) },
  { name: 't12', dtype: 'f16', multiple: 1, run: tc({ ...T3, coop: true }) },
  { name: 't13', dtype: 'f16', multiple: 1, run: tc({ ...T3, sgm: 4, coop: true }) },
  { name: 't14', dtype: 'f16', multiple: 1, run: tc({ ...T3, bk: 16, coop: true }) },
  { name: 't15', dtype: 'f16', multiple: 1, run: tc(T15) },
  { name: 't16', dtype: 'f16', multiple: 1, run: tc({ ...T15, aligned: true }) },
  { name: 't17', dtype: 'f16', multiple: 1, run: tc({ ...T15, db: true }) },
  { name: 't18', dtype: 'f16', multiple: 1, run: tc(T18) },
  { name: 't19', dtype: 'f16', multiple: 1, run: tc({ ...T18, group: 8 }) },
  { name: 't20', dtype: 'f16', multiple: 1, run: tc({ ...T18, bk: 16 }) },
  { name: 't21', dtype: 'f16', multiple: 1, run: tc({ ...T18, bk: 16, group: 8 }) },
  { name: 't22', dtype: 'f16', multiple: 1, run: tc({ ...T18, sgm: 4, bk: 16 }) },
  { name: 't23', dtype: 'f16', multiple: 1, run: tc({ ...T18, sgm: 4, bk: 16, group: 8 }) },
  { name: 't24', dtype: 'f16', multiple: 1, run: tc({ ...T15, aligned: true, sgm: 4 }) },
  { name: 't25', dtype: 'f16', multiple: 1, run: tc({ ...T15, aligned: true, group: 8 }) },
  { name: 't26', dtype: 'f16', multiple: 1, run: tc({ ...T15, aligned: true, bk: 16 }) },
  { name: 't27', dtype: 'f16', multiple: 1, run: tc({ ...T15, aligned: true, prefetch: false }) },
  { name: 'p16', dtype: 'f16', multiple: 1, run: plain(BK8) },
];

// ---------------------------------------------------------------- harness

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

let seed = 0x9e3779b9;
function nextU32(): number {
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed;
}

/** Random values in (−1, 1): f32 directly, f16 as bit patterns (sign, exponent 2^-2…2^-1, mantissa). */
function randomHost(n: number, dtype: 'f32' | 'f16'): Float32Array | Uint16Array {
  if (dtype === 'f32') {
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = nextU32() / 2147483648 - 1;
    return x;
  }
  const x = new Uint16Array(n);
  for (let i = 0; i < n; i++) { const r = nextU32(); x[i] = (r & 0x83ff) | (r & 0x400 ? 0x3800 : 0x3400); }
  return x;
}

const args = (m: number, n: number, k: number, out: FloatDType): MatmulArgs =>
  ({ batch: 1, m, n, k, transA: false, transB: false, batchA: 1, batchB: 1, outDType: out });

async function readF32(be: WebGpuBackend, h: GpuHandle, size: number, dtype: FloatDType): Promise<Float32Array> {
  const raw = await be.read(h, dtype, size);
  return dtype === 'f32' ? raw as Float32Array : Float32Array.from(raw as Uint16Array, f16BitsToF32);
}

/** Max of |gpu − ref| / (1 + |ref|) for one version on an m×n×k case. */
async function check(be: WebGpuBackend, v: Version, m: number, n: number, k: number, cache: Map<string, { a: Float32Array | Uint16Array; b: Float32Array | Uint16Array; ref: Float32Array }>): Promise<number> {
  const key = `${v.dtype}:${m}x${n}x${k}`;
  let c = cache.get(key);
  if (!c) {
    const a = randomHost(m * k, v.dtype), b = randomHost(k * n, v.dtype);
    const ref = cpuMatmul({ h: a, shape: [m, k], dtype: v.dtype }, { h: b, shape: [k, n], dtype: v.dtype }, args(m, n, k, 'f32')) as Float32Array;
    c = { a, b, ref };
    cache.set(key, c);
  }
  const outD = outDType(v);
  const a = { h: be.upload(c.a, v.dtype), shape: [m, k], dtype: v.dtype }, b = { h: be.upload(c.b, v.dtype), shape: [k, n], dtype: v.dtype };
  const o = v.run(be, a, b, args(m, n, k, outD));
  const got = await readF32(be, o, m * n, outD);
  be.free(a.h); be.free(b.h); be.free(o);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - c.ref[i]) / (1 + Math.abs(c.ref[i])) || (Number.isNaN(got[i]) ? Infinity : 0));
  return worst;
}

/** The dev-only kernels write f32; the src tensor-core kernel writes f16, as the op layer asks for f16 inputs. */
function outDType(v: Version): FloatDType {
  return v.name.startsWith('t') && !['t1', 't2', 't8'].includes(v.name) ? 'f16' : 'f32';
}

const inputs = new Map<string, [GpuRef, GpuRef]>();

/** TFLOP/s of one version at n³: median of 5 timed batches after ≥0.5 s of warm-up. */
async function time(be: WebGpuBackend, v: Version, n: number): Promise<{ tflops: number; ms: number; reps: number }> {
  const key = `${v.dtype}:${n}`;
  let ab = inputs.get(key);
  if (!ab) {
    const mk = () => ({ h: be.upload(randomHost(n * n, v.dtype), v.dtype), shape: [n, n], dtype: v.dtype });
    ab = [mk(), mk()];
    inputs.set(key, ab);
  }
  const [a, b] = ab;
  const x = args(n, n, n, outDType(v));
  const batch = async (reps: number) => {
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) be.free(v.run(be, a, b, x));
    await be.sync();
    return performance.now() - t0;
  };
  await batch(1);
  let once = await batch(1);
  for (let spent = once; spent < 500;) { const t = await batch(4); spent += t; once = t / 4; }
  const reps = Math.max(1, Math.min(50, Math.ceil(150 / once)));
  const times: number[] = [];
  for (let i = 0; i < 5; i++) times.push((await batch(reps)) / reps);
  times.sort((p, q) => p - q);
  const ms = times[2];
  return { tflops: (2 * n * n * n) / (ms * 1e-3) / 1e12, ms, reps };
}

async function main(): Promise<void> {
  const sizes = (flag('sizes') ?? '1024,4096,8192').split(',').map(Number);
  const only = flag('only')?.split(',');
  const toggles = flag('toggles');
  if (toggles) {
    const { create, globals } = await import('webgpu');
    Object.assign(globalThis, globals);
    const gpu = create([`enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia,${toggles}`]);
    Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true });
  }
  const be = await WebGpuBackend.create();
  const info = (be.rt.device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number; subgroupMaxSize?: number } }).adapterInfo;
  console.log(`# ${be.caps.adapterName}; f16 ${be.caps.f16}; subgroup matrix ${JSON.stringify(be.caps.subgroupMatrix)}; subgroups ${info?.subgroupMinSize}-${info?.subgroupMaxSize}; workgroup storage ${be.caps.maxWorkgroupStorage}; toggles ${toggles ?? '-'}`);
  const cache = new Map<string, { a: Float32Array | Uint16Array; b: Float32Array | Uint16Array; ref: Float32Array }>();
  for (const v of VERSIONS) {
    if (only && !only.includes(v.name)) continue;
    if (v.dtype === 'f16' && v.name !== 'p16' && !tcEligible(be, { h: null as unknown as GpuHandle, shape: [1], dtype: 'f16' }, { h: null as unknown as GpuHandle, shape: [1], dtype: 'f16' })) {
      console.log(`${v.name}: skipped (no f16 subgroup matrices here)`);
      continue;
    }
    try {
      const q = v.multiple;
      const odd = q > 1 ? [2 * q, 3 * q, 2 * q] : v.dtype === 'f16' ? [300, 200, 160] : [300, 200, 152];
      const e1 = await check(be, v, odd[0], odd[1], odd[2], cache);
      const e2 = await check(be, v, 1024, 1024, 1024, cache);
      const tol = v.dtype === 'f32' ? 1e-4 : 4e-3;
      const ok = e1 <= tol && e2 <= tol;
      const cells: string[] = [];
      if (ok) {
        for (const n of sizes) {
          const r = await time(be, v, n);
          cells.push(`${n}: ${r.tflops.toFixed(1)} TFLOP/s (${r.ms.toFixed(2)} ms, median of 5×${r.reps})`);
        }
      }
      console.log(`${v.name}: check ${odd.join('x')} err ${e1.toExponential(1)}, 1024³ err ${e2.toExponential(1)} ${ok ? 'ok' : 'FAILED'} | ${cells.join(' | ')}`);
    } catch (e) {
      console.log(`${v.name}: ERROR ${(e as Error).message.split('\n').slice(0, 6).join(' / ')}`);
      await be.sync().catch(() => undefined);
    }
  }
  be.destroy();
}

await main().catch((e) => { console.error(e); process.exitCode = 1; });
setImmediate(() => process.exit(process.exitCode ?? 0));
