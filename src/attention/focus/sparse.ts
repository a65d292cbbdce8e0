/**
 * Focus's exact sparse prefill (specs/focus_spot.md A4 and Part D), over the shared attention
 * kernels with block masks — no kernel of its own. Pair (i, j) is kept iff j ≤ i and (i − j ≤ w or
 * the tokens share a group); the kept pairs split into two disjoint sets:
 *
 *   A: pairs that share a group, counted once, in their lowest shared group c;
 *   B: local pairs (i − j ≤ w) that share no group.
 *
 * A runs over the group-sorted layout: every token is copied into each of its k groups, the copies
 * stably sorted by group (a counting sort: within a group the original order stays, so causal
 * attention inside a group's segment is causal in the original positions). The segments are the
 * block mask's segments (the packed-documents predicate), and with k ≥ 2 each row carries the bit
 * word m & (2^c − 1) (its memberships below its group c): a pair of one segment is visible only
 * where those words share no bit, i.e. where c is the lowest group the two tokens share (the spec's
 * multi-membership proposal: each pair counted once). B is the sliding-window attention (window
 * w + 1) in the original order with the bit words m: visible only where the tokens share no
 * group. The k copies' results of A and B's merge by their logsumexp (ops/attention_merge.ts);
 * RoPE was applied before, at the original positions. With k = 1 the words of A are all 0 and it
 * is the paper's sort + segments.
 *
 * Masks are built from the segment boundaries (attention/block_mask.ts blockMaskFromBlocks), in
 * time proportional to the blocks visited. Shapes: q (B, H, T, D), k and v (B, Hkv, T, D),
 * positions 0 … T − 1; bits (B·T) the membership words (groups.ts membershipBits).
 */
import { blockMaskFromBlocks, causalBlockCount, MASK_K_BLOCK, MASK_Q_BLOCK, type BlockMask } from '../block_mask.ts';
import { ArgumentError } from '../../errors.ts';
import { attention, attentionWithLse } from '../../ops/attention.ts';
import { mergeByLse, type MergePartInput } from '../../ops/attention_merge.ts';
import { tensor } from '../../ops/creation.ts';
import { embedding, gatherRows } from '../../ops/indexing.ts';
import { reshape } from '../../ops/layout.ts';
import type { Tensor } from '../../tensor/tensor.ts';

/** The group-sorted layout of one batch of membership words: rows, their positions and groups. */
export interface SortedGroups {
  /** Rows per batch entry: k·T (every token in exactly k groups). */
  rows: number;
  /** Per batch entry and row (B·rows): the token's position. */
  position: Int32Array;
  /** Per batch entry and row: the row's group (the segment id). */
  group: Int32Array;
  /** Per batch entry, K + 1 offsets: group c's rows are [start[b·(K+1) + c], start[b·(K+1) + c + 1]). */
  start: Int32Array;
  /** Per batch entry, token and copy (B·T·k): the row holding the token's copy in its j-th group (ascending groups). */
  copyRow: Int32Array;
}

/** The stable counting sort of every token's copies by group (A4: sort by group; multi-membership: one copy per group). */
export function sortByGroup(bits: Uint32Array, batch: number, t: number, groups: number, topK: number): SortedGroups {
  const rows = topK * t;
  const position = new Int32Array(batch * rows), group = new Int32Array(batch * rows);
  const start = new Int32Array(batch * (groups + 1)), copyRow = new Int32Array(batch * t * topK);
  for (let b = 0; b < batch; b++) {
    const st = b * (groups + 1);
    for (let p = 0; p < t; p++) {
      const w = bits[b * t + p];
      let n = 0;
      for (let c = 0; c < groups; c++) if (w & (1 << c)) { start[st + c + 1]++; n++; }
      if (n !== topK) throw new ArgumentError(`focus: token ${p} of batch entry ${b} is in ${n} groups (word ${w}); expected ${topK}`);
    }
    for (let c = 0; c < groups; c++) start[st + c + 1] += start[st + c];
    const next = Array.from(start.subarray(st, st + groups));
    for (let p = 0; p < t; p++) {
      const w = bits[b * t + p];
      let j = 0;
      for (let c = 0; c < groups; c++) {
        if (!(w & (1 << c))) continue;
        const r = next[c]++;
        position[b * rows + r] = p;
        group[b * rows + r] = c;
        copyRow[(b * t + p) * topK + j++] = r;
      }
    }
  }
  return { rows, position, group, start, copyRow };
}

