/**
 * CPU reference of Backend.selectOpen, flagsMaskTable, selectBlockList, gatherListed and indexBlockScores, and the threshold search
 * selectOpen shares with SpotAttention's host selection (attention/spot/selection.ts):
 *
 * - scores become order-preserving u32 keys (−0 = +0);
 * - the leading `take` open entries (key descending, index ascending) are found without sorting: the
 *   largest key θ with at least `take` open entries at or above it, built bit by bit from the top
 *   (32 rounds of a count over the open entries: what the device form runs in parallel), then every
 *   entry above θ and the ties at θ by index until `take`;
 * - n_p, the fewest leading open entries whose masses reach p of the open mass, the same way with a
 *   masked sum in place of the count.
 * Masses are summed in f64 here and in f32 on the GPU, so a nucleus boundary that falls within
 * rounding of p·total may differ between the two (exact where the masses are dyadic).
 */
import type { BlockListArgs, FlagsMaskArgs, GatherListArgs, IndexScoreArgs, SelectArgs } from '../backend.ts';

/** A block with no visible key (as SPOT_MASKED: below every score, finite). */
const MASKED = -1e30;
import { numbers, type CpuHandle, type CpuRef } from './host.ts';
import { dequantizeInt4Values } from './int4.ts';

const F32 = new Float32Array(1), U32 = new Uint32Array(F32.buffer);

/** A float's u32 key in the same order (−0 = +0; NaN is the caller's to refuse). */
export function orderKey(x: number): number {
  F32[0] = x === 0 ? 0 : x;
  const u = U32[0];
  return (u & 0x80000000 ? ~u : u | 0x80000000) >>> 0;
}

/** The `take` leading entries of `open` (ascending indices) by (key descending, index ascending), in index order. */
export function leadingOpen(open: readonly number[], keys: ArrayLike<number>, take: number): number[] {
  if (take <= 0) return [];
  let theta = 0;
  for (let bit = 31; bit >= 0; bit--) {
    const t = (theta | (1 << bit)) >>> 0;
    let count = 0;
    for (const b of open) if (keys[b] >= t) count++;
    if (count >= take) theta = t;
  }
  const out: number[] = [];
  let ties = take;
  for (const b of open) if (keys[b] > theta) ties--;
  for (const b of open) {
    if (keys[b] > theta) out.push(b);
    else if (keys[b] === theta && ties > 0) { out.push(b); ties--; }
  }
  return out;
}

/** n_p: the fewest leading open entries whose masses reach p of `total` (all of them where they never do; at least 1). */
export function nucleusCount(open: readonly number[], keys: ArrayLike<number>, mass: ArrayLike<number>, total: number, p: number): number {
  if (open.length === 0) return 0;
  const goal = p * total;
  let theta = 0;
  for (let bit = 31; bit >= 0; bit--) {
    const t = (theta | (1 << bit)) >>> 0;
    let m = 0;
    for (const b of open) if (keys[b] >= t) m += mass[b];
    if (m >= goal) theta = t;
  }
  let m = 0, count = 0;
  for (const b of open) if (keys[b] > theta) { m += mass[b]; count++; }
  for (const b of open) {
    if (m >= goal && count > 0) break;
    if (keys[b] === theta) { m += mass[b]; count++; }
  }
  return Math.max(1, count);
}

/** One row of selectOpen: flags (n) from its scores and masses. */
export function selectOpenRow(scores: ArrayLike<number>, given: ArrayLike<number>, a: Omit<SelectArgs, 'rows'>): Uint8Array {
  const flags = new Uint8Array(a.n);
  let mass = given;
  if (a.logMass) {
    let top = -Infinity;
    for (let e = a.low; e < a.high; e++) top = Math.max(top, given[e]);
    mass = Float64Array.from({ length: a.n }, (_, e) => (e >= a.low && e < a.high ? Math.exp(given[e] - top) : 0));
  }
  const keys = new Uint32Array(a.n);
  const open: number[] = [];
  let total = 0;
  for (let e = 0; e < a.valid; e++) {
    if (e < a.low || e >= a.high) { flags[e] = 1; continue; }
    keys[e] = orderKey(scores[e]);
    open.push(e);
    total += mass[e];
  }
  const take = Math.min(open.length, a.p > 0 ? Math.max(nucleusCount(open, keys, mass, total, a.p), a.count) : a.count);
  for (const e of leadingOpen(open, keys, take)) flags[e] = 1;
  return flags;
}

export function selectOpen(scores: CpuRef, mass: CpuRef, a: SelectArgs): CpuHandle {
  const s = numbers(scores), m = numbers(mass);
  const out = new Int32Array(a.rows * a.n);
  for (let r = 0; r < a.rows; r++) out.set(selectOpenRow(s.subarray(r * a.n, (r + 1) * a.n), m.subarray(r * a.n, (r + 1) * a.n), a), r * a.n);
  return out;
}

