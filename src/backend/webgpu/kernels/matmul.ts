/**
 * WebGPU GEMM (Backend.matmul): C[b] = op(A[b]) · op(B[b]) with f32 accumulation.
 *
 * Three kernels, chosen per call:
 * - `matmul_rows.wgsl`, for at most ROWS_MAX rows of A (a decode step's projections) and K of at
 *   least ROWS_MIN_K: K split across a workgroup's lanes, so a GEMM with few output columns is not
 *   one workgroup walking all of K (rowsEligible);
 * - `matmul_tc.wgsl`, tensor cores through `chromium-experimental-subgroup-matrix`: taken when
 *   both inputs are f16 and the device has 16×16×16 f16→f32 subgroup matrices with 32-wide
 *   subgroups. No other dtype is converted to reach it (a cast is an explicit op).
 * - `matmul_f32.wgsl`, the plain register-blocked tiled kernel: every other case (f32, bf16, f16
 *   without subgroup matrices); 16-bit inputs are read through the ld_ loaders.
 * Both take any M, N, K (edges guarded), both transposes and batch broadcasting (batchA/batchB of
 * 1). Where M, N and K are multiples of the block and K-slice (and the operands can be read as
 * vectors) a call takes each kernel's ALIGNED variant, which has no bounds checks: on the H200
 * that variant is what lifts the tensor-core GEMM from ~155 to ~240 TFLOP/s and the f32 one from
 * ~29 to ~33 TFLOP/s at 8192³. Outputs of packed dtypes (bf16, f16 without shader-f16) are
 * written as f32 and packed (`viaStorable`). dev/kernels/gemm.ts holds the versions these came
 * from, with their timings.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { MatmulArgs, MatmulManyArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import type { Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { preprocess, storageType, type Variant } from '../wgsl.ts';
import { castInto, viaStorable } from './elementwise.ts';
import { matrixCode, tensorCores16 } from './subgroup_matrix.ts';
import { unpack4 } from './attention_common.ts';

export const MATMUL_FILES = ['matmul_common', 'matmul_f32', 'matmul_tc', 'matmul_rows'];

/**
 * Plain kernel geometry: a BM×BN block per workgroup, TM×TN per invocation, K-slices of BK;
 * `group` > 0 walks the blocks in groups of that many block rows (0: dispatch order); `aligned`
 * false never takes the bounds-check-free variant (dev/kernels/gemm.ts compares the two).
 */
export interface PlainTile { bm: number; bn: number; bk: number; tm: number; tn: number; group?: number; aligned?: boolean }
/**
 * Tensor-core geometry: SGM×SGN subgroups, each TM×TN tiles of 16×16, K-slices of BK, rows padded
 * by PAD halves; `prefetch` issues the next slice's global loads before the current slice's MMAs;
 * `db` double-buffers the workgroup tiles (one barrier per slice; implies the prefetch);
 * `coop` stages whole fragments (subgroupMatrixLoad/Store), only where M, N and K are multiples of
 * 16 (experimental and slower on the H200: dev/kernels/gemm.ts t12–t14; never double-buffered);
 * `group` and `aligned` as for PlainTile; `loadForm` 'arg' writes subgroupMatrixLoad/Store with the
 * layout as a bool argument (the form Dawn 0.6.2 calls deprecated) instead of a template argument.
 */
export interface TcTile {
  sgm: number; sgn: number; tm: number; tn: number; bk: number; pad: number; prefetch: boolean; coop: boolean;
  db?: boolean; group?: number; aligned?: boolean; loadForm?: 'arg' | 'template';
}

export const PLAIN_TILE: PlainTile = { bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 };
/** For problems too small to fill the GPU with 128×128 blocks. */
export const PLAIN_TILE_SMALL: PlainTile = { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 };
/** 2×2 subgroups of 4×4 tiles: 128×128 blocks, K-slices of 32, 24 KiB (gemm.ts t15/t16). */
export const TC_TILE: TcTile = { sgm: 2, sgn: 2, tm: 4, tn: 4, bk: 32, pad: 8, prefetch: true, coop: false };
/** Where TC_TILE's 24 KiB of workgroup memory is not available: K-slices of 16 (16 KiB, WebGPU's default limit). */
export const TC_TILE_SMALL: TcTile = { ...TC_TILE, bk: 16 };

const PARAMS = 'm: u32, n: u32, k: u32, strideA: u32, strideB: u32, b0: u32, y0: u32';

