/**
 * Block masks for the attention kernels (DESIGN.md, "A mechanism is one self-describing unit"):
 * for each query block of MASK_Q_BLOCK rows, the key blocks of MASK_K_BLOCK keys it visits, each
 * marked whole (every pair inside passes the per-pair predicate, so a kernel skips the test) or
 * partial (the predicate decides inside: causal, window, the valid keys). A kernel visits only the
 * listed blocks, so what a mask leaves out costs nothing; what it keeps is computed exactly as
 * dense attention restricted to those blocks would be. Masks may differ per head (`heads` = the
 * query heads) or be shared (`heads` = 1). Spot's selections and Focus's groups (later issues) are
 * block masks built from their own rules; causal, window and arbitrary kept blocks are built here.
 *
 * Sizes: 128 × 64 is divided by the tiles of every kernel that reads masks (tensor-core forward:
 * 128 or 64 query rows × 32 keys; DQ: 128 or 64 × 16 or 32; DKDV: 64 keys × 16 or 32 query rows a
 * step; the register-blocked forward 64 or 32 rows × 32 keys, its DQ 32 × 32, its DKDV 32 keys × 32
 * rows; the plain kernels 16 or 8 × 16 or 8).
 *
 * Variable-length segments (documents packed into one sequence): with `segments` (one id per batch
 * entry and position, batch × tk), a pair is visible only where the query's position and the key
 * carry the same id, on top of causal/window. A block whose pairs share no segment is left out; a
 * block is whole only where its query and key positions all carry one id.
 *
 * Bit words (`bits`, one u32 per batch entry and position, batch × tk): a pair is visible only where
 * the query position's word and the key's share no bit (Focus's cross-group band and its
 * multi-membership rule, attention/focus). With bit words every listed block is partial.
 *
 * The table (`table`, i32) is compact (CSR-like): its size follows the blocks visited, not the
 * blocks there are, so a band or a sparse group mask over a million tokens stays small. It holds
 * two indexes of row starts, then the lists they point at, then the segment ids and bit words:
 * - the by-query index, at (b·heads + h)·qBlocks + qb: where row (b, h, qb)'s list starts;
 * - the by-key index (for the dk/dv pass), from byKeyOffset, at byKeyOffset + (b·heads + h)·kBlocks
 *   + kb: where row (b, h, kb)'s list starts;
 * - each list: the count n, then n entries, 2·kb + partial in ascending kb by query, 2·qb + partial
 *   in ascending qb by key;
 * - with segments, the ids from segmentOffset, b·tk + position; with bit words, the words from
 *   bitsOffset, b·tk + position.
 */
import { ArgumentError } from '../errors.ts';
import { MASK_COUNT_ROWS, MASK_K_BLOCK, MASK_K_FINE, MASK_Q_BLOCK, type MaskArgs } from '../backend/backend.ts';

export { MASK_K_BLOCK, MASK_K_FINE, MASK_Q_BLOCK };

/** Where the queries and keys sit: the geometry of AttentionArgs a mask is built for. */
export interface MaskGeometry {
  batch: number;
  /** Query heads the mask distinguishes: 1 (shared) or the attention's query heads. */
  heads: number;
  tq: number; tk: number;
  /** Valid keys (≤ tk) and the absolute position of query 0 (default kvLength − tq). */
  kvLength?: number; qOffset?: number;
  /** The per-pair predicate inside partial blocks (default causal, no window). */
  causal?: boolean; window?: number;
  /**
   * A segment id per batch entry and position (batch × tk, integers): a query sees only keys of its
   * position's segment. Query positions (qOffset + i) must lie inside [0, tk).
   */
  segments?: ArrayLike<number>;
  /**
   * A bit word per batch entry and position (batch × tk, integers in [0, 2³²)): a pair is visible
   * only where the query position's word and the key's share no bit. Query positions must lie
   * inside [0, tk).
   */
  bits?: ArrayLike<number>;
}

