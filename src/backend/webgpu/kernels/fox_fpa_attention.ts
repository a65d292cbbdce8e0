/**
 * WebGPU FoX and FPA attention (the FoX and FPA score modifiers of Backend.attention and its backward, by way of attention_entry.ts), checked
 * against src/backend/cpu/fox_attention.ts and fpa_attention.ts by
 * test/backend/webgpu_fox_fpa.test.ts. One WGSL file, fox_fpa_attention.wgsl, in
 * attention_plain.wgsl's tiled form (f32 arithmetic over any storage dtype, no float atomics):
 * - forward: query blocks × the causal key blocks visited from the diagonal backwards; FoX adds
 *   c[p_i] − c[j] per score, FPA subtracts λ·relu(ℓ_j − M_ij) with the running-min carry of
 *   specs/fpa_depth.md §2.4;
 * - backward: DELTA, then DQ over query blocks (FoX: row sums of dS; FPA: dλ row partials and the
 *   dφ cells below) and DKDV over key blocks summing the GQA group (FoX: column sums of dS per
 *   query head; FPA: dℓ per owned column), then COMBINE (FoX: dc = rows − columns) or REDUCE (FPA).
 *
 * FPA's dφ without atomics: the DQ row sweep (the CPU reference's carry scheme) records, per key
 * block, the carry each row owes its argmin when the argmin moves; the workgroup then adds these
 * into its own (query block, t) cells, invocation t mod 64 serving target t and rows in order
 * (no two invocations share a cell, the order is fixed); REDUCE sums, per (batch, kv head, t), the
 * cells of the group's query blocks. Deterministic; it costs batch·heads·⌈tq/BQ⌉·tk·4 bytes of
 * scratch (O(T²/B) per head, as §4.2 allows) and an O(heads·⌈tq/BQ⌉·tk) reduce. Where that scratch
 * would pass the binding limit (16 heads at 32K tokens), the backward runs in groups of kv heads
 * (fpaBackwardKvHeads).
 *
 * The per-position inputs travel in one f32 buffer `ex` so that the backward passes stay within
 * 8 storage bindings: [lse | delta | c] for FoX, [lse | delta | φ | ℓ | λ] for FPA (the forward
 * binds c alone, or [φ | ℓ | λ]). Outputs of packed dtypes go through viaStorable.
 *
 * A forward of few query rows (group·Tq ≤ 16: decode) goes to fox_fpa_decode.ts instead, the keys
 * split over many workgroups and merged by attention_combine.wgsl. f16 inputs (and, in the backward,
 * dO) take the tensor-core kernels (attention_tc.ts with attention_tc_mod_fox.wgsl or
 * attention_tc_mod_fpa.wgsl, foxFpaOptions.tensorCores) for forward, DQ and DKDV, filling `aux` in
 * this file's layout (FPA's dφ cells per query block of tcDqRows() rows), so COMBINE and REDUCE
 * are shared; everything else runs here.
 *
 * FoX without a forced tile takes the register-blocked kernels of attention_blocked.wgsl (its FOX
 * variant: the bias on every score, and the dS row and column sums into the same `aux` layout, so
 * COMBINE is shared) for each pass (FWD, DQ, DKDV) whose tiles fit (attention.ts blockedPlan:
 * head dim ≤ 64 in 48 KB with f32 tiles, ≤ 128 with 16-bit inputs kept packed), as softmax
 * attention does. FPA without a forced tile takes the same
 * file's FPA variant (the [P] design of specs/fpa_depth.md §2.2, key blocks from the diagonal
 * backwards with the §2.4 carry) for each pass whose tiles fit with its extra state
 * (fpaBlockedRows: likewise). Its DQ runs the CPU reference's row sweep per 32-key
 * block (one invocation per row, the block's λ·dS·act gathered per target key in workgroup memory,
 * what a row owed an argmin of the later blocks settled when the argmin first moves inside the
 * block) and writes dλ's row partials and the dφ cells of its 32-row query block; its DKDV writes
 * dℓ per owned key. Both fill `aux` as the tiled passes do (with BQ = 32 for the cells), so REDUCE
 * is shared; the values match the tiled ones within f32 rounding, and repeat bitwise.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { FoxAttentionArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import { f32bits, grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { blockedSource, blockedTiles, rowLoaders } from './attention.ts';
import { blockedPitch, modePlan, modifierBackwardPlan, modifierForwardPlan } from './attention_plan.ts';
import { attentionTc, attentionTcBackward, tcDqRows } from './attention_tc.ts';
import { checkGrid, dt, f32in, f32out, pow2AtLeast } from './attention_common.ts';
import { viaStorable } from './elementwise.ts';
import { concat, copyStrided } from './layout.ts';
import { FOX_FPA_DECODE_FILES, foxDecode, fpaDecode } from './fox_fpa_decode.ts';

export const FOX_FPA_FILES = ['fox_fpa_attention', 'attention_common', 'attention_tiles', 'attention_blocked', ...FOX_FPA_DECODE_FILES];

const PARAMS = 'b: u32, h: u32, hkv: u32, tq: u32, tk: u32, d: u32, kvlen: u32, qoff: i32, causal: u32, window: u32, scale: f32, group: u32, nrows: u32, nkv: u32, xoff: u32';

function uniforms(a: FoxAttentionArgs, xoff: number): number[] {
  const nrows = a.batch * a.heads * a.tq, nkv = a.batch * a.kvHeads * a.tk;
  return [a.batch, a.heads, a.kvHeads, a.tq, a.tk, a.d, a.kvLength, a.qOffset >>> 0, 1, 0, f32bits(a.scale), a.heads / a.kvHeads, nrows, nkv, xoff];
}

function bindings(v: Variant): Binding[] {
  const x = dt(v, 'X');
  const qkv: Binding[] = ['q', 'k', 'v'].map((name) => ({ name, dtype: x }));
  if (v.DELTA) return [{ name: 'o', dtype: dt(v, 'O') }, { name: 'g', dtype: dt(v, 'G') }, f32out('ex')];
  if (v.REDUCE) return [f32in('aux'), f32out('dphi'), f32out('dlevel'), f32out('dlam')];
  if (v.COMBINE) return [f32in('aux'), f32out('dc')];
  if (v.FWD) return [...qkv, f32in('ex'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')];
  const outs: Binding[] = v.DQ ? [{ name: 'dq', dtype: dt(v, 'Y'), write: true }]
    : [{ name: 'dk', dtype: dt(v, 'Y'), write: true }, { name: 'dv', dtype: dt(v, 'Y'), write: true }];
  return [...qkv, { name: 'g', dtype: dt(v, 'G') }, f32in('ex'), ...outs, f32out('aux')];
}

const kernel: Kernel = {
  name: 'fox_fpa_attention',
  source: (v, caps) => preprocess(wgslSource('fox_fpa_attention'), {
    BQ: 16, BK: 16, DM: 16, ...v, HEADER: header(bindings(v), caps.f16, PARAMS), COMMON: wgslSource('attention_common'),
    TILES: preprocess(wgslSource('attention_tiles'), v),
  }),
};

/** attention_blocked.wgsl's FOX variant (FWD, DQ or DKDV); bindings as the tiled passes'. */
const blockedKernel: Kernel = {
  name: 'fox_blocked',
  source: (v, caps) => {
    const head = [header(bindings(v), caps.f16, PARAMS), rowLoaders(v.FWD ? ['q', 'k', 'v'] : ['q', 'k', 'v', 'g']), blockedTiles(v)].join('\n');
    return blockedSource({ ...v, FOX: true }, head);
  },
};

