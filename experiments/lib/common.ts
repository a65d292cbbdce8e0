/**
 * Shared pieces of the experiment scripts (experiments/*.ts): the mechanisms compared (full
 * attention with RoPE, FoX, FPA), seed and backend flags, a training loop over FON's Trainer with
 * a progress bar, a markdown table and JSON output. Each script stays one readable file per
 * experiment; only what all three repeat lives here.
 */
import { writeFileSync, renameSync } from 'node:fs';
import { initBackend, type BackendName } from '../../src/backend/registry.ts';
import '../../src/backend/webgpu/index.ts';
import '../../src/backend/wasm/index.ts';
import type { Backend } from '../../src/backend/backend.ts';
import { ArgumentError } from '../../src/errors.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { Progress } from '../../src/cli/progress.ts';
import { tensor } from '../../src/ops/creation.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import { DEFAULT_TRAIN, Trainer, type Batches, type TrainConfig } from '../../src/train/trainer.ts';

/** Target of a position the loss skips (crossEntropy's default ignore index). */
export const IGNORE = -100;

/** The attention arms of every experiment: softmax with RoPE, FoX (NoPE), FPA (NoPE). */
export const MECHANISMS = ['full', 'fox', 'fpa'] as const;
export type Mechanism = (typeof MECHANISMS)[number];

export type FpaWalk = 'fox' | 'linear' | 'tanh';

/** An FPA layer's eviction as the model config spells it: true (defaults) or some fields. */
export type FpaEvictFlag = false | true | { tau?: number; every?: number; deadFraction?: number };

/** Model shape flags shared by the scripts (everything but the attention). */
export interface ModelShape {
  vocabSize: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  headDim: number;
  /** Feed-forward hidden width: FON's Block always has an MLP, so a one-layer model is attention + MLP. */
  mlpHidden: number;
  contextLength: number;
}

/**
 * The model config of one arm. `full` gets RoPE; `fox` and `fpa` get NoPE (the config's default for
 * them). `evict` turns on FPA's KV-cache eviction (attention/fpa_decode.ts defaults): it changes
 * decoding only, so an evicting model can take a trained FPA model's weights.
 */
/**
 * The model of arm `m`. `pro` gives the fox and fpa arms FoX's "Pro" extras (specs/fpa_depth.md
 * §1.2): QK-norm, the data-dependent token shift of k and v, and the output gate; `full` stays the
 * plain RoPE transformer.
 */
export function mechanismConfig(m: Mechanism, shape: ModelShape, opts: { walk?: FpaWalk; evict?: FpaEvictFlag; pro?: boolean } = {}): ModelConfig {
  const pro = opts.pro && m !== 'full' ? { outputGate: true, tokenShift: true } : {};
  const attention = m === 'full' ? { type: 'full' }
    : m === 'fox' ? { type: 'fox', ...pro }
    : { type: 'fpa', walk: opts.walk ?? 'fox', ...pro, ...(opts.evict ? { evict: opts.evict } : {}) };
  return parseModelConfig({
    vocabSize: shape.vocabSize, dModel: shape.dModel, nLayers: shape.nLayers, nHeads: shape.nHeads, nKvHeads: shape.nHeads,
    headDim: shape.headDim, mlpHidden: shape.mlpHidden, contextLength: shape.contextLength,
    attention: [attention], ...(m === 'full' ? { positions: 'rope' } : {}), ...(opts.pro && m !== 'full' ? { qkNorm: true } : {}),
  }, undefined, `experiment arm '${m}'`);
}

export function parseMechanisms(s: string): Mechanism[] {
  const list = s.split(',').map((x) => x.trim()).filter(Boolean);
  for (const m of list) if (!MECHANISMS.includes(m as Mechanism)) throw new ArgumentError(`--mechanisms: '${m}' is not one of ${MECHANISMS.join(', ')}`);
  if (list.length === 0) throw new ArgumentError('--mechanisms: empty list; expected e.g. full,fox,fpa');
  return list as Mechanism[];
}

export function parseWalk(s: string): FpaWalk {
  if (s !== 'fox' && s !== 'linear' && s !== 'tanh') throw new ArgumentError(`--walk: '${s}' is not one of fox, linear, tanh`);
  return s;
}

