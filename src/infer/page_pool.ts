/**
 * Pages of KV cache from a shared pool (DESIGN.md "How the code is layered", the cache protocol).
 * A page is k and v (B, Hkv, P, D) for P = `pageRows` consecutive positions; a paged layer's slot
 * holds its page table — the pages covering positions 0 … length − 1, in order (PagedKv) — and
 * takes pages from the pool as its sequence grows and gives them back when it is truncated or
 * disposed. Several caches (sequences) share one pool: a freed page is reused by whichever asks
 * next, so memory follows the positions in use, not the longest context each could reach. No page
 * passes a binding (pageRows is bounded by the pool's page budget), so a context of a million
 * positions is a list of pages, not one buffer over WebGPU's 2 GiB binding limit.
 *
 * Page rows are a multiple of PAGE_TILE (128, the decode kernels' key block), else an
 * ArgumentError naming the value. A reused page keeps its old rows: only rows below the sequence's
 * length are ever read, and each is written before it is.
 */
import type { Backend } from '../backend/backend.ts';
import { ArgumentError } from '../errors.ts';
import { zeros } from '../ops/creation.ts';
import { PAGE_TILE } from '../ops/paged_attention.ts';
import type { KvPages } from '../attention/mechanism.ts';
import { keep } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** Bytes one page's k (or v) may take by default: far below WebGPU's 2 GiB binding limit. */
export const PAGE_BYTES = 2 ** 28;
/** The largest default page: 64K positions. */
export const MAX_PAGE_ROWS = 65536;

export interface PageGeometry { batch: number; kvHeads: number; headDim: number; dtype: FloatDType }

/** One page: k and v (B, Hkv, P, D). */
export interface KvPage { k: Tensor; v: Tensor }

/** A zeroed k and v of `shape`, kept past every scope; when v cannot be made, k is given back (no half pair left behind). */
export function zeroKvPair(shape: readonly number[], backend: Backend, dtype: FloatDType): KvPage {
  const k = keep(zeros(shape, { backend, dtype }));
  try {
    return { k, v: keep(zeros(shape, { backend, dtype })) };
  } catch (e) {
    k.dispose();
    throw e;
  }
}

/**
 * The default page rows for caches of `maxLength` positions: the whole length in one page where
 * it fits in MAX_PAGE_ROWS rows and PAGE_BYTES a tensor (the cache is then one contiguous k and v
 * per layer, as before paging), else the largest multiple of PAGE_TILE within both.
 */
export function defaultPageRows(maxLength: number, g: PageGeometry): number {
  const perRow = g.batch * g.kvHeads * g.headDim * (g.dtype === 'f32' ? 4 : 2);
  const byBytes = Math.max(PAGE_TILE, Math.floor(PAGE_BYTES / perRow / PAGE_TILE) * PAGE_TILE);
  const most = Math.min(MAX_PAGE_ROWS, byBytes);
  return maxLength <= most ? maxLength : most;
}

/** A page rows value: a positive multiple of PAGE_TILE, else an ArgumentError (or `error`'s) naming it (`what` says where it came from). */
export function checkPageRows(rows: number, what = 'pageRows', error: (m: string) => Error = (m) => new ArgumentError(m)): number {
  if (!Number.isInteger(rows) || rows < PAGE_TILE || rows % PAGE_TILE !== 0) {
    throw error(`${what} ${rows}: expected a positive multiple of ${PAGE_TILE} (the decode kernels' key block; a page holds whole blocks)`);
  }
  return rows;
}

export interface PagePoolOptions {
  /** Pages of any length (not a multiple of PAGE_TILE): for caches that each fit in one page (defaultPageRows); no cache longer than a page may use the pool. */
  onePage?: boolean;
  /** Disposed when the last cache using it is disposed (a pool a KvCache made for itself); otherwise its maker disposes it. */
  owned?: boolean;
}

export class PagePool {
  readonly pageRows: number;
  readonly onePage: boolean;
  private readonly owned: boolean;
  private readonly free: KvPage[] = [];
  private used = 0;
  private users = 0;
  private disposed = false;

