/**
 * Perplexity and bits per byte of a model over a token stream, in windows of `context` tokens
 * (ids t … t+C−1 predict t+1 … t+C). With stride = context (the default) the windows do not
 * overlap and every token after the first is scored exactly once, each window on its own; with a
 * smaller stride each window scores only its last `stride` targets, with the rest as context.
 *
 * Bits per byte = Σ NLL / (ln 2 · bytes of the scored targets), bytes counted per token by the
 * tokenizer's `byteLengths` (the end-of-text separator counts as one byte: it stands for the
 * document boundary).
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { crossEntropy } from '../ops/fused.ts';
import { sum } from '../ops/reduce.ts';
import type { Decoder } from '../model/decoder.ts';
import { noGrad, tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** One scoring window: inputs and targets of equal length; targets before `scoredFrom` are context only. */
export interface EvalWindow { inputs: Int32Array; targets: Int32Array; scoredFrom: number }

export interface EvalOptions {
  /** Windows scored per forward pass (default 8). */
  batch?: number;
  /** Bytes each token id stands for. */
  byteLengths: ArrayLike<number>;
  onProgress?: (windowsDone: number) => void;
}

export interface EvalResult {
  /** Scored tokens and the bytes they stand for. */
  tokens: number;
  bytes: number;
  /** Mean negative log-likelihood per scored token (nats). */
  loss: number;
  perplexity: number;
  bitsPerByte: number;
}

const IGNORE = -1;

export async function evaluate(model: Decoder, windows: Iterable<EvalWindow>, opts: EvalOptions): Promise<EvalResult> {
  const batch = opts.batch ?? 8;
  const backend = model.embed.weight.backend;
  let nll = 0, tokens = 0, bytes = 0, done = 0;
  let group: EvalWindow[] = [];
  const flush = async () => {
    if (group.length === 0) return;
    const t = group[0].inputs.length;
    const ids = new Int32Array(group.length * t), tg = new Int32Array(group.length * t);
    group.forEach((w, i) => {
      ids.set(w.inputs, i * t);
      for (let j = 0; j < t; j++) {
        const id = w.targets[j];
        if (j < w.scoredFrom) { tg[i * t + j] = IGNORE; continue; }
        tg[i * t + j] = id;
        tokens++;
        bytes += opts.byteLengths[id] ?? 0;
      }
    });
    const total: Tensor = noGrad(() => tidy(() => {
      const x = tensor(ids, [group.length, t], { backend, dtype: 'i32' });
      const y = tensor(tg, [group.length, t], { backend, dtype: 'i32' });
      return sum(crossEntropy(model.forward(x), y, { ignoreIndex: IGNORE, reduction: 'none' }));
    }));
    nll += (await total.data())[0];
    total.dispose();
    done += group.length;
    opts.onProgress?.(done);
    group = [];
  };
  for (const w of windows) {
    if (w.inputs.length !== w.targets.length || w.inputs.length === 0) throw new ArgumentError(`evaluate: window of ${w.inputs.length} inputs and ${w.targets.length} targets`);
    if (group.length && (group.length === batch || group[0].inputs.length !== w.inputs.length)) await flush();
    group.push(w);
  }
  await flush();
  if (tokens === 0) throw new ArgumentError('evaluate: nothing to score (the evaluation text has fewer than 2 tokens)');
  const loss = nll / tokens;
  return { tokens, bytes, loss, perplexity: Math.exp(loss), bitsPerByte: nll / Math.LN2 / bytes };
}
