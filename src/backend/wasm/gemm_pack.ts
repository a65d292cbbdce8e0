/**
 * Packing for the GEMM: copies a block of A or B into the panel order the micro-kernel streams.
 *
 * A panel holds `width` lanes (MR rows of A or NR columns of B) over `depth` steps of K, lane
 * index fastest: panel[d·width + lane] = src[lane·laneStride + d·depthStride]. Lanes past the
 * matrix edge are zero, so edge tiles run the same micro-kernel. Strides are in bytes, which is
 * how the same routines serve A, Aᵀ, B and Bᵀ.
 *
 * Two layouts of the source, two fast paths:
 * - depth contiguous (A as stored, B transposed): `pack_panel` reads four K steps of four lanes
 *   and transposes them in registers (4×4 shuffles), instead of one float at a time;
 * - lanes contiguous (A transposed, B as stored): `pack_rows` walks K outermost and fills many
 *   panels from each source row, so the source streams row by row; reading one panel at a time
 *   would touch a sliver of every row (half a cache line, a new page every few rows).
 */
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';

/** Panels filled per sweep over the source rows (measured: 8 beats 1, 4, 16 and 64 on this Xeon). */
const ROWS_SWEEP_PANELS = 8;

/**
 * Emits `(src, dst, lanes, depth, laneStrideBytes, depthStrideBytes)` for one panel `width`
 * wide (a multiple of 4). Full panels with a one-element depth stride take the transposing path
 * for the first depth − depth % 4 steps; everything else goes one float at a time.
 */