export interface BlockMask {
  readonly batch: number; readonly heads: number;
  readonly tq: number; readonly tk: number; readonly kvLength: number; readonly qOffset: number;
  readonly causal: boolean; readonly window: number;
  readonly qBlocks: number; readonly kBlocks: number;
  /** Where the segment ids start in the table (0: no segments). */
  readonly segmentOffset: number;
  /** Where the bit words start in the table (0: no bit words). */
  readonly bitsOffset: number;
  /** The indexes, the lists, segment ids and bit words (see the file's comment); byKeyOffset is where the by-key index starts. */
  readonly table: Int32Array;
  readonly byKeyOffset: number;
  /**
   * A mask built for the forward only (its by-key lists left empty, as Focus's device plan builds
   * it): attention refuses it where a gradient would read those lists.
   */
  readonly forwardOnly?: boolean;
  /** A device mask's list stride (device_mask.ts: row x's list at byKeyOffset + kRows + 1 + x·stride); absent for a host table. */
  readonly listStride?: number;
  /**
   * Keys a listed block covers: MASK_K_BLOCK (absent), or MASK_K_FINE for a mask of one query row
   * that only the decode kernels take (SpotAttention's 16-token blocks, spot/device_select.ts).
   */
  readonly kBlock?: number;
  /**
   * Each row's (b·heads + h) count of query block 0, where the host knows it though the lists are
   * made on the device (Spot's static top-K: the rule fixes it): a decode takes them as uniforms
   * without copying them from the table.
   */
  readonly counts?: readonly number[];
  /** Blocks visited, and blocks the predicate (causal, window, valid keys, segments) alone would visit (NaN where unknown on the host). */
  readonly visited: number; readonly predicateBlocks: number;
}

/** How a block fares under the predicate: 0 none of its pairs visible, 1 some, 2 all. */
function blockUnderPredicate(qb: number, kb: number, g: Omit<Geometry, 'segments'>): 0 | 1 | 2 {
  const i0 = qb * MASK_Q_BLOCK, i1 = Math.min(g.tq, i0 + MASK_Q_BLOCK) - 1;
  const j0 = kb * MASK_K_BLOCK, j1 = Math.min(g.tk, j0 + MASK_K_BLOCK) - 1;
  const p0 = i0 + g.qOffset, p1 = i1 + g.qOffset;
  // Visible pairs: j < kvLength, j ≤ p (causal), j > p − window (window).
  const jEndAll = Math.min(g.kvLength - 1, g.causal ? p0 : Infinity), jStartAll = g.window > 0 ? p1 - g.window + 1 : -Infinity;
  const jEndAny = Math.min(g.kvLength - 1, g.causal ? p1 : Infinity), jStartAny = g.window > 0 ? p0 - g.window + 1 : -Infinity;
  if (Math.max(j0, jStartAny) > Math.min(j1, jEndAny) || i0 > i1) return 0;
  return j1 <= jEndAll && j0 >= jStartAll ? 2 : 1;
}

/** A geometry with its defaults filled in; segments and bit words stay optional (null: none). */
type Geometry = Required<Omit<MaskGeometry, 'segments' | 'bits'>> & { segments: Int32Array | null; bits: Int32Array | null };

/**
 * How every block (qb, kb) of batch entry b fares, at qb·kBlocks + kb: the predicate's class, and
 * with segments 0 where its pairs share no segment that a query could see (under causal: no key of
 * the segment at or before the segment's last query position there), 2 where it is whole under the
 * predicate and all its query and key positions carry one id, else at most 1.
 */
function blockClasses(b: number, g: Geometry, qBlocks: number, kBlocks: number): Uint8Array {
  const out = new Uint8Array(qBlocks * kBlocks);
  const seg = g.segments, at = b * g.tk;
  for (let qb = 0; qb < qBlocks; qb++) {
    // The last query position of each segment in the query block (once for all its key blocks).
    const lastQuery = new Map<number, number>();
    if (seg) for (let i = qb * MASK_Q_BLOCK; i < Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK); i++) lastQuery.set(seg[at + i + g.qOffset], i + g.qOffset);
    for (let kb = 0; kb < kBlocks; kb++) {
      const base = blockUnderPredicate(qb, kb, g);
      if (base === 0 || seg === null) { out[qb * kBlocks + kb] = base; continue; }
      let one = lastQuery.size === 1, shared = false;
      for (let j = kb * MASK_K_BLOCK; j < Math.min(g.tk, g.kvLength, (kb + 1) * MASK_K_BLOCK); j++) {
        const last = lastQuery.get(seg[at + j]);
        if (last === undefined) one = false;
        else if (!g.causal || j <= last) shared = true;
      }
      out[qb * kBlocks + kb] = !shared ? 0 : base === 2 && one ? 2 : 1;
    }
  }
  return out;
}