/** attention_blocked.wgsl's FPA variant (FWD, DQ or DKDV); bindings as the tiled passes'. */
const fpaBlockedKernel: Kernel = {
  name: 'fpa_blocked',
  source: (v, caps) => {
    const head = [header(bindings(v), caps.f16, PARAMS), rowLoaders(v.FWD ? ['q', 'k', 'v'] : ['q', 'k', 'v', 'g']), blockedTiles(v)].join('\n');
    return blockedSource({ ...v, FPA: true }, head);
  },
};

/**
 * `tensorCores` sends FoX's and FPA's forward and backward of f16 inputs to the tensor-core
 * kernels (attention_tc.wgsl and attention_tc_backward.wgsl with attention_tc_mod_fox.wgsl or
 * attention_tc_mod_fpa.wgsl) where they take the call (on by default: on the H200 at D = 64 FoX's
 * forward took 16K tokens from 42.4 to 15.5 ms; at D = 128 FPA's forward+backward 998.973 → 101.215
 * ms, bench/fox_fpa.ts). SwiftShader has no subgroup matrices, so only a GPU run of
 * test/backend/webgpu_modifier_tc.test.ts checks them (test/backend/webgpu_tc_emulated.test.ts
 * runs the backward's skeleton and hooks on SwiftShader with ALU stand-ins for the MMAs); false
 * keeps FoX and FPA on the blocked/plain kernels.
 */
