/**
 * Expected results of the edge-case tests, shared by cpu_edges.test.ts and webgpu_edges.test.ts:
 * every backend must give these answers (NaN in sorts, i32 wrap-around, the one cast rule,
 * logsumexp with ±Infinity and NaN).
 */
import type { BinaryOp } from '../../src/backend/backend.ts';

/** A row with NaN, ±Infinity, ±0 and ties; the stable orders (NaN after +Infinity, −0 = +0). */
export const SORT_ROW = [3, NaN, 1, -Infinity, NaN, Infinity, 1, -0, 0];
export const SORT_ASC = [3, 7, 8, 2, 6, 0, 5, 1, 4];
export const SORT_DESC = [1, 4, 5, 0, 2, 6, 7, 8, 3];

export const I32_OPS: { op: BinaryOp; a: number[]; b: number[]; want: number[] }[] = [
  { op: 'mul', a: [2000000001, 65537, -3, 2147483647], b: [2000000001, 65537, 7, 2], want: [-1946474495, 131073, -21, -2] },
  { op: 'add', a: [2147483647, -2147483648, 5], b: [1, -1, -7], want: [-2147483648, 2147483647, -2] },
  { op: 'sub', a: [-2147483648, 2147483647, 5], b: [1, -1, 7], want: [2147483647, -2147483648, -2] },
];

/**
 * Float → i32: truncate toward zero, saturate to [−2^31, 2^31 − 1], NaN → 0. Float → u8: that
 * i32 wrapped mod 256 (so 3e9 → 2^31 − 1 → 255, −Infinity → −2^31 → 0).
 */
export const CAST_F32 = {
  x: [1.9, -1.9, NaN, Infinity, -Infinity, 3e9, -3e9, 2147483520, 300.5, -1.5, -0.5, 2147483648],
  i32: [1, -1, 0, 2147483647, -2147483648, 2147483647, -2147483648, 2147483520, 300, -1, 0, 2147483647],
  u8: [1, 255, 0, 255, 0, 255, 0, 128, 44, 255, 0, 255],
};

/** i32 → u8 wraps the integer itself (through f32, 16777217 would round to 16777216 → 0). */
export const CAST_I32_U8 = {
  x: [16777217, -1, 2147483647, 256, 16777215, -2147483648, 300],
  u8: [1, 255, 255, 0, 255, 0, 44],
};

export const LSE_ROWS: { row: number[]; lse: number }[] = [
  { row: [1, Infinity, 2], lse: Infinity },
  { row: [Infinity, Infinity], lse: Infinity },
  { row: [-Infinity, -Infinity], lse: -Infinity },
  { row: [NaN, 1], lse: NaN },
];
