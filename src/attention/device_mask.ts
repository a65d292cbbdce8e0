/**
 * A block mask whose lists are made on the device (block_mask.ts describes the table): each row
 * (b, h, qb) of the by-query index points at a list of a fixed stride, (count, entries…, padding),
 * so the index is arithmetic and the lists can come straight out of device ops without a read to
 * the host. The by-key lists are left empty, so the mask serves forwards only (`forwardOnly`):
 * Focus's device prefill plan (focus/device_plan.ts) builds its masks this way, and Spot's device
 * selection (spot/device_select.ts) pairs deviceMaskShape with the table Backend.flagsMaskTable
 * writes in one pass.
 */
import { MASK_K_BLOCK, MASK_Q_BLOCK, type BlockMask } from './block_mask.ts';
import { ArgumentError } from '../errors.ts';
import type { UploadedMask } from '../ops/attention.ts';
import { cast } from '../ops/cast.ts';
import { tensor } from '../ops/creation.ts';
import { concat, reshape } from '../ops/layout.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** Where a device mask's queries and keys sit (MaskGeometry with every field given). */
export interface DeviceMaskGeometry {
  batch: number; heads: number; tq: number; tk: number; kvLength: number; qOffset: number; causal: boolean; window: number;
  /** Keys a listed block covers (default MASK_K_BLOCK; MASK_K_FINE: a decode-only fine mask). */
  kBlock?: number;
}

/**
 * The geometry and offsets of a device mask whose lists have `stride` slots a row, with segment ids
 * and/or bit words after them (the host table left empty): what deviceMask builds, and what an op
 * that writes the whole table on the device (Backend.flagsMaskTable) pairs its table with.
 */
export function deviceMaskShape(g: DeviceMaskGeometry, stride: number, extra: { segments?: boolean; bits?: boolean } = {}): BlockMask {
  const kBlock = g.kBlock ?? MASK_K_BLOCK;
  const qBlocks = Math.ceil(g.tq / MASK_Q_BLOCK), kBlocks = Math.ceil(g.tk / kBlock);
  const qRows = g.batch * g.heads * qBlocks, kRows = g.batch * g.heads * kBlocks;
  const listsStart = qRows + kRows + 1;
  const segmentOffset = extra.segments ? listsStart + qRows * stride : 0;
  const bitsOffset = extra.bits ? listsStart + qRows * stride + (extra.segments ? g.batch * g.tk : 0) : 0;
  // Object.assign, not a spread followed by properties: V8 (Node 20) defines each property after a
  // spread through the runtime, ~1.2 µs apiece (12 µs this call, every decoding step).
  return Object.assign({}, g, {
    kBlock, qBlocks, kBlocks, segmentOffset, bitsOffset, byKeyOffset: qRows, listStride: stride,
    table: new Int32Array(0), visited: NaN, predicateBlocks: NaN, forwardOnly: true,
  });
}

/**
 * The mask from its lists (batch·heads·qBlocks, stride) integers, each row the count then the
 * entries 2·kb + partial ascending, and optionally a segment id or a bit word per batch entry and
 * key position (batch·tk integers, each a tensor on the lists' device).
 */
export function deviceMask(g: DeviceMaskGeometry, lists: Tensor, extra: { segments?: Tensor; bits?: Tensor } = {}): UploadedMask {
  const shape = deviceMaskShape(g, lists.shape[1], { segments: !!extra.segments, bits: !!extra.bits });
  const qRows = g.batch * g.heads * shape.qBlocks, kRows = g.batch * g.heads * shape.kBlocks;
  const [rows, stride] = lists.shape;
  if (lists.rank !== 2 || rows !== qRows) throw new ArgumentError(`deviceMask: lists (${lists.shape.join(', ')}) for ${qRows} query-block rows (batch ${g.batch} × heads ${g.heads} × ${shape.qBlocks} blocks)`);
  for (const [name, t] of [['segments', extra.segments], ['bits', extra.bits]] as const) {
    if (t && t.size !== g.batch * g.tk) throw new ArgumentError(`deviceMask: ${name} holds ${t.size} values; expected batch × tk = ${g.batch * g.tk}`);
  }
  const be = lists.backend;
  const ints = (a: ArrayLike<number>) => tensor(Int32Array.from(a), [a.length], { dtype: 'i32', backend: be });
  const listsStart = qRows + kRows + 1, empty = qRows + kRows; // the by-key index points at one zero count
  const index = ints(Array.from({ length: qRows }, (_, x) => listsStart + x * stride));
  const byKey = ints(new Int32Array(kRows).fill(empty));
  const sections = [index, byKey, ints([0]), reshape(cast(lists, 'i32'), [qRows * stride])];
  if (extra.segments) sections.push(reshape(cast(extra.segments, 'i32'), [g.batch * g.tk]));
  if (extra.bits) sections.push(reshape(cast(extra.bits, 'i32'), [g.batch * g.tk]));
  return Object.assign(shape, { device: concat(sections, 0) });
}
