/**
 * Lighthouse's geometry and selection (attention/lighthouse, specs/lighthouse_fon.md §1.5–§1.7,
 * §1.14): the gathered length S against the formula, the cascade on a hand-worked case, the causal
 * order of §1.6 (window ends never decrease along the gathered sequence), the integer sort keys,
 * the scatter-back (each entry to exactly its range R(m); fan-in ≤ L, every position from c_L − 1
 * on covered), and the padded tail. The cascade here is the CPU reference
 * (backend/cpu/lighthouse.ts); test/attention/lighthouse_webgpu.test.ts holds the WebGPU kernels to it.
 * Run: node --import tsx --test test/attention/lighthouse_selection.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lighthouseGeometry, levelOf, LIGHTHOUSE_DEFAULTS, type LighthouseGeometry, type LighthouseOptions } from '../../src/attention/lighthouse/geometry.ts';
import { levelScores, selectRows } from '../../src/backend/cpu/lighthouse.ts';
import { lighthouseSortKey as sortKey } from '../../src/backend/lighthouse_layout.ts';
import { lighthouseScatter } from '../../src/attention/lighthouse/scatter.ts';
import type { LighthouseSelection } from '../../src/attention/lighthouse/selection.ts';
import { invertRows } from '../../src/ops/indexing.ts';
import { uniformArray } from '../../src/ops/random.ts';
import * as fon from '../../src/index.ts';

const opts = (o: Partial<LighthouseOptions>): LighthouseOptions => ({ ...LIGHTHOUSE_DEFAULTS, ...o, qk: o.qk ?? Math.floor((o.tile ?? 128) / 2) });

/** Random token norms → the selection of one list. */
function randomRows(g: LighthouseGeometry, seed: number): Int32Array {
  const qn = uniformArray(seed, g.n), kn = uniformArray(seed + 1, g.n);
  return selectRows(levelScores(qn, 0, g), levelScores(kn, 0, g), g);
}

/** The window [start, end] of pyramid row `row`. */
function windowOf(g: LighthouseGeometry, row: number): [number, number] {
  const l = levelOf(g, row), c = g.span[l - 1], i = row - g.offset[l - 1];
  return [c * i, c * (i + 1) - 1];
}

const cases: [n: number, o: Partial<LighthouseOptions>][] = [
  [64, { levels: 2, pool: 2, topk: 8, tile: 4 }],
  [128, { levels: 3, pool: 2, topk: 4, tile: 4 }],
  [256, { levels: 3, pool: 4, topk: 8, tile: 4 }],
  [512, { levels: 4, pool: 2, topk: 16, tile: 8 }],
  [24576, { levels: 3, pool: 4, topk: 1536 }], // the authors' constants: 128 per tile, Cc = 128
];

test('S = N/p^(L−1) + (L−1)·p·k for several (N, L, p, k) with Cc ≥ tile; each list gathers S distinct rows, window ends non-decreasing (§1.6)', () => {
  for (const [n, o] of cases) {
    const g = lighthouseGeometry(n, opts(o));
    const { levels: L, pool: p, topk: k } = g;
    assert.ok(g.perTile >= g.tile, `N=${n}: Cc ${g.perTile} ≥ tile ${g.tile}`);
    assert.equal(g.padded, n, `N=${n} needs no padding`);
    assert.equal(g.gathered, n / p ** (L - 1) + (L - 1) * p * k, `N=${n}, L=${L}, p=${p}, k=${k}`);
    const rows = randomRows(g, n);
    assert.equal(rows.length, g.gathered);
    assert.equal(new Set(rows).size, rows.length, 'no row twice');
    let lastEnd = -1;
    for (const r of rows) {
      const [, end] = windowOf(g, r);
      assert.ok(end >= lastEnd, `N=${n}: row ${r} ends at ${end} after an entry ending at ${lastEnd}`);
      lastEnd = end;
    }
    // Per level: windows of entries are disjoint across levels too (an entry and its ancestor only when the ancestor is refined, then it sorts after).
    const covered = new Int32Array(n);
    for (const r of rows) { const [s, e] = windowOf(g, r); if (levelOf(g, r) === 1 || !rows.includes(g.offset[levelOf(g, r) - 2] + p * (r - g.offset[levelOf(g, r) - 1]))) for (let t = s; t <= e; t++) covered[t]++; }
    assert.ok(covered.every((c) => c === 1), `N=${n}: the leaves (tokens and kept-coarse entries) tile the sequence exactly once`);
  }
});

