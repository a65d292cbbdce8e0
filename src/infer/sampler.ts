/**
 * The token sampler: turns one logits row (Float32Array of vocabulary size, on the host) into the
 * next token id. Transforms run in the order Hugging Face transformers applies them — repetition
 * penalty, temperature, top-k, top-p — then one id is drawn with FON's counter-based random
 * stream, so a seed fixes the whole sequence on every backend.
 *
 * Cost per step for a vocabulary V (150K for Qwen-sized models): one pass to validate, one to
 * score. Top-k keeps a heap of k (O(V log k), no full sort); top-p without top-k heapifies the
 * ids that can be in the nucleus in O(V) and pops only the nucleus, so only what it keeps is sorted.
 */
import { ArgumentError } from '../errors.ts';
import { nextSeed, uniformStream } from '../ops/random.ts';

export interface SamplingOptions {
  /** Divides the logits; 0 = greedy (argmax, ties to the lowest id). Default 1. */
  temperature?: number;
  /** Keeps only the k highest logits (ties to the lowest id, so exactly k); 0 = off. Default 0. */
  topK?: number;
  /** Keeps the smallest highest-first prefix whose probability mass is ≥ p; 1 = off. Default 1. */
  topP?: number;
  /**
   * CTRL-style penalty as in HF transformers: each distinct id in the history has its logit divided
   * by the penalty if positive, multiplied by it otherwise (applied once however often it occurs).
   * 1 = off. Default 1.
   */
  repetitionPenalty?: number;
  /** Seed of the random stream (a 32-bit integer); default: the next seed of the global stream. */
  seed?: number;
}

/** The ids a sampler may pick for one row and their renormalised probabilities, highest first
 *  (in id order when neither top-k nor top-p is on). */
export interface TokenDistribution { ids: Int32Array; probs: Float64Array }

/** Relative slack so that a prefix whose mass equals p up to rounding counts as reaching p. */
const TOP_P_SLACK = 1e-9;

export class Sampler {
  readonly vocabSize: number;
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly repetitionPenalty: number;
  readonly seed: number;
  private readonly random: () => number;
  /** Candidate ids for the current row, best first (or in id order); scratch of length V. */
  private readonly ids: Int32Array;
  /** Unnormalised probabilities of `ids`, same positions. */
  private readonly weights: Float64Array;
  /** Heap and per-id weights: scratch for top-p without top-k (empty otherwise). */
  private readonly heap: Int32Array;
  private readonly weightById: Float64Array;
  /** Logits after the repetition penalty (only allocated when the penalty is on). */
  private readonly penalized: Float32Array | null;
  /** stamp[id] === epoch marks an id already penalised in this row. */
  private readonly stamp: Uint32Array | null;
  private epoch = 0;

  constructor(vocabSize: number, opts: SamplingOptions = {}) {
    if (!Number.isInteger(vocabSize) || vocabSize < 1) throw new ArgumentError(`Sampler: vocabSize must be a positive integer, got ${vocabSize}`);
    const { temperature = 1, topK = 0, topP = 1, repetitionPenalty = 1 } = opts;
    if (!(Number.isFinite(temperature) && temperature >= 0)) throw new ArgumentError(`Sampler: temperature must be a finite number ≥ 0 (0 = greedy), got ${temperature}`);
    if (!Number.isInteger(topK) || topK < 0) throw new ArgumentError(`Sampler: topK must be an integer ≥ 0 (0 = off), got ${topK}`);
    if (!(topP > 0 && topP <= 1)) throw new ArgumentError(`Sampler: topP must be in (0, 1] (1 = off), got ${topP}`);
    if (!(Number.isFinite(repetitionPenalty) && repetitionPenalty > 0)) throw new ArgumentError(`Sampler: repetitionPenalty must be a finite number > 0 (1 = off), got ${repetitionPenalty}`);
    const seed = opts.seed ?? nextSeed();
    if (!Number.isInteger(seed)) throw new ArgumentError(`Sampler: seed must be an integer, got ${seed}`);
    this.vocabSize = vocabSize;
    this.temperature = temperature;
    this.topK = topK;
    this.topP = topP;
    this.repetitionPenalty = repetitionPenalty;
    this.seed = seed;
    this.random = uniformStream(seed);
    this.ids = new Int32Array(vocabSize);
    this.weights = new Float64Array(vocabSize);
    const wholeNucleus = topP < 1 && (topK === 0 || topK >= vocabSize);
    this.heap = new Int32Array(wholeNucleus ? vocabSize : 0);
    this.weightById = new Float64Array(wholeNucleus ? vocabSize : 0);
    this.penalized = repetitionPenalty !== 1 ? new Float32Array(vocabSize) : null;
    this.stamp = repetitionPenalty !== 1 ? new Uint32Array(vocabSize) : null;
  }

