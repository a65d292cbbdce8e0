/**
 * SpotAttention's sparse decode as a block mask of the shared attention kernels (no kernel of its
 * own): the selected 16-token blocks of each batch entry's query become the key blocks the mask
 * lists (a mask block of 64 keys is visited where any of its four selector blocks is selected)
 * and a segment id per key position, 0 for a selected token and 1 for the others, the query's
 * position 0 (its own block is always selected: the recency set). The kernels' segment predicate
 * then hides every token of an unselected block inside a visited mask block, so the decode reads
 * what was selected and nothing else (specs/focus_spot.md B5 step 3), for every head of the layer.
 */
import { ArgumentError } from '../../errors.ts';
import { blockMaskFromLists, MASK_K_BLOCK, type BlockMask } from '../block_mask.ts';
import { SPOT_BLOCK } from './selection.ts';

/**
 * The mask of one decoding step: batch entry b's query sits at position kvLength − 1 of a cache of
 * `tk` rows and reads the selector blocks `selected[b]` (ascending block ids, its own block among
 * them). For attention(q (B, H, 1, D), k, v, { kvLength, mask }).
 */
export function spotDecodeMask(selected: readonly ArrayLike<number>[], kvLength: number, tk: number): BlockMask {
  const batch = selected.length;
  const own = Math.floor((kvLength - 1) / SPOT_BLOCK), blocks = Math.ceil(kvLength / SPOT_BLOCK);
  const segments = new Int32Array(batch * tk).fill(1);
  const lists: number[][] = [];
  for (let b = 0; b < batch; b++) {
    const keep = new Set<number>();
    let prev = -1;
    for (const sb of Array.from(selected[b])) {
      if (!Number.isInteger(sb) || sb < 0 || sb >= blocks || sb <= prev) throw new ArgumentError(`spot: batch entry ${b} selects block ${sb}; expected ascending blocks in 0 … ${blocks - 1}, each once`);
      prev = sb;
      segments.fill(0, b * tk + sb * SPOT_BLOCK, b * tk + Math.min(kvLength, (sb + 1) * SPOT_BLOCK));
      keep.add(Math.floor((sb * SPOT_BLOCK) / MASK_K_BLOCK));
    }
    if (!keep.size || prev !== own) throw new ArgumentError(`spot: batch entry ${b} must select its query's own block ${own}`);
    lists.push([...keep]);
  }
  return blockMaskFromLists({ batch, heads: 1, tq: 1, tk, kvLength, segments }, (b) => lists[b]);
}
