/**
 * WebGPU row kernels: reductions, softmax, logsumexp, RMSNorm/LayerNorm, RoPE, cross-entropy,
 * scans and sort, each over the last axis of a (rows, cols) view, checked against
 * src/backend/cpu/reduce.ts and fused.ts (test/backend/webgpu_rows.test.ts).
 *
 * Shape of the work: one workgroup (wgSize invocations) per row, striding over the columns, with
 * workgroup-memory tree reductions in f32 (rows_common.wgsl). Reduce and scan of i32/u8 inputs
 * take their INT variants instead, exact in i32 arithmetic with sums wrapping modulo 2^32 (and u8
 * results wrapping modulo 256) as the CPU reference's typed arrays. What does not fit that:
 * - reduce of rows of at most SHORT_COLS columns runs one invocation per row (the reduce over a
 *   short middle axis, a window mean, would otherwise take a workgroup per output element);
 * - reduce of few long rows splits each row over several workgroups and reduces the partials
 *   (f32, or i32 under INT) in a second dispatch (no float atomics);
 * - the norm weight gradients (sums over rows) are column sums over row blocks plus a second pass
 *   over the block partials (rows_colsum.wgsl), deterministic;
 * - RoPE and the cross-entropy backward are elementwise (one invocation per pair / logit);
 * - sort is a bitonic sort on (key, index) pairs, in workgroup memory for rows up to L slots, and
 *   for longer rows global compare-exchange passes between workgroup-memory passes.
 * Outputs of the input's dtype go through `viaStorable` (packed bf16/f16 are written as f32 and
 * packed); statistics (rstd, mean, lse, loss) are f32; shapes travel in uniforms.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { BlockListArgs, FlagsMaskArgs, NormArgs, ReduceOp, ScanOp, SelectArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { f32bits, grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { fill, viaStorable } from './elementwise.ts';

export const ROW_FILES: string[] = [
  'rows_common', 'select_common', 'rows_reduce', 'rows_softmax', 'rows_softmax_backward', 'rows_ce_backward',
  'rows_norm', 'rows_norm_backward', 'rows_colsum', 'rows_rope', 'rows_scan', 'rows_sort', 'rows_select',
];

/**
 * Invocations per workgroup (a variant constant): 256, the WebGPU minimum for
 * maxComputeInvocationsPerWorkgroup; 64 on software adapters, where SwiftShader compiles a
 * kernel with 256-wide workgroup arrays about four times slower and runs it no faster.
 */
const wgSize = (be: WebGpuBackend) => (be.caps.software ? 64 : 256);
/** Elements each invocation scans in registers per chunk (a chunk is wgSize·SCAN_K elements). */
const SCAN_K = 4;
/** Reduce splits a row over several workgroups when it has at least this many columns… */
const SPLIT_MIN_COLS = 4096;
/** …and there are fewer rows than this; the split aims at about SPLIT_GROUPS workgroups. */
const SPLIT_MAX_ROWS = 256;
const SPLIT_GROUPS = 512;
const SPLIT_MIN_SPAN = 2048;
/** Rows of at most this many columns reduce one invocation per row (rows_reduce.wgsl SHORT). */
const SHORT_COLS = 32;
/** Sort block (slots in workgroup memory) for rows of up to this many slots; see sortBlock. */
const SORT_SMALL = 512;
const SORT_SMALL_SOFTWARE = 256;

/** A row kernel: its file after the generated header and the shared helpers of rows_common. */
function rowKernel(name: string, file: string, bindings: (v: Variant) => Binding[], params: string): Kernel {
  return {
    name,
    source: (v, caps) => (v.SG ? 'enable subgroups;\n' : '') + preprocess(wgslSource(file), {
      ...v,
      HEADER: header(bindings(v), caps.f16, params),
      COMMON: preprocess(wgslSource('rows_common'), v),
      SELECT_COMMON: file === 'rows_select' ? preprocess(wgslSource('select_common'), v) : '',
    }),
  };
}

const input = (name: string, v: Variant, key: string): Binding => ({ name, dtype: v[key] as DType });
const output = (name: string, v: Variant, key: string): Binding => ({ name, dtype: v[key] as DType, write: true });
const f32out = (name: string): Binding => ({ name, dtype: 'f32', write: true });