/** "1,2,3" → [1, 2, 3]. */
export function parseSeeds(s: string): number[] {
  const seeds = s.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  if (seeds.length === 0 || seeds.some((x) => !Number.isInteger(x))) throw new ArgumentError(`--seeds '${s}': expected whole numbers separated by commas, e.g. 1,2,3`);
  return seeds;
}

/** A flag that must be a whole number ≥ min. */
export function intFlag(name: string, v: string | undefined, min = 1): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new ArgumentError(`--${name} ${v}: expected a whole number ≥ ${min}`);
  return n;
}

/** A flag that must be a finite number in [lo, hi]. */
export function numberFlag(name: string, v: string | undefined, lo: number, hi: number): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < lo || n > hi) throw new ArgumentError(`--${name} ${v}: expected a number in [${lo}, ${hi}]`);
  return n;
}

export async function backendFlag(name: string): Promise<Backend> {
  if (!['auto', 'cpu', 'wasm', 'webgpu'].includes(name)) throw new ArgumentError(`--backend '${name}': expected auto, cpu, wasm or webgpu`);
  return initBackend(name as BackendName | 'auto');
}

export function newModel(cfg: ModelConfig, backend: Backend, seed: number): Decoder {
  return new Decoder(cfg, new ParamFactory({ backend, seed }));
}

/** What one training run took: its final loss, wall time and throughput. */
export interface TrainRun {
  /** Mean loss of the last 10% of steps (at least one). */
  loss: number;
  steps: number;
  /** Tokens fed to the model (steps × batch × context × accumulate). */
  tokens: number;
  /** Wall time of all steps, the first (shader compilation, warm-up) included. */
  seconds: number;
  /** Tokens per second after the first step (all steps when there is only one), so compilation does not count. */
  tokensPerSecond: number;
  /** The layers' training terms (Trainer StepResult.terms, e.g. Spot's spotKL): at the first step and the mean of the last 10%. */
  terms?: { first: Record<string, number>; last: Record<string, number> };
}

/** "312 steps in 41.2 s, 12.3k tokens/s" for logs. */
export function formatTrainRun(r: TrainRun): string {
  const tps = r.tokensPerSecond >= 1e4 ? `${(r.tokensPerSecond / 1000).toFixed(1)}k` : r.tokensPerSecond.toFixed(0);
  return `${r.steps} steps in ${r.seconds.toFixed(1)} s, ${tps} tokens/s`;
}

/**
 * Trains `model` on `batches` for `train.steps` steps with a progress bar labelled `label`, then
 * prints one line on stderr with the time taken and tokens/s; returns them with the final loss.
 */
export async function trainModel(model: Decoder, batches: Batches, train: Partial<TrainConfig> & Pick<TrainConfig, 'steps' | 'batchSize' | 'context' | 'seed'>, label: string): Promise<TrainRun> {
  const config: TrainConfig = { ...DEFAULT_TRAIN, evalEvery: 0, checkpointEvery: 0, ...train };
  config.warmup = Math.min(config.warmup, config.steps);
  const trainer = new Trainer(model, batches, config);
  const bar = new Progress({ label, total: config.steps, unit: 'step' });
  const tail = Math.max(1, Math.floor(config.steps / 10));
  let tailSum = 0, tokens = 0, afterFirst = 0;
  let first: Record<string, number> | undefined;
  const tailTerms: Record<string, number> = {};
  const t0 = performance.now();
  let t1 = t0;
  try {
    for (let s = 0; s < config.steps; s++) {
      const r = await trainer.trainStep();
      if (!Number.isFinite(r.loss)) throw new ArgumentError(`${label}: loss ${r.loss} at step ${r.step}; lower --lr`);
      if (s >= config.steps - tail) {
        tailSum += r.loss;
        for (const [k, v] of Object.entries(r.terms ?? {})) tailTerms[k] = (tailTerms[k] ?? 0) + v / tail;
      }
      if (s === 0 && r.terms) first = { ...r.terms };
      tokens += r.tokens;
      if (s === 0) t1 = performance.now();
      else afterFirst += r.tokens;
      bar.update(r.step, { loss: r.loss, ...Object.fromEntries(Object.entries(r.terms ?? {}).map(([k, v]) => [k, v.toPrecision(3)])) });
    }
  } finally {
    bar.finish();
    trainer.dispose();
  }
  const t2 = performance.now();
  const seconds = (t2 - t0) / 1000;
  const tokensPerSecond = afterFirst > 0 ? afterFirst / ((t2 - t1) / 1000) : tokens / seconds;
  const run: TrainRun = { loss: tailSum / tail, steps: config.steps, tokens, seconds, tokensPerSecond, ...(first ? { terms: { first, last: tailTerms } } : {}) };
  const terms = run.terms ? Object.keys(run.terms.last).map((k) => `, ${k} ${run.terms!.first[k].toPrecision(3)} → ${run.terms!.last[k].toPrecision(3)}`).join('') : '';
  console.error(`${label}: trained ${formatTrainRun(run)}, final loss ${run.loss.toFixed(3)}${terms}`);
  return run;
}