test('the cascade on a hand-worked case: A by query norm, B by key norm among the rest, children, integer keys, causal order', () => {
  // N = 16, L = 2, p = 2, one tile of budget 2 (qk = 1): 8 coarse entries, 2 refined.
  const g = lighthouseGeometry(16, opts({ levels: 2, pool: 2, topk: 2, tile: 2, qk: 1 }));
  assert.deepEqual([g.tiles, g.perTile, g.gathered, g.offset[1]], [1, 8, 12, 16]);
  const qn = new Float32Array(16).fill(1), kn = new Float32Array(16).fill(1);
  qn[11] = 5; // coarse entry 5 has the largest query norm
  kn[10] = 4; kn[4] = 3; // entry 5 also the largest key norm, but it is in A: B takes entry 2
  const rows = selectRows(levelScores(qn, 0, g), levelScores(kn, 0, g), g);
  assert.deepEqual([...rows], [16, 17, 4, 5, 18, 19, 20, 10, 11, 21, 22, 23]);
  // Keys × 2^(L−1): kept-coarse 2·2·i, refined parent 2·2·(i+1) − 1, token 2·t.
  assert.deepEqual([sortKey(g, 2, 3, false), sortKey(g, 2, 2, true), sortKey(g, 1, 5, false)], [12, 11, 10]);
});

test('integer keys stay exact where float32 keys collide (N = 2^22, L = 4)', () => {
  const g = lighthouseGeometry(2 ** 22, opts({ levels: 4, pool: 2, topk: 2 ** 15 / 128 * 128 }));
  const n = 2 ** 22, last = g.count[3] - 1; // the last level-4 entry ends at N − 1
  const parent = sortKey(g, 4, last, true), token = sortKey(g, 1, n - 1, false), parent2 = sortKey(g, 2, g.count[1] - 1, true);
  assert.ok(token < parent2 && parent2 < parent, 'token < level-2 parent < level-4 parent, all ending at N − 1');
  assert.equal(Math.fround((n - 2 ** -3)), n, 'in float32 the level-4 parent key c·(i+1) − 2^(1−L) rounds onto the next window start');
});

/** A selection (host rows of one list) as the layer takes it: rows and their inverse on the CPU backend. */
function selectionOf(g: LighthouseGeometry, rows: Int32Array): LighthouseSelection {
  const r = fon.tensor(rows, [1, g.gathered], { dtype: 'i32' });
  const inverse = invertRows(r, g.total);
  return { geometry: g, rows: r, inverse, lists: 1, dispose: () => { r.dispose(); inverse.dispose(); } };
}

test('the scatter-back (§1.7): entry m delivers to exactly R(m) = [c(i+1) − 1, c(i+2) − 2] ∩ [0, N); at most one entry per level and position; every position from c_L − 1 on covered', () => {
  for (const [n, o] of cases.slice(0, 4)) {
    const g = lighthouseGeometry(n, opts(o));
    const rows = randomRows(g, 7 * n), S = g.gathered;
    const sel = selectionOf(g, rows);
    const eye = new Float32Array(S * S);
    for (let m = 0; m < S; m++) eye[m * S + m] = 1;
    // Õ = the identity: y[t, m] = 1 exactly where entry m delivers to position t.
    const y = lighthouseScatter(fon.tensor(eye, [1, 1, S, S]), sel).dataSync() as Float32Array;
    const perLevel = new Int32Array(g.levels * n);
    for (let m = 0; m < S; m++) {
      const [, end] = windowOf(g, rows[m]), l = levelOf(g, rows[m]), c = g.span[l - 1];
      for (let t = 0; t < n; t++) {
        const want = t >= end && t <= end + c - 1 ? 1 : 0;
        if (y[t * S + m] !== want) assert.fail(`N=${n}: entry ${m} (level ${l}, window ending at ${end}) gives position ${t} ${y[t * S + m]}, expected ${want}`);
        perLevel[(l - 1) * n + t] += want;
      }
    }
    assert.ok(perLevel.every((x) => x <= 1), `N=${n}: at most one entry per level and position`);
    const coarsest = g.span[g.levels - 1];
    for (let t = coarsest - 1; t < n; t++) assert.equal(perLevel[(g.levels - 1) * n + t], 1, `N=${n}: position ${t} gets the coarsest level`);
    sel.dispose();
  }
});

