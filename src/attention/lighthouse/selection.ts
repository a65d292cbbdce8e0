/**
 * Lighthouse's selection (specs/lighthouse_fon.md §1.5): a tile-stratified coarse-to-fine top-k
 * cascade, no gradient, run on the host for each (batch, head). Per tile, starting from the tile's
 * Cc coarsest entries, at each level l = L … 2: A = the `qk` candidates with the largest s^QK_l,
 * B = the `tile − qk` of the rest with the largest s^KQ_l; the other candidates stay as
 * kept-coarse "filler", A ∪ B stay as refined parents, and their p children each are the next
 * level's candidates; the level-1 candidates are emitted as tokens. Ties go to the lower index
 * (the authors' bitonic sort leaves them unspecified). Where a tile has no more than `tile`
 * candidates every one is refined (geometry.ts, FON's relaxation of the authors' Cc ≥ 128).
 *
 * Ordering with integer sort keys (§1.5's caveat, FON's choice): the authors pack float32 keys
 * c_l·i (kept-coarse), c_l·(i+1) − 2^(1−l) (refined parent) and t (token), which stop being exact
 * once ulp(N) > 2^(1−L). FON multiplies every key by 2^(L−1): kept-coarse 2^(L−1)·c_l·i, refined
 * parent 2^(L−1)·c_l·(i+1) − 2^(L−l), token 2^(L−1)·t, the same order in exact integers (JS numbers,
 * exact below 2^53, i.e. for 2^(L−1)·Np < 2^53). Keys are distinct, so the order is total; sorted,
 * the gathered sequence is in causal order (§1.6): every entry's window ends at or after the window
 * end of every entry before it.
 */
import { FonError } from '../../errors.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { LighthouseGeometry } from './geometry.ts';
import { levelScores, tokenNorms } from './scores.ts';

/** The selection of one call: for each (batch, head), the pyramid rows to gather, in causal order. */
export interface LighthouseSelection {
  readonly geometry: LighthouseGeometry;
  /** (B·H, S) row-major: concatenated-pyramid rows (geometry.offset[l−1] + i for entry i of level l). */
  readonly rows: Int32Array;
  /** B·H. */
  readonly lists: number;
}

/** The integer sort key of entry `index` of `level`; `refined` for a parent whose children are in the sequence. */
export function sortKey(g: LighthouseGeometry, level: number, index: number, refined: boolean): number {
  const scale = 2 ** (g.levels - 1), c = g.span[level - 1];
  return refined ? scale * c * (index + 1) - 2 ** (g.levels - level) : scale * c * index;
}

/** The `want` entries of `cand` with the largest `score` (ties: lower index first). */
function top(cand: readonly number[], score: Float32Array, want: number): number[] {
  return [...cand].sort((a, b) => score[b] - score[a] || a - b).slice(0, want);
}

/** One (batch, head)'s gathered rows in causal order, from its per-level scores (index l − 1 = level l). */
export function selectRows(sQK: readonly Float32Array[], sKQ: readonly Float32Array[], g: LighthouseGeometry): Int32Array {
  const keys = new Float64Array(g.gathered), rows = new Int32Array(g.gathered);
  let m = 0;
  const emit = (level: number, i: number, refined: boolean): void => {
    keys[m] = sortKey(g, level, i, refined);
    rows[m++] = g.offset[level - 1] + i;
  };
  for (let tile = 0; tile < g.tiles; tile++) {
    let cand: number[] = [];
    for (let i = tile * g.perTile; i < (tile + 1) * g.perTile; i++) cand.push(i);
    for (let l = g.levels; l >= 2; l--) {
      let refined: number[];
      if (cand.length <= g.tile) refined = cand;
      else {
        const a = top(cand, sQK[l - 1], g.qk);
        const inA = new Set(a);
        refined = [...a, ...top(cand.filter((i) => !inA.has(i)), sKQ[l - 1], g.tile - g.qk)];
      }
      const isRefined = new Set(refined);
      for (const i of cand) emit(l, i, isRefined.has(i));
      cand = [];
      for (const i of [...refined].sort((x, y) => x - y)) for (let j = 0; j < g.pool; j++) cand.push(g.pool * i + j);
    }
    for (const t of cand) emit(1, t, false);
  }
  if (m !== g.gathered) throw new FonError(`lighthouse: the cascade emitted ${m} entries where the geometry expects ${g.gathered} (a bug)`);
  const order = Array.from({ length: m }, (_, i) => i).sort((a, b) => keys[a] - keys[b]);
  return Int32Array.from(order, (i) => rows[i]);
}

/**
 * The selection for q (B, H, N, D) and k (B, H, N, D) (k already repeated to H heads): the `norm`
 * scores (scores.ts), then the cascade for every (batch, head).
 */
export function lighthouseSelect(q: Tensor, k: Tensor, g: LighthouseGeometry): LighthouseSelection {
  const [b, h, n] = q.shape;
  const qn = tokenNorms(q), kn = tokenNorms(k);
  const lists = b * h, rows = new Int32Array(lists * g.gathered);
  for (let s = 0; s < lists; s++) rows.set(selectRows(levelScores(qn, s * n, g), levelScores(kn, s * n, g), g), s * g.gathered);
  return { geometry: g, rows, lists };
}