/** `ld_NAME(i) -> f32` for the storage of a float input (f32, f16 native or packed, bf16). */
function loader(name: string, dtype: DType, f16: boolean): string {
  switch (dtype) {
    case 'f32': return `fn ld_${name}(i: u32) -> f32 { return ${name}[i]; }`;
    case 'f16': return f16
      ? `fn ld_${name}(i: u32) -> f32 { return f32(${name}[i]); }`
      : `fn ld_${name}(i: u32) -> f32 { return unpack2x16float(${name}[i >> 1u])[i & 1u]; }`;
    case 'bf16': return `fn ld_${name}(i: u32) -> f32 { return bitcast<f32>(((${name}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }`;
    default: throw new UnsupportedError(`webgpu: matmul does not take ${dtype} inputs`);
  }
}

/**
 * Uniforms at binding 0, then a, b (read) and c (read_write). An input given as `vec` is bound
 * as an array of that vector type (no loader); otherwise by its storage type with `ld_`.
 */
function bindings(caps: GpuCaps, a: { dtype: DType; vec?: string }, b: { dtype: DType; vec?: string }, c: { dtype: DType; vec?: string }, params = ''): string {
  const lines = [`struct Params { ${PARAMS}${params} }`, '@group(0) @binding(0) var<uniform> P: Params;'];
  const input = (slot: number, name: string, x: { dtype: DType; vec?: string }) => {
    lines.push(`@group(0) @binding(${slot}) var<storage, read> ${name}: array<${x.vec ?? storageType(x.dtype, caps.f16)}>;`);
    if (!x.vec) lines.push(loader(name, x.dtype, caps.f16));
  };
  input(1, 'a', a);
  input(2, 'b', b);
  lines.push(`@group(0) @binding(3) var<storage, read_write> c: array<${c.vec ?? storageType(c.dtype, caps.f16)}>;`);
  if (!c.vec) lines.push(c.dtype === 'f32' ? 'fn st_c(i: u32, v: f32) { c[i] = v; }' : 'fn st_c(i: u32, v: f32) { c[i] = f16(v); }');
  return lines.join('\n');
}

const dt = (v: Variant, k: string) => v[k] as DType;

/**
 * matmul_rows.wgsl MANY's further weights and outputs after a, b, c: b1 and c1 at bindings 4 and 5,
 * b2 and c2 at 6 and 7, the weights read 4 values at a time as b is, `outs` the outputs' dtypes.
 */
function manyBindings(caps: GpuCaps, weight: DType, outs: readonly DType[]): string {
  return outs.flatMap((c, i) => [
    `@group(0) @binding(${4 + 2 * i}) var<storage, read> b${i + 1}: array<${vec4Type(weight)}>;`,
    loader4(`b${i + 1}`, weight),
    `@group(0) @binding(${5 + 2 * i}) var<storage, read_write> c${i + 1}: array<${storageType(c, caps.f16)}>;`,
    c === 'f32' ? `fn st_c${i + 1}(i: u32, v: f32) { c${i + 1}[i] = v; }` : `fn st_c${i + 1}(i: u32, v: f32) { c${i + 1}[i] = f16(v); }`,
  ]).join('\n');
}

/** The plain tiled kernel; its variant carries dtypes, transposes, vector flags and the tile. */
export const plainKernel: Kernel = {
  name: 'matmul_f32',
  source: (v, caps) => {
    const f16 = caps.f16 && [dt(v, 'A'), dt(v, 'B'), dt(v, 'C')].includes('f16');
    const head = (f16 ? 'enable f16;\n' : '') + bindings(caps,
      { dtype: dt(v, 'A'), vec: v.VEC_A ? 'vec4<f32>' : undefined },
      { dtype: dt(v, 'B'), vec: v.VEC_B ? 'vec4<f32>' : undefined },
      { dtype: dt(v, 'C'), vec: v.VEC_C ? 'vec4<f32>' : undefined });
    return preprocess(wgslSource('matmul_f32'), { ...v, HEADER: head, COMMON: preprocess(wgslSource('matmul_common'), v) });
  },
};

/**
 * Unrolled tensor-core code for a variant: accumulators, the MMA block, both epilogues and, for
 * COOP staging, the FA + FB fragment registers with their fetch and stage code. Loads and stores
 * take the layout as a template argument, or with LOAD_ARG the older bool argument
 * (subgroup_matrix.ts).
 */
