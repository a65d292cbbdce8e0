/**
 * WebGPU attention (Backend.attention / attentionBackward / kvWrite), checked against
 * src/backend/cpu/attention.ts by test/backend/webgpu_attention.test.ts.
 *
 * Forward, one of four kernels per call:
 * - flash-decoding (attention_decode.ts) when the query rows of one GQA group are few
 *   (group·Tq ≤ 16);
 * - `attention_tc.wgsl` (tensor cores) for f16 inputs where the device has 16×16×16 f16
 *   subgroup matrices with 32-wide subgroups, D is a multiple of 16 (≤ 256) and Tq ≥ 16: two
 *   passes over the key blocks (row maxima, then P·V with the row sums), no rescaling of the
 *   opaque accumulators (a one-pass form with a lazy rescale is experimental);
 * - `attention_blocked.wgsl` FWD otherwise where its tiles fit (blockedPlan): register-blocked
 *   flash attention in f32 arithmetic, any dtype; f32 tiles up to head dim 64 in 48 KB of workgroup
 *   memory, and with 16-bit inputs packed 16-bit tiles where f32 ones do not fit (head dim 128);
 * - `attention_plain.wgsl` FWD else: the simple tiled form (one scalar per invocation per tile cell).
 * Backward: attention_plain.wgsl DELTA (rowsum dO∘O), then DQ (over query blocks) and DKDV (over key
 * blocks, summing the query heads of a GQA group), each from attention_blocked.wgsl where its tiles
 * fit (blockedPlan, as the forward), else attention_plain.wgsl; no float atomics. Every kernel visits
 * only the key (or query) blocks inside the causal/window bound. Outputs of packed dtypes (bf16, f16
 * without shader-f16) are written as f32 and packed (`viaStorable`); statistics are f32.
 * dev/kernels/attention.ts holds the forward versions these came from, with their timings.
 */