function complete(g: MaskGeometry): Geometry {
  const kvLength = g.kvLength ?? g.tk;
  const out = { ...g, kvLength, qOffset: g.qOffset ?? kvLength - g.tq, causal: g.causal ?? true, window: g.window ?? 0, segments: null as Int32Array | null, bits: null as Int32Array | null };
  for (const k of ['batch', 'heads', 'tq', 'tk', 'kvLength', 'window'] as const) {
    if (!Number.isInteger(out[k]) || out[k] < 0) throw new ArgumentError(`blockMask: ${k} ${out[k]} must be an integer ≥ 0`);
  }
  if (out.batch === 0 || out.heads === 0) throw new ArgumentError(`blockMask: batch ${out.batch} and heads ${out.heads} must be ≥ 1`);
  if (kvLength > g.tk) throw new ArgumentError(`blockMask: kvLength ${kvLength} must be at most tk ${g.tk}`);
  if (!Number.isInteger(out.qOffset) || out.qOffset < kvLength - g.tq) throw new ArgumentError(`blockMask: qOffset ${out.qOffset} must be an integer ≥ kvLength − tq = ${kvLength - g.tq}`);
  if (g.segments !== undefined) {
    if (g.segments.length !== out.batch * g.tk) throw new ArgumentError(`blockMask: segments has ${g.segments.length} ids; expected batch × tk = ${out.batch} × ${g.tk} = ${out.batch * g.tk}`);
    if (out.qOffset + g.tq > g.tk) throw new ArgumentError(`blockMask: with segments every query position must be a key position: qOffset ${out.qOffset} + tq ${g.tq} is past tk ${g.tk}`);
    const ids = Int32Array.from(g.segments);
    for (let t = 0; t < ids.length; t++) {
      if (ids[t] !== g.segments[t]) throw new ArgumentError(`blockMask: segment id ${g.segments[t]} at ${t} (batch ${Math.floor(t / g.tk)}, position ${t % g.tk}) is not a 32-bit integer`);
    }
    out.segments = ids;
  }
  if (g.bits !== undefined) {
    if (g.bits.length !== out.batch * g.tk) throw new ArgumentError(`blockMask: bits has ${g.bits.length} words; expected batch × tk = ${out.batch} × ${g.tk} = ${out.batch * g.tk}`);
    if (out.qOffset + g.tq > g.tk) throw new ArgumentError(`blockMask: with bit words every query position must be a key position: qOffset ${out.qOffset} + tq ${g.tq} is past tk ${g.tk}`);
    const words = new Int32Array(g.bits.length);
    for (let t = 0; t < words.length; t++) {
      const w = g.bits[t];
      if (!Number.isInteger(w) || w < 0 || w >= 2 ** 32) throw new ArgumentError(`blockMask: bit word ${w} at ${t} (batch ${Math.floor(t / g.tk)}, position ${t % g.tk}) is not an integer in [0, 2^32)`);
      words[t] = w | 0;
    }
    out.bits = words;
  }
  return out;
}

/**
 * The mask of the predicate (causal/window/valid keys) restricted to the blocks `keep` accepts
 * (default: all): keep(b, h, qb, kb) is asked only for blocks the predicate leaves some pair in.
 */
export function blockMask(geometry: MaskGeometry, keep: (b: number, h: number, qb: number, kb: number) => boolean = () => true): BlockMask {
  const g = complete(geometry);
  return build(g, (b, h, qb, classOf) => {
    const out: number[] = [];
    for (let kb = 0; kb < Math.ceil(g.tk / MASK_K_BLOCK); kb++) if (classOf(kb) !== 0 && keep(b, h, qb, kb)) out.push(kb);
    return out;
  });
}

/**
 * A mask from explicit key-block lists (what a selector such as Spot produces): lists(b, h, qb)
 * gives the key blocks query block qb visits. A block out of range, listed twice, or (under the
 * causal predicate) wholly after every query of its block is refused, naming the block: a mask
 * never lets a query see a future key.
 */