test('tail: N not a multiple of p^(L−1)·T is padded to T·Cc·p^(L−1); short sequences refine everything; levels longer than N are refused', () => {
  const g = lighthouseGeometry(100, opts({ levels: 3, pool: 2, topk: 12, tile: 4 }));
  assert.deepEqual([g.tiles, g.perTile, g.padded], [3, 9, 108]);
  assert.equal(g.gathered, 108 / 4 + 2 * 2 * 12, 'Cc ≥ tile: the formula over the padded length');
  const rows = randomRows(g, 3);
  assert.equal(rows.length, g.gathered);
  const short = lighthouseGeometry(10, opts({ levels: 3, pool: 2, topk: 8, tile: 8 }));
  assert.deepEqual([short.padded, short.gathered], [12, 3 + 6 + 12], 'Cc = 3 < tile: every entry of every level');
  assert.throws(() => lighthouseGeometry(15, opts({ levels: 3, pool: 4 })), /^ArgumentError: lighthouse: 3 levels with pool 4 need a coarsest window of 4\^2 = 16 tokens, longer than the sequence's 15; use fewer levels or a longer sequence$/);
});

test('the cascade against an independent set-algebra reference (§1.5): random norms, several tiles, uneven qk, a padded tail', () => {
  for (const [n, o] of [[64, { levels: 3, pool: 2, topk: 8, tile: 4, qk: 1 }], [61, { levels: 3, pool: 2, topk: 8, tile: 4, qk: 3 }], [96, { levels: 2, pool: 4, topk: 12, tile: 4, qk: 0 }]] as const) {
    const g = lighthouseGeometry(n, opts(o));
    const qn = uniformArray(n + 1, n), kn = uniformArray(n + 2, n);
    // Window max straight from the token norms (padding scores 0), not through the level below.
    const score = (norms: Float32Array, l: number, i: number) => {
      let m = 0;
      for (let t = g.span[l - 1] * i; t < g.span[l - 1] * (i + 1); t++) if (t < n) m = Math.max(m, norms[t]);
      return m;
    };
    const best = (cand: number[], norms: Float32Array, l: number, want: number) => [...cand].sort((a, b) => score(norms, l, b) - score(norms, l, a) || a - b).slice(0, want);
    const want = new Set<number>();
    for (let tile = 0; tile < g.tiles; tile++) {
      let cand = Array.from({ length: g.perTile }, (_, j) => tile * g.perTile + j);
      for (let l = g.levels; l >= 2; l--) {
        const a = best(cand, qn, l, o.qk);
        const b = best(cand.filter((i) => !a.includes(i)), kn, l, o.tile - o.qk);
        for (const i of cand) want.add(g.offset[l - 1] + i);
        cand = [...a, ...b].flatMap((i) => Array.from({ length: g.pool }, (_, j) => g.pool * i + j));
      }
      for (const t of cand) want.add(t);
    }
    const rows = selectRows(levelScores(qn, 0, g), levelScores(kn, 0, g), g);
    assert.deepEqual([...rows].sort((a, b) => a - b), [...want].sort((a, b) => a - b), `N=${n}`);
  }
});