const reduceKernel = rowKernel('rows_reduce', 'rows_reduce', (v) => [input('x', v, 'X'), output('y', v, 'Y')],
  'rows: u32, cols: u32, parts: u32, span: u32, init: f32');

const softmaxKernel = rowKernel('rows_softmax', 'rows_softmax', (v) => v.CE
  ? [input('x', v, 'X'), { name: 't', dtype: 'i32' }, f32out('loss'), f32out('lse')]
  : [input('x', v, 'X'), output('y', v, 'Y')],
'rows: u32, cols: u32, ignore: i32');

const softmaxBackwardKernel = rowKernel('rows_softmax_backward', 'rows_softmax_backward',
  (v) => [input('y', v, 'Y'), input('dy', v, 'G'), output('dx', v, 'D')], 'rows: u32, cols: u32');

const ceBackwardKernel = rowKernel('rows_ce_backward', 'rows_ce_backward', (v) => [
  input('x', v, 'X'), { name: 't', dtype: 'i32' }, input('lse', v, 'S'), input('g', v, 'G'), output('y', v, 'Y'),
], 'total: u32, v: u32, ignore: i32');

const normKernel = rowKernel('rows_norm', 'rows_norm', (v) => v.LAYER
  ? [input('x', v, 'X'), input('w', v, 'W'), input('b', v, 'B'), output('y', v, 'Y'), f32out('mean'), f32out('rstd')]
  : [input('x', v, 'X'), input('w', v, 'W'), output('y', v, 'Y'), f32out('rstd')],
'rows: u32, cols: u32, eps: f32');

const normBackwardKernel = rowKernel('rows_norm_backward', 'rows_norm_backward', (v) => v.LAYER
  ? [input('x', v, 'X'), input('w', v, 'W'), input('mean', v, 'M'), input('rstd', v, 'R'), input('dy', v, 'G'), output('dx', v, 'D')]
  : [input('x', v, 'X'), input('w', v, 'W'), input('rstd', v, 'R'), input('dy', v, 'G'), output('dx', v, 'D')],
'rows: u32, cols: u32');

const colsumKernel = rowKernel('rows_colsum', 'rows_colsum', (v) => [
  input('dy', v, 'G'),
  ...(v.PLAIN ? [] : [input('x', v, 'X')]),
  ...(v.LNW ? [input('mean', v, 'M')] : []),
  ...(v.PLAIN ? [] : [input('rstd', v, 'R')]),
  output('out', v, 'Y'),
], 'rows: u32, cols: u32, span: u32');

const ropeKernel = rowKernel('rows_rope', 'rows_rope', (v) => [
  input('x', v, 'X'), input('cos', v, 'C'), input('sin', v, 'S'), output('y', v, 'Y'),
], 'pairs: u32, t: u32, inner: u32, half: u32, sgn: f32');

const scanKernel = rowKernel('rows_scan', 'rows_scan', (v) => [
  input('x', v, 'X'), output('y', v, 'Y'), ...(v.EXTREME ? [{ name: 'idx', dtype: 'i32' as DType, write: true }] : []),
], 'rows: u32, cols: u32');

const sortKernel = rowKernel('rows_sort', 'rows_sort', (v) => {
  const scratch = (name: string): Binding => ({ name, dtype: 'i32', write: !v.STORE_OUT });
  if (v.STEP) return [scratch('tk'), scratch('ti')];
  return [
    ...(v.LOAD_X || v.STORE_OUT ? [input('x', v, 'X')] : []),
    ...(v.LOAD_X && v.STORE_OUT ? [] : [scratch('tk'), scratch('ti')]),
    ...(v.STORE_OUT ? [output('y', v, 'Y'), { name: 'idx', dtype: 'i32' as DType, write: true }] : []),
  ];
}, 'rows: u32, cols: u32, n2: u32, blk: u32, kfirst: u32, klast: u32, k: u32, j: u32, desc: u32');

interface RowDispatch {
  kernel: Kernel;
  variant: Variant;
  uniforms: readonly number[];
  buffers: readonly GPUBuffer[];
  /** One workgroup per job (row, row part, sort block) … */
  groups?: number;
  /** … or one invocation per element; a 2-D grid past 65535 workgroups either way. */
  threads?: number;
  /** … or an explicit grid. */
  workgroups?: [number, number];
  /** Invocations per workgroup where not the device's default (wgSize). */
  wg?: number;
}

