/**
 * FPA decoding state (specs/fpa_depth.md §2.6): per layer, per sequence b and KV head h, for each
 * cached key row its level ℓ_j, its running minimum m_j = min φ over (j, now] (+∞ for the newest
 * key) and its absolute position, plus the current walk W. Each new token t lowers every m_j to
 * min(m_j, φ_t); the key's penalty is then λ_h·relu(ℓ_j − m_j), which never decreases (§2.3.2,
 * monotone death), so a key whose penalty passes τ is dropped for good. Dropped keys leave holes
 * that compaction closes: each head's surviving rows move down, in order, and the cache's rows of
 * k and v move with them (ops gather + kvWrite). Heads keep different numbers of keys; the cache is
 * rectangular, so a head with fewer survivors than the longest has dead padding rows, which the
 * attention masks.
 *
 * Kept on the host in f32 (the spec's f32 state), read from the backend synchronously: this path
 * runs on backends with readSync (cpu, wasm); others keep the exact recompute (attention/fpa.ts).
 * Re-centring subtracts W from every ℓ, m and W of a head (the penalty depends on ℓ − m only), so
 * a long decode keeps the state near 0 where f32 is fine.
 *
 * The state is attached to a layer's cache slot (LayerKv) through a WeakMap, so that the cache's
 * layout (k, v and the per-position state tensors) stays what mechanism.ts describes.
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { gather } from '../ops/indexing.ts';
import { kvWrite } from '../ops/attention.ts';
import type { LayerKv } from './mechanism.ts';

/** Eviction of dead keys (FpaSpec.evict), with every field resolved. */
export interface FpaEvict {
  /** A key whose penalty λ·relu(ℓ − m) exceeds τ is dropped. */
  tau: number;
  /** Compact the cache at least every this many decode steps (when any key is dead). */
  every: number;
  /** … or as soon as this fraction of the cache's rows is dead. */
  deadFraction: number;
}

/**
 * Default τ = 16: the spec's fixed range is 10–20 (§2.5); 16 = |ln ε| + ln n_max with ε = e^{−10}
 * and n_max ≈ 400 at U = 0. With QK-norm the safe choice is 2U + ln n_max + 10 (U the score bound).
 */
export const DEFAULT_EVICT: FpaEvict = { tau: 16, every: 64, deadFraction: 0.25 };

/** The level a dead or padding row is given in the attention: its penalty is λ·1e20, weight 0. */
export const DEAD_LEVEL = 1e20;

export interface FpaDecodeOptions {
  /** Re-centre the walk every this many decoded tokens (0 = never; default 256). */
  recentreEvery?: number;
}

export class FpaDecodeState {
  /** Rows in use (the same for every (b, h); rows past a head's survivors are dead padding). */
  length = 0;
  /** Positions seen so far (the next token's absolute position). */
  pos = 0;
  /** Rows are still absolute positions with φ, ℓ, W in the cache's state tensors (no compaction, no re-centring): a rewind can rebuild. */
  exactHistory = true;
  /** Compactions done. */
  compactions = 0;
  readonly level: Float32Array;
  readonly runMin: Float32Array;
  /** Absolute position of each row, −1 for a dead or padding row. */
  readonly position: Int32Array;
  /** The current walk W per (b, h). */
  readonly walk: Float32Array;
  readonly recentreEvery: number;
  private stepsSinceCompact = 0;
  private stepsSinceRecentre = 0;

  constructor(readonly batch: number, readonly heads: number, readonly rows: number, opts: FpaDecodeOptions = {}) {
    const r = opts.recentreEvery ?? 256;
    if (!Number.isInteger(r) || r < 0) throw new ArgumentError(`FpaDecodeState: recentreEvery ${r} must be a non-negative integer (0 = never)`);
    this.recentreEvery = r;
    const n = batch * heads * rows;
    this.level = new Float32Array(n);
    this.runMin = new Float32Array(n);
    this.position = new Int32Array(n).fill(-1);
    this.walk = new Float32Array(batch * heads);
  }

  get slots(): number { return this.batch * this.heads; }

  reset(): void {
    this.length = 0;
    this.pos = 0;
    this.exactHistory = true;
    this.compactions = 0;
    this.position.fill(-1);
    this.walk.fill(0);
    this.stepsSinceCompact = 0;
    this.stepsSinceRecentre = 0;
  }

