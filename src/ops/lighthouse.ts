/**
 * Lighthouse's selection as an op (Backend.lighthouseSelect; specs/lighthouse_fon.md §1.4–§1.5):
 * from q (B, H, N, D) and k (B, Hkv, N, D) the pyramid rows each (batch, head) gathers, in causal
 * order, made on the tensors' backend (no read to the host). No gradient. The layout arithmetic is
 * backend/lighthouse_layout.ts; the layer is attention/lighthouse.
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import { lighthouseLayout } from '../backend/lighthouse_layout.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireFloat, wrap } from './run.ts';

/** The tile structure of a selection: L levels of pooling factor p, T tiles of Cc coarsest entries, `tile` refined per tile and level, `qk` of them by query score. */
export interface LighthouseSelectOptions { levels: number; pool: number; tiles: number; perTile: number; tile: number; qk: number }

/**
 * The gathered rows, i32 (B·H, S), of q (B, H, N, D) and k (B, Hkv, N, D) (float dtypes; query
 * head h reads key head ⌊h/(H/Hkv)⌋): row off_l + i is entry i of level l of the concatenated
 * pyramid (lighthouseLayout's offsets), S = lighthouseLayout(…).gathered.
 */
export function lighthouseSelect(q: Tensor, k: Tensor, o: LighthouseSelectOptions): Tensor {
  const b = backendOf('lighthouseSelect', q, k);
  requireFloat('lighthouseSelect', q);
  requireFloat('lighthouseSelect', k);
  if (q.rank !== 4 || k.rank !== 4 || k.shape[0] !== q.shape[0] || k.shape[2] !== q.shape[2] || k.shape[3] !== q.shape[3] || k.shape[1] < 1 || q.shape[1] % k.shape[1] !== 0) {
    throw new ShapeError(`lighthouseSelect: q ${fmt(q.shape)} and k ${fmt(k.shape)} must be (B, H, N, D) and (B, Hkv, N, D) with Hkv dividing H`);
  }
  const [batch, heads, n, d] = q.shape;
  const { levels, pool, tiles, perTile, tile, qk } = o;
  const ints: Record<string, number> = { levels, tiles, perTile, tile };
  for (const [key, v] of Object.entries(ints)) if (!Number.isInteger(v) || v < 1) throw new ArgumentError(`lighthouseSelect: ${key} ${v} must be an integer ≥ 1`);
  if (!Number.isInteger(pool) || pool < 2 || (pool & (pool - 1)) !== 0) throw new ArgumentError(`lighthouseSelect: pool ${pool} must be a power of 2 ≥ 2`);
  if (!Number.isInteger(qk) || qk < 0 || qk > tile) throw new ArgumentError(`lighthouseSelect: qk ${qk} must be an integer in [0, tile = ${tile}]`);
  if (n < 1 || d < 1) throw new ShapeError(`lighthouseSelect: q ${fmt(q.shape)} has no tokens or no width`);
  const lay = lighthouseLayout({ n, levels, pool, tiles, perTile, tile });
  if (lay.padded < n) throw new ArgumentError(`lighthouseSelect: ${tiles} tiles of ${perTile} coarsest entries of ${pool}^${levels - 1} tokens cover ${lay.padded} tokens, fewer than the sequence's ${n}`);
  if (lay.total >= 2 ** 30) throw new ArgumentError(`lighthouseSelect: a pyramid of ${lay.total} rows (N = ${n} padded to ${lay.padded}); at most 2^30 − 1 are taken`);
  const args = { lists: batch * heads, group: heads / k.shape[1], n, d, levels, pool, tiles, perTile, tile, qk };
  return wrap(b, b.lighthouseSelect(ref(q), ref(k), args), [batch * heads, lay.gathered], 'i32');
}