function tcBody(v: Variant): Record<string, string> {
  const tm = v.TM as number, tn = v.TN as number, fa = v.FA as number, fb = v.FB as number;
  const L = 'subgroup_matrix_left<f16, 16, 16>', R = 'subgroup_matrix_right<f16, 16, 16>';
  const acc: string[] = [], mma: string[] = [], direct: string[] = [], scratch: string[] = [];
  const { load, store } = matrixCode(v.LOAD_ARG === true);
  const colA = v.TRANS_A === true, colB = v.TRANS_B === true;
  for (let i = 0; i < tm; i++) {
    mma.push(`      let a${i} = ${load(L, '&As', `ab + offA(am + ${16 * i}u, kk)`, colA, 'LDA')};`);
    for (let j = 0; j < tn; j++) acc.push(`  var c${i}_${j}: subgroup_matrix_result<f32, 16, 16>;`);
  }
  for (let j = 0; j < tn; j++) {
    mma.push(`      let b${j} = ${load(R, '&Bs', `bb + offB(bn + ${16 * j}u, kk)`, colB, 'LDB')};`);
    for (let i = 0; i < tm; i++) mma.push(`      c${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}, b${j}, c${i}_${j});`);
  }
  for (let i = 0; i < tm; i++) {
    for (let j = 0; j < tn; j++) {
      direct.push(`    ${store('&c', `baseC + (m0 + am + ${16 * i}u) * P.n + n0 + bn + ${16 * j}u`, `c${i}_${j}`, false, 'P.n')};`);
      scratch.push(
        `  ${store('&Cs', 'sg * 256u', `c${i}_${j}`, false, '16u')};`,
        '  workgroupBarrier();',
        `  putTile(sg, lane, lanes, baseC, m0 + am + ${16 * i}u, n0 + bn + ${16 * j}u);`,
        '  workgroupBarrier();');
    }
  }
  const frags: string[] = [], fetch: string[] = [], stage: string[] = [];
  for (let l = 0; l < fa; l++) {
    frags.push(`  var fa${l}: ${L};`);
    fetch.push(`      { let f = frag(sg * FA + ${l}u); if (k0 + f.y < P.k) { fa${l} = ${load(L, '&a', 'gA(baseA, m0, k0, f)', colA, 'ldA()')}; } else { fa${l} = ${L}(); } }`);
    stage.push(`    { let f = frag(sg * FA + ${l}u); ${store('&As', 'offA(f.x, f.y)', `fa${l}`, colA, 'LDA')}; }`);
  }
  for (let l = 0; l < fb; l++) {
    frags.push(`  var fb${l}: ${R};`);
    fetch.push(`      { let f = frag(sg * FB + ${l}u); if (k0 + f.y < P.k) { fb${l} = ${load(R, '&b', 'gB(baseB, n0, k0, f)', colB, 'ldB()')}; } else { fb${l} = ${R}(); } }`);
    stage.push(`    { let f = frag(sg * FB + ${l}u); ${store('&Bs', 'offB(f.x, f.y)', `fb${l}`, colB, 'LDB')}; }`);
  }
  return {
    ACC: acc.join('\n'), MMA: mma.join('\n'), STORE_DIRECT: direct.join('\n'), STORE_SCRATCH: scratch.join('\n'),
    FRAGS: frags.join('\n'), FETCH: fetch.join('\n'), FETCH_FIRST: `  {\n    let k0 = 0u;\n${fetch.join('\n')}\n  }`, STAGE: stage.join('\n'),
  };
}

export const tcKernel: Kernel = {
  name: 'matmul_tc',
  source: (v, caps) => {
    const head = [
      'diagnostic(off, chromium.subgroup_matrix_uniformity);',
      'enable f16;',
      'enable subgroups;',
      'enable chromium_experimental_subgroup_matrix;',
      bindings(caps,
        { dtype: 'f16', vec: v.VEC_A ? 'vec4<u32>' : 'f16' },
        { dtype: 'f16', vec: v.VEC_B ? 'vec4<u32>' : 'f16' },
        { dtype: dt(v, 'C'), vec: v.DIRECT_C ? 'f32' : v.VEC_C16 ? 'vec4<u32>' : undefined }),
      v.DIRECT_C ? 'fn st_c(i: u32, v: f32) { c[i] = v; }' : '',
    ].join('\n');
    return preprocess(wgslSource('matmul_tc'), { ...v, ...tcBody(v), HEADER: head, COMMON: preprocess(wgslSource('matmul_common'), v) });
  },
};