/** Records a row kernel's dispatch with the device's workgroup size (or d.wg) in its variant. */
function run(be: WebGpuBackend, d: RowDispatch): void {
  const wg = d.wg ?? wgSize(be);
  const workgroups = d.workgroups ?? grid(d.groups !== undefined ? d.groups * wg : d.threads ?? 0, wg);
  be.rt.run({ kernel: d.kernel, variant: Object.assign({}, d.variant, { WG: wg }), uniforms: d.uniforms, buffers: d.buffers, workgroups });
}

/** How many workgroups reduce one row: 1 unless the rows are few and long. */
function splitParts(rows: number, cols: number): number {
  if (cols < SPLIT_MIN_COLS || rows >= SPLIT_MAX_ROWS) return 1;
  return Math.max(1, Math.min(Math.ceil(cols / SPLIT_MIN_SPAN), Math.ceil(SPLIT_GROUPS / rows)));
}

/** i32 and u8 inputs reduce and scan exactly in i32 (the INT variants of rows_reduce/rows_scan). */
const isInt = (d: DType) => d === 'i32' || d === 'u8';
/** The INT variant's flags: an f32 store target under INT is a u8 result going through viaStorable. */
const intVariant = (to: DType): Variant => ({ INT: true, U8_OUT: to === 'f32' });
/** i32 identities of the INT reduce (the f32 `init` uniform is for floats). */
const INT_INIT: Record<ReduceOp, string> = { sum: '0i', max: 'i32(-2147483647i - 1i)', min: '2147483647i' };

export function reduce(be: WebGpuBackend, x: GpuRef, op: ReduceOp, rows: number, cols: number): GpuHandle {
  const int = isInt(x.dtype);
  const init = op === 'sum' ? 0 : op === 'max' ? -Infinity : Infinity;
  const dispatch = (src: GPUBuffer, from: DType, dst: GPUBuffer, to: DType, r: number, c: number, parts: number) => {
    run(be, {
      kernel: reduceKernel,
      variant: { X: from, Y: to, SUM: op === 'sum', PICK: op, ...(int ? { ...intVariant(to), IINIT: INT_INIT[op] } : {}) },
      uniforms: [r, c, parts, Math.ceil(c / parts), int ? 0 : f32bits(init)], buffers: [src, dst], groups: r * parts,
    });
  };
  if (cols <= SHORT_COLS) {
    return viaStorable(be, x.dtype, rows, `reduce ${op}`, (buf, y) => run(be, {
      kernel: reduceKernel,
      variant: { X: x.dtype, Y: y, SUM: op === 'sum', PICK: op, SHORT: true, ...(int ? { ...intVariant(y), IINIT: INT_INIT[op] } : {}) },
      uniforms: [rows, cols, 1, cols, int ? 0 : f32bits(init)], buffers: [x.h.buffer, buf], threads: rows,
    }));
  }
  const parts = splitParts(rows, cols);
  if (parts === 1) return viaStorable(be, x.dtype, rows, `reduce ${op}`, (buf, y) => dispatch(x.h.buffer, x.dtype, buf, y, rows, cols, 1));
  const pd: DType = int ? 'i32' : 'f32';
  const partial = be.alloc(pd, rows * parts, `reduce ${op} partials`);
  dispatch(x.h.buffer, x.dtype, partial.buffer, pd, rows, cols, parts);
  const out = viaStorable(be, x.dtype, rows, `reduce ${op}`, (buf, y) => dispatch(partial.buffer, pd, buf, y, rows, parts, 1));
  be.free(partial);
  return out;
}

/** softmax (y of x's dtype, rows·cols) or logsumexp (y of x's dtype, rows): one online pass. */
function softmaxLike(be: WebGpuBackend, x: GpuRef, rows: number, cols: number, mode: 'SOFTMAX' | 'LSE'): GpuHandle {
  const n = mode === 'SOFTMAX' ? rows * cols : rows;
  return viaStorable(be, x.dtype, n, mode.toLowerCase(), (buf, y) => run(be, {
    kernel: softmaxKernel, variant: { X: x.dtype, Y: y, [mode]: true },
    uniforms: [rows, cols, 0], buffers: [x.h.buffer, buf], groups: rows,
  }));
}