  /** `pageRows`: a positive multiple of PAGE_TILE (or, with `onePage`, any positive length). */
  constructor(readonly backend: Backend, readonly geometry: PageGeometry, pageRows: number, opts: PagePoolOptions = {}) {
    this.onePage = opts.onePage ?? false;
    this.owned = opts.owned ?? false;
    if (this.onePage && !(Number.isInteger(pageRows) && pageRows >= 1)) throw new ArgumentError(`PagePool: pageRows ${pageRows}: expected a positive integer`);
    this.pageRows = this.onePage ? pageRows : checkPageRows(pageRows);
  }

  /** A cache of `maxLength` positions starts using the pool (KvCache calls it); ArgumentError where a one-page pool's pages are too short for it. */
  attach(maxLength: number): void {
    if (this.disposed) throw new ArgumentError('PagePool: used after dispose()');
    if (this.onePage && maxLength > this.pageRows) {
      throw new ArgumentError(`PagePool: a cache of ${maxLength} positions on a pool of one-page caches of ${this.pageRows} rows: expected at most ${this.pageRows} (make a pool of pages a multiple of ${PAGE_TILE} rows to share)`);
    }
    this.users++;
  }

  /** A cache stops using the pool; an owned pool is disposed with its last user. */
  detach(): void {
    this.users--;
    if (this.owned && this.users === 0) this.dispose();
  }

  /** A page for a sequence: a freed one if there is one, else a new one. */
  take(): KvPage {
    if (this.disposed) throw new ArgumentError('PagePool: taken from after dispose()');
    const reused = this.free.pop();
    if (reused) { this.used++; return reused; }
    const { batch, kvHeads, headDim, dtype } = this.geometry;
    const shape = [batch, kvHeads, this.pageRows, headDim];
    const page = zeroKvPair(shape, this.backend, dtype);
    this.used++;
    return page;
  }

  /** A page back to the pool, for reuse. */
  give(page: KvPage): void {
    this.used--;
    if (this.disposed) { page.k.dispose(); page.v.dispose(); return; }
    this.free.push(page);
  }

  /** Pages held by sequences. */
  get pagesInUse(): number { return this.used; }
  /** Pages waiting for reuse. */
  get pagesFree(): number { return this.free.length; }
  /** Bytes of one page (k and v). */
  get pageBytes(): number {
    const { batch, kvHeads, headDim, dtype } = this.geometry;
    return 2 * batch * kvHeads * this.pageRows * headDim * (dtype === 'f32' ? 4 : 2);
  }
  /** Bytes the pool holds on its device, in use and free. */
  get bytes(): number { return (this.used + this.free.length) * this.pageBytes; }

  /** Frees the pages waiting for reuse. */
  trim(): void {
    for (const p of this.free.splice(0)) { p.k.dispose(); p.v.dispose(); }
  }

  /** Frees the free pages now and every page given back later. */
  dispose(): void {
    this.trim();
    this.disposed = true;
  }
}

/** One layer's page table of one cache: the pages covering its positions, in order. */
export class PagedKv implements KvPages {
  readonly k: Tensor[] = [];
  readonly v: Tensor[] = [];
  private readonly pages: KvPage[] = [];

  /** `maxRows`: the cache's length; no step may write past it. */
  constructor(private readonly pool: PagePool, readonly maxRows: number) {
    this.reserve(1);
  }

  get pageRows(): number { return this.pool.pageRows; }

  /** Pages enough for rows 0 … rows − 1, taken from the pool; ArgumentError past maxRows. */
  reserve(rows: number): void {
    if (rows > this.maxRows) throw new ArgumentError(`KV cache: rows up to ${rows} pass the cache's ${this.maxRows} positions (its maxLength)`);
    while (this.pages.length * this.pageRows < rows) {
      const p = this.pool.take();
      this.pages.push(p);
      this.k.push(p.k);
      this.v.push(p.v);
    }
  }

  /** Gives back the pages past those covering rows 0 … rows − 1 (the first page stays). */
  release(rows: number): void {
    const keepPages = Math.max(1, Math.ceil(rows / this.pageRows));
    while (this.pages.length > keepPages) {
      this.pool.give(this.pages.pop()!);
      this.k.pop();
      this.v.pop();
    }
  }

  /** Pages held. */
  get length(): number { return this.pages.length; }

  dispose(): void {
    for (const p of this.pages.splice(0)) this.pool.give(p);
    this.k.length = 0;
    this.v.length = 0;
  }
}