const cdiv = (x: number, y: number) => Math.ceil(x / y);

/**
 * Records the dispatches of one GEMM into `out`: a grid of (N blocks, M blocks, batch), split
 * into several dispatches where an axis would pass 65535 workgroups.
 */
function dispatchGrid(be: WebGpuBackend, kernel: Kernel, variant: Variant, a: GpuRef, b: GpuRef, out: GPUBuffer, args: MatmulArgs, bm: number, bn: number): void {
  const { m, n, k, batch } = args;
  const gx = cdiv(n, bn), gy = cdiv(m, bm);
  if (gx > 65535) throw new UnsupportedError(`webgpu: matmul with n=${n} needs ${gx} workgroups along N, above 65535`);
  const strideA = args.batchA === 1 ? 0 : m * k;
  const strideB = args.batchB === 1 ? 0 : k * n;
  for (let b0 = 0; b0 < batch; b0 += 65535) {
    for (let y0 = 0; y0 < gy; y0 += 65535) {
      be.rt.run({
        kernel, variant,
        uniforms: [m, n, k, strideA, strideB, b0, y0],
        buffers: [a.h.buffer, b.h.buffer, out],
        workgroups: [gx, Math.min(65535, gy - y0), Math.min(65535, batch - b0)],
      });
    }
  }
}

function checkArgs(a: GpuRef, b: GpuRef, args: MatmulArgs): void {
  const { m, n, k, batch, batchA, batchB } = args;
  if ((batchA !== 1 && batchA !== batch) || (batchB !== 1 && batchB !== batch)) {
    throw new UnsupportedError(`webgpu: matmul batchA=${batchA}, batchB=${batchB} must each be 1 or batch=${batch}`);
  }
  if (batch * Math.max(m * n, m * k, k * n) >= 2 ** 32) throw new UnsupportedError(`webgpu: matmul of ${batch}×${m}×${n}×${k} passes u32 indexing`);
  for (const x of [a, b]) if (x.dtype !== 'f32' && x.dtype !== 'f16' && x.dtype !== 'bf16') throw new UnsupportedError(`webgpu: matmul does not take ${x.dtype} inputs`);
}

/** The plain kernel; `tile` is exposed for dev/kernels/gemm.ts. */
export function matmulPlain(be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs, tile: PlainTile = pickPlainTile(args)): GpuHandle {
  checkArgs(a, b, args);
  const { m, n, k, transA, transB } = args;
  return viaStorable(be, args.outDType, args.batch * m * n, 'matmul', (buf, c) => {
    const variant: Variant = {
      A: a.dtype, B: b.dtype, C: c, TRANS_A: transA, TRANS_B: transB,
      VEC_A: a.dtype === 'f32' && (transA ? m : k) % 4 === 0,
      VEC_B: b.dtype === 'f32' && (transB ? k : n) % 4 === 0,
      VEC_C: c === 'f32' && n % 4 === 0,
      BM: tile.bm, BN: tile.bn, BK: tile.bk, TM: tile.tm, TN: tile.tn, GROUP: tile.group ?? 0,
    };
    variant.ALIGNED = tile.aligned !== false && !!variant.VEC_A && !!variant.VEC_B && !!variant.VEC_C
      && m % tile.bm === 0 && n % tile.bn === 0 && k % tile.bk === 0 && k > 0;
    dispatchGrid(be, plainKernel, variant, a, b, buf, args, tile.bm, tile.bn);
  });
}

/** Rows of A (per batch entry) up to which matmul_rows.wgsl takes a call, and the least K it takes (below it the tiled kernels lose little). */
export const ROWS_MAX = 4;
export const ROWS_MIN_K = 64;

/**
 * `fn ld4_NAME(g) -> vec4<f32>`: the g-th group of 4 values of a float input bound as vec4Type says:
 * vec4<f32>, or packed halves unpacked as the decode kernels do (attention_common.ts unpack4).
 */
function loader4(name: string, dtype: DType): string {
  if (dtype === 'f32') return `fn ld4_${name}(g: u32) -> vec4<f32> { return ${name}[g]; }`;
  if (dtype !== 'f16' && dtype !== 'bf16') throw new UnsupportedError(`webgpu: matmul does not take ${dtype} inputs`);
  return `fn ld4_${name}(g: u32) -> vec4<f32> { let w = ${name}[g]; ${unpack4(dtype)} }`;
}

