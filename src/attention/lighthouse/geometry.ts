/**
 * The shape of one Lighthouse call (specs/lighthouse_fon.md §1.2, §1.5, §1.14): the options a
 * layer is configured with, and for a sequence of N tokens the padded length, the levels' spans and
 * offsets in the concatenated pyramid, the tiles, and the gathered length S.
 *
 * Tail handling (§1.14, a FON choice): the authors' kernel needs N to be a multiple of
 * p^(L−1)·T·64 and puts S on a CUDA grid axis capped at 65,535. FON pads instead: the sequence is
 * padded with zero q, k, v rows to Np = T·Cc·p^(L−1), Cc = ⌈⌈N/p^(L−1)⌉ / T⌉, so every tile owns
 * the same Cc coarsest entries. Padding never changes an output at a real position: an entry whose
 * scatter range reaches a real position t has its window end ≤ t < N, and every entry sorted before
 * it lies at or before that end (§1.6), so no padded row is ever seen by it; and a padded token's
 * norm is 0, so the max-pooled scores of a partial window are those of its real tokens.
 *
 * Constants (§1.5, a FON relaxation): the per-tile budget `tile` (authors: 128) and the query-norm
 * share `qk` of it (authors: 64; the key-norm stream takes tile − qk) are options with the
 * authors' values as defaults, so tests can run tiny shapes. Where a tile's candidate set at some
 * level has no more than `tile` entries (Cc < tile: a short sequence, or the tiny test shapes),
 * every candidate is refined, where the authors' code asserts Cc ≥ 128; S is then smaller than the
 * formula, and with every block refined the layer is the summed multi-level attention. With
 * Cc ≥ tile, S = Np/p^(L−1) + (L−1)·p·k exactly (§1.5). The arithmetic from the tiles on (levels'
 * offsets, candidates per tile, S) is backend/lighthouse_layout.ts, shared with the kernels.
 */
import type { PyramidLevel } from '../../ops/pyramid_rows.ts';
import { ArgumentError } from '../../errors.ts';
import { lighthouseLayout } from '../../backend/lighthouse_layout.ts';

/**
 * The scorers FON implements (§1.4): `norm` (the default, the only one that runs in the authors'
 * release), ranking by the squared token norm (the same order; backend/cpu/lighthouse.ts says why),
 * and `dilated` (dilated.ts: causal attention over δ = 4 strided pseudo-heads, quadratic ÷ δ). `gla`
 * (a learned gate and a chunked linear-attention kernel) is not implemented.
 */
export const LIGHTHOUSE_SCORERS = ['norm', 'dilated'] as const;
export type LighthouseScorer = (typeof LIGHTHOUSE_SCORERS)[number];

/** A Lighthouse layer's options (the config entry without its type). */
export interface LighthouseOptions {
  /** L, the number of levels; level 1 is the tokens (L = 1: no pyramid, plain causal attention). */
  levels: number;
  /** p, the pooling factor: a power of 2, at least 2. */
  pool: number;
  /** k, the selection budget: a multiple of `tile`; T = k / tile tiles. */
  topk: number;
  /** The parameter-free scorer (§1.4). */
  scorer: LighthouseScorer;
  /** Entries refined per tile and level (authors: 128). */
  tile: number;
  /** Of those, the ones chosen by the query-norm stream s^QK (authors: 64); the rest by s^KQ. */
  qk: number;
  /** The `dilated` scorer's fold δ, tokens a pseudo-head strides over (authors: 4 throughout; dilated.ts DILATION when absent). */
  dilation?: number;
}

/** The authors' values (§1.5, §1.10): L = 3, p = 4, k = 1536, norm, 128 per tile, 64 by s^QK. */
export const LIGHTHOUSE_DEFAULTS: LighthouseOptions = { levels: 3, pool: 4, topk: 1536, scorer: 'norm', tile: 128, qk: 64 };

/** Everything about one call that depends only on N and the options. */
export interface LighthouseGeometry {
  readonly levels: number;
  readonly pool: number;
  /** k, the selection budget. */
  readonly topk: number;
  /** Real tokens N. */
  readonly n: number;
  /** Padded tokens Np ≥ N (a multiple of T·p^(L−1)). */
  readonly padded: number;
  /** T, the tiles. */
  readonly tiles: number;
  /** Cc, the coarsest entries each tile owns. */
  readonly perTile: number;
  /** c_l = p^(l−1), index l − 1. */
  readonly span: readonly number[];
  /** Entries of level l (Np / c_l), index l − 1. */
  readonly count: readonly number[];
  /** Where level l starts in the concatenated pyramid, index l − 1. */
  readonly offset: readonly number[];
  /** Rows of the concatenated pyramid. */
  readonly total: number;
  /** S, the gathered length (every (batch, head) gathers the same number of entries). */
  readonly gathered: number;
  readonly tile: number;
  readonly qk: number;
}

/** A positive power of two. */
export const isPowerOfTwo = (x: number): boolean => Number.isInteger(x) && x >= 1 && (x & (x - 1)) === 0;

/** The geometry of a call over N tokens; ArgumentError where the pyramid does not fit N. */
export function lighthouseGeometry(n: number, o: LighthouseOptions): LighthouseGeometry {
  const { levels, pool, topk, tile, qk } = o;
  if (!Number.isInteger(n) || n < 1) throw new ArgumentError(`lighthouse: sequence length ${n} must be a positive integer`);
  const coarsest = pool ** (levels - 1);
  if (coarsest > n) {
    throw new ArgumentError(`lighthouse: ${levels} levels with pool ${pool} need a coarsest window of ${pool}^${levels - 1} = ${coarsest} tokens, longer than the sequence's ${n}; use fewer levels or a longer sequence`);
  }
  const tiles = topk / tile;
  const perTile = Math.ceil(Math.ceil(n / coarsest) / tiles);
  const { padded, span, count, offset, total, gathered } = lighthouseLayout({ n, levels, pool, tiles, perTile, tile });
  return { levels, pool, topk, n, padded, tiles, perTile, span, count, offset, total, gathered, tile, qk };
}

/** The level (1 … L) of concatenated-pyramid row `row`. */
export function levelOf(g: LighthouseGeometry, row: number): number {
  let l = 1;
  while (l < g.levels && row >= g.offset[l]) l++;
  return l;
}

/**
 * The pyramid's levels as Backend.pyramidGather / pyramidScatter take them: `pool`, level l's entry
 * j the mean of tokens [j·c_l, (j + 1)·c_l) (§1.3; tokens past N count as the zero padding); `deliver`,
 * the scatter-back's ranges [c_l·(j + 1) − 1, c_l·(j + 2) − 1) with weight 1 (§1.7).
 */
export function pyramidLevels(g: LighthouseGeometry, use: 'pool' | 'deliver'): PyramidLevel[] {
  return g.span.map((c, i) => ({ offset: g.offset[i], count: g.count[i], span: c, shift: use === 'pool' ? 0 : c - 1, scale: use === 'pool' ? 1 / c : 1 }));
}