export function softmaxBackward(be: WebGpuBackend, y: GpuRef, dy: GpuRef, rows: number, cols: number): GpuHandle {
  return viaStorable(be, y.dtype, rows * cols, 'softmaxBackward', (buf, d) => run(be, {
    kernel: softmaxBackwardKernel, variant: { Y: y.dtype, G: dy.dtype, D: d },
    uniforms: [rows, cols], buffers: [y.h.buffer, dy.h.buffer, buf], groups: rows,
  }));
}

export function crossEntropy(be: WebGpuBackend, logits: GpuRef, targets: GpuRef, n: number, v: number, ignoreIndex: number): [GpuHandle, GpuHandle] {
  const loss = be.alloc('f32', n, 'crossEntropy loss');
  const lse = be.alloc('f32', n, 'crossEntropy lse');
  run(be, {
    kernel: softmaxKernel, variant: { X: logits.dtype, CE: true },
    uniforms: [n, v, ignoreIndex >>> 0], buffers: [logits.h.buffer, targets.h.buffer, loss.buffer, lse.buffer], groups: n,
  });
  return [loss, lse];
}

export function crossEntropyBackward(be: WebGpuBackend, logits: GpuRef, targets: GpuRef, lse: GpuRef, dloss: GpuRef, n: number, v: number, ignoreIndex: number): GpuHandle {
  return viaStorable(be, logits.dtype, n * v, 'crossEntropyBackward', (buf, y) => run(be, {
    kernel: ceBackwardKernel, variant: { X: logits.dtype, S: lse.dtype, G: dloss.dtype, Y: y },
    uniforms: [n * v, v, ignoreIndex >>> 0],
    buffers: [logits.h.buffer, targets.h.buffer, lse.h.buffer, dloss.h.buffer, buf], threads: n * v,
  }));
}

export function rmsnorm(be: WebGpuBackend, x: GpuRef, w: GpuRef, { rows, cols, eps }: NormArgs): [GpuHandle, GpuHandle] {
  const rstd = be.alloc('f32', rows, 'rmsnorm rstd');
  const y = viaStorable(be, x.dtype, rows * cols, 'rmsnorm', (buf, yd) => run(be, {
    kernel: normKernel, variant: { X: x.dtype, W: w.dtype, Y: yd },
    uniforms: [rows, cols, f32bits(eps)], buffers: [x.h.buffer, w.h.buffer, buf, rstd.buffer], groups: rows,
  }));
  return [y, rstd];
}

export function layernorm(be: WebGpuBackend, x: GpuRef, w: GpuRef, b: GpuRef, { rows, cols, eps }: NormArgs): [GpuHandle, GpuHandle, GpuHandle] {
  const mean = be.alloc('f32', rows, 'layernorm mean');
  const rstd = be.alloc('f32', rows, 'layernorm rstd');
  const y = viaStorable(be, x.dtype, rows * cols, 'layernorm', (buf, yd) => run(be, {
    kernel: normKernel, variant: { X: x.dtype, W: w.dtype, B: b.dtype, Y: yd, LAYER: true },
    uniforms: [rows, cols, f32bits(eps)], buffers: [x.h.buffer, w.h.buffer, b.h.buffer, buf, mean.buffer, rstd.buffer], groups: rows,
  }));
  return [y, mean, rstd];
}

type ColTerm = 'RMS' | 'LNW' | 'PLAIN';

/**
 * out[c] = Σ_r term(r, c) as `outDType`: blocks of `span` rows summed per column into f32
 * partials, then the partials summed (one dispatch when there is a single block).
 * `ins` are dy, then x, mean, rstd as the term needs them (rows_colsum.wgsl).
 */
