/**
 * FPA decoding state (specs/fpa_depth.md §2.6): per layer, per sequence b and KV head h, for each
 * cached key row its level ℓ_j, its running minimum m_j = min φ over (j, now] (+∞ for the newest
 * key) and its absolute position, plus the current walk W. Each new token t lowers every m_j to
 * min(m_j, φ_t); the key's penalty is then λ_h·relu(ℓ_j − m_j), which never decreases (§2.3.2,
 * monotone death), so a key whose penalty passes τ is marked dead for good (its weight in the
 * attention is exactly 0 from then on). Dead keys leave holes that compaction closes: each head's
 * surviving rows move down, in order, and the cache's rows of k and v move with them. Heads keep
 * different numbers of keys; the cache is rectangular, so a head with fewer survivors than the
 * longest has dead padding rows, which the attention masks.
 *
 * Both states implement the cache protocol (attention/mechanism.ts CacheSideState), which
 * draft–revise decoding needs (drafted positions are appended, then the rejected ones truncated):
 *
 * - Compaction happens ONLY in settle() (KvCache.settle, the generation loop's one asynchronous
 *   point), never inside a step; the rule (the layer's `evict` or `stack`: dead keys and `every`
 *   steps since the last compaction, or a dead fraction past `deadFraction`, or the first settle
 *   after a prefill that left dead keys) is checked there. So the rows of positions seen since the
 *   last settle — the uncommitted ones — are never moved. A caller that never settles gets the same
 *   outputs (dead rows weigh exactly 0), only without compaction.
 * - settle() commits: `committed` becomes the positions seen, and no later truncate goes below it
 *   (an ArgumentError naming both lengths).
 * - truncate(L) for committed ≤ L ≤ positions seen restores the state exactly as it was before
 *   position L was first seen. Variant chosen: a snapshot per position appended since the last
 *   settle (taken at the start of each per-token step, dropped by settle): the host state copies
 *   its arrays (the used rows only), the device state holds on to its previous tensors (every step
 *   makes new ℓ-excess and walk tensors and only writes rows past the snapshot's length in place,
 *   so no copy is needed). The alternative, replaying the kept positions' φ from the committed
 *   state, would need fewer bytes but re-runs the steps; a draft is a handful of positions, so the
 *   snapshots cost little. Positions inside a prefill chunk (the exact op runs over all of them at
 *   once) have no snapshot: a truncation into a prefill rebuilds the state from the stored φ, ℓ, W
 *   of the kept positions, as a prefill of that length does (nothing can have been compacted or
 *   re-centred in between: both need a settle or a decoded step after the prefill, and the stored
 *   rows of the prefill stay intact). The k/v rows written for rejected positions, and their
 *   per-position φ, ℓ, W rows, are simply overwritten later (the row pointer `length` is restored).
 *   After truncate(L) the next cached call at position L continues bit for bit as if positions ≥ L
 *   had never been seen (test/attention/fpa_truncate.test.ts).
 *
 * Two implementations of the same state machine, picked by the backend (attachFpaDecodeState):
 *
 * - FpaDecodeState, on backends with readSync (cpu, wasm): kept on the host in f32 (the spec's f32
 *   state), the new token's φ_t read synchronously each step.
 * - DeviceFpaDecodeState, on backends that read asynchronously (webgpu), used by FPA layers with
 *   `evict`: the per-row state stays on the device as two (B, H, rows) f32 tensors, ℓ_j and the
 *   excess e_j = ℓ_j − m_j (the level the attention op takes with φ ≡ 0), updated each step by a
 *   handful of elementwise ops with no read-back (e ← max(e, ℓ − φ_t), bit for bit the host's
 *   ℓ − min(m, φ_t) until a re-centring rounds the two differently; dead rows, e > τ/λ, set to
 *   DEAD_LEVEL), so decoding never waits on the GPU. What needs the host — how many keys each
 *   head keeps (kept()) and which rows to move at a compaction — is read asynchronously in
 *   settle() (one extra small read per FPA layer and step; a compaction reads the live mask once
 *   more). This was chosen over computing the compaction on the device (scans and scatters of the
 *   live mask) because the host must learn the new row count anyway: the attention's kvLength is
 *   a host number, and that needs a read, which only an async seam can make on webgpu. A layer
 *   without `evict` on webgpu recomputes M_ij exactly from the stored φ each step and leaves its
 *   device state passive (nothing to truncate or settle: rows are positions there).
 *
 * FpaStack is the spec's shared-walk hard mode (§2.6, last lines): the alive keys as an explicit
 * stack, amortised O(1) per token; a host structure, checked against the definition and against
 * FpaDecodeState's penalty-based alive set (test/attention/fpa_stack.test.ts). An FPA layer with
 * `shared` and `stack` (attention/fpa/fpa.ts) decodes through it on the host: FpaDecodeState.stackStep
 * pops, marks the popped keys' rows dead and the token is appended as usual; the running minima are
 * not kept (every live row has m = +∞, so the attention gives it no penalty), and compaction follows
 * the layer's `stack` rule (FpaCompaction) as it follows `evict`'s. The snapshots copy the stack too.
 *
 * Re-centring subtracts W from every ℓ, m and W of a head (the penalty depends on ℓ − m only), so
 * a long decode keeps the state near 0 where f32 is fine; it runs inside the step, every
 * `recentreEvery` decoded tokens (settable on the state: `cache.layers[i].side!.fpa`), and its
 * counter is part of the snapshots, so a truncated and continued decode re-centres where an
 * untruncated one does.
 *
 * The state is the "fpa" side state of a layer's cache slot (LayerKv.side.fpa, made by the cache
 * from the layout of attention/fpa/index.ts); slots made by hand get one on first use.
 */
