/**
 * The host references of FPA decoding (specs/fpa_depth.md §2.6), which the decode state in src
 * (attention/fpa/fpa_decode.ts FpaDecodeState: one formulation in ops, for every backend) is
 * checked against: HostFpaDecodeState keeps per cached row its level ℓ_j, running minimum m_j and
 * position in host f32 arrays (observe lowers every m_j to φ_t, markDead drops the rows past τ,
 * compact moves the survivors down), with the cache protocol (snapshots per position appended
 * since the last settle, truncate, settle); FpaStack is the shared-walk hard mode's explicit stack
 * (pop the keys whose level passes φ_t, push t: amortised O(1)). These were the cpu/wasm decode
 * path before the backend branching left src/attention (test/attention/fpa_stack.test.ts and
 * fpa_device_formulation.test.ts use them).
 */
import { ArgumentError } from '../../src/errors.ts';
import { tensor } from '../../src/ops/creation.ts';
import type { LayerKv } from '../../src/attention/mechanism.ts';
import { checkRecentre, checkTruncate, DEAD_LEVEL, moveRowsTo, type FpaCompaction, type FpaDecodeOptions, type FpaEvict } from '../../src/attention/fpa/fpa_decode.ts';

/** The host state before one position: the used rows of each slot packed, the stack copied, the counters. */
interface HostSnapshot {
  length: number; pos: number; exactHistory: boolean; stepsSinceCompact: number; stepsSinceRecentre: number; compactNext: boolean;
  level: Float32Array; runMin: Float32Array; position: Int32Array; walk: Float32Array;
  stack: { positions: Int32Array; levels: Float32Array; sizes: Int32Array; pos: number } | null;
}

export class HostFpaDecodeState {
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
