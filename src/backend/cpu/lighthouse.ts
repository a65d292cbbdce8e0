/**
 * CPU reference of Backend.lighthouseSelect and Backend.invertRows: Lighthouse's `norm` scores and
 * its tile-stratified coarse-to-fine cascade (specs/lighthouse_fon.md §1.4, §1.5), by plain loops
 * per (batch, head) list, and the inverse of row lists. The WebGPU kernels
 * (backend/webgpu/kernels/lighthouse.wgsl) are checked against these, row for row.
 *
 * Scores (§1.4, FON's variant): s_t = ‖x_t‖₂², the squared norm, summed in f32 in index order; a
 * level-l entry scores the max over its window (max-pooled, not the norm of the pooled vector);
 * padded tokens score 0. The square is the norm's order (the square root is monotone) without the
 * root's rounding, which can tie two distinct norms and whose precision WGSL leaves to the device;
 * the scores only rank, so nothing else changes.
 *
 * Cascade, per tile, from the tile's Cc coarsest entries, at each level l = L … 2: A = the `qk`
 * candidates with the largest s^QK_l, B = the `tile − qk` of the rest with the largest s^KQ_l; the
 * other candidates stay as kept-coarse "filler", A ∪ B stay as refined parents, and their p children
 * each are the next level's candidates; the level-1 candidates are emitted as tokens. Ties go to the
 * lower index (the authors' bitonic sort leaves them unspecified). Where a tile has no more than
 * `tile` candidates every one is refined (FON's relaxation of the authors' Cc ≥ 128). The emitted
 * entries are sorted by their integer keys (backend/lighthouse_layout.ts lighthouseSortKey):
 * causal order (§1.6).
 */
import { ArgumentError, FonError } from '../../errors.ts';
import type { InvertRowsArgs, LighthouseSelectArgs } from '../backend.ts';
import { lighthouseLayout, lighthouseSortKey, type LighthouseShape } from '../lighthouse_layout.ts';
import { f32, type CpuHandle, type CpuRef } from './host.ts';

/** s_t = Σ_j x_tj² (f32, index order) of each of the `rows` rows of x (rows · d values). */
export function squaredNorms(x: Float32Array, rows: number, d: number): Float32Array {
  const out = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let acc = 0;
    for (let j = 0; j < d; j++) { const v = x[r * d + j]; acc = Math.fround(acc + Math.fround(v * v)); }
    out[r] = acc;
  }
  return out;
}

/**
 * One list's per-level scores from its n token scores (`scores` at `at` … at + n − 1): level 1 is
 * the scores padded with zeros to Np, level l + 1 the max of p consecutive level-l scores (the max
 * of maxes is the window's max). Index l − 1 holds level l.
 */
export function levelScores(scores: Float32Array, at: number, s: LighthouseShape): Float32Array[] {
  const lay = lighthouseLayout(s);
  const first = new Float32Array(lay.padded);
  first.set(scores.subarray(at, at + s.n));
  const out = [first];
  for (let l = 2; l <= s.levels; l++) {
    const finer = out[l - 2], coarse = new Float32Array(lay.count[l - 1]);
    for (let i = 0; i < coarse.length; i++) {
      let m = finer[i * s.pool];
      for (let j = 1; j < s.pool; j++) m = Math.max(m, finer[i * s.pool + j]);
      coarse[i] = m;
    }
    out.push(coarse);
  }
  return out;
}

/** The `want` entries of `cand` with the largest `score` (ties: lower index first). */
function top(cand: readonly number[], score: Float32Array, want: number): number[] {
  return [...cand].sort((a, b) => score[b] - score[a] || a - b).slice(0, want);
}

/** One list's gathered rows in causal order, from its per-level scores (index l − 1 = level l). */
export function selectRows(sQK: readonly Float32Array[], sKQ: readonly Float32Array[], s: LighthouseShape & { qk: number }): Int32Array {
  const lay = lighthouseLayout(s);
  const keys = new Float64Array(lay.gathered), rows = new Int32Array(lay.gathered);
  let m = 0;
  const emit = (level: number, i: number, refined: boolean): void => {
    keys[m] = lighthouseSortKey(s, level, i, refined);
    rows[m++] = lay.offset[level - 1] + i;
  };
  for (let tile = 0; tile < s.tiles; tile++) {
    let cand: number[] = [];
    for (let i = tile * s.perTile; i < (tile + 1) * s.perTile; i++) cand.push(i);
    for (let l = s.levels; l >= 2; l--) {
      let refined: number[];
      if (cand.length <= s.tile) refined = cand;
      else {
        const a = top(cand, sQK[l - 1], s.qk);
        const inA = new Set(a);
        refined = [...a, ...top(cand.filter((i) => !inA.has(i)), sKQ[l - 1], s.tile - s.qk)];
      }
      const isRefined = new Set(refined);
      for (const i of cand) emit(l, i, isRefined.has(i));
      cand = [];
      for (const i of [...refined].sort((x, y) => x - y)) for (let j = 0; j < s.pool; j++) cand.push(s.pool * i + j);
    }
    for (const t of cand) emit(1, t, false);
  }
  if (m !== lay.gathered) throw new FonError(`lighthouse: the cascade emitted ${m} entries where the layout expects ${lay.gathered} (a bug)`);
  const order = Array.from({ length: m }, (_, i) => i).sort((a, b) => keys[a] - keys[b]);
  return Int32Array.from(order, (i) => rows[i]);
}

/** Backend.lighthouseSelect: the scores of every list, then the cascade of each. */
export function lighthouseSelect(q: CpuRef, k: CpuRef, a: LighthouseSelectArgs): CpuHandle {
  const S = lighthouseLayout(a).gathered;
  const qs = squaredNorms(f32(q), a.lists * a.n, a.d), ks = squaredNorms(f32(k), (a.lists / a.group) * a.n, a.d);
  const out = new Int32Array(a.lists * S);
  for (let s = 0; s < a.lists; s++) {
    out.set(selectRows(levelScores(qs, s * a.n, a), levelScores(ks, Math.floor(s / a.group) * a.n, a), a), s * S);
  }
  return out;
}

/** Backend.invertRows: each list's rows' places, m where a row is not listed; a repeated or out-of-range row throws. */
export function invertRows(rows: CpuRef, a: InvertRowsArgs): CpuHandle {
  const r = rows.h as Int32Array, out = new Int32Array(a.lists * a.n).fill(a.m);
  for (let s = 0; s < a.lists; s++) {
    for (let j = 0; j < a.m; j++) {
      const row = r[s * a.m + j];
      if (!(row >= 0 && row < a.n)) throw new ArgumentError(`invertRows: row ${row} (list ${s}, place ${j}) out of range [0, ${a.n})`);
      if (out[s * a.n + row] !== a.m) throw new ArgumentError(`invertRows: row ${row} listed twice in list ${s} (places ${out[s * a.n + row]} and ${j}); rows must be distinct within a list`);
      out[s * a.n + row] = j;
    }
  }
  return out;
}
