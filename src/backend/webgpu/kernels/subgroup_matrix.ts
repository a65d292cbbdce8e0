/**
 * WGSL text of subgroup-matrix loads and stores, shared by the tensor-core kernels' generators
 * (matmul.ts, attention.ts). The layout goes in as a template argument (`row_major` /
 * `col_major`), or with `boolArg` as the older bool argument, which Dawn 0.6.2 still takes but
 * warns is deprecated.
 */
import type { GpuCaps } from '../device.ts';

/**
 * Whether the tensor-core kernels can run here: shader-f16, 16×16×16 f16→f32 subgroup matrices, and
 * subgroups of 32 (their fragment layout; 0 = size not reported, taken as 32).
 */
export function tensorCores16(caps: GpuCaps): boolean {
  const sm = caps.subgroupMatrix;
  return caps.f16 && !!sm && sm.m === 16 && sm.n === 16 && sm.k === 16 && (caps.subgroupMaxSize === 0 || caps.subgroupMaxSize === 32);
}

export interface MatrixCode {
  /** `subgroupMatrixLoad` of a matrix of type T at ptr[off…], rows ld apart (columns when col). */
  load(T: string, ptr: string, off: string, col: boolean, ld: string): string;
  /** `subgroupMatrixStore` of x at ptr[off…], as load lays it out. */
  store(ptr: string, off: string, x: string, col: boolean, ld: string): string;
}

export function matrixCode(boolArg = false): MatrixCode {
  const layout = (col: boolean) => (col ? 'col_major' : 'row_major');
  return {
    load: (T, ptr, off, col, ld) => boolArg
      ? `subgroupMatrixLoad<${T}>(${ptr}, ${off}, ${col}, ${ld})`
      : `subgroupMatrixLoad<${T}, ${layout(col)}>(${ptr}, ${off}, ${ld})`,
    store: (ptr, off, x, col, ld) => boolArg
      ? `subgroupMatrixStore(${ptr}, ${off}, ${x}, ${col}, ${ld})`
      : `subgroupMatrixStore<${layout(col)}>(${ptr}, ${off}, ${x}, ${ld})`,
  };
}