export function blockMaskFromLists(geometry: MaskGeometry, lists: (b: number, h: number, qb: number) => readonly number[]): BlockMask {
  const g = complete(geometry);
  const kBlocks = Math.ceil(g.tk / MASK_K_BLOCK);
  return build(g, (b, h, qb, classOf) => {
    const seen = new Set<number>();
    const out: number[] = [];
    for (const kb of lists(b, h, qb)) {
      const where = () => `blockMask: batch ${b}, head ${h}, query block ${qb} (rows ${qb * MASK_Q_BLOCK}…${Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK) - 1})`;
      if (!Number.isInteger(kb) || kb < 0 || kb >= kBlocks) throw new ArgumentError(`${where()}: key block ${kb} is not one of 0…${kBlocks - 1}`);
      if (seen.has(kb)) throw new ArgumentError(`${where()}: key block ${kb} is listed twice`);
      seen.add(kb);
      const lastPos = Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK) - 1 + g.qOffset;
      if (g.causal && kb * MASK_K_BLOCK > lastPos) {
        throw new ArgumentError(`${where()}: key block ${kb} (keys ${kb * MASK_K_BLOCK}…) lies after every query of the block (last position ${lastPos}): a causal mask cannot let a query see a future key`);
      }
      if (classOf(kb) !== 0) out.push(kb);
    }
    return out.sort((x, y) => x - y);
  });
}

/** The table from the key blocks listOf names per (b, h, qb); classOf(kb) is block (qb, kb)'s class for b (blockClasses). */
function build(g: Geometry, listOf: (b: number, h: number, qb: number, classOf: (kb: number) => number) => number[]): BlockMask {
  const qBlocks = Math.ceil(g.tq / MASK_Q_BLOCK), kBlocks = Math.ceil(g.tk / MASK_K_BLOCK);
  // Blocks the predicate (with segments) reaches, per batch entry; the lists' partial bits (every
  // block is partial under bit words: the words decide inside).
  const cls = Array.from({ length: g.batch }, (_, b) => blockClasses(b, g, qBlocks, kBlocks));
  if (g.bits) for (const c of cls) for (let i = 0; i < c.length; i++) c[i] = Math.min(c[i], 1);
  let predicateBlocks = 0;
  for (const c of cls) for (const x of c) if (x !== 0) predicateBlocks += g.heads;
  return assemble(g, predicateBlocks, (b, h, qb) => listOf(b, h, qb, (kb) => cls[b][qb * kBlocks + kb]).map((kb) => 2 * kb + (cls[b][qb * kBlocks + kb] === 1 ? 1 : 0)));
}

