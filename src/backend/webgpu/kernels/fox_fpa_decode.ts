/**
 * WebGPU FoX and FPA attention for few query rows (decode: one new token, or a few), split over
 * the keys like attention.ts's flash-decoding: fox_fpa_decode.wgsl writes per-chunk partials
 * (m, l, unnormalised O) of every query row of a GQA group, attention_combine.wgsl merges them
 * into out and lse. Forward only; fox_fpa_attention.ts takes this path when foxFpaDecodeRows says
 * so and keeps its tiled kernel for everything else (and for every backward). Checked against the
 * CPU references by test/backend/webgpu_fox_fpa_decode.test.ts.
 *
 * FPA needs, for each chunk, the minimum of φ over everything after it up to the query: a MINS
 * pass first writes each chunk's minimum of φ (over its positions ≤ the first query's), and each
 * split workgroup folds the later chunks' minima into its carry (fox_fpa_decode.wgsl says how the
 * last Tq positions are handled). φ, ℓ, λ and the chunk minima share one f32 buffer so that the
 * split pass stays within 8 storage bindings (q, k, v, ex, the three partials).
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { FoxAttentionArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import { f32bits, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding, type Variant } from '../wgsl.ts';
import { f32in, f32out, kvLoaders, pow2AtLeast } from './attention_common.ts';
import { combineDecodePartials, decodeStepSource } from './attention_decode.ts';

export const FOX_FPA_DECODE_FILES = ['fox_fpa_decode', 'attention_decode_step', 'attention_decode_q', 'attention_combine', 'attention_common', 'rows_common'];

const PARAMS = 'b: u32, h: u32, hkv: u32, tq: u32, tk: u32, d: u32, kvlen: u32, qoff: i32, causal: u32, window: u32, scale: f32, group: u32, rows: u32, nrows: u32, chunk: u32, nsplit: u32, nkv: u32';

/** Query rows one workgroup serves at most (as attention.ts's decodeRows). */
const MAX_ROWS = 16;
/** Keys per step (the split pass's workgroup size) unless a test asks for fewer. */
const STEP = 128;
/** Workgroups the split pass aims at in all (chunks × kv heads × batch). Softmax attention's decode moved to 660 (attention_decode.ts, faster there at 128K); this path, bound by its per-step host work, was not re-timed. */
const GROUPS = 1024;
const GROUPS_SOFTWARE = 8;

/** Dispatches through this path since the module loaded (tests assert that the dispatcher took it). */
export const foxFpaDecodeStats = { fox: 0, fpa: 0 };

export interface FoxFpaDecodeOptions {
  /** Keys per chunk (one workgroup's share), rounded up to a multiple of `step`; default: the keys spread over about 1024 workgroups (8 on a software adapter). */
  chunk?: number;
  /** Keys per step, the workgroup size: a power of two in [32, 128], at least the head-dim pitch / 4; default 128. */
  step?: number;
  /** Use subgroupMax for the step's row maxima (default: where the device has subgroups). */
  subgroups?: boolean;
}

/** Workgroup bytes of the split pass: q, the NG-group reduction, scores and maxima, row scalars, the mode's scratch. */
function smemBytes(rm: number, dm: number, step: number, fox: boolean): number {
  return (2 * rm * dm + 2 * rm * step + 3 * rm + (fox ? rm : step + rm)) * 4;
}

/**
 * Query rows one split workgroup serves (group·Tq), or 0 when this path does not take the call:
 * more than 16 rows, head dim over 256, or workgroup memory short of the step's tiles.
 */
export function foxFpaDecodeRows(caps: GpuCaps, a: FoxAttentionArgs): number {
  const rows = (a.heads / a.kvHeads) * a.tq;
  if (rows === 0 || rows > MAX_ROWS || a.d === 0 || a.d > 256) return 0;
  const bytes = smemBytes(pow2AtLeast(rows, 1), pow2AtLeast(a.d, 16), STEP, false);
  return bytes <= caps.maxWorkgroupStorage && STEP <= caps.maxInvocations ? rows : 0;
}

const decodeKernel: Kernel = {
  name: 'fox_fpa_decode',
  source: (v, caps) => {
    const x = v.X as DType;
    let head: string;
    if (v.MINS) head = header([f32out('ex')], caps.f16, PARAMS);
    else {
      const b: Binding[] = [{ name: 'q', dtype: x }, f32in(v.FOX ? 'c' : 'ex'), f32out('pm'), f32out('pl'), f32out('pacc')];
      head = [v.SG ? 'enable subgroups;' : '', header(b, caps.f16, PARAMS), kvLoaders(x, !!v.VEC, caps.f16, 6)].join('\n');
    }
    return preprocess(wgslSource('fox_fpa_decode'), { RM: 1, DM: 16, ...v, HEADER: head, COMMON: wgslSource('attention_common'), DECODE_STEP: v.MINS ? '' : decodeStepSource(v) });
  },
};

/** How the keys split: step, keys per chunk, chunks. */
interface Split { step: number; chunk: number; nsplit: number }