/** The WGSL element type of a float input read 4 values at a time: vec4<f32>, or 4 halves in 2 words (f16 and bf16 alike). */
const vec4Type = (dtype: DType) => (dtype === 'f32' ? 'vec4<f32>' : 'vec2<u32>');

const rowsKernel: Kernel = {
  name: 'matmul_rows',
  source: (v, caps) => {
    const nw = Number(v.NW ?? 1);
    const outs = ['C', 'C1', 'C2'].slice(0, nw).map((key) => dt(v, key));
    const f16 = caps.f16 && [dt(v, 'A'), dt(v, 'B'), ...outs].includes('f16');
    const vec = v.VEC === true;
    const body = vec
      ? bindings(caps, { dtype: dt(v, 'A'), vec: vec4Type(dt(v, 'A')) }, { dtype: dt(v, 'B'), vec: vec4Type(dt(v, 'B')) }, { dtype: dt(v, 'C') }, nw > 1 ? ', o1: u32, o2: u32' : '')
        + '\n' + loader4('a', dt(v, 'A')) + '\n' + loader4('b', dt(v, 'B'))
        + (nw > 1 ? '\n' + manyBindings(caps, dt(v, 'B'), outs.slice(1)) : '')
      : bindings(caps, { dtype: dt(v, 'A') }, { dtype: dt(v, 'B') }, { dtype: dt(v, 'C') });
    const head = (f16 ? 'enable f16;\n' : '') + (v.SGR || v.SGT ? 'enable subgroups;\n' : '') + body;
    return preprocess(wgslSource('matmul_rows'), { ...v, HEADER: head });
  },
};

/**
 * How matmul_rows.wgsl runs a call (dev/kernels/gemv.ts times the forms): `form` 'vec' (B stored
 * (N, K), A not transposed, K a multiple of 4: every row of A a workgroup, 4-wide loads) or
 * 'scalar' (any call the kernel takes); `lanes` a column (VEC: a power of two from 2 to
 * ROWS_MAX_LANES, summed by subgroup shuffles where a subgroup holds them, by subgroup sums where they
 * hold whole subgroups, else in workgroup memory) and `wg` invocations a workgroup (VEC: a multiple of
 * lanes, at most the device's limit). Defaults: ROWS_DEFAULTS.
 */
export interface RowsTune { form?: 'vec' | 'scalar'; lanes?: number; wg?: number }

/**
 * The VEC form for 2 … 4 rows, 64 lanes a column and 128 invocations; the scalar form for one row.
 * H100, f32 weights (dev/kernels/gemv.ts, bench/results_gemv_h100.log): at 4 × 4096 × 4096 the vec
 * form took 0.035 ms on the GPU's clock against the scalar form's 0.094 (B read once for every row,
 * not once a row); at one row the two were level (64 lanes: 0.0127 against 0.0126 ms at 516 × 4096,
 * 0.0321 against 0.0326 at 4096 × 4096), and fewer lanes a column were slower (8 lanes: 2.8× the
 * time). 16-bit weights not yet timed.
 */
export const ROWS_DEFAULTS = { lanes: 64, wg: 128, vecFromRows: 2 } as const;

/** Whether the VEC form can take the call: B stored (N, K), A not transposed, K a multiple of 4. */
export function rowsVecEligible(args: MatmulArgs): boolean {
  return args.transB && !args.transA && args.k % 4 === 0;
}

/** Columns of C a scalar matmul_rows.wgsl workgroup takes (its NC): 4 with B stored (N, K), else 64. */
const rowsCols = (transB: boolean) => (transB ? 4 : 64);

/** Whether matmul_rows.wgsl takes the call: few rows, K long enough to split, its column blocks within one grid axis. */
export function rowsEligible(args: MatmulArgs): boolean {
  return args.m >= 1 && args.m <= ROWS_MAX && args.k >= ROWS_MIN_K && cdiv(args.n, rowsCols(args.transB)) <= 65535;
}