/** The table from each (b, h, qb)'s entries 2·kb + partial in ascending kb (see the file's comment). */
function assemble(g: Geometry, predicateBlocks: number, entriesOf: (b: number, h: number, qb: number) => ArrayLike<number>): BlockMask {
  const qBlocks = Math.ceil(g.tq / MASK_Q_BLOCK), kBlocks = Math.ceil(g.tk / MASK_K_BLOCK);
  const rows = g.batch * g.heads, qRows = rows * qBlocks, kRows = rows * kBlocks;
  // The query lists, gathered first (the key lists' sizes come from them).
  let entries = new Int32Array(Math.max(1024, 4 * qRows));
  const qStart = new Int32Array(qRows + 1), keyCount = new Int32Array(kRows);
  let visited = 0;
  for (let r = 0; r < rows; r++) {
    const b = Math.floor(r / g.heads), h = r % g.heads;
    for (let qb = 0; qb < qBlocks; qb++) {
      const list = entriesOf(b, h, qb);
      if (visited + list.length > entries.length) {
        const grown = new Int32Array(Math.max(2 * entries.length, visited + list.length));
        grown.set(entries.subarray(0, visited));
        entries = grown;
      }
      for (let n = 0; n < list.length; n++) {
        entries[visited + n] = list[n];
        keyCount[r * kBlocks + (list[n] >> 1)]++;
      }
      visited += list.length;
      qStart[r * qBlocks + qb + 1] = visited;
    }
  }
  const byKeyOffset = qRows, listsStart = qRows + kRows;
  const keyListsStart = listsStart + qRows + visited, listsEnd = keyListsStart + kRows + visited;
  const segmentOffset = g.segments ? listsEnd : 0;
  const bitsOffset = g.bits ? listsEnd + (g.segments?.length ?? 0) : 0;
  const size = listsEnd + (g.segments?.length ?? 0) + (g.bits?.length ?? 0);
  if (size >= 2 ** 31) throw new ArgumentError(`blockMask: the table would hold ${size} entries (${visited} blocks visited twice, ${qRows + kRows} list rows); at most 2^31 − 1 are addressable`);
  const table = new Int32Array(size);
  if (g.segments) table.set(g.segments, segmentOffset);
  if (g.bits) table.set(g.bits, bitsOffset);
  let at = listsStart;
  for (let i = 0; i < qRows; i++) {
    const n = qStart[i + 1] - qStart[i];
    table[i] = at;
    table[at] = n;
    table.set(entries.subarray(qStart[i], qStart[i + 1]), at + 1);
    at += n + 1;
  }
  for (let j = 0; j < kRows; j++) {
    table[byKeyOffset + j] = at;
    at += keyCount[j] + 1;
  }
  for (let r = 0; r < rows; r++) {
    for (let qb = 0; qb < qBlocks; qb++) {
      for (let e = qStart[r * qBlocks + qb]; e < qStart[r * qBlocks + qb + 1]; e++) {
        const kat = table[byKeyOffset + r * kBlocks + (entries[e] >> 1)];
        table[kat + 1 + table[kat]++] = 2 * qb + (entries[e] & 1);
      }
    }
  }
  return { batch: g.batch, heads: g.heads, tq: g.tq, tk: g.tk, kvLength: g.kvLength, qOffset: g.qOffset, causal: g.causal, window: g.window, qBlocks, kBlocks, segmentOffset, bitsOffset, table, byKeyOffset, visited, predicateBlocks };
}

/** Blocks causal, window and valid keys reach for one batch entry and head (segments and bit words not counted), in O(query blocks). */
function predicateBlockCount(g: Omit<Geometry, 'segments' | 'bits'>): number {
  const qBlocks = Math.ceil(g.tq / MASK_Q_BLOCK), kBlocks = Math.ceil(g.tk / MASK_K_BLOCK);
  let n = 0;
  for (let qb = 0; qb < qBlocks; qb++) {
    const p0 = qb * MASK_Q_BLOCK + g.qOffset, p1 = Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK) - 1 + g.qOffset;
    const hi = Math.min(kBlocks - 1, Math.floor((Math.min(g.kvLength, g.causal ? p1 + 1 : g.kvLength) - 1) / MASK_K_BLOCK));
    const lo = g.window > 0 ? Math.max(0, Math.floor((p0 - g.window + 1) / MASK_K_BLOCK)) : 0;
    n += Math.max(0, hi - lo + 1);
  }
  return n;
}

/** Blocks full causal attention over t positions visits (one batch entry and head): what a mask's visited blocks are measured against. */
export const causalBlockCount = (t: number): number => predicateBlockCount(complete({ batch: 1, heads: 1, tq: t, tk: t }));

/**
 * A mask from entries its caller has classified itself (what Focus builds for sorted group
 * segments and its band, where classifying every block of a long sequence would cost more than the
 * attention): entries(b, h, qb) are 2·kb + partial in ascending kb, partial = 1 where the per-pair
 * predicate (causal, window, valid keys, segments, bit words) must decide inside the block, 0
 * where every pair of the block passes it. The caller vouches for the partial bits (a whole block
 * the predicate would cut is computed whole); the checks here are those of blockMaskFromLists
 * (range, order, no block wholly in a query block's future) and cost O(entries), so the mask of a
 * long sequence is built in time proportional to the blocks it visits. Each list is read before
 * the next call, so a caller may hand back one buffer's views. predicateBlocks counts
 * the blocks causal, window and valid keys alone reach (segments and bit words not counted).
 */