  /** Picks the next id; `history` = ids so far (prompt + generated), read by the repetition penalty. */
  next(logits: Float32Array, history: readonly number[]): number {
    const scores = this.prepare(logits, history);
    if (this.temperature === 0) return argmax(scores);
    const { n, total } = this.candidates(scores);
    // 48 random bits from two 24-bit draws, so even a 1/150K-probability token is hit at the right rate.
    const u = (this.random() + this.random() / 16777216) * total;
    let acc = 0;
    for (let i = 0; i < n; i++) {
      acc += this.weights[i];
      if (u < acc) return this.ids[i];
    }
    return this.ids[n - 1]; // u within rounding of the total
  }

  /** The distribution `next` draws from for this row (does not advance the random stream). */
  distribution(logits: Float32Array, history: readonly number[]): TokenDistribution {
    const scores = this.prepare(logits, history);
    if (this.temperature === 0) return { ids: Int32Array.of(argmax(scores)), probs: Float64Array.of(1) };
    const { n, total } = this.candidates(scores);
    const probs = new Float64Array(n);
    for (let i = 0; i < n; i++) probs[i] = this.weights[i] / total;
    return { ids: this.ids.slice(0, n), probs };
  }

  /**
   * The next uniform in [0, 1) (24 random bits) of the stream `next` draws from, so that a caller
   * (speculative acceptance, specs/lighthouse_fon.md §2.3) can drive all its draws from one seed.
   * Calling it advances the stream: later `next` draws change, as they would after another `next`.
   */
  uniform(): number {
    return this.random();
  }

  /** Validates the row and returns it with the repetition penalty applied (a copy; `logits` is never changed). */
  private prepare(logits: Float32Array, history: readonly number[]): Float32Array {
    const V = this.vocabSize;
    if (logits.length !== V) throw new ArgumentError(`Sampler: logits length ${logits.length} does not match vocabSize ${V}`);
    for (let i = 0; i < V; i++) if (Number.isNaN(logits[i])) throw new ArgumentError(`Sampler: logits[${i}] is NaN`);
    if (this.penalized === null || this.stamp === null) return logits;
    const out = this.penalized, stamp = this.stamp, p = this.repetitionPenalty;
    out.set(logits);
    if (++this.epoch === 0xffffffff) { stamp.fill(0); this.epoch = 1; }
    const epoch = this.epoch;
    for (let j = 0; j < history.length; j++) {
      const id = history[j];
      if (!Number.isInteger(id) || id < 0 || id >= V) throw new ArgumentError(`Sampler: history[${j}] = ${id} is not a token id in [0, ${V})`);
      if (stamp[id] === epoch) continue;
      stamp[id] = epoch;
      const x = out[id];
      out[id] = x > 0 ? x / p : x * p;
    }
    return out;
  }

  /**
   * Fills ids[0..n) and weights[0..n) with the ids that survive top-k and top-p and their
   * unnormalised probabilities exp((s - max) / T); returns n and the weights' sum.
   */
  private candidates(scores: Float32Array): { n: number; total: number } {
    const V = this.vocabSize, ids = this.ids, w = this.weights, T = this.temperature;
    let n: number;
    if (this.topK > 0 && this.topK < V) {
      n = selectTopK(scores, this.topK, ids);
    } else if (this.topP < 1) {
      return this.nucleusOfAll(scores);
    } else {
      n = V;
      for (let i = 0; i < V; i++) ids[i] = i;
    }
    let max = -Infinity;
    for (let i = 0; i < n; i++) if (scores[ids[i]] > max) max = scores[ids[i]];
    if (max === -Infinity) throw new ArgumentError('Sampler: every candidate logit is -Infinity, nothing can be sampled');
    let total = 0;
    for (let i = 0; i < n; i++) total += (w[i] = weight(scores[ids[i]], max, T));
    if (this.topP < 1) {
      // ids are best first here (top-k sorted them): keep the shortest prefix reaching topP.
      const target = this.topP * total * (1 - TOP_P_SLACK);
      let cum = 0, kept = 0;
      while (kept < n && cum < target) cum += w[kept++];
      return { n: kept, total: cum };
    }
    // Plain sampling: drop zero-mass ids (masked with -Infinity or underflowed) to keep the walk short.
    let m = 0;
    for (let i = 0; i < n; i++) if (w[i] > 0) { ids[m] = ids[i]; w[m++] = w[i]; }
    return { n: m, total };
  }