/** Backend.indexBlockScores, by loops (INT4 keys dequantized first, exactly, in f32). */
export function indexBlockScores(q: CpuRef, w: CpuRef, keys: CpuRef, a: IndexScoreArgs, scales?: CpuRef): [CpuHandle, CpuHandle] {
  const Q = numbers(q), W = numbers(w);
  const codes = keys.h as Int32Array;
  const K = scales ? dequantizeInt4Values(new Uint32Array(codes.buffer, codes.byteOffset, codes.length), scales.h as Uint16Array, 8 * codes.length) : numbers(keys);
  const nb = Math.ceil(a.l / a.block), rows = a.batch * a.n;
  const max = new Float32Array(rows * nb).fill(MASKED), logMass = new Float32Array(rows * nb).fill(MASKED);
  const s = new Float64Array(a.block);
  for (let r = 0; r < rows; r++) {
    const b = Math.floor(r / a.n), p = a.pos + (r % a.n);
    for (let j = 0; j < nb; j++) {
      let m = -Infinity, seen = 0;
      for (let u = 0; u < a.block; u++) {
        const t = j * a.block + u;
        if (t >= a.l || t > p) break;
        let sc = 0;
        for (let h = 0; h < a.heads; h++) {
          let dot = 0;
          for (let e = 0; e < a.d; e++) dot += Q[(r * a.heads + h) * a.d + e] * K[(b * a.tmax + t) * a.d + e];
          sc += W[r * a.heads + h] * Math.max(0, a.scale * dot);
        }
        s[seen++] = sc;
        m = Math.max(m, sc);
      }
      if (seen === 0) continue;
      let z = 0;
      for (let u = 0; u < seen; u++) z += Math.exp(s[u] - m);
      max[r * nb + j] = m;
      logMass[r * nb + j] = m + Math.log(z);
    }
  }
  return [max, logMass];
}

/** Backend.flagsMaskTable, by loops. */
export function flagsMaskTable(flags: CpuRef, a: FlagsMaskArgs): CpuHandle {
  const f = flags.h as Int32Array;
  const kb = Math.ceil(a.valid / a.per), stride = kb + 1;
  const qRows = a.batch, kRows = a.batch * a.kBlocks, listsStart = qRows + kRows + 1, segments = listsStart + qRows * stride;
  const withSegments = a.segments ?? true;
  const out = new Int32Array(segments + (withSegments ? a.batch * a.tk : 0));
  for (let b = 0; b < a.batch; b++) {
    out[b] = listsStart + b * stride;
    out.fill(qRows + kRows, qRows + b * a.kBlocks, qRows + (b + 1) * a.kBlocks);
    let count = 0;
    for (let c = 0; c < kb; c++) {
      let n = 0;
      for (let u = 0; u < a.per; u++) { const e = c * a.per + u; if (e < a.valid && f[b * a.valid + e] !== 0) n++; }
      // Whole: every key of the mask block (up to tk) visible and in a selected fine block.
      const end = Math.min((c + 1) * a.per * a.fine, a.tk), whole = end <= a.kvLength && n === Math.ceil(end / a.fine) - c * a.per;
      if (n > 0) out[listsStart + b * stride + 1 + count++] = 2 * c + (whole ? 0 : 1);
    }
    out[listsStart + b * stride] = count;
    for (let t = 0; t < (withSegments ? a.tk : 0); t++) {
      const e = Math.floor(t / a.fine);
      out[segments + b * a.tk + t] = t < a.kvLength && e < a.valid && f[b * a.valid + e] !== 0 ? 0 : 1;
    }
  }
  out[qRows + kRows] = 0;
  return out;
}

/** Backend.selectBlockList: selectOpen, then flagsMaskTable of its flags (one fine block a mask block, no segment ids). */
export function selectBlockList(scores: CpuRef, mass: CpuRef, a: SelectArgs, list: BlockListArgs): [CpuHandle, CpuHandle] {
  const flags = selectOpen(scores, mass, a) as Int32Array;
  // The table reads the first `valid` flags of each row.
  const rows = new Int32Array(a.rows * a.valid);
  for (let r = 0; r < a.rows; r++) rows.set(flags.subarray(r * a.n, r * a.n + a.valid), r * a.valid);
  const table = flagsMaskTable({ h: rows, shape: [a.rows, a.valid], dtype: 'i32' }, { batch: a.rows, valid: a.valid, fine: list.fine, per: 1, tk: list.tk, kBlocks: list.kBlocks, kvLength: list.kvLength, segments: false });
  return [flags, table];
}

/** Backend.gatherListed: the listed blocks' K and V rows, in list order. */
export function gatherListed(table: CpuRef, k: CpuRef, v: CpuRef, a: GatherListArgs): [CpuHandle, CpuHandle] {
  const t = table.h as Int32Array;
  const blocks = (b: number) => Array.from(t.subarray(t[b] + 1, t[b] + 1 + t[t[b]]), (x) => x >> 1);
  return [gatherRows(k, a, blocks), gatherRows(v, a, blocks)];
}

/** x's rows of each batch entry's first `count` blocks of blocks(b), compacted; zero rows past them (rows past tmax from its last). */
function gatherRows(x: CpuRef, a: GatherListArgs, blocks: (b: number) => number[]): CpuHandle {
  const rows = a.count * a.fine;
  const src = x.h;
  const out = new (src.constructor as new (n: number) => CpuHandle)(a.batch * a.hkv * rows * a.d);
  for (let b = 0; b < a.batch; b++) {
    blocks(b).slice(0, a.count).forEach((e, o) => {
      for (let h = 0; h < a.hkv; h++) {
        for (let r = 0; r < a.fine; r++) {
          const srow = Math.min(e * a.fine + r, a.tmax - 1), drow = o * a.fine + r;
          const from = ((b * a.hkv + h) * a.tmax + srow) * a.d, to = ((b * a.hkv + h) * rows + drow) * a.d;
          out.set(src.subarray(from, from + a.d) as never, to);
        }
      }
    });
  }
  return out;
}
