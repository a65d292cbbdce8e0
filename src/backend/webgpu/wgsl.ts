/**
 * WGSL sources and their tiny preprocessor (STYLE.md §6). Kernels live in real `.wgsl` files
 * under kernels/; a source may use `#if NAME` / `#else` / `#endif` (NAME truthy in the variant)
 * and `{{NAME}}` substitutions. Binding declarations and typed load helpers are generated from
 * the dtypes of the tensors a dispatch binds, so one source serves f32, f16, bf16, i32 and u8.
 */
import type { DType } from '../../tensor/dtype.ts';

export type Variant = Record<string, string | number | boolean>;

export function preprocess(src: string, v: Variant): string {
  const out: string[] = [];
  const stack: boolean[] = [];
  const active = () => stack.every(Boolean);
  for (const line of src.split('\n')) {
    const t = line.trim();
    if (t.startsWith('#if ')) { stack.push(!!v[t.slice(4).trim()]); continue; }
    if (t === '#else') { stack.push(!stack.pop()); continue; }
    if (t === '#endif') { stack.pop(); continue; }
    if (!active()) continue;
    out.push(line.replace(/\{\{(\w+)\}\}/g, (_, k: string) => {
      if (!(k in v)) throw new Error(`wgsl: no value for {{${k}}}`);
      return String(v[k]);
    }));
  }
  return out.join('\n');
}

/** How a tensor's storage is declared and read in WGSL. */
export interface Binding {
  name: string;
  dtype: DType;
  /** Written by the kernel (read_write) or only read. */
  write?: boolean;
}

/**
 * Storage layout in WGSL: f32/i32 natively; f16 natively when shader-f16 exists, else packed two
 * to a u32; bf16 packed two to a u32; u8 packed four to a u32. Byte layout equals the host's.
 */
export function storageType(dtype: DType, f16: boolean): string {
  switch (dtype) {
    case 'f32': return 'f32';
    case 'i32': return 'i32';
    case 'f16': return f16 ? 'f16' : 'u32';
    case 'bf16': case 'u8': return 'u32';
  }
}

/** True when a kernel can store single elements of this dtype (not packed). */
export function storesDirectly(dtype: DType, f16: boolean): boolean {
  return dtype === 'f32' || dtype === 'i32' || (dtype === 'f16' && f16);
}

/** `ld_NAME(i) -> f32` (and `ldi_NAME(i) -> i32` for integer tensors) for any storage dtype. */
function loader(b: Binding, f16: boolean): string {
  const n = b.name;
  switch (b.dtype) {
    case 'f32': return `fn ld_${n}(i: u32) -> f32 { return ${n}[i]; }`;
    case 'i32': return `fn ld_${n}(i: u32) -> f32 { return f32(${n}[i]); }\nfn ldi_${n}(i: u32) -> i32 { return ${n}[i]; }`;
    case 'f16': return f16
      ? `fn ld_${n}(i: u32) -> f32 { return f32(${n}[i]); }`
      : `fn ld_${n}(i: u32) -> f32 { return unpack2x16float(${n}[i >> 1u])[i & 1u]; }`;
    case 'bf16': return `fn ld_${n}(i: u32) -> f32 { return bitcast<f32>(((${n}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }`;
    case 'u8': return `fn ld_${n}(i: u32) -> f32 { return f32((${n}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu); }\nfn ldi_${n}(i: u32) -> i32 { return i32((${n}[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu); }`;
  }
}

/** `st_NAME(i, v)` for outputs a kernel may write element by element. */
function storer(b: Binding, f16: boolean): string {
  const n = b.name;
  switch (b.dtype) {
    case 'f32': return `fn st_${n}(i: u32, v: f32) { ${n}[i] = v; }`;
    case 'i32': return `fn st_${n}(i: u32, v: f32) { ${n}[i] = f32_to_i32(v); }\nfn sti_${n}(i: u32, v: i32) { ${n}[i] = v; }`;
    case 'f16': return f16 ? `fn st_${n}(i: u32, v: f32) { ${n}[i] = f16(v); }` : '';
    default: return '';
  }
}

/**
 * Float → i32, the rule of every backend (dtype.ts floatToI32): truncate toward zero, saturate to
 * [−2^31, 2^31 − 1], NaN → 0. WGSL's i32(f32) clamps to [−2^31, 2^31 − 128] (the largest f32
 * below 2^31), so v ≥ 2^31 is mapped to 2^31 − 1 explicitly. NaN is tested by its bits: some
 * compilers (NVIDIA's) fold comparisons with NaN, so `v != v` is not reliable.
 */
export const F32_TO_I32_WGSL = `fn f32_to_i32(v: f32) -> i32 {
  let nan = (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
  let t = select(i32(clamp(v, -2147483648.0, 2147483520.0)), 2147483647i, v >= 2147483648.0);
  return select(t, 0i, nan);
}`;

/**
 * Declarations for binding 0 (uniforms, when `params` is given) and one storage binding per
 * tensor, in order, plus their load/store helpers. `params` is the WGSL struct body.
 */
export function header(bindings: readonly Binding[], f16: boolean, params?: string): string {
  const lines: string[] = [];
  if (f16 && bindings.some((b) => b.dtype === 'f16')) lines.push('enable f16;');
  let slot = 0;
  if (params !== undefined) {
    lines.push(`struct Params { ${params} }`, `@group(0) @binding(${slot++}) var<uniform> P: Params;`);
  }
  if (bindings.some((b) => b.write)) lines.push(F32_TO_I32_WGSL);
  for (const b of bindings) {
    lines.push(`@group(0) @binding(${slot++}) var<storage, ${b.write ? 'read_write' : 'read'}> ${b.name}: array<${storageType(b.dtype, f16)}>;`);
    lines.push(loader(b, f16));
    if (b.write) lines.push(storer(b, f16));
  }
  return lines.join('\n');
}
