/**
 * One Spot query's selection and its block mask on the device (backends whose reads are
 * asynchronous: webgpu), with no read to the host: the same rule as the host's selectBlocks
 * (selection.ts) through Backend.selectOpen (the threshold search, one workgroup per batch entry),
 * then the mask decode_mask.ts builds on the host, built from the flags by device ops:
 *
 * - a segment id per key position, 0 in a selected 16-token block and 1 elsewhere (the query's own
 *   block is always selected, so its position carries 0);
 * - the 64-key mask blocks that hold a selected block, packed by Backend.compactFlags into the
 *   fixed-stride lists of device_mask.ts, whole where all four of its selector blocks are selected
 *   (the kernels then skip the segment test), else partial.
 * Also the tokens the selected blocks hold and which key positions they are (for the layer's budget
 * and recall figures), on the device.
 */
import { MASK_K_BLOCK } from '../block_mask.ts';
import { deviceMask } from '../device_mask.ts';
import type { UploadedMask } from '../../ops/attention.ts';
import { cast } from '../../ops/cast.ts';
import { arange, full } from '../../ops/creation.ts';
import { gather } from '../../ops/indexing.ts';
import { add, eq, lt, maximum, mul, sub, where } from '../../ops/elementwise.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { max, sum } from '../../ops/reduce.ts';
import { compactFlags, selectOpen } from '../../ops/select.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { selectArgs, SPOT_BLOCK, type SpotRule } from './selection.ts';

const PER_MASK_BLOCK = MASK_K_BLOCK / SPOT_BLOCK;

/**
 * Block scores and log-masses (B, 1, N) f32 of one query at position q (N ≥ ⌊q/16⌋ + 1 blocks;
 * selector.ts decodeBlockScores) → the
 * mask of attention(q (B, H, 1, D), k, v (B, Hkv, tk, D), { kvLength: q + 1, mask }), the tokens
 * selected over the batch, (1) f32, and the selected key positions (B, tk) i32, 1 where selected.
 */
export function selectOnDevice(scores: Tensor, logMass: Tensor, q: number, rule: SpotRule, tk: number): { mask: UploadedMask; tokens: Tensor; selected: Tensor } {
  const b = scores.shape[0], n = scores.shape[2];
  const a = selectArgs(q, rule);
  const valid = a.valid, l = q + 1;
  const be = scores.backend;
  const flags = narrow(selectOpen(reshape(scores, [b, n]), reshape(logMass, [b, n]), { ...a, logMass: true }), 1, 0, valid); // (B, valid) i32
  // 16 tokens a selected block, less the part of each query's own block (always selected) past it.
  const tokens = reshape(sub(mul(sum(cast(flags, 'f32')), SPOT_BLOCK), b * (SPOT_BLOCK * valid - l)), [1]);
  // Each key position: 1 in a selected block, 0 elsewhere (and past the blocks); its segment id is the opposite.
  const covered = Math.min(tk, valid * SPOT_BLOCK);
  const perToken = narrow(reshape(mul(reshape(flags, [b, valid, 1]), full([1, 1, SPOT_BLOCK], 1, { dtype: 'i32', backend: be })), [b, valid * SPOT_BLOCK]), 1, 0, covered);
  const selected = covered < tk ? concat([perToken, full([b, tk - covered], 0, { dtype: 'i32', backend: be })], 1) : perToken;
  const segments = sub(1, selected);
  // The 64-key blocks holding a selected block, packed: (B, kb + 1) = count, then the blocks ascending.
  const kb = Math.ceil(valid / PER_MASK_BLOCK), pad = kb * PER_MASK_BLOCK - valid;
  const padded = pad ? concat([flags, full([b, pad], 0, { dtype: 'i32', backend: be })], 1) : flags;
  const perMask = reshape(padded, [b, kb, PER_MASK_BLOCK]);
  const packed = compactFlags(max(perMask, 2)); // (B, kb + 1)
  const count = narrow(packed, 1, 0, 1), listed = narrow(packed, 1, 1, kb);
  // A mask block whose four selector blocks are all selected is whole (the kernels skip the segment
  // test there), except the query's own, which holds keys past it.
  const full4 = gather(reshape(sum(perMask, 2), [b, kb]), listed, 1); // (B, kb): selected blocks in each listed mask block
  const partial = maximum(lt(full4, PER_MASK_BLOCK), eq(listed, kb - 1));
  const entries = where(lt(arange(0, kb, 1, { dtype: 'i32', backend: be }), count), add(mul(listed, 2), partial), 0);
  const g = { batch: b, heads: 1, tq: 1, tk, kvLength: l, qOffset: q, causal: true, window: 0 };
  return { mask: deviceMask(g, concat([count, entries], 1), { segments }), tokens, selected };
}
