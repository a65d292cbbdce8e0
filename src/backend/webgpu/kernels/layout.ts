/**
 * WebGPU data-movement kernels (strided copy/assign, concat, gather/scatter-add, embedding and
 * its backward) and the in-place optimizer updates (AdamW, SGD). References: cpu/layout.ts and
 * cpu/optim.ts.
 *
 * Data movement works on raw bits (layout_copy.wgsl): one invocation writes one whole output
 * word, so every dtype moves exactly (i32 never passes through f32) and packed dtypes (bf16,
 * f16 without shader-f16: two per word; u8: four) never see two invocations share a word.
 * Where a kernel must write single elements of a packed dtype (assignStrided), it works on a
 * copy widened to one element per word and packs that afterwards. Out-of-range indices give
 * zeros on the GPU (the CPU throws): checking would need a read-back.
 */
import { UnsupportedError } from '../../../errors.ts';
import { bytesPerElement, isFloat, type DType } from '../../../tensor/dtype.ts';
import type { AdamWArgs, SGDArgs, StridedArgs } from '../../backend.ts';
import { checkStridedView } from '../../strided_view.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { f32bits, grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { coalesce, vec8 } from '../strides.ts';
import { preprocess, storesDirectly, type Variant } from '../wgsl.ts';
import { fill, kernel, viaStorable } from './elementwise.ts';

export const LAYOUT_FILES: string[] = ['layout_copy', 'layout_assign', 'layout_scatter_add', 'layout_sort', 'layout_embed_grad', 'optim_adamw', 'optim_sgd'];

/** A kernel whose bindings are written out in its .wgsl file (no generated header). */
const plain = (name: string, file: string): Kernel => ({ name, source: (v) => preprocess(wgslSource(file), v) });

const copyKernel = plain('layout_copy', 'layout_copy');
const assignKernel = plain('layout_assign', 'layout_assign');
const sortKernel = plain('layout_sort', 'layout_sort');
const headsKernel = plain('layout_embed_heads', 'layout_embed_grad');
const dt = (v: Variant, k: string) => v[k] as DType;
const scatterAddKernel = kernel('layout_scatter_add', 'layout_scatter_add', (v) => [
  { name: 'base', dtype: dt(v, 'BASE') }, { name: 'idx', dtype: 'i32' }, { name: 'src', dtype: dt(v, 'BASE') }, { name: 'y', dtype: dt(v, 'Y'), write: true },
], 'n: u32, rows: u32, m: u32, inner: u32');
const embedSumKernel = kernel('layout_embed_sum', 'layout_embed_grad', (v) => [
  { name: 'head', dtype: 'i32' }, { name: 'keys', dtype: 'i32' }, { name: 'dy', dtype: dt(v, 'DY') }, { name: 'y', dtype: dt(v, 'Y'), write: true },
], 'n: u32, c: u32, t: u32');
const adamwKernel = kernel('optim_adamw', 'optim_adamw', (v) => [
  { name: 'p', dtype: dt(v, 'P'), write: true }, { name: 'g', dtype: dt(v, 'G') }, { name: 'exp_avg', dtype: dt(v, 'M'), write: true }, { name: 'exp_avg_sq', dtype: dt(v, 'V'), write: true },
], 'n: u32, beta1: f32, beta2: f32, one_minus_beta1: f32, one_minus_beta2: f32, eps: f32, decay: f32, step_size: f32, sqrt_bias2: f32, gscale: f32');
const sgdKernel = kernel('optim_sgd', 'optim_sgd', (v) => [
  { name: 'p', dtype: dt(v, 'P'), write: true }, { name: 'g', dtype: dt(v, 'G') }, { name: 'buf', dtype: dt(v, 'B'), write: true },
], 'n: u32, lr: f32, momentum: f32, weight_decay: f32, nesterov: u32, gscale: f32');

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
/** Elements per u32 word of a dtype's storage (the byte layout equals the host's). */
const perWord = (dtype: DType) => 4 / bytesPerElement(dtype);
const WG = 256;
const SORT_BLOCK = 512;