import { ArgumentError } from '../../errors.ts';
import { full, tensor, zeros } from '../../ops/creation.ts';
import { embedding } from '../../ops/indexing.ts';
import { kvWrite } from '../../ops/attention.ts';
import { add, gt, lt, maximum, sub, where } from '../../ops/elementwise.ts';
import { concat, flip, narrow, reshape } from '../../ops/layout.ts';
import { sum } from '../../ops/reduce.ts';
import { cummin } from '../../ops/scan_sort.ts';
import { keep, noGrad } from '../../tensor/scope.ts';
import type { Backend } from '../../backend/backend.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CacheSideState, LayerKv } from '../mechanism.ts';

/** When a cache with dead rows is compacted (FpaSpec.stack; FpaSpec.evict adds τ). */
export interface FpaCompaction {
  /** Compact the cache at least every this many decode steps (when any key is dead). */
  every: number;
  /** … or as soon as this fraction of the cache's rows is dead. */
  deadFraction: number;
}

/** Eviction of dead keys (FpaSpec.evict), with every field resolved. */
export interface FpaEvict extends FpaCompaction {
  /** A key whose penalty λ·relu(ℓ − m) exceeds τ is dropped. */
  tau: number;
}

/**
 * Default τ = 16: the spec's fixed range is 10–20 (§2.5); 16 = |ln ε| + ln n_max with ε = e^{−10}
 * and n_max ≈ 400 at U = 0. With QK-norm the safe choice is 2U + ln n_max + 10 (U the score bound).
 */
export const DEFAULT_EVICT: FpaEvict = { tau: 16, every: 64, deadFraction: 0.25 };

/** Default compaction of the shared-walk stack mode (FpaSpec.stack): as DEFAULT_EVICT's. */
export const DEFAULT_STACK: FpaCompaction = { every: 64, deadFraction: 0.25 };

/** The level a dead or padding row is given in the attention: its penalty is λ·1e20, weight 0. */
export const DEAD_LEVEL = 1e20;

export interface FpaDecodeOptions {
  /** Re-centre the walk every this many decoded tokens (0 = never; default 256). */
  recentreEvery?: number;
  /** The layer's eviction rule (its `evict`); absent = no eviction. */
  evict?: FpaEvict;
  /** The layer's stack rule (its `stack`); absent = not in the stack mode. */
  stack?: FpaCompaction;
}

/** Checks a re-centring period (a non-negative integer, 0 = never). */
function checkRecentre(r: number, who: string): number {
  if (!Number.isInteger(r) || r < 0) throw new ArgumentError(`${who}: recentreEvery ${r} must be a non-negative integer (0 = never)`);
  return r;
}

/** The cache protocol's check of a truncation against the positions seen and committed. */
function checkTruncate(length: number, pos: number, committed: number): void {
  if (!Number.isInteger(length) || length < 0 || length > pos) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions: ${pos} were seen (expected an integer in [${committed}, ${pos}])`);
  if (length < committed) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions: the first ${committed} are committed (the cache settled after them and may have compacted their rows); a truncation keeps at least ${committed}`);
}

/** The host state before one position: the used rows of each slot packed, the stack copied, the counters. */
interface HostSnapshot {
  length: number; pos: number; exactHistory: boolean; stepsSinceCompact: number; stepsSinceRecentre: number; compactNext: boolean;
  level: Float32Array; runMin: Float32Array; position: Int32Array; walk: Float32Array;
  stack: { positions: Int32Array; levels: Float32Array; sizes: Int32Array; pos: number } | null;
}

export class FpaDecodeState implements CacheSideState {
  /** Rows in use (the same for every (b, h); rows past a head's survivors are dead padding). */
  length = 0;
  /** Positions seen so far (the next token's absolute position). */
  pos = 0;
  /** Positions committed by the last settle(): no truncate goes below it. */
  committed = 0;
  /** Rows are still absolute positions with φ, ℓ, W in the cache's state tensors (no compaction, no re-centring): a rebuild from them is possible. */
  exactHistory = true;
  /** Compactions done. */
  compactions = 0;
  readonly level: Float32Array;
  readonly runMin: Float32Array;
  /** Absolute position of each row, −1 for a dead or padding row. */
  readonly position: Int32Array;
  /** The current walk W per (b, h). */
  readonly walk: Float32Array;
  /** The layer's eviction rule (set from its spec; `settle` compacts by it). */
  evict?: FpaEvict;
  /** The layer's stack rule (set from its spec; `settle` compacts by it). */
  stackRule?: FpaCompaction;
  /** The alive keys as a stack, in the shared-walk stack mode (useStack); null otherwise. */
  stack: FpaStack | null = null;
  /**
   * Rebuilds the state after positions 0 … n−1 from the cache's stored φ, ℓ, W (set by the layer at
   * each cached call: it knows λ and τ); truncate uses it for a length inside a prefill chunk.
   */
  rebuilder?: (n: number) => void;
  private recentre_ = 256;
  private stepsSinceCompact = 0;
  private stepsSinceRecentre = 0;
  /** The next settle compacts whatever is dead (right after a prefill). */
  private compactNext = false;
  /** snapshots[p − committed]: the state before position p (null: p was inside a prefill chunk). */
  private snapshots: (HostSnapshot | null)[] = [];

  constructor(readonly batch: number, readonly heads: number, readonly rows: number, opts: FpaDecodeOptions = {}) {
    this.recentreEvery = opts.recentreEvery ?? 256;
    if (opts.evict) this.evict = opts.evict;
    if (opts.stack) this.stackRule = opts.stack;
    const n = batch * heads * rows;
    this.level = new Float32Array(n);
    this.runMin = new Float32Array(n);
    this.position = new Int32Array(n).fill(-1);
    this.walk = new Float32Array(batch * heads);
  }