export const foxFpaOptions = { tensorCores: true };



/** Query and key rows per tile of the tiled passes (BQ, BK). */
export interface Tile { bq: number; bk: number }

/** Query and key rows per tile: the largest pair whose workgroup memory (tiles, per-row and per-key scratch) fits. */
export function foxFpaTile(caps: GpuCaps, dm: number, backward: boolean): Tile {
  for (const [bq, bk] of [[16, 16], [16, 8], [8, 8], [8, 4], [4, 4]]) {
    const words = backward ? (2 * bq + 2 * bk) * dm + 5 * bq * bk + 7 * bq + 4 * bk + 1
      : (bq + 2 * bk) * dm + bq * bk + 4 * bq + 2 * bk;
    if (words * 4 <= caps.maxWorkgroupStorage) return { bq, bk };
  }
  throw new UnsupportedError(`webgpu: FoX/FPA attention with head dim ${dm} needs more workgroup memory than this device's ${caps.maxWorkgroupStorage} bytes`);
}

function headPitch(what: string, d: number): number {
  if (d > 256) throw new UnsupportedError(`webgpu: ${what} takes head dims up to 256, got ${d}`);
  return pow2AtLeast(d, 16);
}

/**
 * Query rows per DQ workgroup of a backward (FPA's dφ cells are per such block): 32 where the
 * blocked DQ pass takes the call (no tile forced and its tiles fit), else the tiled pass's BQ.
 */
function dqRowsOf(caps: GpuCaps, mode: Mode, a: FoxAttentionArgs, x: DType, g: DType, tile?: Tile): { blocked: boolean; rows: number; plan: { tr: number; px: boolean; pg: boolean } } {
  const plan = modePlan(caps, mode, a.d, 'dq', x, g);
  const blocked = tile === undefined && plan.tr > 0;
  return { blocked, rows: blocked ? 32 : (tile ?? foxFpaTile(caps, headPitch(`${mode}AttentionBackward`, a.d), true)).bq, plan };
}

/** The largest buffer one binding can hold on this device. */
const bindingLimit = (caps: GpuCaps) => Math.min(caps.maxBuffer, caps.maxBinding);

function checkF32(what: string, refs: Record<string, GpuRef>): void {
  for (const [name, r] of Object.entries(refs)) {
    if (r.dtype !== 'f32') throw new UnsupportedError(`webgpu: ${what} takes ${name} as f32, got ${r.dtype}`);
  }
}

/** A new f32 buffer of the given f32 tensors end to end (a null ref leaves its n words to a later pass). */
function pack(be: WebGpuBackend, parts: { ref: GpuRef | null; n: number }[], what: string): GpuHandle {
  const total = parts.reduce((s, p) => s + p.n, 0);
  const out = be.alloc('f32', Math.max(1, total), what);
  const enc = be.rt.commandEncoder();
  let at = 0;
  for (const p of parts) {
    if (p.ref && p.n > 0) enc.copyBufferToBuffer(p.ref.h.buffer, 0, out.buffer, at * 4, p.n * 4);
    at += p.n;
  }
  return out;
}