/** Byte copy in the command stream; lengths round up to whole words (the pool's buffers are word-padded). */
function copyBytes(be: WebGpuBackend, src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, bytes: number): boolean {
  const len = Math.ceil(bytes / 4) * 4;
  if (srcOffset % 4 !== 0 || dstOffset % 4 !== 0 || srcOffset + len > src.size || dstOffset + len > dst.size) return false;
  if (len > 0) be.rt.commandEncoder().copyBufferToBuffer(src, srcOffset, dst, dstOffset, len);
  return true;
}

/** dst[e] = src[offset + Σ k_d·strides_d] on raw bits, src and dst holding sp and dp elements per word. */
function runStrided(be: WebGpuBackend, src: GPUBuffer, sp: number, dst: GPUBuffer, dp: number, shape: readonly number[], strides: readonly number[], offset: number, n: number): void {
  be.rt.run({
    kernel: copyKernel, variant: { STRIDED: true, SP: sp, DP: dp },
    uniforms: [n, shape.length, offset >>> 0, 0, ...vec8(shape, 1), ...vec8(strides, 0)],
    buffers: [src, dst], workgroups: grid(Math.ceil(n / dp), WG),
  });
}

/** Elements of r's dtype its buffer's tensor data holds (a raw ref's shape may be nominal; its bytes are not). */
const elementsOf = (r: GpuRef): number => Math.floor(r.h.bytes / bytesPerElement(r.dtype));

/** Strided gather into a new contiguous tensor: one pass over output words; a contiguous run is a buffer copy. */
export function copyStrided(be: WebGpuBackend, x: GpuRef, args: StridedArgs): GpuHandle {
  checkStridedView('copyStrided', elementsOf(x), args);
  const n = size(args.outShape);
  const out = be.alloc(x.dtype, n, 'copyStrided');
  if (n === 0) return out;
  const plan = coalesce(args.outShape, [args.strides]);
  const bpe = bytesPerElement(x.dtype);
  const contiguous = plan.shape.length === 0 || (plan.shape.length === 1 && plan.strides[0][0] === 1);
  if (contiguous && copyBytes(be, x.h.buffer, args.offset * bpe, out.buffer, 0, n * bpe)) return out;
  const per = perWord(x.dtype);
  runStrided(be, x.h.buffer, per, out.buffer, per, plan.shape, plan.strides[0], args.offset, n);
  return out;
}

/**
 * A copy of base with src written through the view: one buffer copy plus one scatter pass for
 * 32-bit dtypes, and for packed dtypes whose view is whole words (assigned as words); other packed
 * views widen base to a word per element, scatter, and pack (three passes).
 * Along a stride-0 axis the last index wins, as on the CPU; other self-overlapping views (no op
 * makes them) leave which write wins unspecified.
 */
export function assignStrided(be: WebGpuBackend, base: GpuRef, src: GpuRef, args: StridedArgs): GpuHandle {
  if (src.dtype !== base.dtype) throw new UnsupportedError(`webgpu: assignStrided of ${src.dtype} into ${base.dtype} is not supported (cast src to ${base.dtype} first)`);
  const n = size(base.shape);
  // The result holds base's shape: the view must lie within it and within base's data.
  checkStridedView('assignStrided', Math.min(n, elementsOf(base)), args, elementsOf(src));
  const m = size(args.outShape);
  const per = perWord(base.dtype);
  const plan = coalesce(args.outShape, [args.strides]);
  // Packed dtypes whose view is whole words (the last axis contiguous and a multiple of a word, every
  // other stride and the offset whole words): the same assignment on the words, no widening (which
  // doubled a 16-bit tensor's bytes, past the binding limit for Lighthouse's 1 GiB unpool gradient).
  const last = plan.shape.length - 1;
  if (per > 1 && last >= 0 && n % per === 0 && args.offset % per === 0 && plan.strides[0][last] === 1 && plan.shape[last] % per === 0
    && plan.strides[0].every((st, i) => i === last || st % per === 0)) {
    const words = (r: GpuRef, count: number): GpuRef => ({ ...r, dtype: 'i32', shape: [count] });
    return assignStrided(be, words(base, n / per), words(src, m / per), {
      outShape: plan.shape.map((d, i) => (i === last ? d / per : d)), strides: plan.strides[0].map((st, i) => (i === last ? 1 : st / per)), offset: args.offset / per,
    });
  }
  const scatter = (dst: GPUBuffer) => be.rt.run({
    kernel: assignKernel, variant: { SP: per },
    uniforms: [m, plan.shape.length, args.offset >>> 0, 0, ...vec8(plan.shape, 1), ...vec8(plan.strides[0], 0)],
    buffers: [src.h.buffer, dst], workgroups: grid(m, WG),
  });
  if (per === 1) {
    // base copied by a transfer, then the scatter over it. (A flake once put down here to SwiftShader
    // reordering the scatter's write after the copy's was a test view reaching 90 elements past its
    // buffer, into whatever lay beyond: views are bounds-checked now, strided_view.ts.)
    const out = be.alloc(base.dtype, n, 'assignStrided');
    if (out.bytes > 0) be.rt.commandEncoder().copyBufferToBuffer(base.h.buffer, 0, out.buffer, 0, Math.ceil(out.bytes / 4) * 4);
    scatter(out.buffer);
    return out;
  }
  const wide = be.alloc('i32', n, 'assignStrided (widened)');
  runStrided(be, base.h.buffer, per, wide.buffer, 1, [n], [1], 0, n);
  scatter(wide.buffer);
  const out = be.alloc(base.dtype, n, 'assignStrided');
  runStrided(be, wide.buffer, 1, out.buffer, per, [n], [1], 0, n);
  be.free(wide);
  return out;
}

