/**
 * The training loop, readable top to bottom (STYLE.md §9): per step, `accumulate` micro-batches
 * of (batch, context) tokens → mean cross-entropy → backward; then clipping by global norm, the
 * warm-up + cosine learning rate, AdamW; evaluation and checkpoints at their intervals.
 *
 * With `organs` in the model config the loss is the organ objective (train/organ_loss.ts):
 * CE + λ_D·CE(exit) + λ_KL·KL(sg(p_L) ‖ p_D), with LayerSkip-style layer dropout when
 * organs.layerDropout > 0; the step still reports the full model's CE as `loss`, beside the exit
 * head's CE and the KL.
 *
 * Exact resume: everything a step depends on is a function of the step number (the batch order,
 * the learning rate, the layer-dropout masks: a counter-based draw from (seed, step, micro-batch,
 * layer, sequence) whose rate ramps with step/steps, no generator state) or lives in the checkpoint
 * (weights, optimizer moments and step count), so a run stopped at step s and resumed follows the
 * uninterrupted run's loss curve.
 *
 * Only parameters with requiresGrad are trained (`trainableParameters`): Focus's log-normalizers
 * never are, and `fon train --train-only focus` freezes the rest of the model before the Trainer
 * is made.
 */
import { ArgumentError, clip, ConfigError, type FonError, showValue, UnsupportedError } from '../errors.ts';
import { tensor } from '../ops/creation.ts';
import { add, mul } from '../ops/elementwise.ts';
import { concat, reshape } from '../ops/layout.ts';
import type { Decoder } from '../model/decoder.ts';
import { autocast, PRECISIONS, type Precision } from '../tensor/autocast.ts';
import { noGrad, tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { clipGradNorm, gradNorm } from './clip.ts';
import { DynamicLossScale, type LossScaleState } from './loss_scale.ts';
import { AdamW } from './optim.ts';
import { layerKeepMasks, trainingLoss } from './organ_loss.ts';
import { warmupCosine, type Schedule } from './schedule.ts';

/** Training hyper-parameters; one typed defaults object, overridden by flags. */
export interface TrainConfig {
  /** Optimizer steps in the whole run (the cosine reaches minLr there). */
  steps: number;
  /** Sequences per micro-batch. */
  batchSize: number;
  /** Micro-batches per optimizer step (gradient accumulation). */
  accumulate: number;
  /** Tokens per sequence (≤ the model's context length). */
  context: number;
  lr: number;
  minLr: number;
  /** Linear warm-up steps. */
  warmup: number;
  weightDecay: number;
  beta1: number;
  beta2: number;
  /** Clip the global gradient norm to this (0 = off). */
  gradClip: number;
  /** Evaluate on the validation split every N steps (0 = only at the end). */
  evalEvery: number;
  /** Validation windows per evaluation during training (the final evaluation reads them all). */
  evalWindows: number;
  /** Write a checkpoint every N steps (0 = only at the end). */
  checkpointEvery: number;
  /** Seeds initialisation and the batch order. */
  seed: number;
  /**
   * Matmuls and attention in f32, bf16 or f16 (tensor/autocast.ts; master weights, optimizer state
   * and reductions stay f32; f16 adds dynamic loss scaling); 'auto': the backend's fastest.
   */
  precision: Precision | 'auto';
}

export const DEFAULT_TRAIN: TrainConfig = {
  steps: 1000, batchSize: 16, accumulate: 1, context: 256,
  lr: 3e-3, minLr: 3e-4, warmup: 50, weightDecay: 0.1, beta1: 0.9, beta2: 0.95, gradClip: 1.0,
  evalEvery: 200, evalWindows: 64, checkpointEvery: 200, seed: 1337, precision: 'auto',
};

/** Each TrainConfig field's rule: an integer or any number, and its range (the flags' rules, src/cli/train.ts). */
type NumericSetting = Exclude<keyof TrainConfig, 'precision'>;
const TRAIN_RULES: Record<NumericSetting, { integer: boolean; min: number; max?: number; below?: number }> = {
  steps: { integer: true, min: 1 }, batchSize: { integer: true, min: 1 }, accumulate: { integer: true, min: 1 }, context: { integer: true, min: 1 },
  lr: { integer: false, min: 0 }, minLr: { integer: false, min: 0 }, warmup: { integer: true, min: 0 }, weightDecay: { integer: false, min: 0 },
  beta1: { integer: false, min: 0, below: 1 }, beta2: { integer: false, min: 0, below: 1 }, gradClip: { integer: false, min: 0 },
  evalEvery: { integer: true, min: 0 }, evalWindows: { integer: true, min: 1 }, checkpointEvery: { integer: true, min: 0 }, seed: { integer: true, min: 0 },
};

/** Every TrainConfig field of `o` held to TRAIN_RULES (present, a finite number of its range) and warmup ≤ steps; `fail` makes the error naming `where`, the key and the value. */
function checkRules(o: Record<string, unknown>, where: string, fail: (message: string) => FonError): TrainConfig {
  const out = {} as TrainConfig;
  for (const [k, r] of Object.entries(TRAIN_RULES) as [NumericSetting, (typeof TRAIN_RULES)[NumericSetting]][]) {
    const v = o[k];
    const range = `${r.integer ? 'an integer' : 'a number'} ≥ ${r.min}${r.below !== undefined ? ` and < ${r.below}` : ''}`;
    if (typeof v !== 'number' || !Number.isFinite(v) || (r.integer && !Number.isInteger(v)) || v < r.min || (r.below !== undefined && v >= r.below)) {
      throw fail(`${where}: '${k}' = ${v === undefined ? 'missing' : showValue(v)}: expected ${range}`);
    }
    out[k] = v;
  }
  if (out.warmup > out.steps) throw fail(`${where}: 'warmup' = ${out.warmup}: expected at most 'steps' = ${out.steps}`);
  // A run description from before precisions existed trained in f32.
  const p = o.precision ?? 'f32';
  if (typeof p !== 'string' || ![...PRECISIONS, 'auto'].includes(p)) throw fail(`${where}: 'precision' = ${showValue(p)}: expected ${[...PRECISIONS, 'auto'].join(', ')}`);
  out.precision = p as Precision | 'auto';
  return out;
}

/**
 * A TrainConfig read from a file (a checkpoint's trainer.json on resume), held to the rules its
 * flags are: every field present, a finite number of its range, warmup ≤ steps, no other key. A
 * ConfigError names `where`, the key and the value. The Trainer checks the rest against the
 * model (`checkTrainConfig`: context ≤ its context length, lr > 0, minLr ≤ lr).
 */
export function parseTrainConfig(value: unknown, where: string): TrainConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError(`${where}: expected an object of training settings, got ${showValue(value)}`);
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!Object.hasOwn(TRAIN_RULES, k) && k !== 'precision') throw new ConfigError(`${where}: unknown key '${clip(k, 80)}'; expected ${[...Object.keys(TRAIN_RULES), 'precision'].join(', ')}`);
  return checkRules(o, where, (m) => new ConfigError(m));
}