export function blockMaskFromBlocks(geometry: MaskGeometry, entries: (b: number, h: number, qb: number) => ArrayLike<number>): BlockMask {
  const g = complete(geometry);
  const qBlocks = Math.ceil(g.tq / MASK_Q_BLOCK), kBlocks = Math.ceil(g.tk / MASK_K_BLOCK);
  return assemble(g, predicateBlockCount(g) * g.batch * g.heads, (b, h, qb) => {
    const list = entries(b, h, qb);
    const where = () => `blockMask: batch ${b}, head ${h}, query block ${qb} (rows ${qb * MASK_Q_BLOCK}…${Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK) - 1})`;
    const lastPos = Math.min(g.tq, (qb + 1) * MASK_Q_BLOCK) - 1 + g.qOffset;
    let prev = -1;
    for (let n = 0; n < list.length; n++) {
      const e = list[n], kb = e >> 1;
      if (!Number.isInteger(e) || e < 0 || kb >= kBlocks) throw new ArgumentError(`${where()}: entry ${e} names key block ${kb}, not one of 0…${kBlocks - 1}`);
      if (kb <= prev) throw new ArgumentError(`${where()}: key block ${kb} follows key block ${prev}; entries must name ascending blocks, each once`);
      if (g.causal && kb * MASK_K_BLOCK > lastPos) throw new ArgumentError(`${where()}: key block ${kb} (keys ${kb * MASK_K_BLOCK}…) lies after every query of the block (last position ${lastPos}): a causal mask cannot let a query see a future key`);
      prev = kb;
    }
    return list;
  });
}

/** The table's shape as the kernels take it (Backend MaskArgs). */
export function maskArgs(m: BlockMask): MaskArgs {
  const places = countPlaces(m);
  // Known counts go where count places would (one query block, at most MASK_COUNT_ROWS rows).
  return { heads: m.heads, qBlocks: m.qBlocks, kBlocks: m.kBlocks, kBlock: m.kBlock ?? MASK_K_BLOCK, byKeyOffset: m.byKeyOffset, segmentOffset: m.segmentOffset, bitsOffset: m.bitsOffset, ...places, ...(m.counts && places.countAt ? { counts: m.counts } : {}) };
}

/**
 * Where the count of each row (b, h) of query block 0 lies in the table, for a mask of one query
 * block and at most MASK_COUNT_ROWS rows: read from a host table's index, or computed from a device
 * mask's stride. The decode kernel copies those counts into its uniforms (its loop bounds then come
 * from uniforms, which the GPU's compiler keeps uniform).
 */
function countPlaces(m: BlockMask): { countAt?: number[] } {
  const rows = m.batch * m.heads;
  if (m.qBlocks !== 1 || rows > MASK_COUNT_ROWS) return {};
  if (m.table.length > 0) return { countAt: Array.from({ length: rows }, (_, r) => m.table[r]) };
  if (m.listStride === undefined) return {};
  const listsStart = m.byKeyOffset + rows * m.kBlocks + 1;
  return { countAt: Array.from({ length: rows }, (_, r) => listsStart + r * m.listStride!) };
}

/** Where row (b, h, qb)'s list starts in a mask's table (its count; the entries follow), h taken modulo a shared mask's one head. */
export function maskListAt(m: BlockMask, b: number, h: number, qb: number): number {
  return m.table[(b * m.heads + (m.heads === 1 ? 0 : h)) * m.qBlocks + qb];
}

/** Query block qb of (b, h)'s entries, 2·kb + partial in ascending kb. */
export function maskEntries(m: BlockMask, b: number, h: number, qb: number): Int32Array {
  const at = maskListAt(m, b, h, qb);
  return m.table.subarray(at + 1, at + 1 + m.table[at]);
}

/** Key block kb of (b, h)'s entries in the transposed list, 2·qb + partial in ascending qb. */
export function maskKeyEntries(m: BlockMask, b: number, h: number, kb: number): Int32Array {
  const at = m.table[m.byKeyOffset + (b * m.heads + (m.heads === 1 ? 0 : h)) * m.kBlocks + kb];
  return m.table.subarray(at + 1, at + 1 + m.table[at]);
}

/** Whether the mask keeps key block kb for query block qb of (b, h) (h taken modulo a shared mask's one head). */
export function maskKeeps(m: BlockMask, b: number, h: number, qb: number, kb: number): boolean {
  for (const e of maskEntries(m, b, h, qb)) if (e >> 1 === kb) return true;
  return false;
}