function colSums(be: WebGpuBackend, term: ColTerm, ins: readonly GpuRef[], rows: number, cols: number, outDType: DType, what: string): GpuHandle {
  if (rows === 0) return fill(be, cols, 0, outDType);
  const wg = wgSize(be);
  if (Math.ceil(cols / wg) > 65535) throw new UnsupportedError(`webgpu: ${what}: ${cols} columns exceed one dispatch (at most ${65535 * wg})`);
  const dispatch = (t: ColTerm, refs: readonly GpuRef[], dst: GPUBuffer, to: DType, r: number, span: number) => {
    const [dy, x, third, fourth] = refs;
    run(be, {
      kernel: colsumKernel,
      variant: { [t]: true, G: dy.dtype, Y: to, ...(x ? { X: x.dtype } : {}), ...(t === 'LNW' ? { M: third.dtype, R: fourth.dtype } : t === 'RMS' ? { R: third.dtype } : {}) },
      uniforms: [r, cols, span], buffers: [...refs.map((q) => q.h.buffer), dst], workgroups: [Math.ceil(cols / wg), Math.ceil(r / span)],
    });
  };
  const span = rows <= 64 ? rows : Math.max(32, Math.ceil(rows / 256));
  const blocks = Math.ceil(rows / span);
  if (blocks === 1) return viaStorable(be, outDType, cols, what, (buf, y) => dispatch(term, ins, buf, y, rows, span));
  const partial = be.alloc('f32', blocks * cols, `${what} partials`);
  dispatch(term, ins, partial.buffer, 'f32', rows, span);
  const out = viaStorable(be, outDType, cols, what, (buf, y) => dispatch('PLAIN', [{ h: partial, shape: [blocks, cols], dtype: 'f32' }], buf, y, blocks, blocks));
  be.free(partial);
  return out;
}

export function rmsnormBackward(be: WebGpuBackend, x: GpuRef, w: GpuRef, rstd: GpuRef, dy: GpuRef, { rows, cols }: NormArgs): [GpuHandle, GpuHandle] {
  const dx = viaStorable(be, x.dtype, rows * cols, 'rmsnormBackward dx', (buf, d) => run(be, {
    kernel: normBackwardKernel, variant: { X: x.dtype, W: w.dtype, R: rstd.dtype, G: dy.dtype, D: d },
    uniforms: [rows, cols], buffers: [x.h.buffer, w.h.buffer, rstd.h.buffer, dy.h.buffer, buf], groups: rows,
  }));
  return [dx, colSums(be, 'RMS', [dy, x, rstd], rows, cols, w.dtype, 'rmsnormBackward dw')];
}

export function layernormBackward(be: WebGpuBackend, x: GpuRef, w: GpuRef, mean: GpuRef, rstd: GpuRef, dy: GpuRef, { rows, cols }: NormArgs): [GpuHandle, GpuHandle, GpuHandle] {
  const dx = viaStorable(be, x.dtype, rows * cols, 'layernormBackward dx', (buf, d) => run(be, {
    kernel: normBackwardKernel, variant: { X: x.dtype, W: w.dtype, M: mean.dtype, R: rstd.dtype, G: dy.dtype, D: d, LAYER: true },
    uniforms: [rows, cols], buffers: [x.h.buffer, w.h.buffer, mean.h.buffer, rstd.h.buffer, dy.h.buffer, buf], groups: rows,
  }));
  const dw = colSums(be, 'LNW', [dy, x, mean, rstd], rows, cols, w.dtype, 'layernormBackward dw');
  const db = colSums(be, 'PLAIN', [dy], rows, cols, w.dtype, 'layernormBackward db');
  return [dx, dw, db];
}

export function rope(be: WebGpuBackend, x: GpuRef, cos: GpuRef, sin: GpuRef, o: number, t: number, inner: number, d: number, interleaved: boolean, inverse: boolean): GpuHandle {
  const pairs = (o * t * inner * d) / 2;
  return viaStorable(be, x.dtype, 2 * pairs, 'rope', (buf, y) => run(be, {
    kernel: ropeKernel, variant: { X: x.dtype, C: cos.dtype, S: sin.dtype, Y: y, INTERLEAVED: interleaved },
    uniforms: [pairs, t, inner, d / 2, f32bits(inverse ? -1 : 1)],
    buffers: [x.h.buffer, cos.h.buffer, sin.h.buffer, buf], threads: pairs,
  }));
}

export function scan(be: WebGpuBackend, x: GpuRef, op: ScanOp, rows: number, cols: number): [GpuHandle, GpuHandle | null] {
  const n = rows * cols;
  const extreme = op !== 'sum';
  const idx = extreme ? be.alloc('i32', n, `scan ${op} indices`) : null;
  const values = viaStorable(be, x.dtype, n, `scan ${op}`, (buf, y) => run(be, {
    kernel: scanKernel,
    variant: { X: x.dtype, Y: y, K: SCAN_K, EXTREME: extreme, ...(extreme ? { CMP: op === 'max' ? '>=' : '<=' } : {}), ...(isInt(x.dtype) ? intVariant(y) : {}) },
    uniforms: [rows, cols], buffers: [x.h.buffer, buf, ...(idx ? [idx.buffer] : [])], groups: rows,
  }));
  return [values, idx];
}

