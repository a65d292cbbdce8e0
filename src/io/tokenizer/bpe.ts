/**
 * The BPE model. Byte-level (GPT-2, Llama 3, Qwen): a pre-tokenized word becomes its UTF-8 bytes,
 * each byte the id of its byte-level character. Character symbols (SentencePiece conversions:
 * Llama 2, Mistral v0.x): each character is its own token, and with `byteFallback` a character the
 * vocabulary lacks becomes the <0xXX> tokens of its UTF-8 bytes. Then merges apply lowest rank
 * first, leftmost first among equal ranks, until none applies. That order, the stale-entry rule and the `unk_token` / `fuse_unk` /
 * `ignore_merges` options are those of Hugging Face's BPE model (`models/bpe/word.rs`,
 * `merge_all`), so ids agree with `tokenizers` for the same vocab and merges. A per-word cache
 * makes repeated words cost one Map lookup.
 */
import { ArgumentError, showValue, UnsupportedError } from '../../errors.ts';
import { BYTE_CHARS, byteLevelToBytes, bytesToByteLevel } from './byte_level.ts';

/** Ids must stay below this so a pair (a, b) packs into one number a·ID_LIMIT + b. */
const ID_LIMIT = 1 << 21;
/** Heap keys pack rank·2^32 + position. */
const POS_LIMIT = 2 ** 32;
/** Words longer than this (in characters) are not cached, as in Hugging Face. */
const CACHE_MAX_WORD = 256;
const CACHE_MAX_ENTRIES = 1 << 17;

export interface BpeModelSpec {
  /** Token string (byte-level spelling) → id. */
  readonly vocab: ReadonlyMap<string, number>;
  /** Merges in rank order: each joins two vocabulary tokens into a third one, also in the vocabulary. */
  readonly merges: ReadonlyArray<readonly [string, string]>;
  /** Emitted for a byte whose character is missing from the vocabulary; with none, the byte is dropped (as in Hugging Face). */
  readonly unkToken: string | null;
  /** Consecutive unknown bytes become one unk. */
  readonly fuseUnk: boolean;
  /** A word that is itself in the vocabulary is emitted whole, merges or not (Llama-3 files set this). */
  readonly ignoreMerges: boolean;
  /** 'bytes' (default): byte-level symbols; 'chars': one symbol a character, tokens spelt as text. */
  readonly symbols?: 'bytes' | 'chars';
  /** With 'chars': a character missing from the vocabulary becomes its bytes' <0xXX> tokens (before any unk). */
  readonly byteFallback?: boolean;
}

/** The <0xXX> token of byte b (SentencePiece's byte pieces). */
export const bytePiece = (b: number) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
const BYTE_PIECE = /^<0x([0-9A-F]{2})>$/;

export class BpeModel {
  /** id → token string (undefined for ids the vocabulary does not use). */
  readonly tokens: ReadonlyArray<string | undefined>;
  readonly vocab: ReadonlyMap<string, number>;
  /** (left id · ID_LIMIT + right id) → (rank · ID_LIMIT + merged id). */
  private readonly mergeMap = new Map<number, number>();
  /** The id of each byte's character, −1 where the vocabulary lacks it. */
  private readonly byteIds = new Int32Array(256);
  private readonly unkId: number;
  private readonly fuseUnk: boolean;
  private readonly ignoreMerges: boolean;
  private readonly chars: boolean;
  /** With byteFallback: the id of each byte's <0xXX> token, −1 where the vocabulary lacks it. */
  private readonly fallbackIds = new Int32Array(256).fill(-1);
  private readonly byteFallback: boolean;
  private cache = new Map<string, readonly number[]>();
  private readonly bytesById: Array<Uint8Array | undefined> = [];
  // Scratch space reused by every uncached word (no allocation per word but the result).
  private scratchBytes = new Uint8Array(256);
  private scratch = new ScratchWord(64);
  private readonly heap = new MergeHeap(128);
  private readonly utf8 = new TextEncoder();