  /**
   * The state after positions 0 … n−1 from their φ, ℓ (B, H, stride) and W (B, H, stride) rows,
   * host copies of the cache's state tensors: m_j = suffix minimum of φ over (j, n−1], one reverse
   * scan per head (§2.6, prefill).
   */
  rebuild(phi: ArrayLike<number>, level: ArrayLike<number>, walk: ArrayLike<number>, stride: number, n: number): void {
    this.reset();
    for (let s = 0; s < this.slots; s++) {
      let m = Infinity;
      for (let j = n - 1; j >= 0; j--) {
        const r = s * this.rows + j;
        this.level[r] = level[s * stride + j];
        this.runMin[r] = m;
        this.position[r] = j;
        m = Math.min(m, phi[s * stride + j]);
      }
      this.walk[s] = n > 0 ? walk[s * stride + n - 1] : 0;
    }
    this.length = n;
    this.pos = n;
  }

  /** One new token's field φ_t per (b, h): every cached key's minimum m_j ← min(m_j, φ_t). */
  observe(phi: ArrayLike<number>): void {
    for (let s = 0; s < this.slots; s++) {
      const f = phi[s], base = s * this.rows;
      for (let r = 0; r < this.length; r++) if (this.runMin[base + r] > f) this.runMin[base + r] = f;
    }
  }

  /** Appends the new token (level per (b, h)) as row `length` with m = +∞; advances pos. */
  append(level: ArrayLike<number>): void {
    if (this.length >= this.rows) throw new ArgumentError(`FpaDecodeState: the cache's ${this.rows} rows are full at position ${this.pos}`);
    for (let s = 0; s < this.slots; s++) {
      const r = s * this.rows + this.length;
      this.level[r] = level[s];
      this.runMin[r] = Infinity;
      this.position[r] = this.pos;
    }
    this.length++;
    this.pos++;
    this.stepsSinceCompact++;
    this.stepsSinceRecentre++;
  }

  /** λ_h·relu(ℓ − m) of row r of slot s (0 for the newest key). */
  penalty(s: number, r: number, lambda: ArrayLike<number>): number {
    const i = s * this.rows + r;
    const e = this.level[i] - this.runMin[i];
    return e > 0 ? lambda[s % this.heads] * e : 0;
  }

  /** Marks dead every live row whose penalty exceeds τ; returns how many. */
  markDead(lambda: ArrayLike<number>, tau: number): number {
    let n = 0;
    for (let s = 0; s < this.slots; s++) {
      for (let r = 0; r < this.length; r++) {
        const i = s * this.rows + r;
        if (this.position[i] >= 0 && this.penalty(s, r, lambda) > tau) { this.position[i] = -1; n++; }
      }
    }
    return n;
  }

  /** Live keys of slot s. */
  alive(s: number): number {
    let n = 0;
    for (let r = 0; r < this.length; r++) if (this.position[s * this.rows + r] >= 0) n++;
    return n;
  }

  /** Fraction of the used rows that are dead, over all slots. */
  deadFraction(): number {
    if (this.length === 0) return 0;
    let live = 0;
    for (let s = 0; s < this.slots; s++) live += this.alive(s);
    return 1 - live / (this.slots * this.length);
  }

  /**
   * The levels the attention op takes for this state (B, H, rows) with φ ≡ 0 (see fpa.ts): ℓ − m
   * for a live key (its penalty is λ·relu of it), 0 for the newest (m = +∞; the op gives the
   * diagonal no penalty anyway), DEAD_LEVEL for dead and padding rows.
   */
  attentionLevels(): Float32Array {
    const out = new Float32Array(this.slots * this.rows);
    for (let s = 0; s < this.slots; s++) {
      for (let r = 0; r < this.length; r++) {
        const i = s * this.rows + r;
        out[i] = this.position[i] < 0 ? DEAD_LEVEL : this.runMin[i] === Infinity ? 0 : this.level[i] - this.runMin[i];
      }
    }
    return out;
  }

  /** Whether the cache should be compacted now, under `evict`. */
  wantsCompaction(evict: FpaEvict): boolean {
    const dead = this.deadFraction();
    return dead > 0 && (dead > evict.deadFraction || this.stepsSinceCompact >= evict.every);
  }