/**
 * One dispatch per input, each writing its block of columns in every row (words shared with a
 * neighbouring input are read, merged and written back; dispatches run in order). With one row,
 * an input starting on a word boundary is a buffer copy (rounded up to whole words: what spills
 * into the next input's first slots is rewritten by that input, which comes later). Cost: one
 * pass over the output.
 */
export function concat(be: WebGpuBackend, xs: readonly GpuRef[], outer: number, inners: readonly number[]): GpuHandle {
  const dtype = xs[0].dtype;
  const total = inners.reduce((s, v) => s + v, 0);
  const out = be.alloc(dtype, outer * total, 'concat');
  const per = perWord(dtype);
  const bpe = bytesPerElement(dtype);
  let col = 0;
  xs.forEach((x, k) => {
    const inner = inners[k];
    if (x.dtype !== dtype) throw new UnsupportedError(`webgpu: concat of ${x.dtype} with ${dtype} is not supported (cast first)`);
    if (inner > 0 && outer > 0 && !(outer === 1 && copyBytes(be, x.h.buffer, 0, out.buffer, col * bpe, inner * bpe))) {
      const wordsPerRow = per === 1 ? inner : Math.ceil(inner / per) + 1;
      be.rt.run({
        kernel: copyKernel, variant: { CONCAT: true, SP: per, DP: per },
        uniforms: [outer, total, col, inner, wordsPerRow],
        buffers: [x.h.buffer, out.buffer], workgroups: grid(outer * wordsPerRow, WG),
      });
    }
    col += inner;
  });
  return out;
}

/** out[o,j,i] = x[o, idx[o,j,i], i]: one pass over output words; out-of-range indices give 0. */
export function gather(be: WebGpuBackend, x: GpuRef, idx: GpuRef, o: number, n: number, m: number, inner: number): GpuHandle {
  const count = o * m * inner;
  const out = be.alloc(x.dtype, count, 'gather');
  const per = perWord(x.dtype);
  be.rt.run({
    kernel: copyKernel, variant: { GATHER: true, INDEXED: true, SP: per, DP: per },
    uniforms: [count, m, inner, n], buffers: [x.h.buffer, idx.h.buffer, out.buffer], workgroups: grid(Math.ceil(count / per), WG),
  });
  return out;
}

/** out[o,j,i] = x[o, rows[⌊o/share⌋, j], i]: one pass over output words; out-of-range rows give 0. */
export function gatherRows(be: WebGpuBackend, x: GpuRef, rows: GpuRef, o: number, n: number, m: number, inner: number, share: number): GpuHandle {
  const count = o * m * inner;
  const out = be.alloc(x.dtype, count, 'gatherRows');
  const per = perWord(x.dtype);
  be.rt.run({
    kernel: copyKernel, variant: { ROWS: true, INDEXED: true, SP: per, DP: per },
    uniforms: [count, m, inner, n, share], buffers: [x.h.buffer, rows.h.buffer, out.buffer], workgroups: grid(Math.ceil(count / per), WG),
  });
  return out;
}

