/**
 * One Spot query's selection and its block mask on the device (backends whose reads are
 * asynchronous: webgpu), with no read to the host: the same rule as the host's selectBlocks
 * (selection.ts) through Backend.selectBlockList, which runs the threshold search (one workgroup per
 * batch entry, on block scores and log-masses: selector.ts decodeBlockScores) and writes, in the same
 * pass, the block mask of what it kept as a fine mask: one listed block per selected 16-token block
 * (kBlock MASK_K_FINE, read by the split-K decode kernel only), so a step reads the selected keys and
 * no others and tests no segment per key. Under static top-K the rule fixes each list's length, so
 * the mask carries it (BlockMask.counts) and the decode copies nothing from the table. (The host
 * path's mask, decode_mask.ts, lists 64-key blocks with a segment id per key; both select the same
 * keys.) Also the tokens the selected blocks hold and, on request, which key positions they are (the
 * layer's budget and recall figures, from the flags).
 */
import { ArgumentError } from '../../errors.ts';
import { MASK_K_FINE } from '../block_mask.ts';
import { deviceMaskShape } from '../device_mask.ts';
import type { UploadedMask } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { mul, sub } from '../../ops/elementwise.ts';
import { broadcastTo, narrow, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import { gatherListed, selectBlockList } from '../../ops/select.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { selectArgs, SPOT_BLOCK, type SpotRule } from './selection.ts';

/**
 * Block scores and log-masses (B, 1, N) f32 of one query at position q (N ≥ ⌊q/16⌋ + 1 blocks) →
 * the mask of attention(q (B, H, 1, D), k, v (B, Hkv, tk, D), { kvLength: q + 1, mask }), and
 * functions giving the tokens selected over the batch, (1) f32, and the selected key positions
 * (B, 16·(⌊q/16⌋ + 1)) i32, 1 where selected, of which the first q + 1 are the causal keys (each a
 * few ops more: asked for only where measured).
 */
export function selectOnDevice(scores: Tensor, logMass: Tensor, q: number, rule: SpotRule, tk: number, withFlags = true): { mask: UploadedMask; tokens: () => Tensor; selected: () => Tensor } {
  const b = scores.shape[0];
  const valid = Math.floor(q / SPOT_BLOCK) + 1, l = q + 1;
  const out = selectList(scores, logMass, q, rule, tk, withFlags);
  // The flags' valid part, made only where a figure asks for it (a view costs host time each step).
  const flags = () => {
    if (!out.flags) throw new ArgumentError('spot: this selection was made without its flags (selectOnDevice withFlags false): no tokens or key positions to give');
    return narrow(out.flags, 1, 0, valid);
  };
  // 16 tokens a selected block, less the part of each query's own block (always selected) past it.
  const tokens = () => reshape(sub(mul(sum(cast(flags(), 'f32')), SPOT_BLOCK), b * (SPOT_BLOCK * valid - l)), [1]);
  const selected = () => reshape(broadcastTo(reshape(flags(), [b, valid, 1]), [b, valid, SPOT_BLOCK]), [b, valid * SPOT_BLOCK]);
  const shape = deviceMaskShape({ batch: b, heads: 1, tq: 1, tk, kvLength: l, qOffset: q, causal: true, window: 0, kBlock: MASK_K_FINE }, valid + 1);
  const counts = rule.kind === 'top-k' ? new Array<number>(b).fill(topKBlocks(q, rule).blocks) : undefined;
  return { mask: Object.assign({}, shape, { device: out.table }, counts ? { counts } : {}), tokens, selected };
}

/**
 * The blocks static top-K selects for a query at position q, and the tokens they hold: the reserved
 * blocks and min(open, count) open ones, the query's own (partial, last in block order) among the
 * reserved. Known on the host: the rule fixes the count, whatever the scores.
 */
export function topKBlocks(q: number, rule: SpotRule & { kind: 'top-k' }): { blocks: number; tokens: number } {
  const a = selectArgs(q, rule);
  const open = a.high - a.low;
  const blocks = a.valid - open + Math.min(open, a.count);
  return { blocks, tokens: blocks * SPOT_BLOCK - (SPOT_BLOCK * a.valid - (q + 1)) };
}

/**
 * One Spot query's static top-K selection gathered instead of masked (SpotAttention.decodePath
 * 'gather'): the selection's list (Backend.selectBlockList, as selectOnDevice makes it), then the
 * listed blocks' K and V rows compacted in block order (gatherListed) for a plain dense decode over
 * `kvLength` keys, which
 * drops the query's own block's rows past it (the last rows: that block comes last). Top-K only: its
 * block count is known on the host (topKBlocks), so neither the gather nor the decode waits on a
 * read. The same keys as the mask path; the decode sums them in another order.
 */
export function gatherOnDevice(scores: Tensor, logMass: Tensor, q: number, rule: SpotRule & { kind: 'top-k' }, k: Tensor, v: Tensor): { k: Tensor; v: Tensor; kvLength: number } {
  return gatherSelected(selectList(scores, logMass, q, rule, k.shape[2], false).table, q, rule, k, v);
}

/**
 * The selection of one query at position q as selectBlockList makes it: flags (B, N) (where
 * `withFlags`) and the fine mask's table, for a cache of tk keys.
 */
export function selectList(scores: Tensor, logMass: Tensor, q: number, rule: SpotRule, tk: number, withFlags = true): { flags?: Tensor; table: Tensor } {
  const b = scores.shape[0], n = scores.shape[2];
  return selectBlockList(reshape(scores, [b, n]), reshape(logMass, [b, n]), Object.assign(selectArgs(q, rule), { logMass: true }), { fine: SPOT_BLOCK, tk, kvLength: q + 1, flags: withFlags });
}

/** gatherOnDevice from a selectList table (its second half: benchmarks time it apart). */
export function gatherSelected(table: Tensor, q: number, rule: SpotRule & { kind: 'top-k' }, k: Tensor, v: Tensor): { k: Tensor; v: Tensor; kvLength: number } {
  const { blocks, tokens } = topKBlocks(q, rule);
  const g = gatherListed(table, k, v, { fine: SPOT_BLOCK, count: blocks });
  return { k: g.k, v: g.v, kvLength: tokens };
}