/**
 * Set A's mask over the sorted rows: query block qb visits the key blocks from its first row's
 * segment start to its diagonal; a block is whole where the query block lies in one segment, the
 * key block inside it and wholly at or before the block's first row, and no bit words apply.
 */
export function groupSegmentsMask(s: SortedGroups, batch: number, groups: number, bits?: Int32Array): BlockMask {
  const r = s.rows, QB = MASK_Q_BLOCK, KB = MASK_K_BLOCK;
  const out = new Int32Array(Math.ceil(r / KB));
  return blockMaskFromBlocks({ batch, heads: 1, tq: r, tk: r, segments: s.group, ...(bits ? { bits } : {}) }, (b, _h, qb) => {
    const i0 = qb * QB, i1 = Math.min(r, i0 + QB) - 1;
    const g0 = s.group[b * r + i0], g1 = s.group[b * r + i1];
    const first = s.start[b * (groups + 1) + g0];
    let n = 0;
    for (let kb = Math.floor(first / KB); kb <= Math.floor(i1 / KB); kb++) {
      const j0 = kb * KB, j1 = j0 + KB - 1;
      const whole = !bits && g0 === g1 && j0 >= first && j1 <= i0;
      out[n++] = 2 * kb + (whole ? 0 : 1);
    }
    return out.subarray(0, n);
  });
}

/** Set B's mask: the band of w + 1 keys back from each query, every block partial (the bit words decide). */
export function crossGroupBandMask(bits: Uint32Array, batch: number, t: number, window: number): BlockMask {
  const QB = MASK_Q_BLOCK, KB = MASK_K_BLOCK;
  const out = new Int32Array(Math.ceil(t / KB));
  return blockMaskFromBlocks({ batch, heads: 1, tq: t, tk: t, window: window + 1, bits }, (_b, _h, qb) => {
    const i0 = qb * QB, i1 = Math.min(t, i0 + QB) - 1;
    let n = 0;
    for (let kb = Math.floor(Math.max(0, i0 - window) / KB); kb <= Math.floor(i1 / KB); kb++) out[n++] = 2 * kb + 1;
    return out.subarray(0, n);
  });
}

/**
 * Rows `keys` of batch entry b of x (B, heads, T, W) → (1, heads, R, W), x (a cache) read only at
 * those rows: with one batch entry, gatherRows with the R keys as the heads' shared list; else one
 * embedding lookup in x seen as a (B·heads·T, W) table (heads·R ids).
 */
export function gatherEntryRows(x: Tensor, b: number, keys: Int32Array): Tensor {
  const [batch, heads, t, w] = x.shape, r = keys.length;
  if (batch === 1) return gatherRows(x, tensor(keys, [1, r], { dtype: 'i32', backend: x.backend }), 2);
  const ids = new Int32Array(heads * r);
  for (let h = 0; h < heads; h++) for (let i = 0; i < r; i++) ids[h * r + i] = (b * heads + h) * t + keys[i];
  return reshape(embedding(reshape(x, [batch * heads * t, w]), tensor(ids, [ids.length], { dtype: 'i32', backend: x.backend })), [1, heads, r, w]);
}

/** A batch's row lists (B·R positions, R per entry) as the (B, R) i32 tensor gatherRows and mergeByLse read. */
export function rowLists(rows: Int32Array, batch: number, r: number, backend: Tensor['backend']): Tensor {
  return tensor(rows.subarray(0, batch * r), [batch, r], { dtype: 'i32', backend });
}

/** What the sparse prefill ran: the masks' visited blocks against full causal attention's, for the pairs-retained figures. */
export interface FocusPrefillStats { blocksA: number; blocksB: number; causalBlocks: number }

/**
 * The host's half of the sparse prefill for one batch of membership words: the sort, both masks
 * (built for heads = 1, so any head split of q, k and v takes them), and for each of the k copies
 * the rows that bring A's results back to the positions. `dense` where k = K: every pair is kept,
 * and plain causal attention runs instead. Masks may be uploaded once (ops/attention.ts uploadMask)
 * by a caller that runs the plan many times.
 */
export interface FocusPrefillPlan {
  batch: number; t: number; window: number;
  dense: boolean;
  sorted?: SortedGroups;
  maskA?: BlockMask; maskB?: BlockMask;
  /** Per copy j: (B·T) rows of A holding each position's j-th copy. */
  copies: Int32Array[];
}

