/**
 * Focus's decode state (specs/focus_spot.md A4, the spec's decode proposal): per batch entry, each
 * cached position's membership word and, per group, the ascending list of the positions in it. A
 * new token at position p reads the keys of its groups (older than its window) and its last w + 1
 * positions: O(n·k/K + w) keys instead of n. The state follows the cache protocol
 * (attention/mechanism.ts CacheSideState): cached steps append positions in order, `truncate`
 * forgets positions from a length on (each list cut where its positions reach it), `settle` has
 * nothing to commit. The lists live on the host: they index the device's K and V.
 */
import { ArgumentError } from '../../errors.ts';
import type { CacheSideState, LayerKv } from '../mechanism.ts';

export class FocusGroupLists implements CacheSideState {
  /** Positions held (the same for every batch entry). */
  length = 0;
  private readonly words: Uint32Array[];
  private readonly lists: Int32Array[][];
  private readonly counts: Int32Array[];

  constructor(readonly batch: number, readonly capacity: number, readonly groups: number) {
    this.words = Array.from({ length: batch }, () => new Uint32Array(capacity));
    this.lists = Array.from({ length: batch }, () => Array.from({ length: groups }, () => new Int32Array(0)));
    this.counts = Array.from({ length: batch }, () => new Int32Array(groups));
  }

  /** The state of a slot whose k is (B, Hkv, Tmax, D). */
  static forSlot(slot: LayerKv, groups: number): FocusGroupLists {
    return new FocusGroupLists(slot.k.shape[0], slot.k.shape[2], groups);
  }

  /** Appends positions pos … pos + n − 1 with words (B·n, row-major); pos must be the length held. */
  append(pos: number, words: Uint32Array): void {
    const n = words.length / this.batch;
    if (pos !== this.length) throw new ArgumentError(`focus: the group lists hold ${this.length} positions; a step at ${pos} must follow them (truncate first)`);
    if (pos + n > this.capacity) throw new ArgumentError(`focus: positions up to ${pos + n - 1} pass the cache's ${this.capacity}`);
    for (let b = 0; b < this.batch; b++) {
      for (let i = 0; i < n; i++) {
        const w = words[b * n + i], p = pos + i;
        this.words[b][p] = w;
        for (let c = 0; c < this.groups; c++) if (w & (1 << c)) this.push(b, c, p);
      }
    }
    this.length = pos + n;
  }

  /**
   * Moves the length over positions pos … pos + n − 1 without their words: the device form
   * (focus.ts), which keeps membership in the cache's "member" state, still truncates through the
   * cache, so the lists follow its length (their words are then not read).
   */
  advance(pos: number, n: number): void {
    if (pos !== this.length) throw new ArgumentError(`focus: the group lists hold ${this.length} positions; a step at ${pos} must follow them (truncate first)`);
    if (pos + n > this.capacity) throw new ArgumentError(`focus: positions up to ${pos + n - 1} pass the cache's ${this.capacity}`);
    this.length = pos + n;
  }

  private push(b: number, c: number, p: number): void {
    let list = this.lists[b][c];
    const n = this.counts[b][c];
    if (n === list.length) {
      const grown = new Int32Array(Math.min(this.capacity, Math.max(64, 2 * list.length)));
      grown.set(list);
      list = this.lists[b][c] = grown;
    }
    list[n] = p;
    this.counts[b][c] = n + 1;
  }

  /** Membership word of position p of batch entry b. */
  word(b: number, p: number): number {
    return this.words[b][p];
  }

  /** The positions in group c of batch entry b, ascending (a view; valid until the next append). */
  group(b: number, c: number): Int32Array {
    return this.lists[b][c].subarray(0, this.counts[b][c]);
  }

  /**
   * The keys the query at position p (held) of batch entry b reads, ascending: its groups'
   * positions before p − w, then p − w … p. Each key once.
   */
  visible(b: number, p: number, window: number): Int32Array {
    const w = this.words[b][p], near = Math.max(0, p - window);
    const far = new Set<number>();
    for (let c = 0; c < this.groups; c++) {
      if (!(w & (1 << c))) continue;
      const list = this.group(b, c);
      for (let i = 0; i < list.length && list[i] < near; i++) far.add(list[i]);
    }
    const out = new Int32Array(far.size + (p - near + 1));
    let n = 0;
    for (const j of [...far].sort((x, y) => x - y)) out[n++] = j;
    for (let j = near; j <= p; j++) out[n++] = j;
    return out;
  }

  truncate(length: number): void {
    if (!Number.isInteger(length) || length < 0 || length > this.length) throw new ArgumentError(`focus: truncate to ${length}: expected an integer in [0, ${this.length}]`);
    for (let b = 0; b < this.batch; b++) for (let c = 0; c < this.groups; c++) {
      const list = this.lists[b][c];
      let n = this.counts[b][c];
      while (n > 0 && list[n - 1] >= length) n--;
      this.counts[b][c] = n;
    }
    this.length = length;
  }

  async settle(_slot: LayerKv): Promise<void> {}

  get bytes(): number {
    let n = 0;
    for (let b = 0; b < this.batch; b++) {
      n += this.words[b].byteLength;
      for (const l of this.lists[b]) n += l.byteLength;
    }
    return n;
  }

  dispose(): void {
    this.length = 0;
  }
}
