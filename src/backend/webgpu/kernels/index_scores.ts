/** WebGPU's Backend.indexBlockScores: index_scores.wgsl, checked against backend/cpu/select.ts. */
import { UnsupportedError } from '../../../errors.ts';
import type { IndexScoreArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import type { DType } from '../../../tensor/dtype.ts';
import { f32bits, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Binding } from '../wgsl.ts';
import { k8Loader } from './attention_common.ts';
import { dequantizeInt4 } from './int4.ts';

export const INDEX_SCORE_FILES = ['index_scores'] as const;

/** Keys a workgroup scores (the kernel's WG). */
const CHUNK = 256;

const PARAMS = 'rows: u32, n: u32, d: u32, l: u32, tmax: u32, pos: u32, nb: u32, scale: f32';

/**
 * index_scores.wgsl after its header: q, w, then the outputs mx and lm, then the keys (binding 5):
 * with K8 (16-bit keys, d a multiple of 8) as rows of 8-half vec4<u32> words (k8Loader's up4 unpacks
 * them), so a key row is read in d/8 16-byte loads instead of d scalar ones; else through ld_k.
 */
const indexKernel: Kernel = {
  name: 'index_scores',
  source: (v, caps) => {
    const out: Binding[] = [{ name: 'q', dtype: 'f32' }, { name: 'w', dtype: 'f32' }, { name: 'mx', dtype: 'f32', write: true }, { name: 'lm', dtype: 'f32', write: true }];
    const head = v.INT4
      // INT4: a key row's codes as vec4<u32> groups (32 codes, one scale each), its scales as f16 bits two to a word.
      ? ['enable subgroups;', header(out, caps.f16, PARAMS), '@group(0) @binding(5) var<storage, read> k: array<vec4<u32>>;',
        '@group(0) @binding(6) var<storage, read> ks: array<u32>;', 'fn ld_ks(i: u32) -> f32 { return unpack2x16float(ks[i >> 1u])[i & 1u]; }'].join('\n')
      : v.K8 ? [v.COOP ? 'enable subgroups;' : '', header(out, caps.f16, PARAMS), k8Loader(v.K as DType, 5)].join('\n') : header([...out, { name: 'k', dtype: v.K as DType }], caps.f16, PARAMS);
    return preprocess(wgslSource('index_scores'), { ...v, HEADER: head });
  },
};

/**
 * Forms of index_scores (dev/kernels/index_scores.ts times them): `lanes` G > 1 scores each key
 * with G lanes of one subgroup (COOP; 16-bit keys, d a multiple of 8·G, subgroups of at least G
 * lanes), 1 one lane a key; the default is 2 where it can run, else 1.
 */
/** What indexBlockScores does where IndexScoreTune is silent (bench/spot.ts --forms sets `prefetch` to time a whole step with it). */
export const INDEX_SCORE_DEFAULTS = { prefetch: false };

export interface IndexScoreTune {
  lanes?: number;
  /**
   * COOP over 16-bit keys: each lane's words of every key it scores loaded before the first dot
   * (PRE). Slower, so off: 57.4 against 27.0 µs at 128K keys, the Spot step 0.126 against 0.093 ms
   * (H100, bench/spot.ts --forms, bench/results_spot_1207b_forms_h100.log).
   */
  prefetch?: boolean;
}

export function indexBlockScores(be: WebGpuBackend, q: GpuRef, w: GpuRef, keys: GpuRef, a: IndexScoreArgs, tune: IndexScoreTune = {}, scales?: GpuRef): [GpuHandle, GpuHandle] {
  if (CHUNK % a.block !== 0 || a.heads > 16 || a.heads * a.d > 4096) throw new UnsupportedError(`webgpu: indexBlockScores takes blocks dividing ${CHUNK}, at most 16 heads and 4096 query values; got block ${a.block}, ${a.heads} × ${a.d}`);
  if (scales) {
    // INT4 keys: read as they are stored (two lanes a key, a lane a group of 32 codes at a time)
    // where subgroups allow; else dequantized to f16 first and scored as those.
    if (be.caps.subgroups && be.caps.subgroupMinSize >= 2 && a.d % 32 === 0) return run(be, q, w, keys, a, { K: 'i32', INT4: true, COOP: true, G: 2 }, scales);
    const f16 = dequantizeInt4(be, keys, scales, a.batch * a.tmax, a.d, 'f16');
    try {
      return indexBlockScores(be, q, w, { h: f16, shape: [a.batch, a.tmax, a.d], dtype: 'f16' } as GpuRef, a, tune);
    } finally {
      be.free(f16);
    }
  }
  const k8 = keys.dtype !== 'f32' && a.d % 8 === 0;
  // Two lanes a key by default where they can: 0.014 against 0.019 ms at 128K keys, 0.068 against
  // 0.104 at 512K (H100, dev/kernels/index_scores.ts; 4 lanes 0.017 / 0.068, 8 and 16 slower).
  const g = tune.lanes ?? (k8 && (a.d / 8) % 2 === 0 && be.caps.subgroups && be.caps.subgroupMinSize >= 2 ? 2 : 1);
  if (g > 1 && !(k8 && [2, 4, 8, 16].includes(g) && (a.d / 8) % g === 0 && be.caps.subgroups && be.caps.subgroupMinSize >= g)) {
    throw new UnsupportedError(`webgpu: indexBlockScores with ${g} lanes a key needs 16-bit keys of a dim divisible by ${8 * g} and subgroups of at least ${g} lanes; got ${keys.dtype} keys of dim ${a.d}, subgroups ${be.caps.subgroups ? `of ${be.caps.subgroupMinSize}+` : 'none'}`);
  }
  return run(be, q, w, keys, a, { K: keys.dtype, K8: k8, ...(g > 1 ? { COOP: true, G: g, PRE: tune.prefetch ?? INDEX_SCORE_DEFAULTS.prefetch } : {}) });
}

/** One dispatch of index_scores.wgsl in the form `form` (its K and key-reading flags); with `scales`, INT4 keys. */
function run(be: WebGpuBackend, q: GpuRef, w: GpuRef, keys: GpuRef, a: IndexScoreArgs, form: Record<string, string | number | boolean>, scales?: GpuRef): [GpuHandle, GpuHandle] {
  const rows = a.batch * a.n, nb = Math.ceil(a.l / a.block);
  const mx = be.alloc('f32', rows * nb, 'indexBlockScores (max)'), lm = be.alloc('f32', rows * nb, 'indexBlockScores (log mass)');
  if (rows * nb === 0) return [mx, lm];
  const chunks = Math.ceil(a.l / CHUNK);
  be.rt.run({
    kernel: indexKernel, variant: { HEADS: a.heads, BLOCK: a.block, QW: a.heads * a.d, DK: a.d, ...form },
    uniforms: [rows, a.n, a.d, a.l, a.tmax, a.pos, nb, f32bits(a.scale)], buffers: [q.h.buffer, w.h.buffer, mx.buffer, lm.buffer, keys.h.buffer, ...(scales ? [scales.h.buffer] : [])],
    workgroups: [chunks, Math.min(rows, 65535), Math.ceil(rows / 65535)],
  });
  return [mx, lm];
}

export function indexScoreKernels(be: WebGpuBackend): Pick<KernelTable, 'indexBlockScores'> {
  return { indexBlockScores: (q, w, k, a, s) => indexBlockScores(be, q, w, k, a, {}, s) };
}