/**
 * Slots one workgroup sorts in workgroup memory (8 bytes each: key, index) for a row padded to
 * n2: a small block for short rows (more workgroups resident), else the largest power of two
 * the device's workgroup memory holds, up to 4096. Software adapters always get the small one:
 * SwiftShader's pipeline compile time grows with workgroup memory (about 5 s for 16 KiB).
 */
function sortBlock(be: WebGpuBackend, n2: number): number {
  if (be.caps.software) return SORT_SMALL_SOFTWARE;
  if (n2 <= SORT_SMALL) return SORT_SMALL;
  let l = 4096;
  while (l > SORT_SMALL && l * 8 > be.caps.maxWorkgroupStorage) l /= 2;
  return l;
}

export function sort(be: WebGpuBackend, x: GpuRef, rows: number, cols: number, descending: boolean): [GpuHandle, GpuHandle] {
  const n = rows * cols;
  const idx = be.alloc('i32', n, 'sort indices');
  if (n === 0) return [be.alloc(x.dtype, 0, 'sort'), idx];
  let n2 = 1;
  while (n2 < cols) n2 *= 2;
  const L = sortBlock(be, n2);
  const desc = descending ? 1 : 0;
  const uniforms = (blk: number, kfirst: number, klast: number, k = 0, j = 0) => [rows, cols, n2, blk, kfirst, klast, k, j, desc];
  if (n2 <= L) {
    const values = viaStorable(be, x.dtype, n, 'sort', (buf, y) => run(be, {
      kernel: sortKernel, variant: { X: x.dtype, Y: y, L, LOAD_X: true, STORE_OUT: true },
      uniforms: uniforms(n2, 2, n2), buffers: [x.h.buffer, buf, idx.buffer], groups: rows,
    }));
    return [values, idx];
  }
  // Rows longer than one block: bitonic sort across the (rows, n2) scratch of keys and indices.
  const tk = be.alloc('i32', rows * n2, 'sort keys');
  const ti = be.alloc('i32', rows * n2, 'sort scratch indices');
  const blocks = rows * (n2 / L);
  run(be, {
    kernel: sortKernel, variant: { X: x.dtype, L, LOAD_X: true },
    uniforms: uniforms(L, 2, L), buffers: [x.h.buffer, tk.buffer, ti.buffer], groups: blocks,
  });
  const values = viaStorable(be, x.dtype, n, 'sort', (buf, y) => {
    for (let k = 2 * L; k <= n2; k *= 2) {
      for (let j = k / 2; j >= L; j /= 2) {
        run(be, {
          kernel: sortKernel, variant: { STEP: true },
          uniforms: uniforms(L, 0, 0, k, j), buffers: [tk.buffer, ti.buffer], threads: (rows * n2) / 2,
        });
      }
      const last = k === n2;
      run(be, {
        kernel: sortKernel, variant: last ? { X: x.dtype, Y: y, L, STORE_OUT: true } : { L },
        uniforms: uniforms(L, k, k),
        buffers: last ? [x.h.buffer, tk.buffer, ti.buffer, buf, idx.buffer] : [tk.buffer, ti.buffer], groups: blocks,
      });
    }
  });
  be.free(tk);
  be.free(ti);
  return [values, idx];
}

const selectKernel = rowKernel('rows_select', 'rows_select',
  (v) => [input('s', v, 'S'), input('m', v, 'M'), { name: 'y', dtype: 'i32', write: true }, ...(v.LIST ? [{ name: 't', dtype: 'i32' as const, write: true }] : [])],
  'rows: u32, n: u32, valid: u32, low: u32, high: u32, count: u32, p: f32, fine: u32, tk: u32, kblocks: u32, kvlen: u32');

const maskTableKernel = rowKernel('rows_select_mask', 'rows_select', () => [{ name: 'x', dtype: 'i32' }, { name: 'y', dtype: 'i32', write: true }],
  'rows: u32, valid: u32, fine: u32, per: u32, tk: u32, kblocks: u32, kvlen: u32, groups: u32, segs: u32');

