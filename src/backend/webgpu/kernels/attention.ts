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
import type { AttentionArgs, KvWriteArgs, KvWriteOne } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import { grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { viaStorable } from './elementwise.ts';
import { MASK_CONSTS, MASK_PARAMS, PARAMS, checkGrid, dt, f32in, f32out, ins, maskUniforms, maskVariant, pow2AtLeast, unpack4, uniforms } from './attention_common.ts';
import { attentionDecode, attentionDecodeMulti, decodeRows } from './attention_decode.ts';
import { ATTENTION_TC_FILES, attentionTc, attentionTcBackward } from './attention_tc.ts';
import { attentionBackwardPlan, attentionForwardPlan, blockedPitch, blockedPlan, type AttentionBackwardKernel } from './attention_plan.ts';

export const ATTENTION_FILES = ['attention_common', 'attention_tiles', 'attention_plain', 'attention_blocked', 'attention_decode', 'attention_decode_step', 'attention_decode_q', 'attention_decode_lanes', 'attention_combine', 'attention_kv_write', ...ATTENTION_TC_FILES];

const plainKernel: Kernel = {
  name: 'attention_plain',
  source: (v, caps) => {
    const b: Binding[] = v.DELTA ? [{ name: 'o', dtype: dt(v, 'O') }, { name: 'g', dtype: dt(v, 'G') }, f32out('delta')]
      : v.FWD ? [...ins(v, 'X', 'q', 'k', 'v'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')]
        : [...ins(v, 'X', 'q', 'k', 'v'), { name: 'g', dtype: dt(v, 'G') }, f32in('lse'), f32in('delta'),
          ...(v.DQ ? [{ name: 'dq', dtype: dt(v, 'Y'), write: true }] : [{ name: 'dk', dtype: dt(v, 'Y'), write: true }, { name: 'dv', dtype: dt(v, 'Y'), write: true }])];
    if (v.MASK) b.push({ name: 'mask', dtype: 'i32' });
    return maskedSource('attention_plain', v, header(b, caps.f16, v.MASK ? `${PARAMS}, ${MASK_PARAMS}` : PARAMS), { BQ: 16, BK: 16, DM: 16, TILES: preprocess(wgslSource('attention_tiles'), v) });
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

/**
 * An ALU attention kernel's WGSL (attention_plain or attention_blocked) for variant v after `head`
 * (its generated header), `defaults` under the variant: with MASK the block-mask helpers
 * (attention_mask.wgsl) and, with SEG, the pair predicate of segments.
 */
function maskedSource(file: string, v: Variant, head: string, defaults: Variant = {}): string {
  return preprocess(wgslSource(file), {
    ...defaults, ...v, HEADER: v.MASK ? `${head}\n${MASK_CONSTS}` : head, COMMON: wgslSource('attention_common'),
    MASKING: v.MASK ? preprocess(wgslSource('attention_mask'), v) : '', VISIBLE: v.SEG ? 'pair_visible' : 'visible',
  });
}

/** attention_blocked.wgsl for variant v after `head`; also the FoX and FPA variants' source (fox_fpa_attention.ts), which take no mask. */
export const blockedSource = (v: Variant, head: string) => maskedSource('attention_blocked', v, head);

const blockedKernel: Kernel = {
  name: 'attention_blocked',
  source: (v, caps) => {
    const b: Binding[] = v.FWD ? [...ins(v, 'X', 'q', 'k', 'v'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')]
      : [...ins(v, 'X', 'q', 'k', 'v'), { name: 'g', dtype: dt(v, 'G') }, f32in('lse'), f32in('delta'),
        ...(v.DQ ? [{ name: 'dq', dtype: dt(v, 'Y'), write: true }] : [{ name: 'dk', dtype: dt(v, 'Y'), write: true }, { name: 'dv', dtype: dt(v, 'Y'), write: true }])];
    if (v.MASK) b.push({ name: 'mask', dtype: 'i32' });
    const head = [header(b, caps.f16, v.MASK ? `${PARAMS}, ${MASK_PARAMS}` : PARAMS), rowLoaders(v.FWD ? ['q', 'k', 'v'] : ['q', 'k', 'v', 'g']), blockedTiles(v)].join('\n');
    return blockedSource(v, head);
  },
};

/** blockedTileCode for a blocked variant (X, G dtypes; PX, PG packing). */
export const blockedTiles = (v: Variant) => blockedTileCode(dt(v, 'X'), !!v.PX, (v.G ?? v.X) as DType, !!v.PG);

const kvWriteKernel: Kernel = { name: 'attention_kv_write', source: (v) => preprocess(wgslSource('attention_kv_write'), v) };

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

/** The plain forward (any dtype; with `mask` only the blocks of a block mask); exported for tests and dev/kernels/attention.ts. */
export function attentionPlain(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, mask?: GpuRef): [GpuHandle, GpuHandle] {
  const dm = headPitch('attention', a.d);
  const { bq, bk } = plainTile(be.caps, dm, false);
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, 'attention lse');
  const gx = Math.ceil(a.tq / bq);
  checkGrid('attention', gx, a.heads, a.batch);
  const m = maskRun(a, mask);
  const out = viaStorable(be, q.dtype, rows * a.d, 'attention', (buf, y) => be.rt.run({
    kernel: plainKernel, variant: { FWD: true, X: q.dtype, Y: y, BQ: bq, BK: bk, DM: dm, ...m.variant },
    uniforms: m.uniforms, buffers: [q.h.buffer, k.h.buffer, v.h.buffer, buf, lse.buffer, ...m.buffers], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

/** The variant flags and uniforms of a block mask (a.mask its shape, `mask` its table) for the blocked kernels. */
function maskRun(a: AttentionArgs, mask?: GpuRef): { variant: Variant; uniforms: number[]; buffers: GPUBuffer[] } {
  return mask ? { variant: maskVariant(a, mask), uniforms: [...uniforms(a), ...maskUniforms(a)], buffers: [mask.h.buffer] } : { variant: {}, uniforms: uniforms(a), buffers: [] };
}

/**
 * The register-blocked forward (any dtype; callers check blockedRows); `tr` picks the row-threads
 * (16 or 8, default the device's choice), `pack` keeps 16-bit tiles packed even where f32 tiles
 * fit (tests); with `mask` only the blocks of a block mask. Exported for tests and dev/kernels/attention.ts.
 */
export function attentionBlocked(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, tr?: number, pack = false, mask?: GpuRef): [GpuHandle, GpuHandle] {
  const plan = blockedPlan(be.caps, a.d, 'fwd', q.dtype);
  tr ??= plan.tr;
  if (tr === 0 || tr > plan.tr) throw new UnsupportedError(`webgpu: the blocked attention forward does not take head dim ${a.d} with ${tr} row-threads on ${be.caps.adapterName}`);
  const rows = a.batch * a.heads * a.tq;
  const lse = be.alloc('f32', rows, 'attention lse');
  const gx = Math.ceil(a.tq / (4 * tr));
  checkGrid('attention', gx, a.heads, a.batch);
  const m = maskRun(a, mask);
  const out = viaStorable(be, q.dtype, rows * a.d, 'attention', (buf, y) => be.rt.run({
    kernel: blockedKernel, variant: { FWD: true, X: q.dtype, Y: y, TR: tr, DM: blockedPitch(a.d), PX: plan.px || (pack && q.dtype !== 'f32'), ...m.variant },
    uniforms: m.uniforms, buffers: [q.h.buffer, k.h.buffer, v.h.buffer, buf, lse.buffer, ...m.buffers], workgroups: [gx, a.heads, a.batch],
  }));
  return [out, lse];
}

export function attention(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, mask?: GpuRef): [GpuHandle, GpuHandle] {
  if (a.batch * a.heads * a.tq === 0) return [be.alloc(q.dtype, 0, 'attention'), be.alloc('f32', 0, 'attention lse')];
  switch (attentionForwardPlan(be.caps, a, q.dtype)) {
    case 'decode': return attentionDecode(be, q, k, v, a, undefined, be.caps.subgroups, {}, mask);
    case 'tensor-cores': return attentionTc(be, q, k, v, a, {}, undefined, mask);
    case 'blocked': return attentionBlocked(be, q, k, v, a, undefined, false, mask);
    case 'plain': return attentionPlain(be, q, k, v, a, mask);
  }
}

/** delta = rowsum(dO∘O) in f32, (batch, heads, tq): the first pass of every attention backward. */
export function attentionDelta(be: WebGpuBackend, o: GpuRef, g: GpuRef, a: AttentionArgs): GpuHandle {
  const rows = a.batch * a.heads * a.tq;
  const delta = be.alloc('f32', rows, 'attention backward delta');
  be.rt.run({
    kernel: plainKernel, variant: { DELTA: true, O: o.dtype, G: g.dtype },
    uniforms: uniforms(a), buffers: [o.h.buffer, g.h.buffer, delta.buffer], workgroups: grid(rows, 64),
  });
  return delta;
}

/**
 * The backward: delta, then dq and dk/dv by the kernels of attentionBackwardPlan, or of `plan`
 * (tests, dev/kernels/attention.ts: a plan naming a kernel these arguments do not fit throws);
 * `pack` keeps the blocked kernels' 16-bit tiles packed even where f32 ones fit (tests).
 */
export function attentionBackward(
  be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, o: GpuRef, lse: GpuRef, g: GpuRef, a: AttentionArgs,
  plan: { dq: AttentionBackwardKernel; dkdv: AttentionBackwardKernel } = attentionBackwardPlan(be.caps, a, q.dtype, g.dtype), pack = false, mask?: GpuRef,
): [GpuHandle, GpuHandle, GpuHandle] {
  const delta = attentionDelta(be, o, g, a);
  try {
    if (plan.dq === 'tensor-cores' || plan.dkdv === 'tensor-cores') {
      if (plan.dq !== plan.dkdv) throw new UnsupportedError(`webgpu: the tensor-core attention backward runs dq and dk/dv together, not with ${plan.dq === 'tensor-cores' ? plan.dkdv : plan.dq}`);
      return attentionTcBackward(be, q, k, v, g, { lse: lse.h, delta }, a, {}, mask);
    }
    return aluBackward(be, q, k, v, lse, g, delta, a, plan.dq === 'blocked', plan.dkdv === 'blocked', pack, mask);
  } finally {
    be.free(delta);
  }
}

/** dq and dk/dv in f32 arithmetic: each pass register-blocked (attention_blocked.wgsl) or plain (attention_plain.wgsl). */
function aluBackward(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, lse: GpuRef, g: GpuRef, delta: GpuHandle, a: AttentionArgs, dqBlocked: boolean, kvBlocked: boolean, pack: boolean, mask?: GpuRef): [GpuHandle, GpuHandle, GpuHandle] {
  const dm = headPitch('attention backward', a.d);
  const { bq, bk } = plainTile(be.caps, dm, true);
  const dqPlan = blockedPlan(be.caps, a.d, 'dq', q.dtype, g.dtype), kvPlan = blockedPlan(be.caps, a.d, 'dkdv', q.dtype, g.dtype);
  for (const [pass, on, p] of [['dq', dqBlocked, dqPlan], ['dk/dv', kvBlocked, kvPlan]] as const) {
    if (on && p.tr === 0) throw new UnsupportedError(`webgpu: the blocked attention ${pass} pass does not take head dim ${a.d} (${q.dtype}, dO ${g.dtype}) on ${be.caps.adapterName}`);
  }
  const bdm = blockedPitch(a.d);
  const rows = a.batch * a.heads * a.tq;
  const kvSize = a.batch * a.kvHeads * a.tk * a.d;
  const m = maskRun(a, mask);
  const u = m.uniforms;
  const base = { X: q.dtype, G: g.dtype, BWD: true, BQ: bq, BK: bk, DM: dm, ...m.variant };
  const inputs = [q.h.buffer, k.h.buffer, v.h.buffer, g.h.buffer, lse.h.buffer, delta.buffer];
  const bbase = { X: q.dtype, G: g.dtype, TR: 8, DM: bdm, ...m.variant };
  // Packed tiles where the plan needs them, or everywhere with `pack` (tests).
  const packing = (p: { px: boolean; pg: boolean }) => ({ PX: p.px || (pack && q.dtype !== 'f32'), PG: p.pg || (pack && g.dtype !== 'f32') });
  const dqRows = dqBlocked ? 32 : bq, kvRows = kvBlocked ? 32 : bk;
  checkGrid('attention backward', Math.ceil(a.tq / dqRows), Math.ceil(a.tk / kvRows), a.heads, a.batch);
  const dq = viaStorable(be, q.dtype, rows * a.d, 'attention dq', (buf, y) => be.rt.run({
    kernel: dqBlocked ? blockedKernel : plainKernel, variant: dqBlocked ? { ...bbase, ...packing(dqPlan), DQ: true, Y: y } : { ...base, DQ: true, Y: y },
    uniforms: u, buffers: [...inputs, buf, ...m.buffers], workgroups: [Math.ceil(a.tq / dqRows), a.heads, a.batch],
  }));
  let dv: GpuHandle | null = null;
  const dk = viaStorable(be, k.dtype, kvSize, 'attention dk', (bufK, y) => {
    dv = viaStorable(be, v.dtype, kvSize, 'attention dv', (bufV) => be.rt.run({
      kernel: kvBlocked ? blockedKernel : plainKernel, variant: kvBlocked ? { ...bbase, ...packing(kvPlan), DKDV: true, Y: y } : { ...base, DKDV: true, Y: y },
      uniforms: u, buffers: [...inputs, bufK, bufV, ...m.buffers], workgroups: [Math.ceil(a.tk / kvRows), a.kvHeads, a.batch],
    }));
  });
  return [dq, dk, dv!];
}

/**
 * In place: one buffer copy for a full overwrite or a single (batch, kv head) block, else one
 * dispatch for every block (attention_kv_write.wgsl: word copies where rows are 4-byte aligned,
 * else the halves of odd 16-bit rows).
 */
export function kvWrite(be: WebGpuBackend, cache: GpuRef, x: GpuRef, a: KvWriteArgs): void {
  const eb = bytesPerElement(cache.dtype);
  const block = a.n * a.d;
  const blocks = a.batch * a.kvHeads;
  const aligned = (a.d * eb) % 4 === 0;
  if (a.n === a.tmax || (blocks === 1 && aligned)) {
    const bytes = Math.ceil((blocks * block * eb) / 4) * 4;
    be.rt.commandEncoder().copyBufferToBuffer(x.h.buffer, 0, cache.h.buffer, a.n === a.tmax ? 0 : a.pos * a.d * eb, bytes);
    return;
  }
  // ALIGNED counts in words; the halves form in 16-bit elements, a block's words one more than its halves fill.
  const w = aligned ? eb / 4 : 1, words = aligned ? block * w : (block >> 1) + 2;
  be.rt.run({
    kernel: kvWriteKernel, variant: { ALIGNED: aligned }, uniforms: [a.pos * a.d * w, a.tmax * a.d * w, block * w, words, blocks],
    buffers: [cache.h.buffer, x.h.buffer], workgroups: grid(blocks * words, 64),
  });
}

/** The most writes Backend.kvWriteMany makes in one dispatch (attention_kv_write.wgsl MANY). */
const KV_WRITE_MANY = 3;

/**
 * Backend.kvWriteMany: where every write's rows are whole words, one dispatch for up to
 * KV_WRITE_MANY of them (attention_kv_write.wgsl MANY: a step's K, V and selector keys, where each
 * took a dispatch or a buffer copy); else, and past that many, kvWrite each.
 */
export function kvWriteMany(be: WebGpuBackend, writes: readonly KvWriteOne<GpuHandle>[]): void {
  const aligned = (w: KvWriteOne<GpuHandle>) => (w.args.d * bytesPerElement(w.cache.dtype)) % 4 === 0;
  if (writes.length < 2 || !writes.every(aligned)) { for (const w of writes) kvWrite(be, w.cache, w.x, w.args); return; }
  for (let at = 0; at < writes.length; at += KV_WRITE_MANY) {
    const part = writes.slice(at, at + KV_WRITE_MANY);
    if (part.length === 1) { kvWrite(be, part[0].cache, part[0].x, part[0].args); continue; }
    let total = 0;
    const words = part.flatMap(({ cache, args: a }) => {
      const w = bytesPerElement(cache.dtype) / 4, blocks = a.batch * a.kvHeads;
      total += blocks * a.n * a.d * w;
      return [a.pos * a.d * w, a.tmax * a.d * w, a.n * a.d * w, blocks];
    });
    be.rt.run({
      kernel: kvWriteKernel, variant: { MANY: true, NW: part.length, NW3: part.length > 2 }, uniforms: words,
      buffers: part.flatMap((w) => [w.cache.h.buffer, w.x.h.buffer]), workgroups: grid(total, 64),
    });
  }
}

/** The paged-cache decode and the cache write (the attention entry itself is attention_entry.ts). */
export function attentionKernels(be: WebGpuBackend): Pick<KernelTable, 'attentionMulti' | 'kvWrite' | 'kvWriteMany'> {
  return {
    attentionMulti: (q, parts) => (decodeRows(be.caps, parts[0].args) > 0 ? attentionDecodeMulti(be, q, parts) : undefined),
    kvWrite: (cache, x, a) => kvWrite(be, cache, x, a),
    kvWriteMany: (writes) => kvWriteMany(be, writes),
  };
}