  /**
   * Top-p over the whole vocabulary: heapify the ids that can be in the nucleus, pop best-first
   * until it is reached. An id with probability below (1 - p) / V never is: all such ids together
   * hold less than 1 - p, so the ids above them already reach p. On a peaked LM row this leaves few.
   */
  private nucleusOfAll(scores: Float32Array): { n: number; total: number } {
    const V = this.vocabSize, T = this.temperature, heap = this.heap, byId = this.weightById, ids = this.ids, w = this.weights;
    let max = -Infinity;
    for (let i = 0; i < V; i++) if (scores[i] > max) max = scores[i];
    if (max === -Infinity) throw new ArgumentError('Sampler: every candidate logit is -Infinity, nothing can be sampled');
    let total = 0;
    for (let i = 0; i < V; i++) total += (byId[i] = weight(scores[i], max, T));
    const floor = ((1 - this.topP) * total) / V;
    let size = 0;
    for (let i = 0; i < V; i++) if (byId[i] > 0 && byId[i] >= floor) heap[size++] = i;
    for (let i = (size >> 1) - 1; i >= 0; i--) siftDown(heap, size, i, scores, true);
    const target = this.topP * total * (1 - TOP_P_SLACK);
    let cum = 0, kept = 0;
    while (size > 0 && cum < target) {
      const id = heap[0];
      heap[0] = heap[--size];
      siftDown(heap, size, 0, scores, true);
      ids[kept] = id;
      cum += (w[kept++] = byId[id]);
    }
    return { n: kept, total: cum };
  }
}

/** exp((s - max) / T), where a +Infinity max gives all mass to the +Infinity logits (the softmax limit). */
function weight(s: number, max: number, T: number): number {
  if (max === Infinity) return s === Infinity ? 1 : 0;
  return Math.exp((s - max) / T);
}

/** Index of the largest score; ties go to the lowest id. */
function argmax(scores: Float32Array): number {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
  return best;
}

/** Whether id a ranks above id b: higher score, or equal score and lower id. */
function ranksAbove(scores: Float32Array, a: number, b: number): boolean {
  return scores[a] > scores[b] || (scores[a] === scores[b] && a < b);
}

/**
 * Restores the heap property below position i. `bestFirst` = max-heap (root ranks highest);
 * otherwise min-heap (root ranks lowest).
 */
function siftDown(heap: Int32Array, size: number, i: number, scores: Float32Array, bestFirst: boolean): void {
  const x = heap[i];
  for (;;) {
    let c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && ranksAbove(scores, heap[c + 1], heap[c]) === bestFirst) c++;
    if (ranksAbove(scores, heap[c], x) !== bestFirst) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = x;
}

/**
 * Writes the k best ids (by `ranksAbove`) into out[0..k), best first. A min-heap of k holds the
 * best so far; most ids lose to its root at once, so this is close to one pass over the scores.
 */
function selectTopK(scores: Float32Array, k: number, out: Int32Array): number {
  for (let i = 0; i < k; i++) out[i] = i;
  for (let i = (k >> 1) - 1; i >= 0; i--) siftDown(out, k, i, scores, false);
  for (let i = k; i < scores.length; i++) {
    // i is larger than every id in the heap, so it wins only on a strictly higher score.
    if (scores[i] > scores[out[0]]) { out[0] = i; siftDown(out, k, 0, scores, false); }
  }
  // Heapsort in place: moving the current worst to the end leaves out[0..k) best first.
  for (let size = k - 1; size > 0; size--) {
    const worst = out[0];
    out[0] = out[size];
    out[size] = worst;
    siftDown(out, size, 0, scores, false);
  }
  return k;
}
