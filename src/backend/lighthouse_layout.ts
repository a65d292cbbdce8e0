/**
 * The arithmetic of a Lighthouse selection (specs/lighthouse_fon.md §1.3, §1.5) that the layer's
 * geometry (attention/lighthouse/geometry.ts), the op (ops/lighthouse.ts) and every backend's
 * kernel share, so that it exists once: from the tile structure, the padded length, the levels'
 * spans, entry counts and offsets in the concatenated pyramid, the candidates each tile has at each
 * level, the entries a tile emits, the gathered length S, and the integer sort keys.
 *
 * Per tile, level L has the tile's Cc coarsest entries as candidates; level l − 1 has the p
 * children of each refined level-l candidate, min(tile, n_l)·p of them (every candidate is refined
 * where there are no more than `tile`). Every candidate of every level is emitted (kept-coarse,
 * refined parent or token), so a tile emits Σ_l n_l entries whatever the scores, and S = T·Σ_l n_l.
 */

/** The shape of one selection: n real tokens, L levels of pooling factor p, T tiles of Cc coarsest entries, `tile` refined per tile and level. */
export interface LighthouseShape {
  n: number;
  levels: number;
  pool: number;
  tiles: number;
  /** Cc, the coarsest entries each tile owns. */
  perTile: number;
  tile: number;
}

/** Everything a selection's shape fixes; arrays are indexed by level − 1. */
export interface LighthouseLayout {
  /** Np = T·Cc·p^(L−1) ≥ n. */
  readonly padded: number;
  /** c_l = p^(l−1). */
  readonly span: readonly number[];
  /** Entries of level l, Np / c_l. */
  readonly count: readonly number[];
  /** Where level l starts in the concatenated pyramid. */
  readonly offset: readonly number[];
  /** Rows of the concatenated pyramid. */
  readonly total: number;
  /** n_l, the candidates one tile has at level l (n_L = Cc). */
  readonly candidates: readonly number[];
  /** Where level l's candidates start among a tile's emitted entries, coarsest level first (level L at 0). */
  readonly candidateBase: readonly number[];
  /** Entries one tile emits, Σ_l n_l. */
  readonly emitted: number;
  /** S = T · emitted. */
  readonly gathered: number;
}

export function lighthouseLayout(s: LighthouseShape): LighthouseLayout {
  const { levels, pool, tiles, perTile, tile } = s;
  const padded = tiles * perTile * pool ** (levels - 1);
  const span: number[] = [], count: number[] = [], offset: number[] = [];
  let total = 0;
  for (let l = 1; l <= levels; l++) {
    span.push(pool ** (l - 1));
    count.push(padded / pool ** (l - 1));
    offset.push(total);
    total += padded / pool ** (l - 1);
  }
  const candidates = new Array<number>(levels), candidateBase = new Array<number>(levels);
  let cand = perTile, emitted = 0;
  for (let l = levels; l >= 1; l--) {
    candidates[l - 1] = cand;
    candidateBase[l - 1] = emitted;
    emitted += cand;
    cand = Math.min(tile, cand) * pool;
  }
  return { padded, span, count, offset, total, candidates, candidateBase, emitted, gathered: tiles * emitted };
}

/**
 * The integer sort key of entry `index` of `level` (§1.5's caveat, FON's choice): the authors'
 * float32 keys c_l·i (kept-coarse), c_l·(i+1) − 2^(1−l) (refined parent) and t (token), times
 * 2^(L−1): kept-coarse 2^(L−1)·c_l·i, refined parent 2^(L−1)·c_l·(i+1) − 2^(L−l), token 2^(L−1)·t.
 * The same order in exact integers; distinct for distinct entries.
 */
export function lighthouseSortKey(s: Pick<LighthouseShape, 'levels' | 'pool'>, level: number, index: number, refined: boolean): number {
  const scale = 2 ** (s.levels - 1), c = s.pool ** (level - 1);
  return refined ? scale * c * (index + 1) - 2 ** (s.levels - level) : scale * c * index;
}