export function planFocusPrefill(bits: Uint32Array, batch: number, t: number, o: { groups: number; topK: number; window: number }): FocusPrefillPlan {
  if (bits.length !== batch * t) throw new ArgumentError(`focus: ${bits.length} membership words for batch ${batch} × ${t} positions`);
  if (o.topK === o.groups) return { batch, t, window: o.window, dense: true, copies: [] };
  const s = sortByGroup(bits, batch, t, o.groups, o.topK);
  let lowBits: Int32Array | undefined;
  if (o.topK > 1) {
    lowBits = new Int32Array(batch * s.rows);
    for (let bb = 0; bb < batch; bb++) for (let r = 0; r < s.rows; r++) {
      const at = bb * s.rows + r;
      lowBits[at] = bits[bb * t + s.position[at]] & ((1 << s.group[at]) - 1);
    }
  }
  const copies = Array.from({ length: o.topK }, () => new Int32Array(batch * t));
  for (let i = 0; i < batch * t; i++) for (let j = 0; j < o.topK; j++) copies[j][i] = s.copyRow[i * o.topK + j];
  return { batch, t, window: o.window, dense: false, sorted: s, maskA: groupSegmentsMask(s, batch, o.groups, lowBits), maskB: crossGroupBandMask(bits, batch, t, o.window), copies };
}

/**
 * The device's half: q (B, H, T, D), k and v (B, Hkv, T, D), any H, through a plan → (B, H, T, D).
 * The row lists go up once; runSortedPrefill does the rest.
 */
export function runFocusPrefill(q: Tensor, k: Tensor, v: Tensor, plan: FocusPrefillPlan): Tensor {
  if (plan.dense) return attention(q, k, v);
  const [b, , t] = q.shape;
  const s = plan.sorted!;
  return runSortedPrefill(q, k, v, {
    position: rowLists(s.position, b, s.rows, q.backend),
    copies: plan.copies.map((rows) => rowLists(rows, b, t, q.backend)),
    maskA: plan.maskA!, maskB: plan.maskB!, window: plan.window,
  });
}

/** A plan's row lists on the device and its masks: what runSortedPrefill runs (a host plan's, uploaded, or device_plan.ts's). */
export interface SortedPrefill {
  /** (B, k·T) i32: the position of each sorted row. */
  position: Tensor;
  /** Per copy j: (B, T) i32, the sorted row of each position's j-th copy. */
  copies: Tensor[];
  maskA: BlockMask; maskB: BlockMask;
  window: number;
}

/**
 * The sparse prefill from row lists on the device: q, k and v gathered into the sorted layout (one
 * gatherRows each), set A over them, set B over the band, and the merge, which reads A's k copies
 * in place through their row lists.
 */
export function runSortedPrefill(q: Tensor, k: Tensor, v: Tensor, p: SortedPrefill): Tensor {
  const [oA, lA] = attentionWithLse(gatherRows(q, p.position, 2), gatherRows(k, p.position, 2), gatherRows(v, p.position, 2), { mask: p.maskA });
  const [oB, lB] = attentionWithLse(q, k, v, { mask: p.maskB, window: p.window + 1 });
  const parts: MergePartInput[] = p.copies.map((rows) => [oA, lA, rows] as const);
  parts.push([oB, lB]);
  return mergeByLse(parts, q.dtype);
}

/** Blocks the plan's masks visit, added to `stats` beside full causal attention's (dense: every causal block). */
export function addPrefillStats(stats: FocusPrefillStats, plan: FocusPrefillPlan): void {
  const causal = plan.batch * causalBlockCount(plan.t);
  stats.causalBlocks += causal;
  if (plan.dense) stats.blocksA += causal;
  else { stats.blocksA += plan.maskA!.visited; stats.blocksB += plan.maskB!.visited; }
}

/**
 * The exact hard Focus attention over positions 0 … T − 1 (see the file's comment): equal to
 * dense.ts hardFocusDense (the masked reference). No autograd.
 */
export function focusSparseAttention(q: Tensor, k: Tensor, v: Tensor, bits: Uint32Array, o: { groups: number; topK: number; window: number }, stats?: FocusPrefillStats): Tensor {
  const plan = planFocusPrefill(bits, q.shape[0], q.shape[2], o);
  if (stats) addPrefillStats(stats, plan);
  return runFocusPrefill(q, k, v, plan);
}
