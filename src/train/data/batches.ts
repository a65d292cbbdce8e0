/**
 * Training batches and evaluation windows cut from a token store.
 *
 * Training: the store is cut into W = floor((length − 1) / T) windows of T + 1 ids (window w starts
 * at w·T; inputs are its first T ids, targets its last T, so targets are inputs shifted by one).
 * Row b of batch `step` takes the window at position g = step·B + b of an endless stream in which
 * epoch e = floor(g / W) is a permutation of all W windows (Fisher–Yates driven by the counter-based
 * generator of src/ops/random.ts, stream `seed`, counters starting at e·2W). The batch is therefore a
 * pure function of (store, B, T, seed, step): a resumed run needs only the step to continue on the
 * same data, and every window is used exactly once per epoch.
 */
import { ArgumentError } from '../../errors.ts';
import { uniformAt } from '../../ops/random.ts';
import { DataError } from './data_error.ts';
import type { TokenStore } from './token_store.ts';

export interface Batch {
  /** (B, T) ids, row-major. */
  readonly inputs: Int32Array;
  /** (B, T) ids: `targets[b, t]` is the id after `inputs[b, t]`. */
  readonly targets: Int32Array;
}

export interface BatchSamplerOptions {
  /** B: windows per batch. */
  batch: number;
  /** T: ids per window fed to the model. */
  context: number;
  /** Seed of the window order. */
  seed: number;
}

function positiveInteger(where: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new ArgumentError(`${where}: ${name} ${v} must be a whole number ≥ 1`);
}

/** A whole number in [0, n) drawn from two 24-bit uniforms (48 bits, so no window is unreachable). */
function uniformIndex(seed: number, counter: number, n: number): number {
  const hi = Math.floor(uniformAt(seed, counter) * 16777216);
  const lo = Math.floor(uniformAt(seed, counter + 1) * 16777216);
  return (hi * 16777216 + lo) % n;
}

/** Batches of training windows; see the file header for the order. */
export class BatchSampler {
  readonly windowsPerEpoch: number;
  readonly batch: number;
  readonly context: number;
  readonly seed: number;
  /** The permutations of the last epochs asked for (a batch can straddle two). */
  private readonly orders = new Map<number, Int32Array>();

  constructor(private readonly store: TokenStore, options: BatchSamplerOptions) {
    positiveInteger('BatchSampler', 'batch', options.batch);
    positiveInteger('BatchSampler', 'context', options.context);
    if (!Number.isInteger(options.seed)) throw new ArgumentError(`BatchSampler: seed ${options.seed} must be a whole number`);
    this.batch = options.batch;
    this.context = options.context;
    this.seed = options.seed >>> 0;
    this.windowsPerEpoch = Math.floor((store.length - 1) / options.context);
    if (this.windowsPerEpoch < 1) {
      throw new DataError(`BatchSampler: the token store holds ${store.length} ids; context ${options.context} needs at least ${options.context + 1}`);
    }
  }

  /** The window order of `epoch`: a permutation of 0 … W − 1. */
  epochOrder(epoch: number): Int32Array {
    let order = this.orders.get(epoch);
    if (order) return order;
    const n = this.windowsPerEpoch;
    order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    const base = epoch * 2 * n;
    for (let i = n - 1; i > 0; i--) {
      const j = uniformIndex(this.seed, base + 2 * i, i + 1);
      const t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    if (this.orders.size >= 2) this.orders.delete(this.orders.keys().next().value as number);
    this.orders.set(epoch, order);
    return order;
  }

  /** The window (0 … W − 1) that row `row` of batch `step` reads. */
  windowAt(step: number, row: number): number {
    if (!Number.isInteger(step) || step < 0) throw new ArgumentError(`BatchSampler: step ${step} must be a whole number ≥ 0`);
    if (!Number.isInteger(row) || row < 0 || row >= this.batch) throw new ArgumentError(`BatchSampler: row ${row} must be in [0, ${this.batch})`);
    const g = step * this.batch + row;
    const epoch = Math.floor(g / this.windowsPerEpoch);
    return this.epochOrder(epoch)[g - epoch * this.windowsPerEpoch];
  }

  /** The epoch (counted from 0, fractional) that batch `step` ends in, for logging. */
  epochAt(step: number): number {
    return ((step + 1) * this.batch) / this.windowsPerEpoch;
  }

  /** Batch `step`: (B, T) inputs and targets. */
  batchAt(step: number): Batch {
    const T = this.context;
    const inputs = new Int32Array(this.batch * T);
    const targets = new Int32Array(this.batch * T);
    for (let b = 0; b < this.batch; b++) {
      const ids = this.store.read(this.windowAt(step, b) * T, T + 1);
      inputs.set(ids.subarray(0, T), b * T);
      targets.set(ids.subarray(1), b * T);
    }
    return { inputs, targets };
  }
}

export interface EvalWindow {
  /** Ids fed to the model (T of them; fewer only when the whole store is shorter than T + 1). */
  readonly inputs: Int32Array;
  /** The id after each input. */
  readonly targets: Int32Array;
  /** Targets before this index were scored by an earlier window; score `targets[scoredFrom…]`. */
  readonly scoredFrom: number;
}

/**
 * Evaluation windows in store order, as transformers' perplexity loop cuts them: window i feeds the
 * ids at i·stride … i·stride + T − 1 and predicts the id after each, the last window shorter (it
 * ends at the store's end). Targets already scored by an earlier window are marked by
 * `scoredFrom`, so that summing the loss over `targets[scoredFrom…]` of every window scores each id
 * after the first exactly once. stride = T (the default) gives non-overlapping windows; a smaller
 * stride gives each scored id more context (sliding-window perplexity).
 */
export function* evalWindows(store: TokenStore, context: number, stride = context): Generator<EvalWindow> {
  positiveInteger('evalWindows', 'context', context);
  positiveInteger('evalWindows', 'stride', stride);
  if (stride > context) throw new ArgumentError(`evalWindows: stride ${stride} must be ≤ context ${context}, or some ids would never be scored`);
  const n = store.length;
  if (n < 2) throw new DataError(`evalWindows: the token store holds ${n} id(s); at least 2 are needed to score one`);
  const window = (start: number, T: number, scoredFrom: number): EvalWindow => {
    const ids = store.read(start, T + 1);
    return { inputs: ids.slice(0, T), targets: ids.slice(1), scoredFrom };
  };
  let scoredUpTo = 0; // targets at store positions 1 … scoredUpTo are done
  for (let start = 0; scoredUpTo < n - 1; start += stride) {
    const T = Math.min(context, n - 1 - start);
    yield window(start, T, scoredUpTo - start);
    scoredUpTo = start + T;
  }
}
