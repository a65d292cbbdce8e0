/**
 * Focus's sparse-prefill plan built on the device (sparse.ts builds it on the host): the stable
 * sort by group, the row lists and both block masks, from the membership one-hot (B, T, K) without
 * a read to the host, so backends whose reads are asynchronous (webgpu) run the exact sparse path
 * inside a synchronous forward. Only generic ops: a stable sort, integer elementwise ops, scans,
 * gathers and concatenation; no kernel of its own.
 *
 * - Each token's k groups ascending: the first k indices of a stable descending sort of its
 *   one-hot row. Its copies, laid out (T, k), stably sorted by group give the sorted rows (the
 *   counting sort of sparse.ts, same order); position = index ÷ k; the inverse permutation (an
 *   argsort of the indices) gives each copy's row.
 * - Set A's mask has rows of a fixed stride (kBlocks + 1 slots: the count, then the entries), so
 *   its index is arithmetic and its lists an elementwise fill over (B, qBlocks, kBlocks): query
 *   block qb visits key blocks ⌊first/64⌋ … ⌊i1/64⌋, first the start of its first row's group, a
 *   block whole as groupSegmentsMask makes it. Every entry equals the host plan's; the table takes
 *   O(T²/8192) words (32 MB at 256K tokens), so the host plan stays the path of the benchmarks at
 *   a million tokens. Its by-key lists are empty: the mask is forward-only (no gradient reads it).
 * - Set B's band lists depend on T and w alone (built on the host); the membership words, the
 *   table's last section, are computed on the device and concatenated.
 */
import { MASK_K_BLOCK, MASK_Q_BLOCK } from '../block_mask.ts';
import { deviceMask } from '../device_mask.ts';
import { ArgumentError } from '../../errors.ts';
import type { UploadedMask } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { arange, tensor } from '../../ops/creation.ts';
import { add, div, eq, lt, le, ge, mul, sub, where } from '../../ops/elementwise.ts';
import { gather, gatherRows } from '../../ops/indexing.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import { argsort, cumsum, sort } from '../../ops/scan_sort.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { groupIds, wordsOnDevice } from './groups.ts';
import { crossGroupBandMask, type SortedPrefill } from './sparse.ts';

/** A sorted prefill whose masks' tables live on the device. */
export type DeviceFocusPlan = SortedPrefill & { maskA: UploadedMask; maskB: UploadedMask };

/** The plan from membership one-hot (B, T, K) (1 where a token is in a group, exactly k per token); k < K. */
export function planFocusPrefillOnDevice(member: Tensor, o: { groups: number; topK: number; window: number }): DeviceFocusPlan {
  const [b, t, groups] = member.shape;
  const k = o.topK;
  if (groups !== o.groups || !(k >= 1 && k < groups)) throw new ArgumentError(`focus: a device plan needs k in 1 … K − 1 and membership (B, T, ${o.groups}); got k ${k}, membership (${member.shape.join(', ')})`);
  const r = k * t;
  const be = member.backend;
  const ints = (a: ArrayLike<number>, shape: number[]) => tensor(Int32Array.from(a), shape, { dtype: 'i32', backend: be });
  const m = cast(member, 'i32'); // (B, T, K) of 0/1
  // Each token's groups ascending, then the stable sort of the copies by group.
  const groupsOf = narrow(sort(m, -1, { descending: true }).indices, 2, 0, k); // (B, T, k)
  const { values: group, indices } = sort(reshape(groupsOf, [b, r]), -1); // (B, R): group and p·k + j of each row
  const position = div(indices, k);
  const inverse = reshape(argsort(indices, -1), [b, t, k]); // row of copy (p, j)
  const copies = Array.from({ length: k }, (_, j) => reshape(narrow(inverse, 2, j, 1), [b, t]));
  // Group starts in the sorted rows: the exclusive prefix sums of the groups' sizes.
  const counts = sum(m, 1); // (B, K)
  const start = sub(cumsum(counts, -1), counts);
  // The membership words, and (k ≥ 2) each row's memberships below its group.
  const words = reshape(wordsOnDevice(m), [b * t]);
  let lowBits: Tensor | undefined;
  if (k > 1) {
    const rowsMember = gatherRows(m, position, 1); // (B, R, K)
    const below = lt(groupIds(groups, be), reshape(group, [b, r, 1]));
    lowBits = reshape(wordsOnDevice(where(below, rowsMember, 0)), [b * r]);
  }
  const maskA = segmentsMaskOnDevice(group, start, b, r, lowBits);
  const host = crossGroupBandMask(new Uint32Array(b * t), b, t, o.window); // lists; its words follow
  const maskB: UploadedMask = { ...host, device: concat([ints(host.table.subarray(0, host.bitsOffset), [host.bitsOffset]), cast(words, 'i32')], 0) };
  return { position, copies, maskA, maskB, window: o.window };
}

/**
 * Set A's mask over the sorted rows (groupSegmentsMask's entries) as a fixed-stride table on the
 * device: group (B, R) the rows' groups, start (B, K) the groups' first rows, lowBits the rows'
 * words (k ≥ 2: every listed block partial).
 */
function segmentsMaskOnDevice(group: Tensor, start: Tensor, b: number, r: number, lowBits?: Tensor): UploadedMask {
  const QB = MASK_Q_BLOCK, KB = MASK_K_BLOCK;
  const qBlocks = Math.ceil(r / QB), kBlocks = Math.ceil(r / KB), stride = kBlocks + 1;
  const be = group.backend;
  const ints = (a: ArrayLike<number>, shape: number[]) => tensor(Int32Array.from(a), shape, { dtype: 'i32', backend: be });
  const i0 = Array.from({ length: qBlocks }, (_, qb) => qb * QB), i1 = i0.map((x) => Math.min(r, x + QB) - 1);
  const g0 = gatherRows(group, ints(i0, [1, qBlocks]), 1), g1 = gatherRows(group, ints(i1, [1, qBlocks]), 1); // (B, qBlocks)
  const first = reshape(gather(start, g0, 1), [b, qBlocks, 1]);
  const lo = div(first, KB), hi = ints(i1.map((x) => Math.floor(x / KB)), [1, qBlocks, 1]);
  const count = add(sub(hi, lo), 1); // (B, qBlocks, 1)
  const n = ints(Array.from({ length: kBlocks }, (_, x) => x), [1, 1, kBlocks]);
  const kb = add(lo, n); // (B, qBlocks, kBlocks)
  // Whole: the query block in one segment, no bit words, the key block inside the segment and wholly at or before the block's first row.
  const single = lowBits ? null : reshape(eq(g0, g1), [b, qBlocks, 1]);
  const whole = single
    ? mul(mul(single, ge(mul(kb, KB), first)), le(add(mul(kb, KB), KB - 1), ints(i0, [1, qBlocks, 1])))
    : null;
  const entry = add(mul(kb, 2), whole ? sub(1, whole) : 1);
  const lists = concat([count, where(lt(n, count), entry, 0)], 2); // (B, qBlocks, stride)
  const g = { batch: b, heads: 1, tq: r, tk: r, kvLength: r, qOffset: 0, causal: true, window: 0 };
  return deviceMask(g, reshape(lists, [b * qBlocks, stride]), { segments: group, ...(lowBits ? { bits: lowBits } : {}) });
}