  /** `where` names the file in error messages. */
  constructor(spec: BpeModelSpec, where: string) {
    this.vocab = spec.vocab;
    const tokens: Array<string | undefined> = [];
    for (const [token, id] of spec.vocab) {
      if (!Number.isInteger(id) || id < 0) throw new ArgumentError(`${where}: model.vocab[${showValue(token)}] is ${id}; expected a non-negative integer id`);
      if (id >= ID_LIMIT) throw new UnsupportedError(`${where}: model.vocab id ${id} is too large; FON supports ids below ${ID_LIMIT}`);
      tokens[id] = token;
    }
    this.tokens = tokens;
    for (let b = 0; b < 256; b++) this.byteIds[b] = spec.vocab.get(BYTE_CHARS[b]) ?? -1;
    spec.merges.forEach(([a, b], rank) => {
      const left = spec.vocab.get(a);
      const right = spec.vocab.get(b);
      const merged = spec.vocab.get(a + b);
      const missing = left === undefined ? a : right === undefined ? b : merged === undefined ? a + b : null;
      if (missing !== null) throw new ArgumentError(`${where}: model.merges[${rank}] (${showValue(a)}, ${showValue(b)}) needs the token ${showValue(missing)}, which is not in model.vocab`);
      // A pair listed twice keeps its last rank, as Hugging Face's HashMap collect does.
      this.mergeMap.set(left! * ID_LIMIT + right!, rank * ID_LIMIT + merged!);
    });
    if (spec.unkToken !== null && !spec.vocab.has(spec.unkToken)) throw new ArgumentError(`${where}: model.unk_token ${showValue(spec.unkToken)} is not in model.vocab`);
    this.unkId = spec.unkToken === null ? -1 : spec.vocab.get(spec.unkToken)!;
    this.fuseUnk = spec.fuseUnk;
    this.ignoreMerges = spec.ignoreMerges;
    this.chars = spec.symbols === 'chars';
    this.byteFallback = this.chars && spec.byteFallback === true;
    if (this.byteFallback) for (let b = 0; b < 256; b++) this.fallbackIds[b] = spec.vocab.get(bytePiece(b)) ?? -1;
  }

  /** Appends the ids of one pre-tokenized word (plain text, before the byte mapping) to `out`. */
  encodeWord(word: string, out: number[]): void {
    let ids = this.cache.get(word);
    if (ids === undefined) {
      ids = this.encodeUncached(word);
      if (word.length <= CACHE_MAX_WORD) {
        if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache = new Map();
        this.cache.set(word, ids);
      }
    }
    for (let i = 0; i < ids.length; i++) out.push(ids[i]);
  }

  private encodeUncached(word: string): number[] {
    if (this.chars) return this.encodeChars(word);
    if (this.scratchBytes.length < 3 * word.length) this.scratchBytes = new Uint8Array(3 * word.length);
    const length = this.utf8.encodeInto(word, this.scratchBytes).written;
    const bytes = this.scratchBytes.subarray(0, length);
    if (this.ignoreMerges) {
      const whole = this.vocab.get(bytesToByteLevel(bytes));
      if (whole !== undefined) return [whole];
    }
    if (this.scratch.sym.length < length) this.scratch = new ScratchWord(2 * length);
    const sym = this.scratch.sym;
    let n = 0;
    let pendingUnk = false;
    for (let i = 0; i < length; i++) {
      const id = this.byteIds[bytes[i]];
      if (id >= 0) {
        if (pendingUnk) { sym[n++] = this.unkId; pendingUnk = false; }
        sym[n++] = id;
      } else if (this.unkId >= 0) {
        if (pendingUnk && !this.fuseUnk) sym[n++] = this.unkId;
        pendingUnk = true;
      }
    }
    if (pendingUnk) sym[n++] = this.unkId;
    return this.applyMerges(n);
  }

  /**
   * Character symbols: each character's id; one the vocabulary lacks becomes its bytes' <0xXX>
   * tokens with byteFallback (when all of them exist), else unk (fused with fuse_unk), else nothing
   * (Hugging Face's BPE merge_word).
   */
  private encodeChars(word: string): number[] {
    if (this.ignoreMerges) {
      const whole = this.vocab.get(word);
      if (whole !== undefined) return [whole];
    }
    if (this.scratch.sym.length < 4 * word.length) this.scratch = new ScratchWord(8 * word.length);
    const sym = this.scratch.sym;
    let n = 0;
    let pendingUnk = false;
    for (const ch of word) {
      const id = this.vocab.get(ch);
      let ids: number[] | null = id !== undefined ? [id] : null;
      if (ids === null && this.byteFallback) {
        const fb = Array.from(this.utf8.encode(ch), (b) => this.fallbackIds[b]);
        if (fb.every((x) => x >= 0)) ids = fb;
      }
      if (ids !== null) {
        if (pendingUnk) { sym[n++] = this.unkId; pendingUnk = false; }
        for (const x of ids) sym[n++] = x;
      } else if (this.unkId >= 0) {
        if (pendingUnk && !this.fuseUnk) sym[n++] = this.unkId;
        pendingUnk = true;
      }
    }
    if (pendingUnk) sym[n++] = this.unkId;
    return this.applyMerges(n);
  }