/**
 * Forget-gate biases spread over memory spans: head h of H gets b_h = log(τ_h − 1), so that
 * f = σ(b_h) = 1 − 1/τ_h at a zero input, with τ geometric from 2 (b = 0, FoX's init: f ≈ 0.5)
 * to `span` tokens. FoX's zero bias makes every head forget within a few tokens at step 0, so a
 * short run never gets a gradient from a needle tens of tokens back.
 */
export function spreadGateBias(heads: number, span: number): Float32Array {
  if (!Number.isInteger(heads) || heads < 1) throw new ArgumentError(`spreadGateBias: heads ${heads} must be a whole number ≥ 1`);
  if (!(span >= 2)) throw new ArgumentError(`spreadGateBias: span ${span} must be ≥ 2 tokens`);
  return Float32Array.from({ length: heads }, (_, h) => Math.log(2 * (span / 2) ** (heads > 1 ? h / (heads - 1) : 1) - 1));
}

/** The parameters that hold a FoX-style forget gate's bias: FoX's `fgate.bias` and FPA's `fpa.walk.bias` (walk "fox"). */
export const FORGET_GATE_BIAS = /\.(fgate|fpa\.walk)\.bias$/;

/**
 * `model` with every forget-gate bias (FORGET_GATE_BIAS) set to `bias` (one value per head); the
 * other weights are the model's. The returned model is new: dispose `model` separately.
 */
export function withGateBias(model: Decoder, bias: Float32Array): Decoder {
  const backend = model.embed.weight.backend;
  const weights: Record<string, Tensor> = {}, made: Tensor[] = [];
  try {
    for (const [name, p] of model.namedParameters()) {
      if (!FORGET_GATE_BIAS.test(name)) { weights[name] = p; continue; }
      if (p.shape.join() !== String(bias.length)) throw new ArgumentError(`withGateBias: '${name}' has shape [${p.shape}], the bias ${bias.length} values`);
      const t = tensor(bias, [bias.length], { backend, dtype: 'f32' });
      made.push(t);
      weights[name] = t;
    }
    return new Decoder(model.config, new ParamFactory({ backend, weights, source: 'withGateBias' }));
  } finally {
    for (const t of made) t.dispose();
  }
}

/** Mean and sample standard deviation (0 for one value). */
export function meanStd(xs: readonly number[]): { mean: number; std: number } {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const v = xs.length > 1 ? xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (xs.length - 1) : 0;
  return { mean, std: Math.sqrt(v) };
}

/** A markdown table: header row, separator, body. */
export function markdownTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: readonly string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** Writes JSON atomically (temporary name, then rename). */
export function writeJson(path: string, value: unknown): void {
  writeText(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** `text` to `path` through a temporary name and a rename, so a killed run leaves no half file. */
export function writeText(path: string, text: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** The command line that ran this script, for the JSON record (RESULTS.md quotes it). */
export function commandLine(): string {
  return ['node --import tsx', ...process.argv.slice(1).map((a) => (/^[\w./:=,@+-]+$/.test(a) ? a : JSON.stringify(a)))].join(' ');
}