/**
 * base plus src added at rows idx, deterministic without atomics: each output element walks the
 * M candidates of its column in order (the reference's order, f32 accumulation), so the cost is
 * O(O·N·I·M) — fine for the small N of attention gathers, not for a vocabulary (use
 * embeddingBackward there). i32 adds in i32 (exact, wrapping; the CPU's f32 sum agrees while
 * |values| ≤ 2^24). Out-of-range indices add nothing.
 */
export function scatterAdd(be: WebGpuBackend, base: GpuRef, idx: GpuRef, src: GpuRef, o: number, n: number, m: number, inner: number): GpuHandle {
  const count = o * n * inner;
  return viaStorable(be, base.dtype, count, 'scatterAdd', (buf, y) => {
    be.rt.run({
      kernel: scatterAddKernel, variant: { BASE: base.dtype, Y: y, INT: base.dtype === 'i32' },
      uniforms: [count, n, m, inner], buffers: [base.h.buffer, idx.h.buffer, src.h.buffer, buf], workgroups: grid(count, WG),
    });
  });
}

/** Rows of table (V, C) at ids (T) → (T, C); one pass over output words, out-of-range ids give zero rows. */
export function embedding(be: WebGpuBackend, table: GpuRef, ids: GpuRef, v: number, c: number): GpuHandle {
  const count = size(ids.shape) * c;
  const out = be.alloc(table.dtype, count, 'embedding');
  const per = perWord(table.dtype);
  be.rt.run({
    kernel: copyKernel, variant: { EMBED: true, INDEXED: true, SP: per, DP: per },
    uniforms: [count, c, v, 0], buffers: [table.h.buffer, ids.h.buffer, out.buffer], workgroups: grid(Math.ceil(count / per), WG),
  });
  return out;
}

/**
 * dTable (V, C) = Σ over tokens of dy rows, deterministic without atomics: (id, token) pairs are
 * bitonic-sorted (O(T log² T) work, about log²(T/512)/2 + log(T/512) + 1 dispatches), the first
 * sorted position of each id is recorded (O(V) fill + O(T)), then each output element sums its
 * id's rows in token order (O(V·C + T·C) in all; an id repeated r times costs its C invocations
 * r steps each). Matches the CPU bit for bit in f32. Out-of-range ids are dropped.
 */
export function embeddingBackward(be: WebGpuBackend, dy: GpuRef, ids: GpuRef, v: number, c: number): GpuHandle {
  const t = size(ids.shape);
  const count = v * c;
  return viaStorable(be, dy.dtype, count, 'embeddingBackward', (buf, y) => {
    if (count === 0) return;
    const head = fill(be, v, -1, 'i32');
    const np = t <= 1 ? 1 : 2 ** Math.ceil(Math.log2(t));
    const keys = be.alloc('i32', 2 * np, 'embeddingBackward (sorted ids)');
    if (t > 0) {
      be.rt.run({ kernel: sortKernel, variant: { KEYS: true }, uniforms: [t, np, v, 0], buffers: [ids.h.buffer, keys.buffer], workgroups: grid(np, WG) });
      const blocks = grid(Math.ceil(np / SORT_BLOCK), 1);
      const block = (k: number, j: number, kEnd: number) =>
        be.rt.run({ kernel: sortKernel, variant: { BLOCK: true }, uniforms: [k, j, kEnd, np], buffers: [keys.buffer], workgroups: blocks });
      if (np >= 2) block(2, 1, Math.min(SORT_BLOCK, np));
      for (let k = 2 * SORT_BLOCK; k <= np; k *= 2) {
        for (let j = k / 2; j >= SORT_BLOCK; j /= 2) {
          be.rt.run({ kernel: sortKernel, variant: { MERGE: true }, uniforms: [k, j, k, np], buffers: [keys.buffer], workgroups: grid(np / 2, WG) });
        }
        block(k, SORT_BLOCK / 2, k);
      }
      be.rt.run({ kernel: headsKernel, variant: { HEADS: true }, uniforms: [t], buffers: [keys.buffer, head.buffer], workgroups: grid(t, WG) });
    }
    be.rt.run({
      kernel: embedSumKernel, variant: { DY: dy.dtype, Y: y },
      uniforms: [count, c, t], buffers: [head.buffer, keys.buffer, dy.h.buffer, buf], workgroups: grid(count, WG),
    });
    be.free(head);
    be.free(keys);
  });
}

