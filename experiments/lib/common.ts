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
import { DEFAULT_TRAIN, Trainer, type Batches, type TrainConfig } from '../../src/train/trainer.ts';

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
export function mechanismConfig(m: Mechanism, shape: ModelShape, opts: { walk?: FpaWalk; evict?: FpaEvictFlag } = {}): ModelConfig {
  const attention = m === 'full' ? { type: 'full' }
    : m === 'fox' ? { type: 'fox' }
    : { type: 'fpa', walk: opts.walk ?? 'fox', ...(opts.evict ? { evict: opts.evict } : {}) };
  return parseModelConfig({
    vocabSize: shape.vocabSize, dModel: shape.dModel, nLayers: shape.nLayers, nHeads: shape.nHeads, nKvHeads: shape.nHeads,
    headDim: shape.headDim, mlpHidden: shape.mlpHidden, contextLength: shape.contextLength,
    attention: [attention], ...(m === 'full' ? { positions: 'rope' } : {}),
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

/**
 * Trains `model` on `batches` for `train.steps` steps with a progress bar labelled `label`;
 * returns the mean loss of the last 10% of steps (at least one).
 */
export async function trainModel(model: Decoder, batches: Batches, train: Partial<TrainConfig> & Pick<TrainConfig, 'steps' | 'batchSize' | 'context' | 'seed'>, label: string): Promise<number> {
  const config: TrainConfig = { ...DEFAULT_TRAIN, evalEvery: 0, checkpointEvery: 0, ...train };
  config.warmup = Math.min(config.warmup, config.steps);
  const trainer = new Trainer(model, batches, config);
  const bar = new Progress({ label, total: config.steps, unit: 'step' });
  const tail = Math.max(1, Math.floor(config.steps / 10));
  let tailSum = 0;
  try {
    for (let s = 0; s < config.steps; s++) {
      const r = await trainer.trainStep();
      if (!Number.isFinite(r.loss)) throw new ArgumentError(`${label}: loss ${r.loss} at step ${r.step}; lower --lr`);
      if (s >= config.steps - tail) tailSum += r.loss;
      bar.update(r.step, { loss: r.loss });
    }
  } finally {
    bar.finish();
    trainer.dispose();
  }
  return tailSum / tail;
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
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, path);
}

/** The command line that ran this script, for the JSON record (RESULTS.md quotes it). */
export function commandLine(): string {
  return ['node --import tsx', ...process.argv.slice(1).map((a) => (/^[\w./:=,@+-]+$/.test(a) ? a : JSON.stringify(a)))].join(' ');
}
