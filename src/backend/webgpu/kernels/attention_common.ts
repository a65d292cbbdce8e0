/**
 * What the WebGPU attention kernels' hosts share (attention.ts, attention_decode.ts, and the FoX/FPA
 * files): the uniform block every attention kernel declares (PARAMS, in AttentionArgs order), binding
 * shorthands, the loaders of 16-bit K/V rows packed in u32 words, and grid checks.
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import { MASK_K_BLOCK, MASK_Q_BLOCK, type AttentionArgs } from '../../backend.ts';
import { f32bits } from '../runtime.ts';
import { storageType, type Binding, type Variant } from '../wgsl.ts';

export const PARAMS = 'b: u32, h: u32, hkv: u32, tq: u32, tk: u32, d: u32, kvlen: u32, qoff: i32, causal: u32, window: u32, scale: f32, group: u32';
export const DECODE_PARAMS = `${PARAMS}, rows: u32, nrows: u32, lo: u32, hi: u32, chunk: u32, nsplit: u32`;

/** A block mask's uniforms after PARAMS (AttentionArgs.mask), and its block sizes as WGSL constants (attention_mask.wgsl). */
export const MASK_PARAMS = 'mheads: u32, mqblocks: u32, mkblocks: u32, mbykey: u32, mseg: u32, mbits: u32';
export const MASK_CONSTS = maskConsts(MASK_K_BLOCK);

/** The mask block sizes as WGSL constants, for a mask of `kBlock` keys a listed block (fine masks: the decode kernels only). */
export function maskConsts(kBlock: number): string {
  return `const MASK_QB = ${MASK_Q_BLOCK}u;\nconst MASK_KB = ${kBlock}u;`;
}
export const maskUniforms = (a: AttentionArgs) => (a.mask ? [a.mask.heads, a.mask.qBlocks, a.mask.kBlocks, a.mask.byKeyOffset, a.mask.segmentOffset, a.mask.bitsOffset] : []);
/** Whether a mask's shape carries a per-pair predicate beyond causal/window (segments, bit words): the kernels' SEG variant. */
export const maskPairs = (a: AttentionArgs): boolean => (a.mask?.segmentOffset ?? 0) > 0 || (a.mask?.bitsOffset ?? 0) > 0;
/** A masked kernel's variant flags: MASK with a mask's table, SEG where its shape (a.mask) carries a pair predicate (segments or bit words). */
export const maskVariant = (a: AttentionArgs, mask?: unknown): { MASK?: boolean; SEG?: boolean; MASK_KB?: number; FINE?: boolean } =>
  (mask ? { MASK: true, SEG: maskPairs(a), ...(a.mask && a.mask.kBlock !== MASK_K_BLOCK ? { MASK_KB: a.mask.kBlock, FINE: true } : {}) } : {});

/** PARAMS' words for a call. */
export function uniforms(a: AttentionArgs): number[] {
  return [a.batch, a.heads, a.kvHeads, a.tq, a.tk, a.d, a.kvLength, a.qOffset >>> 0, a.causal ? 1 : 0, a.window, f32bits(a.scale), a.heads / a.kvHeads];
}

export const dt = (v: Variant, key: string) => v[key] as DType;
export const ins = (v: Variant, key: string, ...names: string[]): Binding[] => names.map((name) => ({ name, dtype: dt(v, key) }));
export const f32in = (name: string): Binding => ({ name, dtype: 'f32' });
export const f32out = (name: string): Binding => ({ name, dtype: 'f32', write: true });

/** WGSL statement returning the 4 values of dtype (f16 or bf16) packed in `w: vec2<u32>` as a vec4<f32>. */
export function unpack4(dtype: DType): string {
  return dtype === 'f16' ? 'return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));'
    : 'return vec4<f32>(bitcast<f32>(w.x << 16u), bitcast<f32>(w.x & 0xffff0000u), bitcast<f32>(w.y << 16u), bitcast<f32>(w.y & 0xffff0000u));';
}

/**
 * 4-element loads of k and v (`ldk4(e, left)`, `ldv4(e, left)`: elements e … e+3 of a row, those
 * past it (left < 4) as 0) for the decode kernels (attention_decode.ts's and fox_fpa_decode.ts's),
 * bound at `slot` and `slot + 1`: vectors where D is a multiple of 4, else guarded scalars.
 */
export function kvLoaders(dtype: DType, vec: boolean, f16: boolean, slot: number, names: readonly string[] = ['k', 'v']): string {
  const lines: string[] = [];
  for (const n of names) {
    const i = n === 'k' ? 0 : 1;
    if (vec) {
      lines.push(`@group(0) @binding(${slot + i}) var<storage, read> ${n}: array<${dtype === 'f32' ? 'vec4<f32>' : 'vec2<u32>'}>;`);
      const body = dtype === 'f32' ? `return ${n}[e >> 2u];`
        : `let w = ${n}[e >> 2u]; ${unpack4(dtype)}`;
      lines.push(`fn ld${n}4(e: u32, left: u32) -> vec4<f32> { ${body} }`);
    } else {
      lines.push(`@group(0) @binding(${slot + i}) var<storage, read> ${n}: array<${storageType(dtype, f16)}>;`);
      const one = dtype === 'f32' ? `${n}[i]` : dtype === 'f16' && f16 ? `f32(${n}[i])`
        : dtype === 'f16' ? `unpack2x16float(${n}[i >> 1u])[i & 1u]` : `bitcast<f32>(((${n}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u)`;
      lines.push(`fn ld${n}1(i: u32) -> f32 { return ${one}; }`);
      // Guarded by branches, not select(): reads past the row could pass the buffer's end (no robustness pass).
      lines.push(`fn ld${n}4(e: u32, left: u32) -> vec4<f32> { var x = vec4<f32>(ld${n}1(e), 0.0, 0.0, 0.0); if (left > 1u) { x.y = ld${n}1(e + 1u); } if (left > 2u) { x.z = ld${n}1(e + 2u); } if (left > 3u) { x.w = ld${n}1(e + 3u); } return x; }`);
    }
  }
  return lines.join('\n');
}

/** K rows as vec4<u32> (8 packed halves) for the K8 variant, and up4: 4 packed halves → f32. */
export function k8Loader(dtype: DType, slot: number): string {
  return `@group(0) @binding(${slot}) var<storage, read> k: array<vec4<u32>>;\nfn up4(w: vec2<u32>) -> vec4<f32> { ${unpack4(dtype)} }`;
}

/** The least power of two ≥ x, from min up. */
export const pow2AtLeast = (x: number, min: number) => { let p = min; while (p < x) p *= 2; return p; };

/** UnsupportedError where a grid axis would pass WebGPU's 65535 workgroups. */
export function checkGrid(what: string, ...dims: number[]): void {
  for (const n of dims) if (n > 65535) throw new UnsupportedError(`webgpu: ${what} needs ${n} workgroups along one grid axis, above 65535`);
}