  /**
   * Merges the n symbols in the scratch word by a min-heap of (rank, position); positions are
   * fixed slots of a linked list, so "leftmost" means the left symbol's original index, as in
   * Hugging Face. An entry is stale, and skipped, when its slot was consumed or the pair there no
   * longer merges into the same token.
   */
  private applyMerges(n: number): number[] {
    const { sym, next, prev, alive } = this.scratch;
    if (n < 2) return Array.from(sym.subarray(0, n));
    const merges = this.mergeMap;
    for (let i = 0; i < n; i++) { next[i] = i + 1 < n ? i + 1 : -1; prev[i] = i - 1; alive[i] = 1; }
    const heap = this.heap;
    heap.size = 0;
    for (let i = 0; i + 1 < n; i++) {
      const m = merges.get(sym[i] * ID_LIMIT + sym[i + 1]);
      if (m !== undefined) heap.push(Math.floor(m / ID_LIMIT) * POS_LIMIT + i, m % ID_LIMIT);
    }
    while (heap.size > 0) {
      const newId = heap.topId();
      const pos = heap.pop() % POS_LIMIT;
      if (!alive[pos]) continue;
      const right = next[pos];
      if (right < 0) continue;
      const m = merges.get(sym[pos] * ID_LIMIT + sym[right]);
      if (m === undefined || m % ID_LIMIT !== newId) continue;
      sym[pos] = newId;
      alive[right] = 0;
      next[pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = pos;
      const before = prev[pos];
      if (before >= 0) {
        const mb = merges.get(sym[before] * ID_LIMIT + newId);
        if (mb !== undefined) heap.push(Math.floor(mb / ID_LIMIT) * POS_LIMIT + before, mb % ID_LIMIT);
      }
      const after = next[pos];
      if (after >= 0) {
        const ma = merges.get(newId * ID_LIMIT + sym[after]);
        if (ma !== undefined) heap.push(Math.floor(ma / ID_LIMIT) * POS_LIMIT + pos, ma % ID_LIMIT);
      }
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]) out.push(sym[i]);
    return out;
  }

  /** The bytes token `id` stands for (the ByteLevel decoder's rule; with character symbols the ▁ / ByteFallback decoders'), or undefined for an unused id. */
  tokenBytes(id: number): Uint8Array | undefined {
    let bytes = this.bytesById[id];
    if (bytes === undefined) {
      const token = Number.isInteger(id) && id >= 0 ? this.tokens[id] : undefined;
      if (token === undefined) return undefined;
      const piece = this.chars ? BYTE_PIECE.exec(token) : null;
      // Character symbols: a byte piece is its byte, any other token its text with ▁ read as a space.
      bytes = !this.chars ? byteLevelToBytes(token) : piece ? Uint8Array.of(parseInt(piece[1], 16)) : this.utf8.encode(token.replaceAll('\u2581', ' '));
      this.bytesById[id] = bytes;
    }
    return bytes;
  }
}

/** The symbols of the word being merged, as a linked list over fixed slots. */
class ScratchWord {
  readonly sym: Int32Array;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  readonly alive: Uint8Array;
  constructor(capacity: number) {
    this.sym = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
    this.prev = new Int32Array(capacity);
    this.alive = new Uint8Array(capacity);
  }
}

/** A binary min-heap of (key, id) pairs for `applyMerges`; grows as needed. */
class MergeHeap {
  private keys: Float64Array;
  private ids: Int32Array;
  size = 0;

  constructor(capacity: number) {
    this.keys = new Float64Array(Math.max(capacity, 4));
    this.ids = new Int32Array(Math.max(capacity, 4));
  }

  push(key: number, id: number): void {
    if (this.size === this.keys.length) {
      const keys = new Float64Array(this.size * 2); keys.set(this.keys); this.keys = keys;
      const ids = new Int32Array(this.size * 2); ids.set(this.ids); this.ids = ids;
    }
    const { keys, ids } = this;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (keys[parent] <= key) break;
      keys[i] = keys[parent]; ids[i] = ids[parent];
      i = parent;
    }
    keys[i] = key; ids[i] = id;
  }

  topId(): number { return this.ids[0]; }

  /** Removes the smallest entry and returns its key. */
  pop(): number {
    const { keys, ids } = this;
    const top = keys[0];
    const last = --this.size;
    const key = keys[last];
    const id = ids[last];
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= last) break;
      if (child + 1 < last && keys[child + 1] < keys[child]) child++;
      if (keys[child] >= key) break;
      keys[i] = keys[child]; ids[i] = ids[child];
      i = child;
    }
    keys[i] = key; ids[i] = id;
    return top;
  }
}