  /**
   * Drops dead rows: each head's live rows move down in order to rows 0 … alive−1, the k and v
   * rows of `cache` with them; the new length is the most live keys of any head (the rest of a
   * shorter head is dead padding). Returns the new length.
   */
  compact(cache: LayerKv): number {
    const { rows, slots } = this;
    const src = new Int32Array(slots * rows); // new row → old row, per slot (padding: its own row, dead)
    let length = 0;
    for (let s = 0; s < slots; s++) {
      let w = 0;
      for (let r = 0; r < this.length; r++) if (this.position[s * rows + r] >= 0) src[s * rows + w++] = r;
      length = Math.max(length, w);
      for (let r = w; r < rows; r++) src[s * rows + r] = -1;
    }
    for (let s = 0; s < slots; s++) {
      const b = s * rows;
      for (let r = 0; r < length; r++) {
        const from = src[b + r];
        if (from < 0) { this.position[b + r] = -1; continue; }
        this.level[b + r] = this.level[b + from];
        this.runMin[b + r] = this.runMin[b + from];
        this.position[b + r] = this.position[b + from];
      }
      for (let r = length; r < rows; r++) this.position[b + r] = -1;
    }
    moveRows(cache.k, src, length, rows);
    moveRows(cache.v, src, length, rows);
    this.length = length;
    this.exactHistory = false;
    this.stepsSinceCompact = 0;
    this.compactions++;
    return length;
  }

  /** Re-centres when due (recentreEvery tokens since the last): ℓ, m and W of each head minus its W. */
  maybeRecentre(): void {
    if (this.recentreEvery > 0 && this.stepsSinceRecentre >= this.recentreEvery) this.recentre();
  }

  /** Subtracts each head's current W from its stored ℓ, m (finite ones) and W: penalties are unchanged. */
  recentre(): void {
    for (let s = 0; s < this.slots; s++) {
      const w = this.walk[s];
      for (let r = 0; r < this.length; r++) {
        const i = s * this.rows + r;
        this.level[i] = this.level[i] - w;
        if (this.runMin[i] !== Infinity) this.runMin[i] = this.runMin[i] - w;
      }
      this.walk[s] = 0;
    }
    this.exactHistory = false;
    this.stepsSinceRecentre = 0;
  }

  /** Fraction of the positions seen whose key is kept, per KV head (averaged over the batch). */
  kept(): number[] {
    const out = new Array<number>(this.heads).fill(0);
    if (this.pos === 0) return out.fill(1);
    for (let s = 0; s < this.slots; s++) out[s % this.heads] += this.alive(s) / this.pos / this.batch;
    return out;
  }
}

/** Rows 0 … length−1 of t (B, H, rows, D) become its rows src[(b, h), r] (−1: left as is, a dead row). */
function moveRows(t: LayerKv['k'], src: Int32Array, length: number, rows: number): void {
  if (length === 0) return;
  const [b, h, , d] = t.shape;
  const idx = new Int32Array(b * h * length * d);
  for (let s = 0; s < b * h; s++) {
    for (let r = 0; r < length; r++) {
      const from = src[s * rows + r];
      idx.fill(from < 0 ? r : from, (s * length + r) * d, (s * length + r + 1) * d);
    }
  }
  const index = tensor(idx, [b, h, length, d], { backend: t.backend, dtype: 'i32' });
  const moved = gather(t, index, 2);
  kvWrite(t, moved, 0);
  index.dispose();
  moved.dispose();
}

const states = new WeakMap<LayerKv, FpaDecodeState>();

/** Attaches a fresh decode state to a layer's cache slot (KvCache does it with its options). */
export function attachFpaDecodeState(cache: LayerKv, opts: FpaDecodeOptions = {}): FpaDecodeState {
  const [b, h, rows] = cache.k.shape;
  const st = new FpaDecodeState(b, h, rows, opts);
  states.set(cache, st);
  return st;
}

/** The decode state of a layer's cache slot, made with default options on first use. */
export function fpaDecodeState(cache: LayerKv): FpaDecodeState {
  return states.get(cache) ?? attachFpaDecodeState(cache);
}

/** The decode state of a slot if it has one (an FPA layer that has decoded), else undefined. */
export const peekFpaDecodeState = (cache: LayerKv): FpaDecodeState | undefined => states.get(cache);