/** A source of training batches whose step-th batch is a pure function of the step. */
export interface Batches {
  batchAt(index: number): { inputs: Int32Array; targets: Int32Array };
}

export interface StepResult {
  step: number;
  /** The full model's mean cross-entropy (nats/token; with organs not the objective, which adds the organ terms). */
  loss: number;
  lr: number;
  gradNorm: number;
  tokens: number;
  /** With organs: the exit head's mean cross-entropy CE(p_D). */
  exitLoss?: number;
  /** With organs: KL(sg(p_L) ‖ p_D), mean over positions. */
  distill?: number;
  /** The layers' training terms by name (nn/training_terms.ts: Spot's "spotKL"), each part of the objective. */
  terms?: Record<string, number>;
  /** f16: the gradients overflowed at this loss scale, so the update was skipped (and the scale halved). */
  skipped?: boolean;
}

/** A TrainConfig given in code, checked before training: the same rules as parseTrainConfig (an ArgumentError), then against the model: context ≤ its context length, lr > 0, minLr ≤ lr. */
export function checkTrainConfig(c: TrainConfig, contextLength: number): void {
  checkRules(c as unknown as Record<string, unknown>, 'train', (m) => new ArgumentError(m));
  if (c.context > contextLength) throw new ArgumentError(`train: context ${c.context} passes the model's context length ${contextLength}`);
  if (!(c.lr > 0) || c.minLr > c.lr) throw new ArgumentError(`train: need lr > 0 and 0 ≤ minLr ≤ lr, got lr ${c.lr}, minLr ${c.minLr}`);
}

