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
import { MASK_K_BLOCK } from '../block_mask.ts';
import { deviceMask } from '../device_mask.ts';
import { attentionWithLse, type UploadedMask } from '../../ops/attention.ts';
import { mergeByLse, type MergePartInput } from '../../ops/attention_merge.ts';
import { cast } from '../../ops/cast.ts';
import { tensor } from '../../ops/creation.ts';
import { add, eq, lt, mul, sub } from '../../ops/elementwise.ts';
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
  const parts: MergePartInput[] = [];
  const all = decodeLists(b, l, 0, be); // the lists, uploaded once for the k parts
  for (let j = 0; j < o.topK; j++) {
    const c = narrow(groupsOf, 2, j, 1); // (B, 1, 1)
    const isC = eq(ids, c), below = lt(ids, c); // (B, 1, K)
    const keyWords = wordsOnDevice(add(mul(sub(1, m), isC), mul(m, below))); // (B, Tmax)
    const queryWord = wordsOnDevice(add(isC, mul(mp, below))); // (B, 1)
    // The query's own position carries the query's word (a device copy, no host array of the cache's length).
    const words = concat([narrow(keyWords, 1, 0, p), reshape(queryWord, [b, 1]), ...(p + 1 < tmax ? [narrow(keyWords, 1, p + 1, tmax - p - 1)] : [])], 1);
    parts.push(attentionWithLse(q, k, v, { kvLength: l, mask: decodeMask(all, b, tmax, l, 0, words) }));
  }
  parts.push(attentionWithLse(q, k, v, { kvLength: l, window: o.window + 1, mask: decodeMask(decodeLists(b, l, o.window + 1, be), b, tmax, l, o.window + 1, wordsOnDevice(m)) }));
  parts.push(attentionWithLse(q, k, v, { kvLength: l, window: 1 }));
  return mergeByLse(parts, q.dtype);
}

/**
 * The lists of one query row at position l − 1 over keys 0 … l − 1 (in a window of `window` keys,
 * or all), every listed block partial, one row per batch entry: (B, n + 1), the count then the
 * entries. O(l/64) on the host, nothing of the cache's length.
 */
function decodeLists(batch: number, l: number, window: number, backend: Tensor['backend']): Tensor {
  const p = l - 1;
  const first = window ? Math.max(0, Math.floor((p - window + 1) / MASK_K_BLOCK)) : 0;
  const n = Math.floor(p / MASK_K_BLOCK) - first + 1;
  const row = Int32Array.from({ length: n + 1 }, (_, i) => (i === 0 ? n : 2 * (first + i - 1) + 1));
  const rows = new Int32Array(batch * (n + 1));
  for (let b = 0; b < batch; b++) rows.set(row, b * (n + 1));
  return tensor(rows, [batch, n + 1], { dtype: 'i32', backend });
}

/** The mask of those lists with the bit words (B, Tmax) on the device (device_mask.ts). */
function decodeMask(lists: Tensor, batch: number, tk: number, l: number, window: number, words: Tensor): UploadedMask {
  return deviceMask({ batch, heads: 1, tq: 1, tk, kvLength: l, qOffset: l - 1, causal: true, window }, lists, { bits: words });
}