/** The few-rows kernel (callers check rowsEligible); exported for tests and dev/kernels. */
export function matmulRows(be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs, tune: RowsTune = {}): GpuHandle {
  checkArgs(a, b, args);
  const { m, n, k, transA, transB } = args;
  if (!rowsEligible(args)) throw new UnsupportedError(`webgpu: the few-rows matmul takes 1 … ${ROWS_MAX} rows and K ≥ ${ROWS_MIN_K}, not m=${m}, k=${k} (n=${n})`);
  const vec = (tune.form ?? (m >= ROWS_DEFAULTS.vecFromRows ? 'vec' : 'scalar')) === 'vec' && rowsVecEligible(args);
  if (tune.form === 'vec' && !vec) throw new UnsupportedError(`webgpu: the few-rows matmul's vec form needs B stored (N, K), A not transposed and K a multiple of 4; got transA=${transA}, transB=${transB}, k=${k}`);
  if (!vec) {
    // One row of C a workgroup row, rowsCols columns a workgroup.
    return viaStorable(be, args.outDType, args.batch * m * n, 'matmul', (buf, c) =>
      dispatchGrid(be, rowsKernel, { A: a.dtype, B: b.dtype, C: c, TRANS_A: transA, TRANS_B: transB }, a, b, buf, args, 1, rowsCols(transB)));
  }
  const { lanes, wg, sums } = rowsVecGeometry(be, tune);
  // Every row of A a workgroup (M ≤ 4 rows a block), wg / lanes columns a workgroup.
  return viaStorable(be, args.outDType, args.batch * m * n, 'matmul', (buf, c) =>
    dispatchGrid(be, rowsKernel, { A: a.dtype, B: b.dtype, C: c, TRANS_A: false, TRANS_B: true, VEC: true, LC: lanes, WG: wg, ...sums }, a, b, buf, args, ROWS_MAX, wg / lanes));
}

/**
 * The VEC form's lanes a column and invocations a workgroup (RowsTune, else ROWS_DEFAULTS), checked,
 * and how a column's partials are summed: SGR (subgroup shuffles: every subgroup holds whole
 * columns), SGT (a subgroup sum, then one partial a subgroup: every column holds whole subgroups),
 * else a tree in workgroup memory.
 */
function rowsVecGeometry(be: WebGpuBackend, tune: Omit<RowsTune, 'form'>): { lanes: number; wg: number; sums: { SGR: boolean; SGT: boolean } } {
  const { lanes, wg } = vecShape(be, tune);
  if (!(lanes >= 2 && lanes <= ROWS_MAX_LANES && (lanes & (lanes - 1)) === 0 && wg % lanes === 0 && wg <= be.caps.maxInvocations)) {
    throw new UnsupportedError(`webgpu: the few-rows matmul's vec form takes a power of two from 2 to ${ROWS_MAX_LANES} lanes a column and a workgroup of a multiple of them up to ${be.caps.maxInvocations}; got ${lanes} lanes, ${wg} invocations`);
  }
  const sgr = be.caps.subgroups && be.caps.subgroupMinSize >= lanes;
  const sgt = !sgr && be.caps.subgroups && be.caps.subgroupMaxSize <= lanes;
  return { lanes, wg, sums: { SGR: sgr, SGT: sgt } };
}

/** The VEC form's lanes a column and invocations a workgroup under `tune` (unchecked: rowsVecGeometry checks). */
function vecShape(be: WebGpuBackend, tune: Omit<RowsTune, 'form'>): { lanes: number; wg: number } {
  const lanes = tune.lanes ?? ROWS_DEFAULTS.lanes;
  return { lanes, wg: tune.wg ?? Math.min(be.caps.maxInvocations, Math.max(lanes, ROWS_DEFAULTS.wg)) };
}

/** Columns of C a VEC workgroup takes under `tune`. */
function columnsPerWorkgroup(be: WebGpuBackend, tune: Omit<RowsTune, 'form'>): number {
  const { lanes, wg } = vecShape(be, tune);
  return Math.max(1, Math.floor(wg / lanes));
}

/** The most lanes a column the VEC form takes. */
export const ROWS_MAX_LANES = 256;

/**
 * matmulMany's geometry where the caller names none: from K = `fromK` on, `lanes` a column summed by
 * subgroup sums (SGT) in workgroups of `wg`, four groups a lane a loop step; below it ROWS_DEFAULTS'.
 * A Spot step's selector projections (512 + 4 + 128 rows of 4096, f32) took 15.4 µs against 19.5 at 64
 * lanes in 128 (16.2 at 128 in 256), the step 0.089 against 0.093 ms at 128K keys (H100,
 * bench/spot.ts --forms, bench/results_spot_1207b_forms_h100.log). Mutable: bench/spot.ts --forms
 * sets it to time a whole step with another geometry.
 */
export const MANY_DEFAULTS: { lanes: number; wg: number; fromK: number } = { lanes: 256, wg: 256, fromK: 4096 };

