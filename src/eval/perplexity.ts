/**
 * Perplexity and bits per byte of a model over a token stream, in windows of `context` tokens
 * (ids t … t+C−1 predict t+1 … t+C). With stride = context (the default) the windows do not
 * overlap and every token after the first is scored exactly once, each window on its own; with a
 * smaller stride each window scores only its last `stride` targets, with the rest as context.
 *
 * Bits per byte = Σ NLL / (ln 2 · bytes of the scored targets), bytes counted per token by the
 * tokenizer's `byteLengths` (the end-of-text separator counts as one byte: it stands for the
 * document boundary).
 *
 * The exit head (DESIGN.md "The FON model (organs)"): for a model with organs, or any model given
 * `draftLayers` D, the same forward pass also scores the exit head at layer D (layers [0, D), the
 * shared final norm and LM head, then layers [D, L) for the full model, each head's logits reduced before the next runs)
 * over the same targets, reported as `exit`. The full model's figures are those of a plain forward.
 */
import { ArgumentError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { crossEntropy } from '../ops/fused.ts';
import { concat, reshape } from '../ops/layout.ts';
import { sum } from '../ops/reduce.ts';
import type { Decoder } from '../model/decoder.ts';
import { checkDraftLayers } from '../model/organs.ts';
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
  /**
   * Also score the exit head after layer D−1, D in [1, L−1]: by default the model's
   * organs.draftLayers (none without organs); a number for any model; null not to.
   */
  draftLayers?: number | null;
}

/** The exit head's figures over the same scored tokens. */
export interface ExitEvalResult {
  /** D: the exit head reads the hidden state after layer D−1. */
  draftLayers: number;
  loss: number;
  perplexity: number;
  bitsPerByte: number;
}

export interface EvalResult {
  /** Scored tokens and the bytes they stand for. */
  tokens: number;
  bytes: number;
  /** Mean negative log-likelihood per scored token (nats). */
  loss: number;
  perplexity: number;
  bitsPerByte: number;
  /** With organs or `draftLayers`: the exit head's. */
  exit?: ExitEvalResult;
}

const IGNORE = -1;

export async function evaluate(model: Decoder, windows: Iterable<EvalWindow>, opts: EvalOptions): Promise<EvalResult> {
  const batch = opts.batch ?? 8;
  const backend = model.embed.weight.backend;
  const d = opts.draftLayers === undefined ? model.config.organs?.draftLayers : opts.draftLayers ?? undefined;
  if (d !== undefined) checkDraftLayers(d, model.layers.length, 'evaluate: draftLayers', (m) => new ArgumentError(m));
  let nll = 0, exitNll = 0, tokens = 0, bytes = 0, done = 0;
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
      const nllOf = (logits: Tensor) => reshape(sum(crossEntropy(logits, y, { ignoreIndex: IGNORE, reduction: 'none' })), [1]);
      if (d === undefined) return nllOf(model.forward(x));
      // The exit head's logits are reduced before the revise layers run: one (B, T, V) at a time.
      const draft = model.runLayers(model.embedTokens(x, 0), 0, d, { pos: 0 });
      const exitNll = tidy(() => nllOf(model.logits(draft.x)));
      const fullNll = tidy(() => nllOf(model.logits(model.runLayers(draft.x, d, model.layers.length, { pos: 0, records: draft.records }).x)));
      return concat([fullNll, exitNll]); // one read-back for both
    }));
    const host = await total.data();
    nll += host[0];
    if (d !== undefined) exitNll += host[1];
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
  const r: EvalResult = { tokens, bytes, loss, perplexity: Math.exp(loss), bitsPerByte: nll / Math.LN2 / bytes };
  if (d !== undefined) r.exit = { draftLayers: d, loss: exitNll / tokens, perplexity: Math.exp(exitNll / tokens), bitsPerByte: exitNll / Math.LN2 / bytes };
  return r;
}
