/**
 * Byte-level BPE training over word frequencies. Text is cut into words by the GPT-2 pattern and
 * only distinct words are kept, with their counts; each word starts as its UTF-8 bytes (ids 0..255).
 * Pair counts are kept incrementally with an index from each pair to the words holding it, so a
 * merge visits only the words it changes; a lazy max-heap yields the most frequent pair. Ties go to
 * the pair with the smaller left id, then the smaller right id (as in Hugging Face's trainer), so the
 * result depends on the documents alone, not on their order or on hashing.
 */
import { BYTE_CHARS, utf8Bytes } from './byte_level.ts';
import { byteLevelStep } from './pretokenize.ts';

export interface LearnedBpe {
  /** Token strings (byte-level spelling) by id: the 256 bytes, then one per new token. */
  readonly tokens: readonly string[];
  /** Merges in the order learned (their rank). Two merges may build the same token ("a"+"bc", "ab"+"c"). */
  readonly merges: ReadonlyArray<readonly [string, string]>;
}

/** Counts the GPT-2 pre-tokenized words of `docs`. */
export function countWords(docs: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>();
  const cut = byteLevelStep(false, true);
  const add = (word: string) => counts.set(word, (counts.get(word) ?? 0) + 1);
  for (const doc of docs) cut(doc, add);
  return counts;
}

/**
 * Learns merges until there are `numTokens` tokens (bytes included) or no pair is left.
 * `onProgress(done, total)` is called every 64 new tokens and at the end, counting new tokens.
 */
export function learnBpe(wordCounts: ReadonlyMap<string, number>, numTokens: number, onProgress?: (done: number, total: number) => void): LearnedBpe {
  const tokens: string[] = [...BYTE_CHARS];
  const idOf = new Map<string, number>(tokens.map((t, i) => [t, i]));
  const merges: Array<[string, string]> = [];
  const total = Math.max(0, numTokens - 256);
  const V = Math.max(numTokens, 257); // pair key = left · V + right keeps (left, right) order
  const words: number[][] = [];
  const freqs: number[] = [];
  for (const [word, count] of wordCounts) { words.push(Array.from(utf8Bytes(word))); freqs.push(count); }

  const pairCount = new Map<number, number>();
  const wordsOf = new Map<number, number[]>(); // pair → words holding it (may hold stale entries)
  const changed = new Set<number>();
  const inc = (key: number, f: number, w: number) => {
    pairCount.set(key, (pairCount.get(key) ?? 0) + f);
    const list = wordsOf.get(key);
    if (list === undefined) wordsOf.set(key, [w]);
    else if (list[list.length - 1] !== w) list.push(w);
    changed.add(key);
  };
  const dec = (key: number, f: number) => pairCount.set(key, (pairCount.get(key) ?? 0) - f);
  words.forEach((sym, w) => { for (let i = 0; i + 1 < sym.length; i++) inc(sym[i] * V + sym[i + 1], freqs[w], w); });

  const heap = new PairHeap();
  for (const [key, count] of pairCount) heap.push(count, key);
  changed.clear();
  const seen = new Int32Array(words.length).fill(-1);

  while (tokens.length < numTokens && heap.size > 0) {
    const [count, key] = heap.pop();
    const current = pairCount.get(key) ?? 0;
    if (current !== count) { if (current > 0) heap.push(current, key); continue; }
    if (count <= 0) break;
    const a = Math.floor(key / V);
    const b = key % V;
    const merged = tokens[a] + tokens[b];
    let newId = idOf.get(merged);
    if (newId === undefined) { newId = tokens.length; tokens.push(merged); idOf.set(merged, newId); }
    merges.push([tokens[a], tokens[b]]);

    const step = merges.length;
    for (const w of wordsOf.get(key) ?? []) {
      if (seen[w] === step) continue;
      seen[w] = step;
      const sym = words[w];
      const f = freqs[w];
      let j = 0;
      for (let i = 0; i < sym.length;) {
        if (i + 1 < sym.length && sym[i] === a && sym[i + 1] === b) {
          if (j > 0) { dec(sym[j - 1] * V + a, f); inc(sym[j - 1] * V + newId, f, w); }
          if (i + 2 < sym.length) { dec(b * V + sym[i + 2], f); inc(newId * V + sym[i + 2], f, w); }
          sym[j++] = newId;
          i += 2;
        } else sym[j++] = sym[i++];
      }
      sym.length = j;
    }
    pairCount.delete(key);
    wordsOf.delete(key);
    for (const k of changed) { const c = pairCount.get(k) ?? 0; if (c > 0 && k !== key) heap.push(c, k); }
    changed.clear();
    if (onProgress && (tokens.length - 256) % 64 === 0) onProgress(tokens.length - 256, total);
  }
  onProgress?.(tokens.length - 256, total);
  return { tokens, merges };
}

/** A max-heap of (count, pair key): larger count first, then smaller key. */
class PairHeap {
  private counts: number[] = [];
  private keys: number[] = [];

  get size(): number { return this.counts.length; }

  private above(i: number, j: number): boolean {
    return this.counts[i] > this.counts[j] || (this.counts[i] === this.counts[j] && this.keys[i] < this.keys[j]);
  }

  private swap(i: number, j: number): void {
    const c = this.counts[i]; this.counts[i] = this.counts[j]; this.counts[j] = c;
    const k = this.keys[i]; this.keys[i] = this.keys[j]; this.keys[j] = k;
  }

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    for (let i = this.counts.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!this.above(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): [number, number] {
    const top: [number, number] = [this.counts[0], this.keys[0]];
    const last = this.counts.length - 1;
    this.swap(0, last);
    this.counts.pop();
    this.keys.pop();
    for (let i = 0; ;) {
      let best = i;
      const l = 2 * i + 1;
      const r = l + 1;
      if (l < last && this.above(l, best)) best = l;
      if (r < last && this.above(r, best)) best = r;
      if (best === i) break;
      this.swap(i, best);
      i = best;
    }
    return top;
  }
}
