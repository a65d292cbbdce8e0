/**
 * FPA decoding state (specs/fpa_depth.md §2.6): per layer, per sequence b and KV head h, for each
 * cached key row its level ℓ_j and its excess e_j = ℓ_j − m_j over the running minimum m_j = min φ
 * over (j, now] (−1e30 for the newest key, whose m is +∞), its absolute position (a host mirror),
 * plus the current walk W. Each new token t raises every e_j to max(e_j, ℓ_j − φ_t) (bit for bit
 * ℓ_j − min(m_j, φ_t)); the key's penalty is λ_h·relu(e_j), which never decreases (§2.3.2,
 * monotone death), so a key whose penalty passes τ (e_j > τ/λ_h) is marked dead for good (e_j =
 * DEAD_LEVEL: weight exactly 0 from then on). Dead keys leave holes that compaction closes: each
 * head's surviving rows move down, in order, and the cache's rows of k and v move with them. Heads
 * keep different numbers of keys; the cache is rectangular, so a head with fewer survivors than
 * the longest has dead padding rows, which the attention masks. The attention takes the state as
 * the FPA op's levels with φ ≡ 0 (then pen_ij = λ·relu(e_j)).
 *
 * One formulation for every backend, written in ops (elementwise updates, a reverse cummin for
 * the prefill's suffix minima, row gathers for compaction; no read-back inside a step), so
 * decoding never waits on the device and models never branch on the backend. What needs the host
 * — how many keys each head keeps (kept()) and which rows to move at a compaction — is read
 * asynchronously in settle() (KvCache.settle, the generation loop's one asynchronous point: one
 * small read per FPA layer and step, a compaction reads the live mask once more). This was chosen
 * over computing the compaction on the device (scans and scatters of the live mask) because the
 * host must learn the new row count anyway: the attention's kvLength is a host number. The host
 * formulation this replaced (per-row minima in host arrays, and the shared-walk stack as an
 * explicit FpaStack) lives on in test/attention/fpa_reference.ts as the reference this one is
 * checked against (test/attention/fpa_device_formulation.test.ts, fpa_stack.test.ts).
 *
 * The shared-walk hard mode (§2.3.4, §2.6's last lines; FpaSpec.stack) is the same state with
 * death threshold 0: a key is dead once λ·relu(ℓ_j − m_j) > 0, i.e. once the field went below its
 * level — exactly the stack's alive set A_i = {j : ℓ_j ≤ φ_t ∀ t ∈ (j, i]} (ties kept: relu(0) =
 * 0), and the live keys have no penalty; the prompt goes through the state one token at a time
 * (the hard limit throughout), compaction follows the layer's `stack` rule. It costs an O(n)
 * elementwise pass per token instead of the explicit stack's amortised O(1) pops.
 *
 * The cache protocol (attention/mechanism.ts CacheSideState), which draft–revise decoding needs
 * (drafted positions are appended, then the rejected ones truncated):
 *
 * - Compaction happens ONLY in settle(), never inside a step; the rule (the layer's `evict` or
 *   `stack`: dead keys and `every` steps since the last compaction, or a dead fraction past
 *   `deadFraction`, or the first settle after a prefill that left dead keys) is checked there. So
 *   the rows of positions seen since the last settle — the uncommitted ones — are never moved. A
 *   caller that never settles gets the same outputs (dead rows weigh exactly 0), only without
 *   compaction, and kept() reports the figures of the last settle.
 * - settle() commits: `committed` becomes the positions seen, and no later truncate goes below it
 *   (an ArgumentError naming both lengths).
 * - truncate(L) for committed ≤ L ≤ positions seen restores the state exactly as it was before
 *   position L was first seen. Variant chosen: a snapshot per position appended since the last
 *   settle (taken at the start of each per-token step, dropped by settle) that holds on to the
 *   state's previous tensors instead of copying them: every step makes new excess and walk tensors
 *   and writes ℓ and e in place only at rows past the snapshot's length, so holding them is enough.
 *   The alternative, replaying the kept positions' φ from the committed state, would keep fewer
 *   tensors but re-run the steps; a draft is a handful of positions, so the snapshots cost little.
 *   Positions inside a prefill chunk (the exact op runs over all of them at once) have no
 *   snapshot: a truncation into a prefill rebuilds the state from the stored φ, ℓ, W of the kept
 *   positions, as a prefill of that length does (nothing can have been compacted or re-centred in
 *   between: both need a settle or a decoded step after the prefill, and the stored rows of the
 *   prefill stay intact). The stack mode's prefill runs token by token but takes no snapshots
 *   either (each would hold that step's tensors: O(n²) for a prompt of n); a truncation into it
 *   rebuilds the alive set from the stored rows, which reach only to its first re-centring (the
 *   rows are written while they are absolute): past that, an ArgumentError naming the position.
 *   The k/v rows written for rejected positions, and their per-position φ, ℓ, W rows, are simply
 *   overwritten later (the row pointer `length` is restored). After
 *   truncate(L) the next cached call at position L continues bit for bit as if positions ≥ L had
 *   never been seen (test/attention/fpa_truncate.test.ts, on cpu and webgpu).
 *
 * A layer without `evict` or `stack` decodes exactly, recomputing M_ij from the stored φ of every
 * position each step (one fused kernel, no extra state), and leaves its state passive (rows are
 * positions there: nothing to truncate or settle).
 *
 * Re-centring subtracts W from every ℓ and W of a head (e = ℓ − m is unchanged), so a long decode
 * keeps the state near 0 where f32 is fine; it runs inside the step, every `recentreEvery` decoded
 * tokens (settable on the state: `cache.layers[i].side!.fpa`), and its counter is part of the
 * snapshots, so a truncated and continued decode re-centres where an untruncated one does.
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
import { keep, noGrad, tidy } from '../../tensor/scope.ts';
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
export function checkRecentre(r: number, who: string): number {
  if (!Number.isInteger(r) || r < 0) throw new ArgumentError(`${who}: recentreEvery ${r} must be a non-negative integer (0 = never)`);
  return r;
}

/** The cache protocol's check of a truncation against the positions seen and committed. */
export function checkTruncate(length: number, pos: number, committed: number): void {
  if (!Number.isInteger(length) || length < 0 || length > pos) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions: ${pos} were seen (expected an integer in [${committed}, ${pos}])`);
  if (length < committed) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions: the first ${committed} are committed (the cache settled after them and may have compacted their rows); a truncation keeps at least ${committed}`);
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
 * call a no-op) for a layer without `evict` or `stack`, which decodes exactly from the stored φ.
 * Only ops: it runs on any backend (on cpu a test attaches it to compare it with FpaDecodeState).
 */
