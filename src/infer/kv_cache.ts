/**
 * The KV cache of one generation: per layer k and v, plus what the layer's mechanism declares in
 * its cache layout (attention/mechanism.ts CacheLayout, read from the table): per-position f32
 * state (B, heads, Tmax, 1) — FoX's c, FPA's φ, ℓ and walk — and side states (FPA's decode state,
 * the token shift's recent rows). A layer whose layout is `paged` (full, local) keeps k and v in
 * pages of `pageRows` positions from a PagePool (infer/page_pool.ts), taken as the sequence grows
 * and given back on truncate and dispose; several caches may share one pool. The other layers'
 * k and v (B, Hkv, Tmax, D) and all per-position state are allocated once when the sequence
 * starts; everything is written in place (ops/attention.ts kvWrite), never re-allocated per token.
 *
 * The protocol (DESIGN.md "How the code is layered"): cached steps append positions; `truncate`
 * forgets the positions from a length on, in every layer and every side state (the rejected drafts
 * of draft–revise decoding); `settle` is the generation loop's one asynchronous point, where side
 * states commit what they have seen and compact (FPA eviction on webgpu reads its kept counts
 * there); `kept` reports the fraction of keys each layer and KV head keeps, `bytes` what the
 * cache holds, `dispose` frees it. `length` is the number of positions written.
 */
import { mechanismCache } from '../attention/table.ts';
import { checkPageRows, defaultPageRows, PagedKv, PagePool, zeroKvPair } from './page_pool.ts';
import type { LayerKv } from '../attention/mechanism.ts';
import type { Backend } from '../backend/backend.ts';
import { ArgumentError, DeviceError } from '../errors.ts';
import { zeros } from '../ops/creation.ts';
import { layerAttention, modelDims, type ModelConfig } from '../model/config.ts';
import { keep } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';

export interface KvCacheOptions {
  /** Positions a page holds (a positive multiple of 128); default defaultPageRows (the whole length in one page up to 64K positions). */
  pageRows?: number;
  /** The pool paged layers take pages from, shared with other caches of the same geometry; default a pool of this cache's own (others may share it too: it goes with its last user). */
  pool?: PagePool;
}

export class KvCache {
  readonly layers: LayerKv[];
  /** Where the paged layers' pages come from. */
  readonly pool: PagePool;
  /** Positions written so far. */
  length = 0;

  constructor(readonly config: ModelConfig, readonly batch: number, readonly maxLength: number, backend: Backend, readonly dtype: FloatDType = 'f32', opts: KvCacheOptions = {}) {
    if (!Number.isInteger(maxLength) || maxLength < 1 || maxLength > config.contextLength) {
      throw new ArgumentError(`KvCache: maxLength ${maxLength} must be an integer in [1, ${config.contextLength}] (the model's context length)`);
    }
    const geometry = { batch, kvHeads: config.nKvHeads, headDim: config.headDim, dtype };
    if (opts.pool) {
      const g = opts.pool.geometry;
      if (opts.pool.backend !== backend || g.batch !== batch || g.kvHeads !== geometry.kvHeads || g.headDim !== geometry.headDim || g.dtype !== dtype) {
        throw new ArgumentError(`KvCache: the pool's pages are (${g.batch}, ${g.kvHeads}, P, ${g.headDim}) ${g.dtype} on '${opts.pool.backend.name}': expected (${batch}, ${geometry.kvHeads}, P, ${geometry.headDim}) ${dtype} on '${backend.name}' for this cache`);
      }
      if (opts.pageRows !== undefined && opts.pageRows !== opts.pool.pageRows) throw new ArgumentError(`KvCache: pageRows ${opts.pageRows} with a pool of ${opts.pool.pageRows}-row pages: give one`);
    }
    const rows = opts.pageRows === undefined ? defaultPageRows(maxLength, geometry) : checkPageRows(opts.pageRows, 'KvCache: pageRows');
    this.pool = opts.pool ?? new PagePool(backend, geometry, rows, { onePage: rows >= maxLength, owned: true });
    this.pool.attach(maxLength);
    const shape = [batch, config.nKvHeads, maxLength, config.headDim];
    const dims = modelDims(config);
    const layers: LayerKv[] = [];
    this.layers = layers;
    let at = 0, paged = false; // the layer being built, for the error below
    try {
      for (; at < config.nLayers; at++) {
        const layout = mechanismCache(layerAttention(config, at), dims);
        paged = !!layout.paged;
        let slot: LayerKv;
        if (layout.paged) {
          const pages = new PagedKv(this.pool, maxLength);
          slot = { k: pages.k[0], v: pages.v[0], pages };
        } else {
          slot = zeroKvPair(shape, backend, dtype);
        }
        layers.push(slot); // from here dispose() frees it, whatever fails next
        // Each state joins the slot as it is made, so a failure part-way leaves nothing dispose() cannot reach.
        const perPosition = Object.entries(layout.perPosition);
        if (perPosition.length) {
          const state: NonNullable<LayerKv['state']> = (slot.state = {});
          for (const [name, heads] of perPosition) state[name] = keep(zeros([batch, heads, maxLength, 1], { backend, dtype: 'f32' }));
        }
        const side = Object.entries(layout.side);
        if (side.length) {
          const made: NonNullable<LayerKv['side']> = (slot.side = {});
          for (const [name, make] of side) made[name] = make(slot);
        }
      }
    } catch (e) {
      this.dispose(); // what the layers before took, and the pool
      if (!(e instanceof DeviceError)) throw e;
      const why = paged ? '' : ' (only full and local layers keep k and v in pages; this one needs one buffer of the whole length)';
      throw new DeviceError(`KvCache: ${maxLength} positions: layer ${at} (${layerAttention(config, at).type}) could not take its cache${why}: ${e.message}`);
    }
  }

