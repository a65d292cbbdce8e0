/**
 * The GEMM micro-kernel: one MR×NR tile of C from a packed A panel and a packed B panel.
 *
 * Packed A panel: kc steps of MR floats (column l of the MR rows). Packed B panel: kc steps of
 * NR floats (row l of the NR columns). Each step broadcasts one A value per row
 * (`v128.load32_splat`) against the NR/4 B vectors kept in registers, so the tile's
 * MR·NR/4 f32x4 accumulators never leave registers.
 *
 * Shape 4×8 (8 accumulators + 2 B vectors + 1 broadcast + 1 product = 12 of x64's 16 xmm
 * registers, V8 keeps one as scratch) was the fastest of 2×16, 3×12, 3×16, 4×8, 4×12, 5×8,
 * 6×8, 8×4 measured on this repository's 2-core Xeon (Node 20, ~41 GFLOP/s on one core with L1/L2
 * resident panels); unrolling the k loop made V8's code slower, so the loop is not unrolled.
 */
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';

export interface MicroTile {
  /** Rows of the tile (A panel width). */
  mr: number;
  /** Columns of the tile (B panel width), a multiple of 4. */
  nr: number;
}

export const GEMM_TILE: MicroTile = { mr: 4, nr: 8 };

/**
 * Emits `(pa, pb, pc, ldcBytes, kc)`: C[MR×NR] (+)= Ã·B̃ over kc ≥ 1 steps. `accumulate` picks
 * C += (later K blocks) or C = (the first K block, which saves zeroing C). With `fma` the
 * multiply-add is relaxed SIMD's `f32x4.relaxed_madd`; without it, a mul then an add.
 */
export function emitMicroKernel(mb: WasmModuleBuilder, name: string, tile: MicroTile, fma: boolean, accumulate: boolean): FunctionBuilder {
  const { mr, nr } = tile;
  const vectors = nr / 4;
  const f = mb.function(name, ['i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [pa, pb, pc, ldc, kc] = f.params;
  const acc: number[][] = [];
  for (let r = 0; r < mr; r++) acc.push(Array.from({ length: vectors }, () => f.local('v128')));
  const b = Array.from({ length: vectors }, () => f.local('v128'));
  const a = f.local('v128');
  const paEnd = f.local('i32');
  const row = f.local('i32');

  for (const accRow of acc) for (const x of accRow) f.v128Zero().set(x);
  f.get(pa).get(kc).i32Const(mr * 4).i32Mul().i32Add().set(paEnd);
  f.loop((next) => {
    for (let v = 0; v < vectors; v++) f.get(pb).v128Load(v * 16).set(b[v]);
    for (let r = 0; r < mr; r++) {
      f.get(pa).v128Load32Splat(r * 4).set(a);
      for (let v = 0; v < vectors; v++) {
        if (fma) f.get(a).get(b[v]).get(acc[r][v]).f32x4RelaxedMadd().set(acc[r][v]);
        else f.get(acc[r][v]).get(a).get(b[v]).f32x4Mul().f32x4Add().set(acc[r][v]);
      }
    }
    f.get(pa).i32Const(mr * 4).i32Add().set(pa);
    f.get(pb).i32Const(nr * 4).i32Add().set(pb);
    f.get(pa).get(paEnd).i32Ne().brIf(next);
  });

  f.get(pc).set(row);
  for (let r = 0; r < mr; r++) {
    for (let v = 0; v < vectors; v++) {
      f.get(row);
      if (accumulate) f.get(row).v128Load(v * 16).get(acc[r][v]).f32x4Add();
      else f.get(acc[r][v]);
      f.v128Store(v * 16);
    }
    if (r < mr - 1) f.get(row).get(ldc).i32Add().set(row);
  }
  return f;
}

/**
 * Emits `(tile, pc, ldcBytes, rows, cols, accumulate)`: copies (or adds) the top-left rows×cols
 * of a dense MR×NR scratch tile into C. Edge tiles are computed into scratch by the full
 * micro-kernel, so the hot loop never branches on the tile size.
 */
export function emitEdgeTile(mb: WasmModuleBuilder, name: string, tile: MicroTile): FunctionBuilder {
  const f = mb.function(name, ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [src, pc, ldc, rows, cols, accumulate] = f.params;
  const i = f.local('i32');
  const j = f.local('i32');
  const srcRow = f.local('i32');
  const dstRow = f.local('i32');
  const colBytes = f.local('i32');
  f.get(cols).i32Const(4).i32Mul().set(colBytes);
  f.forUp(i, () => f.i32Const(0), rows, 1, () => {
    f.get(src).get(i).i32Const(tile.nr * 4).i32Mul().i32Add().set(srcRow);
    f.get(pc).get(i).get(ldc).i32Mul().i32Add().set(dstRow);
    f.forUp(j, () => f.i32Const(0), colBytes, 4, () => {
      f.get(dstRow).get(j).i32Add();
      f.get(srcRow).get(j).i32Add().f32Load();
      f.get(dstRow).get(j).i32Add().f32Load().f32Const(0).get(accumulate).select().f32Add();
      f.f32Store();
    });
  });
  return f;
}