function requireFloat(op: string, what: string, r: GpuRef): void {
  if (!isFloat(r.dtype)) throw new UnsupportedError(`webgpu: ${op} takes float tensors; ${what} is ${r.dtype}`);
}

/** How an optimizer kernel writes a buffer: element by element, or packed whole words. */
function writeMode(be: WebGpuBackend, key: string, dtype: DType): Variant {
  const word = !storesDirectly(dtype, be.caps.f16);
  return { [`${key}_WORD`]: word, [`${key}_PACK`]: word ? (dtype === 'bf16' ? 'pack_bf16' : 'pack_f16') : '' };
}

/** AdamW in place over param, m, v (any float dtypes; packed ones written by whole words). One pass. */
export function adamw(be: WebGpuBackend, p: GpuRef, g: GpuRef, m: GpuRef, v: GpuRef, a: AdamWArgs): void {
  for (const [what, r] of [['param', p], ['grad', g], ['m', m], ['v', v]] as const) requireFloat('adamw', what, r);
  const n = size(p.shape);
  be.rt.run({
    kernel: adamwKernel,
    variant: { P: p.dtype, G: g.dtype, M: m.dtype, V: v.dtype, ...writeMode(be, 'P', p.dtype), ...writeMode(be, 'M', m.dtype), ...writeMode(be, 'V', v.dtype) },
    uniforms: [n, ...[a.beta1, a.beta2, 1 - a.beta1, 1 - a.beta2, a.eps, 1 - a.lr * a.weightDecay, a.lr / a.bias1, Math.sqrt(a.bias2), a.gradScale].map(f32bits)],
    buffers: [p.h.buffer, g.h.buffer, m.h.buffer, v.h.buffer], workgroups: grid(Math.ceil(n / 2), WG),
  });
}

/** SGD (momentum, Nesterov, weight decay) in place over param and buf (any float dtypes). One pass. */
export function sgd(be: WebGpuBackend, p: GpuRef, g: GpuRef, buf: GpuRef, a: SGDArgs): void {
  for (const [what, r] of [['param', p], ['grad', g], ['buf', buf]] as const) requireFloat('sgd', what, r);
  const n = size(p.shape);
  be.rt.run({
    kernel: sgdKernel,
    variant: { P: p.dtype, G: g.dtype, B: buf.dtype, ...writeMode(be, 'P', p.dtype), ...writeMode(be, 'B', buf.dtype) },
    uniforms: [n, f32bits(a.lr), f32bits(a.momentum), f32bits(a.weightDecay), a.nesterov ? 1 : 0, f32bits(a.gradScale)],
    buffers: [p.h.buffer, g.h.buffer, buf.h.buffer], workgroups: grid(Math.ceil(n / 2), WG),
  });
}

export function layoutKernels(be: WebGpuBackend): Pick<KernelTable, 'copyStrided' | 'assignStrided' | 'concat' | 'gather' | 'gatherRows' | 'scatterAdd' | 'embedding' | 'embeddingBackward' | 'adamw' | 'sgd'> {
  return {
    copyStrided: (x, args) => copyStrided(be, x, args),
    assignStrided: (base, src, args) => assignStrided(be, base, src, args),
    concat: (xs, outer, inners) => concat(be, xs, outer, inners),
    gather: (x, idx, o, n, m, inner) => gather(be, x, idx, o, n, m, inner),
    gatherRows: (x, rows, o, n, m, inner, share) => gatherRows(be, x, rows, o, n, m, inner, share),
    scatterAdd: (base, idx, src, o, n, m, inner) => scatterAdd(be, base, idx, src, o, n, m, inner),
    embedding: (table, ids, v, c) => embedding(be, table, ids, v, c),
    embeddingBackward: (dy, ids, v, c) => embeddingBackward(be, dy, ids, v, c),
    adamw: (p, g, m, v, a) => adamw(be, p, g, m, v, a),
    sgd: (p, g, buf, a) => sgd(be, p, g, buf, a),
  };
}