/** The parameters training updates: those with requiresGrad, in the model's order (the optimizer state's indexes). */
export function trainableParameters(model: Decoder): Tensor[] {
  return model.parameters().filter((p) => p.requiresGrad);
}

export class Trainer {
  readonly optimizer: AdamW;
  readonly schedule: Schedule;
  /** The precision the steps run in (config.precision, 'auto' resolved against the backend). */
  readonly precision: Precision;
  /** f16's dynamic loss scale (null in f32 and bf16); its state is saved with the trainer. */
  readonly lossScale: DynamicLossScale | null;
  /** Optimizer steps done (the next step to run). */
  step = 0;
  /** The names of the training terms the last step's forward added (their order in the step's read). */
  private termNames: string[] = [];

  constructor(readonly model: Decoder, readonly batches: Batches, readonly config: TrainConfig, lossScale?: LossScaleState) {
    checkTrainConfig(config, model.config.contextLength);
    const c = config;
    const support = model.embed.weight.backend.precisions();
    this.precision = c.precision === 'auto' ? support.fastest : c.precision;
    if (!support.offered.includes(this.precision)) {
      throw new UnsupportedError(`train: precision '${this.precision}' is not offered by the ${model.embed.weight.backend.name} backend${support.missing ? ` (${support.missing})` : ''}; it offers ${support.offered.join(', ')}`);
    }
    this.lossScale = this.precision === 'f16' ? new DynamicLossScale(lossScale) : null;
    // The optimizer takes the parameters that require gradients, in the model's order: frozen ones
    // (Focus's log-normalizers, updated in place; everything a `--train-only` run leaves out) are
    // neither updated nor decayed, and a resume that freezes the same ones indexes the same state.
    const trainable = trainableParameters(model);
    if (trainable.length === 0) throw new ArgumentError('train: every parameter of the model is frozen (requiresGrad false); nothing to train');
    // Decoupled weight decay on matrices only (norm weights, biases and 1-D tensors are not decayed).
    this.optimizer = new AdamW(trainable, { lr: c.lr, betas: [c.beta1, c.beta2], weightDecay: c.weightDecay });
    this.optimizer.decayMask = trainable.map((p) => p.rank >= 2);
    this.schedule = warmupCosine(c.lr, c.warmup, c.steps, c.minLr);
  }