/** matmulMany's default geometry at K = k on this device (MANY_DEFAULTS). */
function manyGeometry(be: WebGpuBackend, k: number): Omit<RowsTune, 'form'> {
  const { lanes, wg, fromK } = MANY_DEFAULTS;
  return k >= fromK && wg <= be.caps.maxInvocations ? { lanes, wg } : {};
}

/** The most weights Backend.matmulMany takes in one dispatch (matmul_rows.wgsl MANY). */
export const MANY_MAX = 3;

/**
 * Whether matmul_rows.wgsl MANY takes a matmulMany call: 2 … MANY_MAX weights of one dtype, each
 * (n_i, k) as a Linear stores it, few rows, K a multiple of 4 and long enough to split, the columns
 * within one grid axis at `tune`'s columns a workgroup.
 */
export function manyEligible(be: WebGpuBackend, a: GpuRef, bs: readonly GpuRef[], args: MatmulManyArgs, tune: Omit<RowsTune, 'form'>): boolean {
  const n = args.ns.reduce((x, y) => x + y, 0);
  return bs.length >= 2 && bs.length <= MANY_MAX && bs.every((b) => b.dtype === bs[0].dtype) && [a, ...bs].every((x) => x.dtype === 'f32' || x.dtype === 'f16' || x.dtype === 'bf16')
    && args.m >= 1 && args.m <= ROWS_MAX && args.k >= ROWS_MIN_K && args.k % 4 === 0
    && cdiv(n, columnsPerWorkgroup(be, tune)) <= 65535;
}

/**
 * Backend.matmulMany: one dispatch of matmul_rows.wgsl's VEC form over every weight (MANY) where it
 * takes the call (manyEligible), an output the device does not store as it is (bf16, f16 without
 * shader-f16) written in f32 and cast after; else one matmul a weight.
 */
export function matmulMany(be: WebGpuBackend, a: GpuRef, bs: readonly GpuRef[], args: MatmulManyArgs, tune: Omit<RowsTune, 'form'> = manyGeometry(be, args.k)): GpuHandle[] {
  const { m, k, ns, outDTypes } = args;
  if (!manyEligible(be, a, bs, args, tune)) {
    return bs.map((b, i) => matmul(be, a, b, { batch: 1, m, n: ns[i], k, transA: false, transB: true, batchA: 1, batchB: 1, outDType: outDTypes[i] }));
  }
  const n = ns.reduce((x, y) => x + y, 0);
  const { lanes, wg, sums } = rowsVecGeometry(be, tune);
  const stored = outDTypes.map((d) => (d === 'f32' || (d === 'f16' && be.caps.f16) ? d : 'f32'));
  const outs = bs.map((_, i) => be.alloc(stored[i], m * ns[i], 'matmulMany'));
  const nw = bs.length;
  be.rt.run({
    kernel: rowsKernel,
    variant: { A: a.dtype, B: bs[0].dtype, C: stored[0], C1: stored[1], ...(nw > 2 ? { C2: stored[2] } : {}), TRANS_A: false, TRANS_B: true, VEC: true, MANY: true, NW: nw, NW3: nw > 2, LC: lanes, WG: wg, ...sums },
    uniforms: [m, n, k, 0, 0, 0, 0, ns[0], nw > 2 ? ns[0] + ns[1] : n],
    buffers: [a.h.buffer, bs[0].h.buffer, outs[0].buffer, ...bs.slice(1).flatMap((b, i) => [b.h.buffer, outs[i + 1].buffer])],
    workgroups: [cdiv(n, wg / lanes), 1, 1],
  });
  return outs.map((h, i) => {
    if (stored[i] === outDTypes[i]) return h;
    const cast = castInto(be, h.buffer, 'f32', m * ns[i], outDTypes[i], 'matmulMany');
    be.free(h);
    return cast;
  });
}

/** 128×128 blocks when they fill the GPU, else 64×64. */
export function pickPlainTile(args: MatmulArgs): PlainTile {
  return cdiv(args.m, 128) * cdiv(args.n, 128) * args.batch >= 256 ? PLAIN_TILE : PLAIN_TILE_SMALL;
}

function tcSmem(t: TcTile): number {
  const bm = t.sgm * t.tm * 16, bn = t.sgn * t.tn * 16;
  const sa = Math.max(bm * (t.bk + t.pad), t.bk * (bm + t.pad));
  const sb = Math.max(t.bk * (bn + t.pad), bn * (t.bk + t.pad));
  return 2 * (sa + sb) * (t.db && !t.coop ? 2 : 1) + 1024 * t.sgm * t.sgn;
}