  /** Re-centre the walk every this many decoded tokens (0 = never; default 256). */
  get recentreEvery(): number { return this.recentre_; }
  set recentreEvery(r: number) { this.recentre_ = checkRecentre(r, 'FpaDecodeState'); }

  get slots(): number { return this.batch * this.heads; }

  reset(): void {
    this.length = 0;
    this.pos = 0;
    this.committed = 0;
    this.snapshots = [];
    this.exactHistory = true;
    this.compactions = 0;
    this.position.fill(-1);
    this.walk.fill(0);
    this.stack?.reset();
    this.stepsSinceCompact = 0;
    this.stepsSinceRecentre = 0;
    this.compactNext = false;
  }

  /**
   * Switches this state to the shared-walk stack mode (idempotent): the alive set is kept by an
   * FpaStack (stackStep) instead of running minima (observe, markDead). Call before the first token.
   */
  useStack(): FpaStack {
    if (!this.stack) {
      if (this.length > 0) throw new ArgumentError(`FpaDecodeState.useStack: the state already holds ${this.length} rows; switch to the stack mode before the first token`);
      this.stack = new FpaStack(this.slots, this.rows);
    }
    return this.stack;
  }

  /**
   * Stack mode, before appending token `pos` whose field and level are its walk W_t (per (b, h)):
   * pops every key whose level passes W_t and marks its row dead. Returns how many rows died.
   * The live rows of a slot are its stack's keys in order (both only ever lose a top segment and
   * gain the newest), so the popped keys are the slot's topmost live rows.
   */
  stackStep(walk: ArrayLike<number>): number {
    const stack = this.stack;
    if (!stack) throw new ArgumentError('FpaDecodeState.stackStep: not in the stack mode (useStack)');
    if (stack.pos !== this.pos) throw new ArgumentError(`FpaDecodeState.stackStep: the stack is at position ${stack.pos}, the state at ${this.pos}`);
    const cursor = new Int32Array(this.slots).fill(this.length - 1);
    return stack.step(walk, walk, (s, position) => {
      const base = s * this.rows;
      let r = cursor[s];
      while (r >= 0 && this.position[base + r] !== position) r--;
      if (r < 0) throw new ArgumentError(`FpaDecodeState.stackStep: popped position ${position} of slot ${s} is not a live row`);
      this.position[base + r] = -1;
      cursor[s] = r - 1;
    });
  }

  /**
   * Stack mode: the state after positions 0 … n−1 from their walk W (B, H, stride) (a host copy of
   * the cache's "walk" state): the stack replayed over W, the rows of its popped keys dead. Rows
   * stay absolute positions (nothing is compacted here; the next settle compacts).
   */
  rebuildStack(walk: ArrayLike<number>, stride: number, n: number): void {
    this.reset();
    this.useStack();
    const col = new Float32Array(this.slots);
    for (let j = 0; j < n; j++) {
      for (let s = 0; s < this.slots; s++) col[s] = walk[s * stride + j];
      this.stackStep(col);
      this.append(col);
    }
    if (n > 0) this.walk.set(col);
    this.stepsSinceCompact = 0;
    this.stepsSinceRecentre = 0;
    this.compactNext = true;
  }

  /**
   * The state after positions 0 … n−1 from their φ, ℓ (B, H, stride) and W (B, H, stride) rows,
   * host copies of the cache's state tensors: m_j = suffix minimum of φ over (j, n−1], one reverse
   * scan per head (§2.6, prefill). The next settle compacts (after markDead, when evicting).
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
    this.compactNext = true;
    // The prefill's positions have no snapshots: a truncation into them rebuilds.
    this.snapshots = new Array<HostSnapshot | null>(n).fill(null);
  }

  /**
   * Takes the snapshot of the state before position `pos` (the layer calls it at the start of each
   * per-token step), so that truncate(pos) can come back to it until the next settle.
   */
  checkpoint(): void {
    const { rows, slots, length } = this;
    const pack = <A extends Float32Array | Int32Array>(src: A, out: A): A => {
      for (let s = 0; s < slots; s++) out.set(src.subarray(s * rows, s * rows + length), s * length);
      return out;
    };
    const st = this.stack;
    this.snapshots[this.pos - this.committed] = {
      length, pos: this.pos, exactHistory: this.exactHistory, stepsSinceCompact: this.stepsSinceCompact,
      stepsSinceRecentre: this.stepsSinceRecentre, compactNext: this.compactNext,
      level: pack(this.level, new Float32Array(slots * length)), runMin: pack(this.runMin, new Float32Array(slots * length)),
      position: pack(this.position, new Int32Array(slots * length)), walk: this.walk.slice(),
      stack: st ? { positions: st.positions.slice(), levels: st.levels.slice(), sizes: st.sizes.slice(), pos: st.pos } : null,
    };
  }

