/**
 * WebGPU's Backend.lighthouseSelect and Backend.invertRows (lighthouse.wgsl, layout_invert.wgsl),
 * checked against backend/cpu/lighthouse.ts (test/attention/lighthouse_webgpu.test.ts).
 *
 * The selection is four dispatches and no read-back: SCORES (squared token norms of q and k into
 * level 1 of two f32 score pyramids, lists × total), POOL (each coarser entry the max over its
 * window), CASCADE (one workgroup per list and tile: the coarse-to-fine cascade, its candidates in a
 * global scratch of lists × S words, so a tile's Cc coarsest candidates may be any number), PLACE
 * (one invocation per emitted entry: its place in causal order by binary searches over the other
 * levels' candidates, which are in key order within a tile). Scratch: 2·lists·total f32 and
 * lists·S i32 words.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { InvertRowsArgs, LighthouseSelectArgs } from '../../backend.ts';
import { lighthouseLayout } from '../../lighthouse_layout.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { fill } from './elementwise.ts';

export const LIGHTHOUSE_FILES = ['lighthouse', 'layout_invert'] as const;

/** Levels the uniforms' per-level table holds (a coarsest window of 2^15 tokens at p = 2). */
const MAX_LEVELS = 16;

const PARAMS = 'lists: u32, group: u32, n: u32, d: u32, padded: u32, levels: u32, pool: u32, tiles: u32, '
  + 'per_tile: u32, tile: u32, qk: u32, total: u32, gathered: u32, emitted: u32, pad0: u32, pad1: u32, '
  + `lv: array<vec4<u32>, ${MAX_LEVELS}>, lb: array<vec4<u32>, ${MAX_LEVELS}>`;

/** Invocations per workgroup: 256, or 64 on software adapters (as the row kernels, rows.ts). */
const wgSize = (be: WebGpuBackend) => (be.caps.software ? 64 : 256);

function bindings(v: Variant): Binding[] {
  const f32 = (name: string, write = false): Binding => ({ name, dtype: 'f32', write });
  const i32 = (name: string, write = false): Binding => ({ name, dtype: 'i32', write });
  if (v.SCORES) return [{ name: 'q', dtype: v.Q as DType }, { name: 'k', dtype: v.K as DType }, f32('sq', true), f32('sk', true)];
  if (v.POOL) return [f32('sq', true), f32('sk', true)];
  if (v.CASCADE) return [f32('sq'), f32('sk'), i32('cand', true)];
  return [i32('cand'), i32('rows', true)];
}

const selectKernel: Kernel = {
  name: 'lighthouse',
  source: (v, caps) => (v.SG ? 'enable subgroups;\n' : '') + preprocess(wgslSource('lighthouse'), {
    ...v,
    HEADER: header(bindings(v), caps.f16, PARAMS),
    COMMON: preprocess(wgslSource('rows_common'), v),
    SELECT_COMMON: preprocess(wgslSource('select_common'), v),
  }),
};

const invertKernel: Kernel = {
  name: 'layout_invert',
  source: (v, caps) => preprocess(wgslSource('layout_invert'), { ...v, HEADER: header([{ name: 'rows', dtype: 'i32' }, { name: 'out', dtype: 'i32', write: true }], caps.f16, 'lists: u32, m: u32, n: u32') }),
};

export function lighthouseSelect(be: WebGpuBackend, q: GpuRef, k: GpuRef, a: LighthouseSelectArgs): GpuHandle {
  const lay = lighthouseLayout(a);
  if (a.levels > MAX_LEVELS) throw new UnsupportedError(`webgpu: lighthouseSelect takes at most ${MAX_LEVELS} levels, got ${a.levels}`);
  const tileKeys = 2 ** (a.levels - 1) * a.perTile * a.pool ** (a.levels - 1);
  if (tileKeys >= 2 ** 32) throw new UnsupportedError(`webgpu: lighthouseSelect's tile-relative sort keys need 2^(L−1)·Cc·p^(L−1) < 2^32; got ${tileKeys} (L = ${a.levels}, Cc = ${a.perTile}, p = ${a.pool})`);
  const rows = be.alloc('i32', a.lists * lay.gathered, 'lighthouseSelect');
  if (a.lists * lay.gathered === 0) return rows;
  const sq = be.alloc('f32', a.lists * lay.total, 'lighthouseSelect (query scores)');
  const sk = be.alloc('f32', a.lists * lay.total, 'lighthouseSelect (key scores)');
  const cand = be.alloc('i32', a.lists * lay.gathered, 'lighthouseSelect (candidates)');
  const u = new Array<number>(16 + 8 * MAX_LEVELS).fill(0);
  [a.lists, a.group, a.n, a.d, lay.padded, a.levels, a.pool, a.tiles, a.perTile, a.tile, a.qk, lay.total, lay.gathered, lay.emitted].forEach((x, i) => { u[i] = x; });
  for (let l = 0; l < a.levels; l++) {
    u.splice(16 + 4 * l, 4, lay.offset[l], lay.count[l], lay.span[l], lay.candidates[l]);
    u[16 + 4 * MAX_LEVELS + 4 * l] = lay.candidateBase[l];
  }
  const wg = wgSize(be), sg = be.caps.subgroups;
  const run = (variant: Variant, buffers: GPUBuffer[], workgroups: [number, number]) => be.rt.run({ kernel: selectKernel, variant: { ...variant, WG: wg }, uniforms: u, buffers, workgroups });
  run({ SCORES: true, Q: q.dtype, K: k.dtype }, [q.h.buffer, k.h.buffer, sq.buffer, sk.buffer], grid(a.lists * lay.padded, wg));
  if (lay.total > lay.padded) run({ POOL: true }, [sq.buffer, sk.buffer], grid(a.lists * (lay.total - lay.padded), wg));
  run({ CASCADE: true, SG: sg }, [sq.buffer, sk.buffer, cand.buffer], grid(a.lists * a.tiles * wg, wg));
  run({ PLACE: true }, [cand.buffer, rows.buffer], grid(a.lists * lay.gathered, wg));
  for (const h of [sq, sk, cand]) be.free(h);
  return rows;
}

export function invertRows(be: WebGpuBackend, rows: GpuRef, a: InvertRowsArgs): GpuHandle {
  const out = fill(be, a.lists * a.n, a.m, 'i32');
  if (a.lists * a.m > 0) be.rt.run({ kernel: invertKernel, variant: {}, uniforms: [a.lists, a.m, a.n], buffers: [rows.h.buffer, out.buffer], workgroups: grid(a.lists * a.m, 256) });
  return out;
}

export function lighthouseKernels(be: WebGpuBackend): Pick<KernelTable, 'lighthouseSelect' | 'invertRows'> {
  return {
    lighthouseSelect: (q, k, a) => lighthouseSelect(be, q, k, a),
    invertRows: (rows, a) => invertRows(be, rows, a),
  };
}