/** The largest tensor-core geometry this device's workgroup memory and invocation limits allow. */
export function pickTcTile(be: WebGpuBackend): TcTile {
  const fits = (t: TcTile) => tcSmem(t) <= be.caps.maxWorkgroupStorage && 32 * t.sgm * t.sgn <= be.caps.maxInvocations;
  return fits(TC_TILE) ? TC_TILE : TC_TILE_SMALL;
}

/** Whether the tensor-core kernel takes this call (f16 inputs, 16×16×16 f16 subgroup matrices, 32-wide subgroups). */
export function tcEligible(be: WebGpuBackend, a: GpuRef, b: GpuRef, tile: TcTile = TC_TILE_SMALL): boolean {
  if (a.dtype !== 'f16' || b.dtype !== 'f16' || !tensorCores16(be.caps)) return false;
  return tcSmem(tile) <= be.caps.maxWorkgroupStorage && 32 * tile.sgm * tile.sgn <= be.caps.maxInvocations;
}

/** The tensor-core kernel (callers check tcEligible); `tile` is exposed for dev/kernels/gemm.ts. */
export function matmulTc(be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs, tile: TcTile = pickTcTile(be)): GpuHandle {
  checkArgs(a, b, args);
  const { m, n, k, transA, transB } = args;
  const bm = tile.sgm * tile.tm * 16, bn = tile.sgn * tile.tn * 16;
  const wg = 32 * tile.sgm * tile.sgn;
  const nsg = tile.sgm * tile.sgn;
  if ((bm * tile.bk / 8) % wg !== 0 || (bn * tile.bk / 8) % wg !== 0 || tile.bk % 16 !== 0
    || (tile.coop && ((bm / 16 * tile.bk / 16) % nsg !== 0 || (bn / 16 * tile.bk / 16) % nsg !== 0))) {
    throw new UnsupportedError(`webgpu: matmul tensor-core tile ${JSON.stringify(tile)} does not divide into ${wg} invocations`);
  }
  return viaStorable(be, args.outDType, args.batch * m * n, 'matmul', (buf, c) => {
    const coop = tile.coop && m % 16 === 0 && n % 16 === 0 && k % 16 === 0;
    const nsg = tile.sgm * tile.sgn, frags = tile.bk / 16;
    const vecA = !coop && (transA ? m : k) % 8 === 0, vecB = !coop && (transB ? k : n) % 8 === 0;
    const aligned = tile.aligned !== false && vecA && vecB && m % bm === 0 && n % bn === 0 && k % tile.bk === 0 && k > 0;
    const variant: Variant = {
      C: c, TRANS_A: transA, TRANS_B: transB, COOP: coop,
      VEC_A: vecA, VEC_B: vecB, DIRECT_C: c === 'f32', ALIGNED: aligned, VEC_C16: aligned && c === 'f16',
      DB: !coop && tile.db === true, NBUF: !coop && tile.db === true ? 2 : 1, GROUP: tile.group ?? 0,
      LOAD_ARG: tile.loadForm === 'arg',
      SGM: tile.sgm, SGN: tile.sgn, TM: tile.tm, TN: tile.tn, BK: tile.bk, PAD: tile.pad, PREFETCH: tile.prefetch,
      AR: transA ? tile.bk : bm, AC: transA ? bm : tile.bk,
      BR: transB ? bn : tile.bk, BC: transB ? tile.bk : bn,
      FA: coop ? bm / 16 * frags / nsg : 0, FB: coop ? bn / 16 * frags / nsg : 0,
    };
    dispatchGrid(be, tcKernel, variant, a, b, buf, args, bm, bn);
  });
}

export function matmul(be: WebGpuBackend, a: GpuRef, b: GpuRef, args: MatmulArgs): GpuHandle {
  if (rowsEligible(args)) return matmulRows(be, a, b, args);
  return tcEligible(be, a, b) ? matmulTc(be, a, b, args) : matmulPlain(be, a, b, args);
}

export function matmulKernels(be: WebGpuBackend): Pick<KernelTable, 'matmul' | 'matmulMany'> {
  return { matmul: (a, b, args) => matmul(be, a, b, args), matmulMany: (a, bs, args) => matmulMany(be, a, bs, args) };
}