  private restore(p: HostSnapshot): void {
    const { rows, slots } = this, n = p.length;
    for (let s = 0; s < slots; s++) {
      this.level.set(p.level.subarray(s * n, (s + 1) * n), s * rows);
      this.runMin.set(p.runMin.subarray(s * n, (s + 1) * n), s * rows);
      this.position.set(p.position.subarray(s * n, (s + 1) * n), s * rows);
      this.position.fill(-1, s * rows + n, (s + 1) * rows);
    }
    this.walk.set(p.walk);
    if (p.stack && this.stack) {
      this.stack.positions.set(p.stack.positions);
      this.stack.levels.set(p.stack.levels);
      this.stack.sizes.set(p.stack.sizes);
      this.stack.pos = p.stack.pos;
    }
    this.length = n;
    this.pos = p.pos;
    this.exactHistory = p.exactHistory;
    this.stepsSinceCompact = p.stepsSinceCompact;
    this.stepsSinceRecentre = p.stepsSinceRecentre;
    this.compactNext = p.compactNext;
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

  /** Whether the cache should be compacted now, under `rule` (a layer's `evict` or `stack`; the first settle after a prefill compacts whatever is dead). */
  wantsCompaction(rule: FpaCompaction): boolean {
    const dead = this.deadFraction();
    return dead > 0 && (this.compactNext || dead > rule.deadFraction || this.stepsSinceCompact >= rule.every);
  }

  /**
   * Drops dead rows: each head's live rows move down in order to rows 0 … alive−1, the k and v
   * rows of `cache` with them; the new length is the most live keys of any head (the rest of a
   * shorter head is dead padding). Returns the new length. settle() calls it when the rule says
   * so; calling it between settles would move uncommitted rows (truncate could then not restore).
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
    if (length > 0) {
      // new row → old row as global rows of (B·H·rows); a padding row keeps its own (dead) row
      const ids = new Int32Array(slots * length);
      for (let s = 0; s < slots; s++) for (let r = 0; r < length; r++) ids[s * length + r] = s * rows + (src[s * rows + r] < 0 ? r : src[s * rows + r]);
      const idx = tensor(ids, [slots * length], { backend: cache.k.backend, dtype: 'i32' });
      moveRowsTo(cache.k, idx, length);
      moveRowsTo(cache.v, idx, length);
      idx.dispose();
    }
    this.length = length;
    this.exactHistory = false;
    this.stepsSinceCompact = 0;
    this.compactNext = false;
    this.compactions++;
    this.snapshots = [];
    return length;
  }

  /** Re-centres when due (recentreEvery tokens since the last): ℓ, m and W of each head minus its W. */
  maybeRecentre(): void {
    if (this.recentreEvery > 0 && this.stepsSinceRecentre >= this.recentreEvery) this.recentre();
  }

  /** Subtracts each head's current W from its stored ℓ, m (finite ones), W and stack levels: penalties and the stack's order are unchanged (up to f32 rounding). */
  recentre(): void {
    for (let s = 0; s < this.slots; s++) {
      const w = this.walk[s];
      for (let r = 0; r < this.length; r++) {
        const i = s * this.rows + r;
        this.level[i] = this.level[i] - w;
        if (this.runMin[i] !== Infinity) this.runMin[i] = this.runMin[i] - w;
      }
      this.stack?.recentre(s, w);
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

  /**
   * The cache protocol's truncate (see the file comment): back to the state before position
   * `length` was first seen, for committed ≤ length ≤ pos; below `committed` an ArgumentError.
   */
  truncate(length: number): void {
    checkTruncate(length, this.pos, this.committed);
    if (length === this.pos) return;
    if (length === 0) { this.reset(); return; }
    const snap = this.snapshots[length - this.committed];
    if (snap) {
      this.restore(snap);
      this.snapshots.length = length - this.committed;
      return;
    }
    // Inside a prefill chunk (see the file comment): rebuilt from the stored rows, as a prefill of `length` makes it.
    if (!this.exactHistory && this.compactions > 0) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions: no snapshot of that position and the rows were compacted`);
    if (!this.rebuilder) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions inside the prefill before the layer has run`);
    this.rebuilder(length);
  }

  /** Host arrays (nothing on the device). */
  get bytes(): number { return 0; }

  /**
   * Commits the positions seen (no later truncate goes below them; the snapshots are dropped) and
   * compacts the cache when the layer's rule (`evict` or `stack`) says so. Synchronous on the host.
   */
  async settle(cache: LayerKv): Promise<void> {
    this.committed = this.pos;
    this.snapshots = [];
    const rule = this.evict ?? this.stackRule;
    if (rule && this.length > 0 && this.wantsCompaction(rule)) this.compact(cache);
    this.compactNext = false;
  }

  /** Host arrays only: nothing to free (DeviceFpaDecodeState.dispose frees its tensors). */
  dispose(): void {}
}

/**
 * The shared-walk hard mode of §2.6 (last lines) and §2.3.4: with φ = ℓ = W (u ≡ w ≡ 0) and the
 * penalty's hard limit (λ → ∞, or τ → 0: a key dies as soon as its penalty is positive), the keys
 * alive at query i are A_i = {j ≤ i : W_j ≤ W_t for every t ∈ (j, i]}. Ordered by position their
 * levels never decrease, so A_i is A_{i−1} less a top segment (the keys whose level passes W_i)
 * plus i itself: an explicit stack, each key pushed once and popped at most once (amortised O(1)
 * per token and head, against the O(n) scan of FpaDecodeState.observe). Ties stay: relu(0) = 0,
 * a key at exactly the field's level has no penalty.
 *
 * The same holds whenever no key's level is below its own field (ℓ_t ≥ φ_t, i.e. w_t ≥ u_t): a
 * key j alive at j′ has ℓ_j ≤ φ_j′ ≤ ℓ_j′, so the stack stays ordered; `step` takes φ and ℓ
 * separately and refuses a token whose level is below its field (the stack would no longer be
 * the alive set). Host state per (b, h), like FpaDecodeState; the positions it holds are the keys
 * a cache in this mode keeps.
 */
export class FpaStack {
  /** Positions on each slot's stack, bottom (oldest) first: slot s holds positions[s·capacity + 0 … size−1]. */
  readonly positions: Int32Array;
  /** Their levels ℓ, non-decreasing from the bottom. */
  readonly levels: Float32Array;
  readonly sizes: Int32Array;
  /** Positions seen (the next token's position). */
  pos = 0;

  constructor(readonly slots: number, readonly capacity: number) {
    if (!Number.isInteger(slots) || slots < 1 || !Number.isInteger(capacity) || capacity < 1) throw new ArgumentError(`FpaStack: slots ${slots} and capacity ${capacity} must be positive integers`);
    this.positions = new Int32Array(slots * capacity);
    this.levels = new Float32Array(slots * capacity);
    this.sizes = new Int32Array(slots);
  }

  /** Empties every slot; the next token is position 0. */
  reset(): void {
    this.sizes.fill(0);
    this.pos = 0;
  }

  /** Subtracts `by` from slot s's levels (a re-centred walk: the order against later fields is kept). */
  recentre(s: number, by: number): void {
    const base = s * this.capacity;
    for (let r = 0; r < this.sizes[s]; r++) this.levels[base + r] = this.levels[base + r] - by;
  }

  /**
   * Token `pos` with field φ_t and level ℓ_t per slot: every key whose level passes φ_t leaves
   * (a top segment; `onPop` hears each, newest first), then the token is pushed. Returns how many
   * keys left, over all slots.
   */
  step(phi: ArrayLike<number>, level: ArrayLike<number>, onPop?: (slot: number, position: number) => void): number {
    let popped = 0;
    for (let s = 0; s < this.slots; s++) {
      const f = Math.fround(phi[s]), l = Math.fround(level[s]);
      if (!(l >= f)) throw new ArgumentError(`FpaStack.step: slot ${s} at position ${this.pos} has level ${l} below its field ${f}; the stack holds the alive keys only when ℓ_t ≥ φ_t (a shared walk has ℓ = φ)`);
      const base = s * this.capacity;
      let n = this.sizes[s];
      while (n > 0 && this.levels[base + n - 1] > f) { n--; popped++; onPop?.(s, this.positions[base + n]); }
      if (n >= this.capacity) throw new ArgumentError(`FpaStack.step: slot ${s} holds ${n} alive keys, the capacity; make the stack with a larger capacity`);
      this.positions[base + n] = this.pos;
      this.levels[base + n] = l;
      this.sizes[s] = n + 1;
    }
    this.pos++;
    return popped;
  }

  /** Alive positions of slot s, oldest first. */
  alive(s: number): number[] {
    return Array.from(this.positions.subarray(s * this.capacity, s * this.capacity + this.sizes[s]));
  }
}


/** The excess e given the newest key (m = +∞): below any level, so its penalty relu(e) is 0. */
const NEWEST = -1e30;

/** The device state's tensors: φ ≡ 0, ℓ and e (B, H, rows), W (B, H, 1), and the newest key's e (B, H, 1, 1). */
interface DeviceTensors { zeroField: Tensor; level: Tensor; excess: Tensor; walk: Tensor; newest: Tensor }

/** The device state before one position: its tensors (held, not copied) and host fields. */
interface DeviceSnapshot {
  level: Tensor; excess: Tensor; walk: Tensor; position: Int32Array;
  length: number; pos: number; exactHistory: boolean; stepsSinceCompact: number; stepsSinceRecentre: number; compactNext: boolean;
}

/**
 * The decode state on a device read asynchronously (webgpu), for FPA layers with eviction: see the
 * file comment. ℓ, e (B, H, rows) and W (B, H, 1) are f32 device tensors, kept out of tidy scopes;
 * `position` and the live counts are host mirrors, exact as of the last settle(). Passive (every
 * call a no-op) for a layer without `evict`, which decodes exactly from the stored φ.
 */
export class DeviceFpaDecodeState implements CacheSideState {
  /** Rows in use (the same for every (b, h); rows past a head's survivors are dead padding). */
  length = 0;
  /** Positions seen so far (the next token's absolute position). */
  pos = 0;
  /** Positions committed by the last settle(): no truncate goes below it. */
  committed = 0;
  /** As FpaDecodeState.exactHistory: no compaction or re-centring yet. */
  exactHistory = true;
  /** Compactions done. */
  compactions = 0;
  /** The eviction rule of the layer decoding into this slot (from its spec; settle needs it). Absent: the state is passive. */
  evict?: FpaEvict;
  /**
   * Absolute position of each row, −1 for padding: exact for the survivors right after a
   * compaction; rows that died since keep their position here until the next one moves them out.
   */
  readonly position: Int32Array;
  /** As FpaDecodeState.rebuilder (set by the layer): the state after positions 0 … n−1 from the stored φ, ℓ, W. */
  rebuilder?: (n: number) => void;
  private recentre_ = 256;
  /** The device tensors, made on first use (a layer without `evict` never uses its state on webgpu). */
  private buf: DeviceTensors | null = null;
  /** Live rows per (b, h) as of the last settle (all rows in use before the first). */
  private readonly live: Float64Array;
  private livePos = 0;
  private stepsSinceCompact = 0;
  private stepsSinceRecentre = 0;
  /** The next settle compacts whatever is dead (right after a prefill, as the host state does). */
  private compactNext = false;
  /** Bumped by every change of the rows (reset, rebuild, append, truncate, compaction): a settle that awaited across one drops its figures. */
  private epoch = 0;
  /** snapshots[p − committed]: the state before position p (null: inside a prefill chunk). */
  private snapshots: (DeviceSnapshot | null)[] = [];
  /** Tensors the snapshots hold, with how many hold each: not freed while held. */
  private readonly held = new Map<Tensor, number>();

  constructor(readonly backend: Backend, readonly batch: number, readonly heads: number, readonly rows: number, opts: FpaDecodeOptions = {}) {
    this.recentreEvery = opts.recentreEvery ?? 256;
    if (opts.evict) this.evict = opts.evict;
    this.position = new Int32Array(batch * heads * rows).fill(-1);
    this.live = new Float64Array(batch * heads);
  }

  /** Re-centre the walk every this many decoded tokens (0 = never; default 256). */
  get recentreEvery(): number { return this.recentre_; }
  set recentreEvery(r: number) { this.recentre_ = checkRecentre(r, 'DeviceFpaDecodeState'); }

  get slots(): number { return this.batch * this.heads; }

  private get t(): DeviceTensors {
    if (!this.buf) {
      const { batch: b, heads: h, rows } = this, o = { backend: this.backend };
      const z = () => keep(zeros([b, h, rows], o));
      this.buf = { zeroField: z(), level: z(), excess: z(), walk: keep(zeros([b, h, 1], o)), newest: keep(full([b, h, 1, 1], NEWEST, o)) };
    }
    return this.buf;
  }

  /** φ ≡ 0 (B, H, rows): the field the attention op takes in the penalty form (as FpaDecodeState.attentionLevels). */
  get zeroField(): Tensor { return this.t.zeroField; }

  /** The levels the attention op takes with φ ≡ 0: e = ℓ − m, DEAD_LEVEL for dead rows, −1e30 for the newest. */
  get attentionLevels(): Tensor { return this.t.excess; }

  reset(): void {
    this.dropSnapshots(0);
    this.epoch++;
    this.length = 0;
    this.pos = 0;
    this.committed = 0;
    this.exactHistory = true;
    this.compactions = 0;
    this.position.fill(-1);
    this.live.fill(0);
    this.livePos = 0;
    if (this.buf) this.replace('walk', zeros([this.batch, this.heads, 1], { backend: this.backend }));
    this.stepsSinceCompact = 0;
    this.stepsSinceRecentre = 0;
    this.compactNext = false;
  }

  /**
   * The state after positions 0 … n−1 from the cache's φ, ℓ, W rows (B, H, rows): e_j = ℓ_j −
   * min φ over (j, n−1] (one reverse cummin), the newest −1e30; dead rows marked when `threshold`
   * (τ/λ, (1, H, 1)) is given. The next settle() compacts.
   */
  rebuild(phi: Tensor, level: Tensor, walk: Tensor, n: number, threshold: Tensor | null): void {
    this.reset();
    if (n > 0) {
      const [b, h] = [this.batch, this.heads];
      const phiN = narrow(phi, 2, 0, n), levelN = narrow(level, 2, 0, n); // (B, H, n)
      const rev = cummin(flip(phiN, [2]), 2);
      const suffix = flip(rev.values, [2]); // min φ over [j, n−1]
      const e = n > 1 ? concat([sub(narrow(levelN, 2, 0, n - 1), narrow(suffix, 2, 1, n - 1)), full([b, h, 1], NEWEST, { backend: this.backend })], 2) : full([b, h, 1], NEWEST, { backend: this.backend });
      writeRows(this.t.excess, e, 0);
      writeRows(this.t.level, levelN, 0);
      this.replace('walk', add(narrow(walk, 2, n - 1, 1), 0));
      for (const t of [phiN, levelN, rev.values, rev.indices, suffix, e]) t.dispose();
      for (let s = 0; s < this.slots; s++) for (let j = 0; j < n; j++) this.position[s * this.rows + j] = j;
    }
    this.length = n;
    this.pos = n;
    this.epoch++;
    this.live.fill(n);
    this.livePos = n;
    if (threshold) this.markDead(threshold);
    this.compactNext = true;
    this.snapshots = new Array<DeviceSnapshot | null>(n).fill(null);
  }

  /** The snapshot of the state before position `pos` (the layer calls it at the start of each per-token step): its tensors held, not copied. */
  checkpoint(): void {
    const t = this.t;
    const snap: DeviceSnapshot = {
      level: t.level, excess: t.excess, walk: t.walk, position: this.position.slice(0, this.position.length),
      length: this.length, pos: this.pos, exactHistory: this.exactHistory, stepsSinceCompact: this.stepsSinceCompact,
      stepsSinceRecentre: this.stepsSinceRecentre, compactNext: this.compactNext,
    };
    for (const x of [snap.level, snap.excess, snap.walk]) this.held.set(x, (this.held.get(x) ?? 0) + 1);
    this.snapshots[this.pos - this.committed] = snap;
  }

  /** Drops the snapshots from index `from` on, freeing the tensors no one holds any more (and not in use). */
  private dropSnapshots(from: number): void {
    const cur = this.buf ? new Set([this.buf.level, this.buf.excess, this.buf.walk]) : new Set<Tensor>();
    for (const s of this.snapshots.slice(from)) {
      if (!s) continue;
      for (const x of [s.level, s.excess, s.walk]) {
        const n = (this.held.get(x) ?? 1) - 1;
        if (n > 0) this.held.set(x, n);
        else {
          this.held.delete(x);
          if (!cur.has(x)) x.dispose();
        }
      }
    }
    this.snapshots.length = Math.min(this.snapshots.length, from);
  }

  /** One token's walk increment, field offset u and level offset w (B, H, 1) → its φ_t, ℓ_t and W_t (B, H, 1); W advances. */
  advance(inc: Tensor, u: Tensor, w: Tensor): [phi: Tensor, level: Tensor, walk: Tensor] {
    this.replace('walk', add(this.t.walk, inc));
    return [add(this.t.walk, u), add(this.t.walk, w), this.t.walk];
  }

  /** Every cached key's minimum lowered to φ_t (B, H, 1): e ← max(e, ℓ − φ_t); then dead rows (e > τ/λ) marked when `threshold` is given. */
  observe(phi: Tensor, threshold: Tensor | null): void {
    const d = sub(this.t.level, phi);
    this.replace('excess', maximum(this.t.excess, d));
    d.dispose();
    if (threshold) this.markDead(threshold);
  }

  /** Rows whose penalty λ·e passes τ (e > τ/λ, `threshold` (1, H, 1)) get e = DEAD_LEVEL. */
  private markDead(threshold: Tensor): void {
    const dead = gt(this.t.excess, threshold);
    this.replace('excess', where(dead, DEAD_LEVEL, this.t.excess));
    dead.dispose();
  }

  /**
   * Appends the new token (ℓ_t (B, H, 1)) as row `length` with m = +∞; advances pos. Writes row
   * `length` of ℓ and e in place: past every snapshot's rows (they end at or before it).
   */
  append(level: Tensor): void {
    if (this.length >= this.rows) throw new ArgumentError(`DeviceFpaDecodeState: the cache's ${this.rows} rows are full at position ${this.pos}`);
    writeRows(this.t.level, level, this.length);
    const e = reshape(this.t.excess, [this.batch, this.heads, this.rows, 1]);
    kvWrite(e, this.t.newest, this.length);
    e.dispose();
    for (let s = 0; s < this.slots; s++) this.position[s * this.rows + this.length] = this.pos;
    this.length++;
    this.pos++;
    this.epoch++;
    this.stepsSinceCompact++;
    this.stepsSinceRecentre++;
  }

  /** Re-centres when due: ℓ and W of each head minus its W (e = ℓ − m is unchanged). */
  maybeRecentre(): void {
    if (this.recentreEvery > 0 && this.stepsSinceRecentre >= this.recentreEvery) this.recentre();
  }

  recentre(): void {
    this.replace('level', sub(this.t.level, this.t.walk));
    this.replace('walk', zeros([this.batch, this.heads, 1], { backend: this.backend }));
    this.exactHistory = false;
    this.stepsSinceRecentre = 0;
  }

  /**
   * Commits the positions seen (the snapshots are dropped), reads how many keys each head keeps
   * (one small read) and, when the host rule says so (dead keys and `every` steps since the last
   * compaction, or a dead fraction past `deadFraction`, or the first settle after a prefill), reads
   * the live mask and compacts. A step or truncate that ran while this awaited makes its figures
   * stale: they are dropped (the next settle reads again).
   */
  async settle(cache: LayerKv): Promise<void> {
    const evict = this.evict;
    this.committed = this.pos;
    this.dropSnapshots(0);
    if (!evict || this.length === 0) return;
    const stamp = this.epoch, pos = this.pos, len = this.length;
    const mask = noGrad(() => { const e = narrow(this.t.excess, 2, 0, len); const m = lt(e, DEAD_LEVEL / 2); e.dispose(); return keep(m); }); // (B, H, len) 1 = live
    try {
      const countsT = noGrad(() => keep(sum(mask, -1)));
      const counts = (await countsT.data()) as Float32Array;
      countsT.dispose();
      if (this.epoch !== stamp) return;
      let live = 0;
      for (let s = 0; s < this.slots; s++) { this.live[s] = counts[s]; live += counts[s]; }
      this.livePos = pos;
      const dead = 1 - live / (this.slots * len);
      if (!(dead > 0 && (this.compactNext || dead > evict.deadFraction || this.stepsSinceCompact >= evict.every))) { this.compactNext = false; return; }
      const flags = (await mask.data()) as Float32Array;
      if (this.epoch !== stamp) return;
      noGrad(() => this.compact(cache, flags, len));
    } finally {
      mask.dispose();
    }
  }

  /** Drops the rows whose flag is 0 (flags (B, H, len)): as FpaDecodeState.compact, rows moved on the device. */
  private compact(cache: LayerKv, flags: Float32Array, len: number): void {
    const { rows, slots } = this;
    const keepRows: number[][] = [];
    let length = 0;
    for (let s = 0; s < slots; s++) {
      const k: number[] = [];
      for (let r = 0; r < len; r++) if (flags[s * len + r] > 0) k.push(r);
      keepRows.push(k);
      length = Math.max(length, k.length);
    }
    // new row → old row (global over slots); a head's padding takes one of its dead rows, so e stays DEAD_LEVEL there.
    const ids = new Int32Array(slots * length);
    const position = this.position.slice();
    for (let s = 0; s < slots; s++) {
      const k = keepRows[s];
      let deadRow = 0;
      while (k.length < length && flags[s * len + deadRow] > 0) deadRow++;
      for (let r = 0; r < length; r++) {
        const from = r < k.length ? k[r] : deadRow;
        ids[s * length + r] = s * rows + from;
        this.position[s * rows + r] = r < k.length ? position[s * rows + from] : -1;
      }
      for (let r = length; r < rows; r++) this.position[s * rows + r] = -1;
    }
    if (length > 0) {
      const idx = tensor(ids, [slots * length], { backend: this.backend, dtype: 'i32' });
      for (const t of [cache.k, cache.v]) moveRowsTo(t, idx, length);
      for (const t of [this.t.level, this.t.excess]) {
        const t4 = reshape(t, [this.batch, this.heads, rows, 1]);
        moveRowsTo(t4, idx, length);
        t4.dispose();
      }
      idx.dispose();
    }
    for (let s = 0; s < slots; s++) this.live[s] = keepRows[s].length;
    this.length = length;
    this.epoch++;
    this.exactHistory = false;
    this.stepsSinceCompact = 0;
    this.compactNext = false;
    this.compactions++;
  }

  /** Fraction of the positions seen whose key is kept, per KV head (averaged over the batch), as of the last settle(). */
  kept(): number[] {
    const out = new Array<number>(this.heads).fill(0);
    if (this.livePos === 0) return out.fill(1);
    for (let s = 0; s < this.slots; s++) out[s % this.heads] += this.live[s] / this.livePos / this.batch;
    return out;
  }

  /**
   * The cache protocol's truncate (see the file comment): back to the state before position
   * `length` was first seen, for committed ≤ length ≤ pos; below `committed` an ArgumentError.
   * A passive state (no `evict`: the layer decodes exactly from the stored φ) has nothing to undo.
   */
  truncate(length: number): void {
    if (!this.evict && this.pos === 0) return;
    checkTruncate(length, this.pos, this.committed);
    if (length === this.pos) return;
    if (length === 0) { this.reset(); return; }
    const snap = this.snapshots[length - this.committed];
    if (snap) {
      const t = this.t;
      const cur = [t.level, t.excess, t.walk];
      t.level = snap.level;
      t.excess = snap.excess;
      t.walk = snap.walk;
      this.dropSnapshots(length - this.committed); // releases snap too; its tensors are in use now
      for (const x of cur) if (x !== t.level && x !== t.excess && x !== t.walk && !this.held.has(x)) x.dispose();
      this.position.set(snap.position);
      this.length = snap.length;
      this.pos = snap.pos;
      this.exactHistory = snap.exactHistory;
      this.stepsSinceCompact = snap.stepsSinceCompact;
      this.stepsSinceRecentre = snap.stepsSinceRecentre;
      this.compactNext = snap.compactNext;
      this.epoch++;
      return;
    }
    if (!this.rebuilder) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions inside the prefill before the layer has run`);
    this.rebuilder(length);
  }

  /** Bytes of the device tensors (ℓ, e, φ ≡ 0: rows each; W, the newest; and those the snapshots hold). */
  get bytes(): number {
    if (!this.buf) return 0;
    const all = new Set<Tensor>([...Object.values(this.buf), ...this.held.keys()]);
    let n = 0;
    for (const t of all) n += t.size * 4;
    return n;
  }

  /** Frees the device tensors (the cache's dispose does it). */
  dispose(): void {
    const all = new Set<Tensor>([...(this.buf ? Object.values(this.buf) : []), ...this.held.keys()]);
    for (const t of all) t.dispose();
    this.held.clear();
    this.snapshots = [];
    this.buf = null;
  }

  /** Makes `t` the current tensor of `field`; the old one is freed unless a snapshot holds it. */
  private replace(field: 'level' | 'excess' | 'walk', t: Tensor): void {
    const buf = this.t, old = buf[field];
    buf[field] = keep(t);
    if (old !== t && !this.held.has(old)) old.dispose();
  }
}

/** Writes rows x (B, H, n) into t (B, H, rows) at `at` … (an in-place write through a 4-D view). */
function writeRows(t: Tensor, x: Tensor, at: number): void {
  const [b, h, rows] = t.shape;
  const t4 = reshape(t, [b, h, rows, 1]), x4 = reshape(x, [b, h, x.shape[2], 1]);
  kvWrite(t4, x4, at);
  t4.dispose();
  x4.dispose();
}

/** Rows 0 … length−1 of t (B, H, rows, W) become its rows ids[(b, h), r] (global rows (b·H + h)·rows + r), one row lookup each. */
function moveRowsTo(t: Tensor, ids: Tensor, length: number): void {
  const [b, h, rows, w] = t.shape;
  const table = reshape(t, [b * h * rows, w]);
  const moved = embedding(table, ids); // (B·H·length, W)
  const m4 = reshape(moved, [b, h, length, w]);
  kvWrite(t, m4, 0);
  for (const x of [table, moved, m4]) x.dispose();
}

/** Either decode state. */
export type AnyFpaDecodeState = FpaDecodeState | DeviceFpaDecodeState;

/** States of slots made by hand (without the cache's layout); a cache's slot has its own in `side.fpa`. */
const states = new WeakMap<LayerKv, AnyFpaDecodeState>();

/**
 * A fresh decode state for a layer's cache slot (the cache's layout makes one per slot, with the
 * layer's rules): the host state where the cache's backend reads synchronously, the device state
 * elsewhere.
 */
export function attachFpaDecodeState(cache: LayerKv, opts: FpaDecodeOptions = {}): AnyFpaDecodeState {
  const [b, h, rows] = cache.k.shape;
  const backend = cache.k.backend;
  const st = backend.readSync ? new FpaDecodeState(b, h, rows, opts) : new DeviceFpaDecodeState(backend, b, h, rows, opts);
  states.set(cache, st);
  return st;
}

/** The slot's state: its side state "fpa", else one made on first use. */
function stateOf(cache: LayerKv): AnyFpaDecodeState {
  const side = cache.side?.fpa;
  if (side instanceof FpaDecodeState || side instanceof DeviceFpaDecodeState) return side;
  return states.get(cache) ?? attachFpaDecodeState(cache);
}

/** The host decode state of a layer's cache slot; ArgumentError if the slot holds a device state. */
export function fpaDecodeState(cache: LayerKv): FpaDecodeState {
  const st = stateOf(cache);
  if (!(st instanceof FpaDecodeState)) throw new ArgumentError(`fpaDecodeState: this cache slot lives on backend '${cache.k.backend.name}', which reads asynchronously; its state is a DeviceFpaDecodeState (deviceFpaDecodeState)`);
  return st;
}

/** The device decode state of a layer's cache slot; ArgumentError if the slot holds a host state. */
export function deviceFpaDecodeState(cache: LayerKv): DeviceFpaDecodeState {
  const st = stateOf(cache);
  if (!(st instanceof DeviceFpaDecodeState)) throw new ArgumentError(`deviceFpaDecodeState: this cache slot lives on backend '${cache.k.backend.name}', which reads synchronously; its state is an FpaDecodeState (fpaDecodeState)`);
  return st;
}

/** The decode state of a slot if it has one, else undefined. */
export const peekFpaDecodeState = (cache: LayerKv): AnyFpaDecodeState | undefined => {
  const side = cache.side?.fpa;
  if (side instanceof FpaDecodeState || side instanceof DeviceFpaDecodeState) return side;
  return states.get(cache);
};