export function emitPackPanel(mb: WasmModuleBuilder, name: string, width: number): FunctionBuilder {
  if (width % 4 !== 0) throw new Error(`pack panel width ${width} is not a multiple of 4`);
  const f = mb.function(name, ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [src, dst, lanes, depth, laneStride, depthStride] = f.params;
  const d = f.local('i32'), lane = f.local('i32'), from = f.local('i32'), to = f.local('i32');
  const scalarFrom = f.local('i32'), depth4 = f.local('i32'), laneBase = f.local('i32');
  const rows = Array.from({ length: 4 }, () => f.local('v128'));
  const mixed = Array.from({ length: 4 }, () => f.local('v128'));
  f.i32Const(0).set(scalarFrom);

  // Transposing path: lanes l..l+3 × steps d..d+3 → four stores of four lanes.
  f.get(lanes).i32Const(width).i32Eq().get(depthStride).i32Const(4).i32Eq().i32And().if(() => {
    f.get(depth).i32Const(-4).i32And().set(depth4);
    f.get(depth4).set(scalarFrom);
    for (let group = 0; group < width / 4; group++) {
      f.get(src).get(laneStride).i32Const(group * 4).i32Mul().i32Add().set(laneBase);
      f.forUp(d, () => f.i32Const(0), depth4, 4, () => {
        f.get(laneBase).get(d).i32Const(4).i32Mul().i32Add().set(from);
        for (let r = 0; r < 4; r++) {
          f.get(from).v128Load().set(rows[r]);
          if (r < 3) f.get(from).get(laneStride).i32Add().set(from);
        }
        f.get(rows[0]).get(rows[1]).f32x4Shuffle([0, 4, 1, 5]).set(mixed[0]);
        f.get(rows[0]).get(rows[1]).f32x4Shuffle([2, 6, 3, 7]).set(mixed[1]);
        f.get(rows[2]).get(rows[3]).f32x4Shuffle([0, 4, 1, 5]).set(mixed[2]);
        f.get(rows[2]).get(rows[3]).f32x4Shuffle([2, 6, 3, 7]).set(mixed[3]);
        f.get(dst).get(d).i32Const(width * 4).i32Mul().i32Add().set(to);
        const step = width * 4;
        f.get(to).get(mixed[0]).get(mixed[2]).f32x4Shuffle([0, 1, 4, 5]).v128Store(group * 16);
        f.get(to).get(mixed[0]).get(mixed[2]).f32x4Shuffle([2, 3, 6, 7]).v128Store(group * 16 + step);
        f.get(to).get(mixed[1]).get(mixed[3]).f32x4Shuffle([0, 1, 4, 5]).v128Store(group * 16 + 2 * step);
        f.get(to).get(mixed[1]).get(mixed[3]).f32x4Shuffle([2, 3, 6, 7]).v128Store(group * 16 + 3 * step);
      });
    }
  });

  // One float at a time for steps scalarFrom..depth (all of them unless transposed above).
  f.get(lanes).i32Const(width).i32LtU().if(() => {
    f.get(dst).i32Const(0).get(depth).i32Const(width * 4).i32Mul().memoryFill();
  });
  f.forUp(lane, () => f.i32Const(0), lanes, 1, () => {
    f.get(src).get(lane).get(laneStride).i32Mul().i32Add().get(scalarFrom).get(depthStride).i32Mul().i32Add().set(from);
    f.get(dst).get(lane).i32Const(4).i32Mul().i32Add().get(scalarFrom).i32Const(width * 4).i32Mul().i32Add().set(to);
    f.forUp(d, () => f.get(scalarFrom), depth, 1, () => {
      f.get(to).get(from).f32Load().f32Store();
      f.get(from).get(depthStride).i32Add().set(from);
      f.get(to).i32Const(width * 4).i32Add().set(to);
    });
  });
  return f;
}

/**
 * Emits `(src, dst, panels, depth, depthStrideBytes)`: `panels` full panels `width` wide whose
 * lanes are contiguous in the source (lane stride one element), K outermost so each source row
 * is read once, left to right. Panel p of the output starts at dst + p·depth·width·4.
 */
export function emitPackRows(mb: WasmModuleBuilder, name: string, width: number): FunctionBuilder {
  if (width % 4 !== 0) throw new Error(`pack rows width ${width} is not a multiple of 4`);
  const f = mb.function(name, ['i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [src, dst, panels, depth, depthStride] = f.params;
  const d = f.local('i32'), p = f.local('i32'), from = f.local('i32'), to = f.local('i32'), panelBytes = f.local('i32');
  f.get(depth).i32Const(width * 4).i32Mul().set(panelBytes);
  f.forUp(d, () => f.i32Const(0), depth, 1, () => {
    f.get(src).get(d).get(depthStride).i32Mul().i32Add().set(from);
    f.get(dst).get(d).i32Const(width * 4).i32Mul().i32Add().set(to);
    f.forUp(p, () => f.i32Const(0), panels, 1, () => {
      for (let v = 0; v < width / 4; v++) f.get(to).get(from).v128Load(v * 16).v128Store(v * 16);
      f.get(from).i32Const(width * 4).i32Add().set(from);
      f.get(to).get(panelBytes).i32Add().set(to);
    });
  });
  return f;
}

/**
 * Emits `(src, dst, lanes, depth, laneStrideBytes, depthStrideBytes)`: ⌈lanes/width⌉ panels
 * side by side (panel q at dst + q·depth·width·4), each through the faster of the two paths.
 */
export function emitPackBlock(mb: WasmModuleBuilder, name: string, width: number, packPanel: FunctionBuilder, packRows: FunctionBuilder): FunctionBuilder {
  const f = mb.function(name, ['i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  const [src, dst, lanes, depth, laneStride, depthStride] = f.params;
  const fullLanes = f.local('i32'), q = f.local('i32'), rest = f.local('i32'), tileWidth = f.local('i32');
  f.i32Const(width).set(tileWidth);
  f.i32Const(0).set(fullLanes);
  f.get(laneStride).i32Const(4).i32Eq().if(() => {
    f.get(lanes).get(lanes).i32Const(width).i32RemU().i32Sub().set(fullLanes);
    // Sweeps of ROWS_SWEEP_PANELS panels: panels are 4 KiB-aligned apart, so more write streams
    // than L1 has ways would evict each other.
    f.forUp(q, () => f.i32Const(0), fullLanes, ROWS_SWEEP_PANELS * width, () => {
      f.get(src).get(q).i32Const(4).i32Mul().i32Add();
      f.get(dst).get(q).get(depth).i32Mul().i32Const(4).i32Mul().i32Add();
      f.get(fullLanes).get(q).i32Sub().set(rest);
      f.i32Const(ROWS_SWEEP_PANELS * width).get(rest).i32Const(ROWS_SWEEP_PANELS * width).get(rest).i32LtU().select();
      f.i32Const(width).i32DivU();
      f.get(depth).get(depthStride).call(packRows);
    });
  });
  f.forUp(q, () => f.get(fullLanes), lanes, width, () => {
    f.get(src).get(q).get(laneStride).i32Mul().i32Add();
    f.get(dst).get(q).get(depth).i32Mul().i32Const(4).i32Mul().i32Add();
    f.get(lanes).get(q).i32Sub().set(rest);
    f.get(tileWidth).get(rest).get(tileWidth).get(rest).i32LtU().select();
    f.get(depth).get(laneStride).get(depthStride).call(packPanel);
  });
  return f;
}
