/**
 * One Focus decoding step on a backend whose reads are asynchronous (webgpu): the query at position
 * p = kvLength − 1 over the whole cache through the shared decode kernels and block masks with bit
 * words, its membership kept on the device, no read to the host. The kept keys split into
 *
 *   A_j (j = 0 … k − 1): keys that share a group with the query, counted in their lowest shared
 *        group c_j, the query's j-th group: with the query's word Q = 2^c + (m_p below c) and each
 *        key's K = (c ∉ m_t)·2^c + (m_t below c), Q & K = 0 exactly where c ∈ m_t and no lower
 *        group is shared (the pair visible where the words share no bit: block_mask.ts);
 *   B:   keys of the window (p − t ≤ w) that share no group with the query (plain words);
 *   S:   the query's own key (its word is the query's in A and shares a bit with itself in B);
 *
 * merged by their logsumexp (ops/attention_merge.ts). Each part reads the keys its mask lists, A's
 * every block up to p, so a step costs k + 1 passes over the cache (the rule is exact, not sparse:
 * the group's keys are spread over the cache). Words are sums of distinct powers of two over the
 * one-hot (i32 ops, no bitwise op needed). One query row per batch entry.
 */
import { blockMaskFromBlocks, MASK_K_BLOCK, type BlockMask } from '../block_mask.ts';
import { attentionWithLse, type UploadedMask } from '../../ops/attention.ts';
import { mergeByLse, type MergePartInput } from '../../ops/attention_merge.ts';
import { cast } from '../../ops/cast.ts';
import { arange, tensor } from '../../ops/creation.ts';
import { add, eq, lt, mul, sub, where } from '../../ops/elementwise.ts';
import { concat, narrow, reshape } from '../../ops/layout.ts';
import { sort } from '../../ops/scan_sort.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { groupIds, wordsOnDevice } from './groups.ts';

/**
 * q (B, H, 1, D) at position kvLength − 1 over the cache k, v (B, Hkv, Tmax, D); member (B, Tmax, K)
 * the one-hot membership of every cached position (rows past kvLength are never read as keys).
 */
export function focusDecodeOnDevice(q: Tensor, k: Tensor, v: Tensor, member: Tensor, o: { topK: number; window: number; kvLength: number }): Tensor {
  const b = q.shape[0];
  const [, tmax, groups] = member.shape;
  const l = o.kvLength, p = l - 1;
  const be = q.backend;
  const m = cast(member, 'i32'); // (B, Tmax, K)
  const ids = groupIds(groups, be);
  const mp = narrow(m, 1, p, 1); // (B, 1, K): the query's groups
  const groupsOf = narrow(sort(mp, -1, { descending: true }).indices, 2, 0, o.topK); // (B, 1, k): ascending
  const atQuery = reshape(eq(arange(0, tmax, 1, { dtype: 'i32', backend: be }), p), [1, tmax]);
  const parts: MergePartInput[] = [];
  const all = decodeMask(b, tmax, l, 0), allHead = tableHead(all, be); // the lists, uploaded once for the k parts
  for (let j = 0; j < o.topK; j++) {
    const c = narrow(groupsOf, 2, j, 1); // (B, 1, 1)
    const isC = eq(ids, c), below = lt(ids, c); // (B, 1, K)
    const keyWords = wordsOnDevice(add(mul(sub(1, m), isC), mul(m, below))); // (B, Tmax)
    const queryWord = wordsOnDevice(add(isC, mul(mp, below))); // (B, 1)
    parts.push(attentionWithLse(q, k, v, { kvLength: l, mask: withWords(all, allHead, where(atQuery, queryWord, keyWords)) }));
  }
  const band = decodeMask(b, tmax, l, o.window + 1);
  parts.push(attentionWithLse(q, k, v, { kvLength: l, window: o.window + 1, mask: withWords(band, tableHead(band, be), wordsOnDevice(m)) }));
  parts.push(attentionWithLse(q, k, v, { kvLength: l, window: 1 }));
  return mergeByLse(parts, q.dtype);
}

/** One query row at position l − 1 over keys 0 … l − 1 (in a window of `window` keys, or all), every listed block partial, bit words to follow. */
function decodeMask(batch: number, tk: number, l: number, window: number): BlockMask {
  const p = l - 1;
  const first = window ? Math.max(0, Math.floor((p - window + 1) / MASK_K_BLOCK)) : 0;
  const list = Int32Array.from({ length: Math.floor(p / MASK_K_BLOCK) - first + 1 }, (_, n) => 2 * (first + n) + 1);
  return blockMaskFromBlocks({ batch, heads: 1, tq: 1, tk, kvLength: l, window, bits: new Uint32Array(batch * tk) }, () => list);
}

/** A host-listed mask's table up to its bit words, on the device. */
function tableHead(m: BlockMask, backend: Tensor['backend']): Tensor {
  return tensor(m.table.subarray(0, m.bitsOffset), [m.bitsOffset], { dtype: 'i32', backend });
}

/** The mask with its table on the device: the uploaded head and the bit words (B, Tmax) i32, the table's last section. */
function withWords(m: BlockMask, head: Tensor, words: Tensor): UploadedMask {
  return { ...m, device: concat([head, reshape(cast(words, 'i32'), [words.size])], 0) };
}