function splitOf(be: WebGpuBackend, a: FoxAttentionArgs, dm: number, opts: FoxFpaDecodeOptions): Split {
  const step = opts.step ?? STEP;
  if (![32, 64, 128].includes(step) || step < dm / 4) throw new UnsupportedError(`webgpu: FoX/FPA decode step ${step} must be 32, 64 or 128 and at least ${dm / 4} for head dim ${a.d}`);
  const keys = a.kvLength;
  const blocks = Math.max(1, Math.ceil(keys / step));
  let chunk: number;
  if (opts.chunk !== undefined) chunk = Math.max(1, Math.ceil(opts.chunk / step)) * step;
  else {
    const target = be.caps.software ? GROUPS_SOFTWARE : GROUPS;
    const want = Math.max(1, Math.min(blocks, Math.ceil(target / (a.batch * a.kvHeads))));
    chunk = Math.ceil(blocks / want) * step;
  }
  const nsplit = Math.max(1, Math.ceil(keys / chunk));
  if (nsplit > 65535 || a.kvHeads > 65535 || a.batch > 65535) throw new UnsupportedError(`webgpu: FoX/FPA decode needs ${nsplit} × ${a.kvHeads} × ${a.batch} workgroups, above 65535 along one axis`);
  return { step, chunk, nsplit };
}

type Mode = 'fox' | 'fpa';

/** MINS (FPA), the split pass and the combine; `extra` is c (FoX) or the packed [φ | ℓ | λ | chunk minima] (FPA). */
function decode(be: WebGpuBackend, mode: Mode, q: GpuRef, k: GpuRef, v: GpuRef, extra: (s: Split) => GpuHandle, a: FoxAttentionArgs, opts: FoxFpaDecodeOptions): [GpuHandle, GpuHandle] {
  const rows = foxFpaDecodeRows(be.caps, a);
  const what = `${mode}Attention decode`;
  if (rows === 0) throw new UnsupportedError(`webgpu: ${what} does not take ${a.heads / a.kvHeads}×${a.tq} query rows of head dim ${a.d}`);
  const rm = pow2AtLeast(rows, 1), dm = pow2AtLeast(a.d, 16);
  const s = splitOf(be, a, dm, opts);
  if (smemBytes(rm, dm, s.step, mode === 'fox') > be.caps.maxWorkgroupStorage) throw new UnsupportedError(`webgpu: ${what} with step ${s.step} needs more workgroup memory than this device's ${be.caps.maxWorkgroupStorage} bytes`);
  const nrows = a.batch * a.heads * a.tq;
  const uniforms = [a.batch, a.heads, a.kvHeads, a.tq, a.tk, a.d, a.kvLength, a.qOffset >>> 0, 1, 0, f32bits(a.scale), a.heads / a.kvHeads,
    rows, nrows, s.chunk, s.nsplit, a.batch * a.kvHeads * a.tk];
  const ex = extra(s);
  if (mode === 'fpa') {
    be.rt.run({ kernel: decodeKernel, variant: { MINS: true, WG: 128 }, uniforms, buffers: [ex.buffer], workgroups: [s.nsplit, a.kvHeads, a.batch] });
  }
  const pm = be.alloc('f32', s.nsplit * nrows, `${what} partial max`);
  const pl = be.alloc('f32', s.nsplit * nrows, `${what} partial sum`);
  const pacc = be.alloc('f32', s.nsplit * nrows * a.d, `${what} partial out`);
  const vec = a.d % 4 === 0;
  const variant: Variant = { FOX: mode === 'fox', X: q.dtype, VEC: vec, SG: opts.subgroups ?? be.caps.subgroups, WG: s.step, RM: rm, DM: dm };
  be.rt.run({
    kernel: decodeKernel, variant, uniforms,
    buffers: [q.h.buffer, ex.buffer, pm.buffer, pl.buffer, pacc.buffer, k.h.buffer, v.h.buffer],
    workgroups: [s.nsplit, a.kvHeads, a.batch],
  });
  if (mode === 'fpa') be.free(ex);
  foxFpaDecodeStats[mode]++;
  return combineDecodePartials(be, { pm, pl, pacc }, nrows, a.d, s.nsplit, q.dtype, `${mode} attention`);
}

/** FoX forward by the split path (callers check foxFpaDecodeRows; c f32 (B, H, Tk)). */
export function foxDecode(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, c: GpuRef, a: FoxAttentionArgs, opts: FoxFpaDecodeOptions = {}): [GpuHandle, GpuHandle] {
  return decode(be, 'fox', q, k, v, () => c.h, a, opts);
}

/** FPA forward by the split path (callers check foxFpaDecodeRows; φ, ℓ f32 (B, Hkv, Tk), λ f32 (Hkv)). */
export function fpaDecode(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, phi: GpuRef, level: GpuRef, lambda: GpuRef, a: FoxAttentionArgs, opts: FoxFpaDecodeOptions = {}): [GpuHandle, GpuHandle] {
  const nkv = a.batch * a.kvHeads * a.tk;
  return decode(be, 'fpa', q, k, v, (s) => {
    const ex = be.alloc('f32', 2 * nkv + a.kvHeads + a.batch * a.kvHeads * s.nsplit, 'fpa attention decode inputs');
    const enc = be.rt.commandEncoder();
    if (nkv > 0) {
      enc.copyBufferToBuffer(phi.h.buffer, 0, ex.buffer, 0, nkv * 4);
      enc.copyBufferToBuffer(level.h.buffer, 0, ex.buffer, nkv * 4, nkv * 4);
    }
    enc.copyBufferToBuffer(lambda.h.buffer, 0, ex.buffer, 2 * nkv * 4, a.kvHeads * 4);
    return ex;
  }, a, opts);
}