/** Segment ids a flagsMaskTable workgroup writes at most (the table's slices shrink with the cache). */
const MASK_TABLE_TOKENS = 4096;

/**
 * Backend.flagsMaskTable: `groups` workgroups per batch entry (rows_select.wgsl MASKTABLE), each a
 * slice of the table, so that a long cache's table is not written by one workgroup (at 128K cached
 * tokens one workgroup took 0.165 ms of a 0.9 ms Spot step on the H100, bench/results_spot_profile_h100.log).
 */
export function flagsMaskTable(be: WebGpuBackend, flags: GpuRef, a: FlagsMaskArgs): GpuHandle {
  const kb = Math.ceil(a.valid / a.per), stride = kb + 1, segments = a.segments ?? true;
  const y = be.alloc('i32', a.batch * (1 + a.kBlocks + stride + (segments ? a.tk : 0)) + 1, 'flagsMaskTable');
  const groups = Math.max(1, Math.ceil(kb / wgSize(be)), segments ? Math.ceil(a.tk / MASK_TABLE_TOKENS) : 1);
  run(be, { kernel: maskTableKernel, variant: { MASKTABLE: true }, uniforms: [a.batch, a.valid, a.fine, a.per, a.tk, a.kBlocks, a.kvLength, groups, segments ? 1 : 0], buffers: [flags.h.buffer, y.buffer], groups: a.batch * groups });
  return y;
}

/**
 * How selectOpen runs where not by default (dev/kernels/select_open.ts times the forms): `wg`, the
 * invocations of its one workgroup per row (a power of two from 32 to the device's
 * maxComputeInvocationsPerWorkgroup whose 24·wg + 1104 bytes of workgroup memory fit; default selectWg).
 */
export interface SelectTune { wg?: number }

/** Open entries an invocation holds in registers at most before selectWg takes a larger workgroup. */
const SELECT_PER = 16;

/**
 * selectOpen's default invocations for rows of `open` open entries: 512 where the device allows
 * them, 1024 where 512 would leave an invocation more than SELECT_PER entries and the device allows
 * it, else the row kernels' size. On the H100 (dev/kernels/select_open.ts,
 * bench/results_select_open_1207_h100.log, µs on the GPU's clock at 512 / 1024 invocations): 8,192
 * blocks (128K tokens) 51 / 54 under top-K 0.1 and 89 / 103 under top-p 0.9; 32,768 blocks (512K)
 * 181 / 168 and 413 / 333.
 */
export function selectWg(be: WebGpuBackend, open = 0): number {
  if (be.caps.software) return wgSize(be);
  const fits = (wg: number) => be.caps.maxInvocations >= wg && selectStorage(wg) <= be.caps.maxWorkgroupStorage;
  if (!fits(512)) return wgSize(be);
  return open > 512 * SELECT_PER && fits(1024) ? 1024 : 512;
}

/**
 * Backend.selectOpen: one workgroup per row (rows_select.wgsl SELECT; SG: subgroup sums where the
 * device has them), each invocation holding its span of the open entries in registers (PER, a power
 * of two ≥ the span), with their masses (MASS) for top-p only.
 */
export function selectOpen(be: WebGpuBackend, scores: GpuRef, mass: GpuRef, a: SelectArgs, tune: SelectTune = {}): GpuHandle {
  return selectRows(be, scores, mass, a, undefined, tune)[0];
}

/**
 * Backend.selectBlockList: selectOpen's kernel writing the fine mask table beside the flags
 * (rows_select.wgsl LIST): one dispatch where selectOpen then flagsMaskTable took two.
 */
export function selectBlockList(be: WebGpuBackend, scores: GpuRef, mass: GpuRef, a: SelectArgs, list: BlockListArgs, tune: SelectTune = {}): [GpuHandle, GpuHandle] {
  const [flags, table] = selectRows(be, scores, mass, a, list, tune);
  return [flags, table!];
}