export class FpaDecodeState implements CacheSideState {
  /** Rows in use (the same for every (b, h); rows past a head's survivors are dead padding). */
  length = 0;
  /** Positions seen so far (the next token's absolute position). */
  pos = 0;
  /** Positions committed by the last settle(): no truncate goes below it. */
  committed = 0;
  /** No compaction or re-centring yet: rows are positions, with φ, ℓ, W in the cache's state tensors (a rebuild from them is possible). */
  exactHistory = true;
  /** Leading positions whose φ, ℓ, W rows the cache holds as seen (Infinity while exactHistory): how far a rebuild can reach. */
  private rowsStored = Infinity;
  /** Compactions done. */
  compactions = 0;
  /** The eviction rule of the layer decoding into this slot (from its spec; settle compacts by it). */
  evict?: FpaEvict;
  /**
   * The stack rule of a layer in the shared-walk stack mode (from its spec; settle compacts by it):
   * the same state with threshold 0 (a key dies once its penalty is positive: the hard limit, whose
   * alive set is FpaStack's). Neither rule: the state is passive.
   */
  stackRule?: FpaCompaction;
  /**
   * Absolute position of each row, −1 for padding: exact for the survivors right after a
   * compaction; rows that died since keep their position here until the next one moves them out.
   */
  readonly position: Int32Array;
  /** Set by the layer at each cached call (it knows λ and τ): the state after positions 0 … n−1 from the stored φ, ℓ, W; truncate uses it for a length inside a prefill chunk. */
  rebuilder?: (n: number) => void;
  private recentre_ = 256;
  /** The device tensors, made on first use (a layer without `evict` never uses its state on webgpu). */
  private buf: DeviceTensors | null = null;
  /** Live rows per (b, h) as of the last settle (all rows in use before the first). */
  private readonly live: Float64Array;
  private livePos = 0;
  private stepsSinceCompact = 0;
  private stepsSinceRecentre = 0;
  /** The next settle compacts whatever is dead (right after a prefill). */
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
    if (opts.stack) this.stackRule = opts.stack;
    this.position = new Int32Array(batch * heads * rows).fill(-1);
    this.live = new Float64Array(batch * heads);
  }

  /** Re-centre the walk every this many decoded tokens (0 = never; default 256). */
  get recentreEvery(): number { return this.recentre_; }
  set recentreEvery(r: number) { this.recentre_ = checkRecentre(r, 'FpaDecodeState'); }

  get slots(): number { return this.batch * this.heads; }

  private get t(): DeviceTensors {
    if (!this.buf) {
      const { batch: b, heads: h, rows } = this, o = { backend: this.backend };
      const z = () => keep(zeros([b, h, rows], o));
      this.buf = { zeroField: z(), level: z(), excess: z(), walk: keep(zeros([b, h, 1], o)), newest: keep(full([b, h, 1, 1], NEWEST, o)) };
    }
    return this.buf;
  }

  /** φ ≡ 0 (B, H, rows): the field the attention op takes in the penalty form. */
  get zeroField(): Tensor { return this.t.zeroField; }

  /** The levels the attention op takes with φ ≡ 0: e = ℓ − m, DEAD_LEVEL for dead rows, −1e30 for the newest. */
  get attentionLevels(): Tensor { return this.t.excess; }

  /** The current walk W (B, H, 1) (re-centred: relative to the last re-centring). */
  get walk(): Tensor { return this.t.walk; }

  /** The positions of the live keys per (b, h), in row order (one read of the live mask; for tests and tools, not for a step). */
  async alivePositions(): Promise<number[][]> {
    const len = this.length, position = this.position.slice();
    if (len === 0) return Array.from({ length: this.slots }, () => []);
    const mask = noGrad(() => tidy(() => keep(lt(narrow(this.t.excess, 2, 0, len), DEAD_LEVEL / 2))));
    const flags = (await mask.data()) as Float32Array;
    mask.dispose();
    return Array.from({ length: this.slots }, (_, s) => {
      const out: number[] = [];
      for (let r = 0; r < len; r++) if (flags[s * len + r] > 0) out.push(position[s * this.rows + r]);
      return out;
    });
  }

  reset(): void {
    this.dropSnapshots(0);
    this.epoch++;
    this.length = 0;
    this.pos = 0;
    this.committed = 0;
    this.exactHistory = true;
    this.rowsStored = Infinity;
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
    if (this.length >= this.rows) throw new ArgumentError(`FpaDecodeState: the cache's ${this.rows} rows are full at position ${this.pos}`);
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
    if (this.exactHistory) this.rowsStored = this.pos;
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
    const evict = this.evict ?? this.stackRule;
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

  /** Drops the rows whose flag is 0 (flags (B, H, len)): each head's live rows move down in order, the k and v rows of `cache` with them (row gathers); the new length is the most live keys of any head (a shorter head's rest is dead padding). */
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
    if (this.exactHistory) this.rowsStored = this.pos;
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
    if (!this.evict && !this.stackRule && this.pos === 0) return;
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
      if (snap.exactHistory) this.rowsStored = Infinity;
      this.stepsSinceCompact = snap.stepsSinceCompact;
      this.stepsSinceRecentre = snap.stepsSinceRecentre;
      this.compactNext = snap.compactNext;
      this.epoch++;
      return;
    }
    if (!this.rebuilder) throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions inside the prefill before the layer has run`);
    if (length > this.rowsStored) {
      throw new ArgumentError(`fpa decode state: cannot truncate to ${length} positions inside the stack-mode prefill: it keeps no snapshots, and its φ, ℓ, W rows are stored only up to position ${this.rowsStored} (it re-centred there); truncate to at most ${this.rowsStored}, or settle after the prefill and truncate past it`);
    }
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
export function moveRowsTo(t: Tensor, ids: Tensor, length: number): void {
  const [b, h, rows, w] = t.shape;
  const table = reshape(t, [b * h * rows, w]);
  const moved = embedding(table, ids); // (B·H·length, W)
  const m4 = reshape(moved, [b, h, length, w]);
  kvWrite(t, m4, 0);
  for (const x of [table, moved, m4]) x.dispose();
}

/** States of slots made by hand (without the cache's layout); a cache's slot has its own in `side.fpa`. */
const states = new WeakMap<LayerKv, FpaDecodeState>();

/** A fresh decode state for a layer's cache slot (the cache's layout makes one per slot, with the layer's rules). */
export function attachFpaDecodeState(cache: LayerKv, opts: FpaDecodeOptions = {}): FpaDecodeState {
  const [b, h, rows] = cache.k.shape;
  const st = new FpaDecodeState(cache.k.backend, b, h, rows, opts);
  states.set(cache, st);
  return st;
}

/** The decode state of a slot if it has one (its side state "fpa", or one attached by hand), else undefined. */
export function peekFpaDecodeState(cache: LayerKv): FpaDecodeState | undefined {
  const side = cache.side?.fpa;
  return side instanceof FpaDecodeState ? side : states.get(cache);
}

/** The decode state of a layer's cache slot, made with default options on first use. */
export const fpaDecodeState = (cache: LayerKv): FpaDecodeState => peekFpaDecodeState(cache) ?? attachFpaDecodeState(cache);