import { UnsupportedError } from '../../../errors.ts';
import { bytesPerElement, type DType } from '../../../tensor/dtype.ts';
import type { AttentionArgs, KvWriteArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import { grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { viaStorable } from './elementwise.ts';
import { matrixCode, tensorCores16 } from './subgroup_matrix.ts';
import { PARAMS, checkGrid, dt, f32in, f32out, ins, pow2AtLeast, unpack4, uniforms } from './attention_common.ts';
import { attentionDecode, attentionDecodeMulti, decodeRows } from './attention_decode.ts';

export const ATTENTION_FILES = ['attention_common', 'attention_tiles', 'attention_plain', 'attention_blocked', 'attention_decode', 'attention_decode_step', 'attention_combine', 'attention_kv_write', 'attention_tc'];

const plainKernel: Kernel = {
  name: 'attention_plain',
  source: (v, caps) => {
    const b: Binding[] = v.DELTA ? [{ name: 'o', dtype: dt(v, 'O') }, { name: 'g', dtype: dt(v, 'G') }, f32out('delta')]
      : v.FWD ? [...ins(v, 'X', 'q', 'k', 'v'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')]
        : [...ins(v, 'X', 'q', 'k', 'v'), { name: 'g', dtype: dt(v, 'G') }, f32in('lse'), f32in('delta'),
          ...(v.DQ ? [{ name: 'dq', dtype: dt(v, 'Y'), write: true }] : [{ name: 'dk', dtype: dt(v, 'Y'), write: true }, { name: 'dv', dtype: dt(v, 'Y'), write: true }])];
    return preprocess(wgslSource('attention_plain'), {
      BQ: 16, BK: 16, DM: 16, ...v, HEADER: header(b, caps.f16, PARAMS), COMMON: wgslSource('attention_common'), TILES: preprocess(wgslSource('attention_tiles'), v),
    });
  },
};

/** `ld4_NAME(o, c)`: elements o … o+3 of a row at column c, those at columns ≥ d as zero. */
export function rowLoaders(names: readonly string[]): string {
  return names.map((n) => `fn ld4_${n}(o: u32, c: u32) -> vec4<f32> {
  if (c + 3u < P.d) { return vec4<f32>(ld_${n}(o), ld_${n}(o + 1u), ld_${n}(o + 2u), ld_${n}(o + 3u)); }
  var x = vec4<f32>(0.0);
  if (c < P.d) { x.x = ld_${n}(o); }
  if (c + 1u < P.d) { x.y = ld_${n}(o + 1u); }
  if (c + 2u < P.d) { x.z = ld_${n}(o + 2u); }
  return x;
}`).join('\n');
}

const blockedKernel: Kernel = {
  name: 'attention_blocked',
  source: (v, caps) => {
    const b: Binding[] = v.FWD ? [...ins(v, 'X', 'q', 'k', 'v'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')]
      : [...ins(v, 'X', 'q', 'k', 'v'), { name: 'g', dtype: dt(v, 'G') }, f32in('lse'), f32in('delta'),
        ...(v.DQ ? [{ name: 'dq', dtype: dt(v, 'Y'), write: true }] : [{ name: 'dk', dtype: dt(v, 'Y'), write: true }, { name: 'dv', dtype: dt(v, 'Y'), write: true }])];
    const head = [header(b, caps.f16, PARAMS), rowLoaders(v.FWD ? ['q', 'k', 'v'] : ['q', 'k', 'v', 'g']), blockedTiles(v)].join('\n');
    return preprocess(wgslSource('attention_blocked'), { ...v, HEADER: head, COMMON: wgslSource('attention_common') });
  },
};

/** blockedTileCode for a blocked variant (X, G dtypes; PX, PG packing). */
export const blockedTiles = (v: Variant) => blockedTileCode(dt(v, 'X'), !!v.PX, (v.G ?? v.X) as DType, !!v.PG);

const kvWriteKernel: Kernel = { name: 'attention_kv_write', source: () => wgslSource('attention_kv_write') };

/** Head dim rounded up to a power of two ≥ 16: the row pitch of the workgroup tiles. */
function headPitch(what: string, d: number): number {
  if (d > 256) throw new UnsupportedError(`webgpu: ${what} takes head dims up to 256, got ${d}`);
  return pow2AtLeast(d, 16);
}

/** Query and key rows per tile of the plain kernels: the largest pair whose workgroup memory fits. */
export function plainTile(caps: GpuCaps, dm: number, backward: boolean): { bq: number; bk: number } {
  for (const [bq, bk] of [[16, 16], [16, 8], [8, 8]]) {
    const words = backward ? (2 * bq + 2 * bk) * dm + 2 * bq * bk + 2 * bq : (bq + 2 * bk) * dm + bq * bk + 3 * bq;
    if (words * 4 <= caps.maxWorkgroupStorage) return { bq, bk };
  }
  throw new UnsupportedError(`webgpu: attention with head dim ${dm} needs more workgroup memory than this device's ${caps.maxWorkgroupStorage} bytes`);
}

/** A pass of the register-blocked kernels (attention_blocked.wgsl). */
export type BlockedPass = 'fwd' | 'dq' | 'dkdv';

/** Row pitch of the blocked kernels' tiles: the head dim rounded up to a power of two ≥ 32. */
export const blockedPitch = (d: number) => pow2AtLeast(d, 32);

/**
 * How a blocked pass runs for head dim d: row-threads TR (4·TR query rows per workgroup of 8·TR
 * invocations; dq and dk/dv take TR = 8), the largest whose tiles fit this device's workgroup memory
 * less `reserve` bytes, and whether the q/k/v tiles (px) and dO's (pg) are kept as packed 16-bit
 * values (only when the inputs are 16-bit and f32 tiles do not fit); tr 0 where nothing fits (then
 * the attention_plain.wgsl kernels run). `x` and `g` are the dtypes of q/k/v and of dO.
 */
export function blockedPlan(caps: GpuCaps, d: number, pass: BlockedPass, x: DType = 'f32', g: DType = x, reserve = 0): { tr: number; px: boolean; pg: boolean } {
  if (d === 0 || d > 128) return { tr: 0, px: false, pg: false };
  const dp = blockedPitch(d) / 4 + 1, bk = 32;
  const fits = (tr: number, px: boolean, pg: boolean) => {
    const bq = 4 * tr, tx = px ? 8 : 16, tg = pg ? 8 : 16;
    const bytes = pass === 'fwd' ? (bq * dp + 2 * bk * dp) * tx + (bq * (bk / 4 + 1) + bq * 2) * 16
      : pass === 'dq' ? (bq * dp + 2 * bk * dp) * tx + bq * dp * tg + bq * (bk / 4 + 1) * 16
        : (bq * dp + 2 * bk * dp) * tx + bq * dp * tg + 2 * bk * (bq / 4 + 1) * 16;
    return bytes + reserve <= caps.maxWorkgroupStorage && 8 * tr <= caps.maxInvocations;
  };
  const canX = x !== 'f32', canG = pass !== 'fwd' && g !== 'f32';
  for (const [px, pg] of [[false, false], [canX, false], [canX, canG]]) {
    for (const tr of pass === 'fwd' ? [16, 8] : [8]) if (fits(tr, px, pg)) return { tr, px, pg };
  }
  return { tr: 0, px: false, pg: false };
}

/** Row-threads of a blocked pass (blockedPlan's tr): 0 where its tiles do not fit. */
export function blockedRows(caps: GpuCaps, d: number, pass: BlockedPass, x: DType = 'f32', g: DType = x): number {
  return blockedPlan(caps, d, pass, x, g).tr;
}

/**
 * The tile element types of attention_blocked.wgsl and their load/store (TX for q/k/v of dtype x,
 * TG for dO of dtype g): vec4<f32> as is, or 4 packed 16-bit values (exact for values read from
 * that dtype).
 */
export function blockedTileCode(x: DType, px: boolean, g: DType, pg: boolean): string {
  const one = (t: string, dtype: DType, packed: boolean) => {
    if (!packed) return `alias ${t.toUpperCase()} = vec4<f32>;\nfn ${t}_ld(w: vec4<f32>) -> vec4<f32> { return w; }\nfn ${t}_st(x: vec4<f32>) -> vec4<f32> { return x; }`;
    const ld = unpack4(dtype);
    const st = dtype === 'f16' ? 'return vec2<u32>(pack2x16float(x.xy), pack2x16float(x.zw));'
      : 'let b = bitcast<vec4<u32>>(x); return vec2<u32>((b.x >> 16u) | (b.y & 0xffff0000u), (b.z >> 16u) | (b.w & 0xffff0000u));';
    return `alias ${t.toUpperCase()} = vec2<u32>;\nfn ${t}_ld(w: vec2<u32>) -> vec4<f32> { ${ld} }\nfn ${t}_st(x: vec4<f32>) -> vec2<u32> { ${st} }`;
  };
  return [one('tx', x, px), one('tg', g, pg)].join('\n');
}

/** The plain forward (any dtype); exported for tests and dev/kernels/attention.ts. */
export function attentionPlain(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs): [GpuHandle, GpuHandle] {
  const dm = headPitch('attention', a.d);
  const { bq, bk } = plainTile(be.caps, dm, false);
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, 'attention lse');
  const gx = Math.ceil(a.tq / bq);
  checkGrid('attention', gx, a.heads, a.batch);
  const out = viaStorable(be, q.dtype, rows * a.d, 'attention', (buf, y) => be.rt.run({
    kernel: plainKernel, variant: { FWD: true, X: q.dtype, Y: y, BQ: bq, BK: bk, DM: dm },
    uniforms: uniforms(a), buffers: [q.h.buffer, k.h.buffer, v.h.buffer, buf, lse.buffer], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

/**
 * The register-blocked forward (any dtype; callers check blockedRows); `tr` picks the row-threads
 * (16 or 8, default the device's choice), `pack` keeps 16-bit tiles packed even where f32 tiles
 * fit (tests). Exported for tests and dev/kernels/attention.ts.
 */
export function attentionBlocked(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, tr?: number, pack = false): [GpuHandle, GpuHandle] {
  const plan = blockedPlan(be.caps, a.d, 'fwd', q.dtype);
  tr ??= plan.tr;
  if (tr === 0 || tr > plan.tr) throw new UnsupportedError(`webgpu: the blocked attention forward does not take head dim ${a.d} with ${tr} row-threads on ${be.caps.adapterName}`);
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, 'attention lse');
  const gx = Math.ceil(a.tq / (4 * tr));
  checkGrid('attention', gx, a.heads, a.batch);
  const out = viaStorable(be, q.dtype, rows * a.d, 'attention', (buf, y) => be.rt.run({
    kernel: blockedKernel, variant: { FWD: true, X: q.dtype, Y: y, TR: tr, DM: blockedPitch(a.d), PX: plan.px || (pack && q.dtype !== 'f32') },
    uniforms: uniforms(a), buffers: [q.h.buffer, k.h.buffer, v.h.buffer, buf, lse.buffer], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

export function attention(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs): [GpuHandle, GpuHandle] {
  if (a.batch * a.heads * a.tq === 0) return [be.alloc(q.dtype, 0, 'attention'), be.alloc('f32', 0, 'attention lse')];
  if (decodeRows(be, a) > 0) return attentionDecode(be, q, k, v, a);
  if (a.tq >= 16 && tcEligible(be, q.dtype, a.d)) return attentionTc(be, q, k, v, a);
  if (blockedRows(be.caps, a.d, 'fwd', q.dtype) > 0) return attentionBlocked(be, q, k, v, a);
  return attentionPlain(be, q, k, v, a);
}

/**
 * The backward: delta, then dq and dk/dv through the blocked kernels where their tiles fit (each
 * pass on its own), else attention_plain.wgsl; `blocked: false` forces the plain kernels (tests,
 * dev/kernels/attention.ts).
 */
export function attentionBackward(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, a: AttentionArgs, blocked = true, pack = false): [GpuHandle, GpuHandle, GpuHandle] {
  const dm = headPitch('attention backward', a.d);
  const { bq, bk } = plainTile(be.caps, dm, true);
  const dqPlan = blockedPlan(be.caps, a.d, 'dq', q.dtype, g.dtype), kvPlan = blockedPlan(be.caps, a.d, 'dkdv', q.dtype, g.dtype);
  const dqBlocked = blocked && dqPlan.tr > 0, kvBlocked = blocked && kvPlan.tr > 0;
  const bdm = blockedPitch(a.d);
  const rows = a.batch * a.heads * a.tq;
  const kvSize = a.batch * a.kvHeads * a.tk * a.d;
  const u = uniforms(a);
  const delta = be.alloc('f32', rows, 'attention backward delta');
  be.rt.run({
    kernel: plainKernel, variant: { DELTA: true, O: o.dtype, G: g.dtype },
    uniforms: u, buffers: [o.h.buffer, g.h.buffer, delta.buffer], workgroups: grid(rows, 64),
  });
  const base = { X: q.dtype, G: g.dtype, BWD: true, BQ: bq, BK: bk, DM: dm };
  const inputs = [q.h.buffer, k.h.buffer, v.h.buffer, g.h.buffer, lse.h.buffer, delta.buffer];
  const bbase = { X: q.dtype, G: g.dtype, TR: 8, DM: bdm };
  // Packed tiles where the plan needs them, or everywhere with `pack` (tests).
  const packing = (p: { px: boolean; pg: boolean }) => ({ PX: p.px || (pack && q.dtype !== 'f32'), PG: p.pg || (pack && g.dtype !== 'f32') });
  const dqRows = dqBlocked ? 32 : bq, kvRows = kvBlocked ? 32 : bk;
  checkGrid('attention backward', Math.ceil(a.tq / dqRows), Math.ceil(a.tk / kvRows), a.heads, a.batch);
  const dq = viaStorable(be, q.dtype, rows * a.d, 'attention dq', (buf, y) => be.rt.run({
    kernel: dqBlocked ? blockedKernel : plainKernel, variant: dqBlocked ? { ...bbase, ...packing(dqPlan), DQ: true, Y: y } : { ...base, DQ: true, Y: y },
    uniforms: u, buffers: [...inputs, buf], workgroups: [Math.ceil(a.tq / dqRows), a.heads, a.batch],
  }));
  let dv: GpuHandle | null = null;
  const dk = viaStorable(be, k.dtype, kvSize, 'attention dk', (bufK, y) => {
    dv = viaStorable(be, v.dtype, kvSize, 'attention dv', (bufV) => be.rt.run({
      kernel: kvBlocked ? blockedKernel : plainKernel, variant: kvBlocked ? { ...bbase, ...packing(kvPlan), DKDV: true, Y: y } : { ...base, DKDV: true, Y: y },
      uniforms: u, buffers: [...inputs, bufK, bufV], workgroups: [Math.ceil(a.tk / kvRows), a.kvHeads, a.batch],
    }));
  });
  be.free(delta);
  return [dq, dk, dv!];
}

/** In place: a buffer copy per (batch, kv head) block where rows are 4-byte aligned, else attention_kv_write.wgsl. */
export function kvWrite(be: WebGpuBackend, cache: GpuRef, x: GpuRef, a: KvWriteArgs): void {
  const eb = bytesPerElement(cache.dtype);
  const block = a.n * a.d;
  const blocks = a.batch * a.kvHeads;
  if (a.n === a.tmax) {
    const bytes = Math.ceil((blocks * block * eb) / 4) * 4;
    be.rt.commandEncoder().copyBufferToBuffer(x.h.buffer, 0, cache.h.buffer, 0, bytes);
  } else if ((a.d * eb) % 4 === 0) {
    const enc = be.rt.commandEncoder();
    for (let bh = 0; bh < blocks; bh++) enc.copyBufferToBuffer(x.h.buffer, bh * block * eb, cache.h.buffer, (bh * a.tmax + a.pos) * a.d * eb, block * eb);
  } else {
    const words = (block >> 1) + 2;
    be.rt.run({
      kernel: kvWriteKernel, variant: {}, uniforms: [a.pos * a.d, a.tmax * a.d, block, words, blocks],
      buffers: [cache.h.buffer, x.h.buffer], workgroups: grid(blocks * words, 64),
    });
  }
}

// ------------------------------------------------------------------------------------ tensor cores

/** Whether the tensor-core forward takes f16 inputs of head dim d on this device. */
export function tcEligible(be: WebGpuBackend, dtype: DType, d: number): boolean {
  if (dtype !== 'f16' || !tensorCores16(be.caps)) return false;
  if (d % 16 !== 0 || d === 0 || d > 256) return false;
  return tcSmem(4, d, TC_KPAD) <= be.caps.maxWorkgroupStorage;
}

const TC_BK = 32;
/**
 * Halves of padding after each staged K/V row of the tensor-core forward. Unpadded rows of head dim
 * 128 lie 256 bytes apart, so the 16 rows of a fragment load start on the same banks: padding by 8
 * took 16K prefill on the H200 from 81.8 to 31.0 ms (dev/kernels/attention.ts t5 → t9).
 */
const TC_KPAD = 8;

/** Subgroups per workgroup of the tensor-core forward (16 query rows each): 8 where memory allows, else 4. */
function tcSubgroups(caps: GpuCaps, d: number): number {
  return tcSmem(8, d, TC_KPAD) <= caps.maxWorkgroupStorage && 256 <= caps.maxInvocations ? 8 : 4;
}

/** Workgroup bytes of the tensor-core forward: K and V blocks (rows of d + kPad halves), S and P, 1/l and α per row, FoX's c of a block. */
function tcSmem(nsg: number, d: number, kPad: number): number {
  return 2 * TC_BK * (d + kPad) * 2 + nsg * 16 * TC_BK * (4 + 2) + 2 * nsg * 16 * 4 + 4 + TC_BK * 4;
}

/**
 * Unrolled subgroup-matrix code for head dim d (no matrix lives in an indexed array): the q
 * fragments, the scores of a key block, the O accumulators, P·V, ONEPASS's rescale of O and the
 * epilogue.
 */
function tcBody(d: number, qReload: boolean, boolArg: boolean): Record<string, string> {
  const L = 'subgroup_matrix_left<f16, 16, 16>', R = 'subgroup_matrix_right<f16, 16, 16>', A = 'subgroup_matrix_result<f32, 16, 16>';
  const { load, store } = matrixCode(boolArg);
  const nd = d / 16;
  const qload: string[] = [], scores: string[] = [`    {`, `      var s0 = ${A}();`, `      var s1 = ${A}();`];
  const oinit: string[] = [], pv: string[] = [], rescale: string[] = [], epilogue: string[] = [];
  for (let i = 0; i < nd; i++) {
    const qi = load(L, '&q16', `(qrow0 + rb) * D + ${16 * i}u`, false, 'D');
    if (qReload) scores.push(`      let q${i} = ${qi};`);
    else qload.push(`  let q${i} = ${qi};`);
    scores.push(`      s0 = subgroupMatrixMultiplyAccumulate(q${i}, ${load(R, '&KV', `${16 * i}u`, true, 'KD')}, s0);`);
    scores.push(`      s1 = subgroupMatrixMultiplyAccumulate(q${i}, ${load(R, '&KV', `16u * KD + ${16 * i}u`, true, 'KD')}, s1);`);
    oinit.push(`  var o${i} = ${A}();`);
    // Tiles alternate between the two halves of the subgroup's scratch: tile i + 2 is stored only
    // after two barriers past tile i's load.
    const at = `sbase + ${256 * (i % 2)}u`;
    rescale.push(`      ${store('&Ss', at, `o${i}`, false, '16u')};`, '      workgroupBarrier();', `      scale_tile(sg, lane, ${at});`,
      '      workgroupBarrier();', `      o${i} = ${load(A, '&Ss', at, false, '16u')};`);
    epilogue.push(`  ${store('&Ss', 'sg * SP', `o${i}`, false, '16u')};`, '  workgroupBarrier();', `  put_tile(sg, lane, qrow0, rb, ${16 * i}u);`, '  workgroupBarrier();');
  }
  scores.push(`      ${store('&Ss', 'sbase', 's0', true, '16u')};`, `      ${store('&Ss', 'sbase + 256u', 's1', true, '16u')};`, '    }');
  for (let kk = 0; kk < TC_BK / 16; kk++) pv.push(`    let p${kk} = ${load(L, '&Ps', `sbase + ${256 * kk}u`, true, '16u')};`);
  for (let n = 0; n < nd; n++) {
    for (let kk = 0; kk < TC_BK / 16; kk++) {
      pv.push(`    o${n} = subgroupMatrixMultiplyAccumulate(p${kk}, ${load(R, '&KV', `BK * KD + ${16 * kk}u * KD + ${16 * n}u`, false, 'KD')}, o${n});`);
    }
  }
  return { QLOAD: qload.join('\n'), SCORES: scores.join('\n'), OINIT: oinit.join('\n'), PV: pv.join('\n'), RESCALE: rescale.join('\n'), STORE: epilogue.join('\n') };
}

export const tcKernel: Kernel = {
  name: 'attention_tc',
  source: (v) => {
    const head = [
      'diagnostic(off, chromium.subgroup_matrix_uniformity);',
      'enable f16;',
      'enable subgroups;',
      'enable chromium_experimental_subgroup_matrix;',
      `struct Params { ${PARAMS} }`,
      '@group(0) @binding(0) var<uniform> P: Params;',
      '@group(0) @binding(1) var<storage, read> q16: array<f16>;',
      '@group(0) @binding(2) var<storage, read> k8: array<vec4<u32>>;',
      '@group(0) @binding(3) var<storage, read> v8: array<vec4<u32>>;',
      '@group(0) @binding(4) var<storage, read_write> out: array<f16>;',
      '@group(0) @binding(5) var<storage, read_write> lse: array<f32>;',
      v.FOX ? '@group(0) @binding(6) var<storage, read> cg: array<f32>;' : '',
    ].join('\n');
    return preprocess(wgslSource('attention_tc'), {
      ...v, ...tcBody(v.D as number, !!v.QRELOAD, !!v.LOAD_ARG), HEADER: head, COMMON: wgslSource('attention_common'), BIAS: v.FOX ? ' + cq - Ck[c]' : '',
    });
  },
};

/**
 * Tensor-core forward variants (dev/kernels/attention.ts t3–t6): subgroups per workgroup; one
 * pass with the lazy rescale of O, or two (row maxima first); whether q fragments are loaded
 * again for every key block instead of held in registers (fewer registers, more loads); the older
 * bool-argument form of the subgroup-matrix loads (subgroup_matrix.ts); the padding of the staged
 * K/V rows in halves (TC_KPAD; 0 is the unpadded t5).
 */
export interface TcVariant { nsg: number; onePass: boolean; qReload: boolean; loadArg: boolean; kPad: number }

export function tcVariant(caps: GpuCaps, d: number): TcVariant {
  // One pass is experimental: NaNs on the H200 (attention_tc.wgsl).
  return { nsg: tcSubgroups(caps, d), onePass: false, qReload: false, loadArg: false, kPad: TC_KPAD };
}

/**
 * The tensor-core forward (callers check tcEligible); with `foxC` (f32 c per query head and key,
 * causal only) FoX's forward (fox_fpa_attention.ts). Exported for tests and dev/kernels/attention.ts.
 */
export function attentionTc(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, variant: Partial<TcVariant> = {}, foxC?: GpuRef): [GpuHandle, GpuHandle] {
  const { nsg, onePass, qReload, loadArg, kPad } = { ...tcVariant(be.caps, a.d), ...variant };
  if (!tcEligible(be, q.dtype, a.d) || a.tq < 16) throw new UnsupportedError(`webgpu: the tensor-core attention does not take ${q.dtype} inputs of head dim ${a.d} on ${be.caps.adapterName}`);
  if (tcSmem(nsg, a.d, kPad) > be.caps.maxWorkgroupStorage) throw new UnsupportedError(`webgpu: the tensor-core attention with ${nsg} subgroups and rows padded by ${kPad} halves needs ${tcSmem(nsg, a.d, kPad)} bytes of workgroup memory; ${be.caps.adapterName} has ${be.caps.maxWorkgroupStorage}`);
  const rows = a.batch * a.heads * a.tq;
  const gx = Math.ceil(a.tq / (16 * nsg));
  checkGrid('attention', gx, a.heads, a.batch);
  const out = be.alloc('f16', rows * a.d, 'attention');
  const lse = be.alloc('f32', rows, 'attention lse');
  be.rt.run({
    kernel: tcKernel, variant: { D: a.d, NSG: nsg, ONEPASS: onePass, QRELOAD: qReload, LOAD_ARG: loadArg, KPAD: kPad, FOX: !!foxC },
    uniforms: uniforms(a), buffers: [q.h.buffer, k.h.buffer, v.h.buffer, out.buffer, lse.buffer, ...(foxC ? [foxC.h.buffer] : [])], workgroups: [gx, a.heads, a.batch],
  });
  return [out, lse];
}

export function attentionKernels(be: WebGpuBackend): Pick<KernelTable, 'attention' | 'attentionMulti' | 'attentionBackward' | 'kvWrite'> {
  return {
    attention: (q, k, v, a) => attention(be, q, k, v, a),
    attentionMulti: (q, parts) => (decodeRows(be, parts[0].args) > 0 ? attentionDecodeMulti(be, q, parts) : undefined),
    attentionBackward: (q, k, v, o, lse, g, a) => attentionBackward(be, q, k, v, o, lse, g, a),
    kvWrite: (cache, x, a) => kvWrite(be, cache, x, a),
  };
}