/** selectOpen, and with `list` the table selectBlockList writes. */
function selectRows(be: WebGpuBackend, scores: GpuRef, mass: GpuRef, a: SelectArgs, list: BlockListArgs | undefined, tune: SelectTune): [GpuHandle, GpuHandle | undefined] {
  const open = Math.max(0, a.high - a.low);
  const wg = tune.wg ?? selectWg(be, open);
  if (!(wg >= 32 && (wg & (wg - 1)) === 0 && wg <= be.caps.maxInvocations && selectStorage(wg) <= be.caps.maxWorkgroupStorage)) {
    throw new UnsupportedError(`webgpu: selectOpen with ${wg} invocations a workgroup needs a power of two from 32 to ${be.caps.maxInvocations} whose ${selectStorage(wg)} bytes of workgroup memory fit the device's ${be.caps.maxWorkgroupStorage}`);
  }
  // Flags not asked for (a list whose flags nobody reads): a word to bind, none written (NOFLAGS).
  const noFlags = !!list && list.flags === false;
  const y = be.alloc('i32', noFlags ? 1 : a.rows * a.n, 'selectOpen');
  const t = list ? be.alloc('i32', a.rows * (1 + list.kBlocks + a.valid + 1) + 1, 'selectBlockList') : undefined;
  if (a.rows * a.n === 0) return [y, t];
  let per = 1;
  while (per * wg < open) per *= 2;
  run(be, {
    kernel: selectKernel, variant: { SELECT: true, MASS: a.p > 0, LOGMASS: a.p > 0 && !!a.logMass, PER: per, LIST: !!list, NOFLAGS: noFlags, S: scores.dtype, M: mass.dtype, SG: be.caps.subgroups },
    uniforms: [a.rows, a.n, a.valid, a.low, a.high, a.count, f32bits(a.p), list?.fine ?? 0, list?.tk ?? 0, list?.kBlocks ?? 0, list?.kvLength ?? 0],
    buffers: [scores.h.buffer, mass.h.buffer, y.buffer, ...(t ? [t.buffer] : [])], groups: a.rows, wg,
  });
  return [y, t];
}

/** Workgroup bytes of rows_select.wgsl SELECT at wg invocations: red and red2 (f32), part (vec4) and tot; count_search's hist, kext and pick. */
const selectStorage = (wg: number) => wg * (4 + 4 + 16) + 64 + 256 * 4 + 16;

export function rowKernels(be: WebGpuBackend): Pick<KernelTable, 'reduce' | 'softmax' | 'softmaxBackward' | 'logsumexp' | 'rmsnorm' | 'rmsnormBackward' | 'layernorm' | 'layernormBackward' | 'rope' | 'crossEntropy' | 'crossEntropyBackward' | 'scan' | 'sort' | 'selectOpen' | 'selectBlockList' | 'flagsMaskTable'> {
  return {
    reduce: (x, op, rows, cols) => reduce(be, x, op, rows, cols),
    softmax: (x, rows, cols) => softmaxLike(be, x, rows, cols, 'SOFTMAX'),
    softmaxBackward: (y, dy, rows, cols) => softmaxBackward(be, y, dy, rows, cols),
    logsumexp: (x, rows, cols) => softmaxLike(be, x, rows, cols, 'LSE'),
    rmsnorm: (x, w, args) => rmsnorm(be, x, w, args),
    rmsnormBackward: (x, w, rstd, dy, args) => rmsnormBackward(be, x, w, rstd, dy, args),
    layernorm: (x, w, b, args) => layernorm(be, x, w, b, args),
    layernormBackward: (x, w, mean, rstd, dy, args) => layernormBackward(be, x, w, mean, rstd, dy, args),
    rope: (x, cos, sin, o, t, inner, d, il, inv) => rope(be, x, cos, sin, o, t, inner, d, il, inv),
    crossEntropy: (logits, targets, n, v, ignore) => crossEntropy(be, logits, targets, n, v, ignore),
    crossEntropyBackward: (logits, targets, lse, dloss, n, v, ignore) => crossEntropyBackward(be, logits, targets, lse, dloss, n, v, ignore),
    scan: (x, op, rows, cols) => scan(be, x, op, rows, cols),
    sort: (x, rows, cols, desc) => sort(be, x, rows, cols, desc),
    selectOpen: (scores, mass, a) => selectOpen(be, scores, mass, a),
    selectBlockList: (scores, mass, a, list) => selectBlockList(be, scores, mass, a, list),
    flagsMaskTable: (flags, a) => flagsMaskTable(be, flags, a),
  };
}