type Mode = 'fox' | 'fpa';

function forward(be: WebGpuBackend, mode: Mode, q: GpuRef, k: GpuRef, v: GpuRef, ex: GpuHandle, a: FoxAttentionArgs, tile?: Tile): [GpuHandle, GpuHandle] {
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, `${mode} attention lse`);
  if (rows === 0) return [be.alloc(q.dtype, 0, `${mode} attention`), lse];
  const dm = headPitch(`${mode}Attention`, a.d);
  const { bq, bk } = tile ?? foxFpaTile(be.caps, dm, false);
  const gx = Math.ceil(a.tq / bq);
  checkGrid(`${mode}Attention`, gx, a.heads, a.batch);
  const out = viaStorable(be, q.dtype, rows * a.d, `${mode} attention`, (buf, y) => be.rt.run({
    kernel, variant: { FWD: true, TILED: true, FOX: mode === 'fox', X: q.dtype, Y: y, BQ: bq, BK: bk, DM: dm },
    uniforms: uniforms(a, 0), buffers: [q.h.buffer, k.h.buffer, v.h.buffer, ex.buffer, buf, lse.buffer], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

/**
 * The blocked forward of FoX (callers check blockedRows > 0; ex is c) or FPA (fpaBlockedRows > 0;
 * ex is [φ | ℓ | λ]), for rows > 0.
 */
function forwardBlocked(be: WebGpuBackend, mode: Mode, q: GpuRef, k: GpuRef, v: GpuRef, ex: GpuHandle, a: FoxAttentionArgs): [GpuHandle, GpuHandle] {
  const { tr, px } = modePlan(be.caps, mode, a.d, 'fwd', q.dtype);
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, `${mode} attention lse`);
  const gx = Math.ceil(a.tq / (4 * tr));
  checkGrid(`${mode}Attention`, gx, a.heads, a.batch);
  const out = viaStorable(be, q.dtype, rows * a.d, `${mode} attention`, (buf, y) => be.rt.run({
    kernel: mode === 'fox' ? blockedKernel : fpaBlockedKernel, variant: { FWD: true, X: q.dtype, Y: y, TR: tr, DM: blockedPitch(a.d), PX: px },
    uniforms: uniforms(a, 0), buffers: [q.h.buffer, k.h.buffer, v.h.buffer, ex.buffer, buf, lse.buffer], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

/**
 * [lse | delta | extra] in one new f32 buffer, the words every backward pass of either mode reads:
 * lse and extra copied in, delta (Σ dO·O per row) written by the DELTA pass.
 */
function backwardStats(be: WebGpuBackend, mode: Mode, o: GpuRef, lse: GpuRef, g: GpuRef, extra: { ref: GpuRef | null; n: number }[], a: FoxAttentionArgs): GpuHandle {
  const rows = a.batch * a.heads * a.tq;
  const st = pack(be, [{ ref: lse, n: rows }, { ref: null, n: rows }, ...extra], `${mode}AttentionBackward stats`);
  be.rt.run({
    kernel, variant: { DELTA: true, FOX: mode === 'fox', O: o.dtype, G: g.dtype, X: o.dtype },
    uniforms: uniforms(a, 2 * rows), buffers: [o.h.buffer, g.h.buffer, st.buffer], workgroups: grid(rows, 64),
  });
  return st;
}

/**
 * DELTA, DQ and DKDV of either mode into `aux` (f32, auxSize(rows per DQ workgroup) words, zeroed
 * first); `extra` is packed behind lse and delta; without a forced `tile`, DQ and DKDV each take the
 * blocked kernel where its tiles fit (blockedRows for FoX, fpaBlockedRows for FPA). Returns dq, dk, dv, aux
 * (the caller reduces it and frees it) and the query rows per DQ workgroup (FPA's dφ cells: BQ of
 * the tiled DQ, 32 of the blocked one).
 */
function backward(be: WebGpuBackend, mode: Mode, q: GpuRef, k: GpuRef, v: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, extra: { ref: GpuRef | null; n: number }[], auxSize: (bq: number) => number, a: FoxAttentionArgs, tile?: Tile): [GpuHandle, GpuHandle, GpuHandle, GpuHandle, number] {
  const what = `${mode}AttentionBackward`;
  const dm = headPitch(what, a.d);
  const { bq, bk } = tile ?? foxFpaTile(be.caps, dm, true);
  const rows = a.batch * a.heads * a.tq;
  const kvSize = a.batch * a.kvHeads * a.tk * a.d;
  const u = uniforms(a, 2 * rows);
  const st = backwardStats(be, mode, o, lse, g, extra, a);
  const dqr = dqRowsOf(be.caps, mode, a, q.dtype, g.dtype, tile);
  const dqPlan = dqr.plan, kvPlan = modePlan(be.caps, mode, a.d, 'dkdv', q.dtype, g.dtype);
  const passes = modifierBackwardPlan(be.caps, mode, a, q.dtype, g.dtype, { tile: tile !== undefined, tensorCores: false });
  const dqBlocked = passes.dq === 'blocked', kvBlocked = passes.dkdv === 'blocked';
  const dqRows = dqr.rows, kvRows = kvBlocked ? 32 : bk;
  const auxWords = auxSize(dqRows);
  const limit = bindingLimit(be.caps);
  if (auxWords * 4 > limit) throw new UnsupportedError(`webgpu: ${what} needs a ${auxWords * 4}-byte partials buffer, above this device's ${limit}-byte binding limit`);
  const aux = be.alloc('f32', Math.max(1, auxWords), `${what} partials`);
  be.rt.commandEncoder().clearBuffer(aux.buffer);
  const base = { TILED: true, FOX: mode === 'fox', X: q.dtype, G: g.dtype, BWD: true, BQ: bq, BK: bk, DM: dm };
  const inputs = [q.h.buffer, k.h.buffer, v.h.buffer, g.h.buffer, st.buffer];
  const bbase = { X: q.dtype, G: g.dtype, TR: 8, DM: blockedPitch(a.d) };
  const bkernel = mode === 'fox' ? blockedKernel : fpaBlockedKernel;
  checkGrid(what, Math.ceil(a.tq / dqRows), Math.ceil(a.tk / kvRows), a.heads, a.batch);
  const dq = viaStorable(be, q.dtype, rows * a.d, `${mode} attention dq`, (buf, y) => be.rt.run({
    kernel: dqBlocked ? bkernel : kernel, variant: dqBlocked ? { ...bbase, PX: dqPlan.px, PG: dqPlan.pg, DQ: true, Y: y } : { ...base, DQ: true, Y: y },
    uniforms: u, buffers: [...inputs, buf, aux.buffer], workgroups: [Math.ceil(a.tq / dqRows), a.heads, a.batch],
  }));
  let dv: GpuHandle | null = null;
  const dk = viaStorable(be, k.dtype, kvSize, `${mode} attention dk`, (bufK, y) => {
    dv = viaStorable(be, v.dtype, kvSize, `${mode} attention dv`, (bufV) => be.rt.run({
      kernel: kvBlocked ? bkernel : kernel, variant: kvBlocked ? { ...bbase, PX: kvPlan.px, PG: kvPlan.pg, DKDV: true, Y: y } : { ...base, DKDV: true, Y: y },
      uniforms: u, buffers: [...inputs, bufK, bufV, aux.buffer], workgroups: [Math.ceil(a.tk / kvRows), a.kvHeads, a.batch],
    }));
  });
  be.free(st);
  return [dq, dk, dv!, aux, dqRows];
}

/**
 * The backward of either mode on the tensor cores (attention_tc_backward.wgsl with the mode's hook
 * file): [lse | delta | extra] (backwardStats) and `auxWords` zeroed words of partials (FoX: the dS
 * row and column sums; FPA: dλ's row partials, dℓ, the dφ cells), which the caller reduces and frees.
 */
function backwardTc(be: WebGpuBackend, mode: Mode, q: GpuRef, k: GpuRef, v: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, extra: { ref: GpuRef | null; n: number }[], auxWords: number, a: FoxAttentionArgs): [GpuHandle, GpuHandle, GpuHandle, GpuHandle] {
  const ex = backwardStats(be, mode, o, lse, g, extra, a);
  const aux = be.alloc('f32', auxWords, `${mode}AttentionBackward partials`);
  be.rt.commandEncoder().clearBuffer(aux.buffer);
  const [dq, dk, dv] = attentionTcBackward(be, q, k, v, g, { modifier: { kind: mode, ex, aux } }, { ...a, causal: true, window: 0 });
  be.free(ex);
  return [dq, dk, dv, aux];
}

/**
 * The four entries below run the kernels attention_plan.ts's modifierForwardPlan and
 * modifierBackwardPlan pick (a pure choice from capabilities, shapes and dtypes); an optional
 * `tile` in place of foxFpaTile's choice (tests) forces the tiled kernels.
 */
export function foxAttention(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, c: GpuRef, a: FoxAttentionArgs, tile?: Tile): [GpuHandle, GpuHandle] {
  checkF32('foxAttention', { c });
  switch (modifierForwardPlan(be.caps, 'fox', a, q.dtype, { tile: tile !== undefined, tensorCores: foxFpaOptions.tensorCores })) {
    case 'decode': return foxDecode(be, q, k, v, c, a);
    case 'tensor-cores': return attentionTc(be, q, k, v, { ...a, causal: true, window: 0 }, {}, { kind: 'fox', c });
    case 'blocked': return forwardBlocked(be, 'fox', q, k, v, c.h, a);
    case 'tiled': return forward(be, 'fox', q, k, v, c.h, a, tile);
  }
}

export function foxAttentionBackward(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, c: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, a: FoxAttentionArgs, tile?: Tile): [GpuHandle, GpuHandle, GpuHandle, GpuHandle] {
  checkF32('foxAttentionBackward', { c });
  const rows = a.batch * a.heads * a.tq, nc = a.batch * a.heads * a.tk;
  const plan = modifierBackwardPlan(be.caps, 'fox', a, q.dtype, g.dtype, { tile: tile !== undefined, tensorCores: foxFpaOptions.tensorCores });
  let dq: GpuHandle, dk: GpuHandle, dv: GpuHandle, aux: GpuHandle;
  if (plan.dq === 'tensor-cores') {
    [dq, dk, dv, aux] = backwardTc(be, 'fox', q, k, v, o, lse, g, [{ ref: c, n: nc }], rows + nc, a);
  } else {
    [dq, dk, dv, aux] = backward(be, 'fox', q, k, v, o, lse, g, [{ ref: c, n: nc }], () => rows + nc, a, tile);
  }
  const dc = be.alloc('f32', nc, 'fox attention dc');
  be.rt.run({
    kernel, variant: { COMBINE: true, FOX: true },
    uniforms: uniforms(a, 0), buffers: [aux.buffer, dc.buffer], workgroups: grid(nc, 64),
  });
  be.free(aux);
  return [dq, dk, dv, dc];
}

function fpaExtra(a: FoxAttentionArgs, phi: GpuRef, level: GpuRef, lambda: GpuRef): { ref: GpuRef; n: number }[] {
  const nkv = a.batch * a.kvHeads * a.tk;
  return [{ ref: phi, n: nkv }, { ref: level, n: nkv }, { ref: lambda, n: a.kvHeads }];
}

export function fpaAttention(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, phi: GpuRef, level: GpuRef, lambda: GpuRef, a: FoxAttentionArgs, tile?: Tile): [GpuHandle, GpuHandle] {
  checkF32('fpaAttention', { phi, level, lambda });
  const kernel = modifierForwardPlan(be.caps, 'fpa', a, q.dtype, { tile: tile !== undefined, tensorCores: foxFpaOptions.tensorCores });
  if (kernel === 'decode') return fpaDecode(be, q, k, v, phi, level, lambda, a);
  const ex = pack(be, fpaExtra(a, phi, level, lambda), 'fpa attention inputs');
  const r = kernel === 'tensor-cores' ? attentionTc(be, q, k, v, { ...a, causal: true, window: 0 }, {}, { kind: 'fpa', ex })
    : kernel === 'blocked' ? forwardBlocked(be, 'fpa', q, k, v, ex, a) : forward(be, 'fpa', q, k, v, ex, a, tile);
  be.free(ex);
  return r;
}

/** Bytes of the partials buffer (`aux`) FPA's backward needs with `bq` query rows a DQ workgroup: rows, keys and the dφ cells. */
const fpaAuxBytes = (a: FoxAttentionArgs, bq: number) =>
  4 * (a.batch * a.heads * a.tq + a.batch * a.kvHeads * a.tk + a.batch * a.heads * Math.ceil(a.tq / bq) * a.tk);

/**
 * Kv heads FPA's backward takes in one piece: all of them unless its partials buffer (its dφ cells
 * grow as heads·T²/BQ: 2.15 GB at 16 heads, 32K tokens and the blocked pass's 32 rows) passes the
 * device's binding limit, then as many as fit; 0 when not even one kv head fits. x and g: the
 * dtypes of q/k/v and of dO, which decide the DQ pass and so its rows (dqRowsOf).
 */
export function fpaBackwardKvHeads(caps: GpuCaps, a: FoxAttentionArgs, x: DType, g: DType, tile?: Tile): number {
  const need = fpaAuxBytes(a, fpaDqRows(caps, a, x, g, tile));
  const limit = bindingLimit(caps);
  return need <= limit ? a.kvHeads : Math.min(a.kvHeads, Math.floor((a.kvHeads * limit) / need));
}

/**
 * FPA's backward. Where one piece would pass the binding limit (fpaBackwardKvHeads), the kv heads
 * run in groups: each group's inputs copied out along the head axis, its gradients joined back by
 * concat. The heads are independent (a GQA group shares only its kv head's k, v, φ, ℓ and λ), so
 * the gradients are the one-piece ones.
 */
export function fpaAttentionBackward(
  be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, phi: GpuRef, level: GpuRef, lambda: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, a: FoxAttentionArgs, tile?: Tile,
): [GpuHandle, GpuHandle, GpuHandle, GpuHandle, GpuHandle, GpuHandle] {
  checkF32('fpaAttentionBackward', { phi, level, lambda });
  const per = fpaBackwardKvHeads(be.caps, a, q.dtype, g.dtype, tile);
  if (per >= a.kvHeads) return fpaBackwardAll(be, q, k, v, phi, level, lambda, o, lse, g, a, tile);
  if (per === 0) {
    throw new UnsupportedError(`webgpu: fpaAttentionBackward needs ${fpaAuxBytes({ ...a, batch: 1, heads: a.heads / a.kvHeads, kvHeads: 1 }, fpaDqRows(be.caps, a, q.dtype, g.dtype, tile))} bytes of partials for one kv head of one batch entry (${a.heads / a.kvHeads} query heads, ${a.tq}×${a.tk} tokens), above this device's ${bindingLimit(be.caps)}-byte binding limit`);
  }
  const group = a.heads / a.kvHeads;
  const qInner = a.tq * a.d, kInner = a.tk * a.d;
  // Heads [h0, h0 + n) of a (B, heads, inner) tensor as a contiguous (B, n, inner) copy.
  const slice = (x: GpuRef, heads: number, inner: number, h0: number, n: number): GpuRef =>
    ({ h: copyStrided(be, x, { outShape: [a.batch, n * inner], strides: [heads * inner, 1], offset: h0 * inner }), shape: [a.batch, n * inner], dtype: x.dtype });
  // Each group's gradients are kept until the joins (peak: twice the gradients' bytes).
  const parts: GpuHandle[][] = [];
  const sizes: number[] = [];
  try {
    for (let h0 = 0; h0 < a.kvHeads; h0 += per) {
      const n = Math.min(per, a.kvHeads - h0);
      const ins: GpuRef[] = [];
      try {
        const [qs, os, gs] = [q, o, g].map((x) => slice(x, a.heads, qInner, h0 * group, n * group));
        ins.push(qs, os, gs);
        const ls = slice(lse, a.heads, a.tq, h0 * group, n * group);
        const [ks, vs] = [k, v].map((x) => slice(x, a.kvHeads, kInner, h0, n));
        const [fs, lvs] = [phi, level].map((x) => slice(x, a.kvHeads, a.tk, h0, n));
        const lam: GpuRef = { h: copyStrided(be, lambda, { outShape: [n], strides: [1], offset: h0 }), shape: [n], dtype: 'f32' };
        ins.push(ls, ks, vs, fs, lvs, lam);
        parts.push(fpaBackwardAll(be, qs, ks, vs, fs, lvs, lam, os, ls, gs, { ...a, heads: n * group, kvHeads: n }, tile));
        sizes.push(n);
      } finally {
        for (const r of ins) be.free(r.h);
      }
    }
    // Joined along heads (outer: batch): dq by query heads, dk, dv, dφ, dℓ by kv heads, dλ alone.
    const dtypes = [q.dtype, k.dtype, v.dtype, 'f32', 'f32', 'f32'] as const;
    const join = (i: number, inner: number, outer = a.batch) =>
      concat(be, parts.map((p) => ({ h: p[i], shape: [], dtype: dtypes[i] })), outer, sizes.map((n) => n * inner));
    return [join(0, group * qInner), join(1, kInner), join(2, kInner), join(3, a.tk), join(4, a.tk), join(5, 1, 1)];
  } finally {
    for (const p of parts) for (const h of p) be.free(h);
  }
}

/** The plan of FPA's backward passes (modifierBackwardPlan with this file's options). */
const fpaBackwardPasses = (caps: GpuCaps, a: FoxAttentionArgs, x: DType, g: DType, tile?: Tile) =>
  modifierBackwardPlan(caps, 'fpa', a, x, g, { tile: tile !== undefined, tensorCores: foxFpaOptions.tensorCores });

/** Query rows per DQ workgroup of FPA's backward (its dφ cells are per such block). */
function fpaDqRows(caps: GpuCaps, a: FoxAttentionArgs, x: DType, g: DType, tile?: Tile): number {
  return fpaBackwardPasses(caps, a, x, g, tile).dq === 'tensor-cores' ? tcDqRows() : dqRowsOf(caps, 'fpa', a, x, g, tile).rows;
}

/** FPA's backward over every head at once (one partials buffer). */
function fpaBackwardAll(
  be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, phi: GpuRef, level: GpuRef, lambda: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, a: FoxAttentionArgs, tile?: Tile,
): [GpuHandle, GpuHandle, GpuHandle, GpuHandle, GpuHandle, GpuHandle] {
  const nkv = a.batch * a.kvHeads * a.tk;
  let dq: GpuHandle, dk: GpuHandle, dv: GpuHandle, aux: GpuHandle, bq: number;
  if (fpaBackwardPasses(be.caps, a, q.dtype, g.dtype, tile).dq === 'tensor-cores') {
    bq = tcDqRows();
    [dq, dk, dv, aux] = backwardTc(be, 'fpa', q, k, v, o, lse, g, fpaExtra(a, phi, level, lambda), fpaAuxBytes(a, bq) / 4, a);
  } else {
    [dq, dk, dv, aux, bq] = backward(be, 'fpa', q, k, v, o, lse, g, fpaExtra(a, phi, level, lambda), (rows) => fpaAuxBytes(a, rows) / 4, a, tile);
  }
  const dphi = be.alloc('f32', nkv, 'fpa attention dphi');
  const dlevel = be.alloc('f32', nkv, 'fpa attention dlevel');
  const dlam = be.alloc('f32', a.kvHeads, 'fpa attention dlambda');
  be.rt.run({
    kernel, variant: { REDUCE: true, FOX: false, BQ: bq },
    uniforms: uniforms(a, 0), buffers: [aux.buffer, dphi.buffer, dlevel.buffer, dlam.buffer], workgroups: grid(nkv + a.kvHeads, 64),
  });
  be.free(aux);
  return [dq, dk, dv, dphi, dlevel, dlam];
}