  /** Runs one optimizer step and reads its losses and gradient norm back (one read per step, after the update is queued). */
  async trainStep(): Promise<StepResult> {
    const c = this.config, b = this.model.embed.weight.backend;
    const organs = this.model.config.organs;
    const lr = this.schedule(this.step);
    this.optimizer.lr = lr;
    // Summed over micro-batches: [CE] or, with organs, [CE, exit CE, KL].
    let total: Tensor | null = null;
    for (let micro = 0; micro < c.accumulate; micro++) {
      const { inputs, targets } = this.batches.batchAt(this.step * c.accumulate + micro);
      const layerKeep = organs && organs.layerDropout > 0
        ? layerKeepMasks(organs.layerDropout, this.model.layers.length, c.batchSize, { seed: c.seed, step: this.step, micro, steps: c.steps })
        : undefined;
      const l = tidy(() => {
        const x = tensor(inputs, [c.batchSize, c.context], { backend: b, dtype: 'i32' });
        const y = tensor(targets, [c.batchSize, c.context], { backend: b, dtype: 'i32' });
        const parts = autocast(this.precision, () => trainingLoss(this.model, x, y, { layerKeep }));
        // Each micro-batch's loss counts 1/accumulate, so the summed gradient is the mean's and
        // clipping sees the same norm as one batch of accumulate × batchSize; in f16 the loss scale
        // multiplies it too (the gradients are unscaled in the optimizer step).
        const weight = (this.lossScale?.scale ?? 1) / c.accumulate;
        (weight === 1 ? parts.loss : mul(parts.loss, weight)).backward();
        this.termNames = Object.keys(parts.terms).sort();
        const reported = [parts.ce, ...(organs ? [parts.exitCe!, parts.distill!] : []), ...this.termNames.map((n) => parts.terms[n])].map((t) => reshape(t.detach(), [1]));
        const d = reported.length === 1 ? reported[0] : concat(reported);
        return total ? add(total, d) : d;
      });
      if (total && total !== l) total.dispose();
      total = l;
    }
    if (this.lossScale) return this.scaledStep(total!, lr);
    const norm = c.gradClip > 0 ? clipGradNorm(this.optimizer.params, c.gradClip) : null;
    this.optimizer.step();
    this.optimizer.zeroGrad();
    // One read-back per step: the losses and the gradient norm travel together.
    const stats = norm ? noGrad(() => tidy(() => concat([total!, reshape(norm, [1])]))) : total!;
    const host = await stats.data();
    const gradNorm = norm ? host[host.length - 1] : NaN;
    for (const t of new Set([stats, total!, norm])) t?.dispose();
    this.step++;
    const r: StepResult = { step: this.step, loss: host[0] / c.accumulate, lr, gradNorm, tokens: c.accumulate * c.batchSize * c.context };
    this.readParts(r, host);
    return r;
  }

  /**
   * The end of an f16 step: the norm of the scaled gradients is read back before the update (the
   * one read of the step, with the losses); a non-finite norm skips the update and halves the
   * scale, a finite one unscales and clips through AdamW's gradient multiplier.
   */
  private async scaledStep(total: Tensor, lr: number): Promise<StepResult> {
    const c = this.config, scaler = this.lossScale!;
    const norm = gradNorm(this.optimizer.params);
    const stats = noGrad(() => tidy(() => concat([total, reshape(norm, [1])])));
    const host = await stats.data();
    for (const t of [stats, total, norm]) t.dispose();
    const scaled = host[host.length - 1];
    const finite = Number.isFinite(scaled);
    const trueNorm = scaled / scaler.scale;
    if (finite) {
      const clipBy = c.gradClip > 0 ? Math.min(1, c.gradClip / (trueNorm + 1e-6)) : 1;
      const outer = this.optimizer.gradScale;
      this.optimizer.gradScale = outer * clipBy / scaler.scale;
      this.optimizer.step();
      this.optimizer.gradScale = outer;
    }
    this.optimizer.zeroGrad();
    scaler.update(finite);
    this.step++;
    const r: StepResult = { step: this.step, loss: host[0] / c.accumulate, lr, gradNorm: finite ? trueNorm : NaN, tokens: c.accumulate * c.batchSize * c.context, skipped: !finite };
    this.readParts(r, host);
    return r;
  }
  /** The objective's parts after the CE in a step's read (summed over micro-batches): the organ terms, then the layers' terms. */
  private readParts(r: StepResult, host: ArrayLike<number>): void {
    const n = this.config.accumulate;
    let at = 1;
    if (this.model.config.organs) { r.exitLoss = host[1] / n; r.distill = host[2] / n; at = 3; }
    if (this.termNames.length) r.terms = Object.fromEntries(this.termNames.map((name, i) => [name, host[at + i] / n]));
  }


  dispose(): void {
    this.optimizer.dispose();
  }
}