  /** Bytes held by the cache on its device: k, v (a paged layer's pages in use), the per-position state and the side states. Pages given back wait in the pool (pool.bytes). */
  get bytes(): number {
    const per = this.dtype === 'f32' ? 4 : 2;
    let n = 0;
    for (const l of this.layers) {
      n += l.pages ? l.pages.k.length * this.pool.pageBytes : (l.k.size + l.v.size) * per;
      for (const s of Object.values(l.state ?? {})) n += s.size * 4;
      for (const s of Object.values(l.side ?? {})) n += s.bytes;
    }
    return n;
  }

  /**
   * Forgets positions ≥ length in every layer and side state: the next cached step starts there.
   * The rows of k, v and the per-position state past it are simply overwritten later. A side
   * state that cannot rewind that far (below its committed length, or past the token shift's
   * ring) throws an ArgumentError; the cache is then to be disposed (layers before it have rewound).
   */
  truncate(length: number): void {
    if (!Number.isInteger(length) || length < 0 || length > this.length) throw new ArgumentError(`KvCache.truncate: length ${length} must be an integer in [0, ${this.length}] (the positions written)`);
    for (const l of this.layers) for (const s of Object.values(l.side ?? {})) s.truncate(length);
    for (const l of this.layers) l.pages?.release(length);
    this.length = length;
  }

  /** The most positions one truncate may forget (the smallest of the side states' limits; Infinity where none has one). */
  get maxRewind(): number {
    let m = Infinity;
    for (const l of this.layers) for (const s of Object.values(l.side ?? {})) m = Math.min(m, s.maxRewind ?? Infinity);
    return m;
  }

  /**
   * Per layer, per KV head: the fraction of the positions seen whose keys the cache keeps (1 for
   * layers that keep every key; below 1 for FPA layers with eviction once keys die).
   */
  kept(): number[][] {
    return this.layers.map((l) => {
      const kept = Object.values(l.side ?? {}).flatMap((s) => (s.kept ? [s.kept()] : []));
      return kept[0] ?? new Array<number>(this.config.nKvHeads).fill(1);
    });
  }

  /**
   * The generation loop's asynchronous point: every side state commits the positions seen so far
   * and compacts when due (FPA eviction on webgpu: its kept counts, then the dead keys). generate
   * awaits it with each step's logits.
   */
  async settle(): Promise<void> {
    await Promise.all(this.layers.flatMap((l) => Object.values(l.side ?? {}).map((s) => s.settle(l))));
  }

  dispose(): void {
    for (const l of this.layers) {
      for (const s of Object.values(l.side ?? {})) s.dispose();
      if (l.pages) l.pages.dispose();
      else { l.k.dispose(); l.v.dispose(); }
      for (const s of Object.values(l.state ?? {})) s.dispose();
    }
    this.pool.detach();
  }
}
