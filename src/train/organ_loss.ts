/**
 * The training objective of a FON model with organs (specs/lighthouse_fon.md §2.3 "Training", item 3;
 * DESIGN.md "The FON model (organs)"; the config key in model/organs.ts):
 *
 *   𝓛 = CE(p_L) + λ_D·CE(p_D) + λ_KL·KL(sg(p_L) ‖ p_D)
 *
 * p_L is the full model's next-token distribution, p_D the exit head's (the shared final norm and LM
 * head applied to the hidden state after layer D−1), sg a stop-gradient (detach). The KL term is
 * Σ_v p_L·(log p_L − log p_D) per position, averaged over every position of the batch (training has
 * no ignored targets); with p_L detached its gradient reaches only p_D: layers < D and the shared
 * head, norm and embedding. Neither the exit CE nor the KL reaches a layer ≥ D. A weight of 0 leaves
 * its term out of the graph (it is still computed, without gradient, for the step's report), so
 * λ_D = λ_KL = 0 is the plain CE, value and gradients, exactly. Built from ordinary ops (log-softmax,
 * softmax, mul, sum, mean); no fused kernel. 𝓛_sel (SpotAttention's selector distillation) is not here.
 *
 * Layer dropout (LayerSkip, Elhoushi et al. 2024), the variant implemented:
 * - rate of layer l (0-based) of L: p_l = p_max · l/(L−1) · S(t): 0 for layer 0 (never skipped),
 *   p_max for the last layer at full ramp. Linear in depth (LayerSkip's D(l) is exponential,
 *   e^(l·ln2/(L−1)) − 1; both are 0 at layer 0 and 1 at the last).
 * - the ramp over training S(t) = t/(T−1) for the 0-based step t of a run of T steps (1 when T = 1):
 *   0 at the first step, full at the last. Linear in time (LayerSkip's pre-training curriculum is the
 *   exponential e^(t·ln2/(T−1)) − 1, also 0 → 1).
 * - drawn per SEQUENCE of the micro-batch: sequence b skips layer l iff u < p_l, where u is uniform
 *   from a counter-based stream that is a pure function of (seed, step, micro-batch, layer, b)
 *   (layerDropUniform). Nothing is drawn from a stateful generator, so a run resumed at step s draws
 *   the masks the uninterrupted run drew (the trainer's exact-resume promise).
 * - a skipped layer is the identity for that sequence: y = x + m_b·(block(x) − x) with m_b ∈ {0, 1},
 *   computed as the select m_b ? block(x) : x (the same value, without rounding; Decoder.forwardWithExit).
 *   With Depth-Attention, a skipped layer's record (the k̂, ṽ its mechanism computed from its input)
 *   is still handed to the later layers that read it: what is dropped is the block's update of the
 *   residual stream, not its keys and values (at inference nothing is dropped, and every record is there).
 * - the exit head reads the hidden state after layer D−1 of the same dropped network, and the KL's
 *   teacher p_L is that network's too (as in LayerSkip, where the early-exit loss rides on the
 *   dropped forward).
 * Only the trainer draws masks; evaluation and generation never drop layers.
 */
import { crossEntropy } from '../ops/fused.ts';
import { add, mul, sub } from '../ops/elementwise.ts';
import { detach } from '../ops/grad.ts';
import { uniformAt } from '../ops/random.ts';
import { logSoftmax, mean, softmax, sum } from '../ops/reduce.ts';
import { ArgumentError, ShapeError } from '../errors.ts';
import { noGrad, tidy } from '../tensor/scope.ts';
import { collectTrainingTerms } from '../nn/training_terms.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { OrgansSpec } from '../model/organs.ts';
import type { Decoder } from '../model/decoder.ts';

/** The objective and its parts, scalars (nats). */
export interface OrganLoss {
  /** 𝓛, what backward runs on. */
  loss: Tensor;
  /** CE(p_L), the full model's mean cross-entropy (the figure runs are compared by). */
  ce: Tensor;
  /** CE(p_D), the exit head's mean cross-entropy. */
  exitCe: Tensor;
  /** KL(sg(p_L) ‖ p_D), mean over positions. */
  distill: Tensor;
}

/**
 * KL(sg(p_T) ‖ p_S) = Σ_v p_T (log p_T − log p_S) per position, mean over positions; teacher and
 * student logits (…, V) of one shape. The teacher is detached: the gradient flows into the student only.
 */
export function distillKl(teacherLogits: Tensor, studentLogits: Tensor): Tensor {
  if (teacherLogits.shape.join() !== studentLogits.shape.join() || teacherLogits.rank < 1) {
    throw new ShapeError(`distillKl: teacher logits [${teacherLogits.shape}] and student logits [${studentLogits.shape}] must have one shape (…, V)`);
  }
  return tidy(() => {
    const t = detach(teacherLogits);
    const logPt = logSoftmax(t);
    const pt = softmax(t);
    const perPosition = sum(mul(pt, sub(logPt, logSoftmax(studentLogits))), -1);
    return mean(perPosition);
  });
}

/** 𝓛 and its parts from the full model's and the exit head's logits (B, T, V) and targets (B, T) i32. */
export function organLoss(logits: Tensor, exitLogits: Tensor, targets: Tensor, weights: Pick<OrgansSpec, 'exitLoss' | 'distill'>): OrganLoss {
  return tidy(() => {
    const ce = crossEntropy(logits, targets);
    // A term of weight 0 is reported but kept out of the graph: the objective is then exactly CE.
    const term = (w: number, f: () => Tensor) => (w === 0 ? noGrad(f) : f());
    const exitCe = term(weights.exitLoss, () => crossEntropy(exitLogits, targets));
    const distill = term(weights.distill, () => distillKl(logits, exitLogits));
    let loss = ce;
    if (weights.exitLoss !== 0) loss = add(loss, mul(exitCe, weights.exitLoss));
    if (weights.distill !== 0) loss = add(loss, mul(distill, weights.distill));
    return { loss, ce, exitCe, distill };
  });
}

// ---- layer dropout

/** Where in a run a micro-batch sits: what its layer-dropout masks are a function of. */
export interface LayerDropAt {
  /** The trainer's seed (TrainConfig.seed). */
  seed: number;
  /** The 0-based optimizer step being run. */
  step: number;
  /** The micro-batch inside the step (0 … accumulate−1). */
  micro: number;
  /** Steps in the whole run (the ramp's length). */
  steps: number;
}

/** S(t): the ramp of the layer-dropout rate, t/(T−1) for step t of T (1 for a one-step run). */
export function layerDropRamp(step: number, steps: number): number {
  return steps <= 1 ? 1 : Math.min(1, Math.max(0, step / (steps - 1)));
}

/** p_l = p_max · l/(L−1) · ramp: the probability that a sequence skips layer l (0 for layer 0). */
export function layerDropRate(pMax: number, layer: number, nLayers: number, ramp = 1): number {
  return nLayers <= 1 ? 0 : pMax * (layer / (nLayers - 1)) * ramp;
}

/** lowbias32 (Chris Wellons' hash search), as ops/random.ts mixes its counters. */
function hash32(x: number): number {
  x ^= x >>> 16; x = Math.imul(x, 0x21f0aaad);
  x ^= x >>> 15; x = Math.imul(x, 0x735a2d97);
  x ^= x >>> 15;
  return x >>> 0;
}

/**
 * The uniform in [0, 1) that decides whether sequence `sequence` of micro-batch `micro` of step
 * `step` skips layer `layer`: a pure function of its arguments (a counter-based stream keyed by
 * seed, step, micro-batch and layer, read at the sequence index).
 */
export function layerDropUniform(seed: number, step: number, micro: number, layer: number, sequence: number): number {
  let k = hash32((seed >>> 0) ^ 0x1a7e5d09); // a salt: not the stream the batch sampler or the init draw from
  k = hash32(k ^ (step >>> 0) ^ Math.imul(Math.floor(step / 4294967296), 0x27d4eb2f));
  k = hash32(k ^ Math.imul(micro + 1, 0x9e3779b9));
  k = hash32(k ^ Math.imul(layer + 1, 0x85ebca6b));
  return uniformAt(k, sequence);
}

/**
 * The keep masks of one micro-batch of `batch` sequences, per layer: null where every sequence runs
 * the layer (always for layer 0, and everywhere while the rate is 0), else 1 (run) / 0 (skip) per
 * sequence. What trainingLoss takes as `layerKeep`.
 */
export function layerKeepMasks(pMax: number, nLayers: number, batch: number, at: LayerDropAt): (Float32Array | null)[] {
  const ramp = layerDropRamp(at.step, at.steps);
  return Array.from({ length: nLayers }, (_, l) => {
    const p = layerDropRate(pMax, l, nLayers, ramp);
    if (!(p > 0)) return null;
    const m = new Float32Array(batch);
    let skipped = 0;
    for (let b = 0; b < batch; b++) {
      const keep = layerDropUniform(at.seed, at.step, at.micro, l, b) >= p;
      m[b] = keep ? 1 : 0;
      if (!keep) skipped++;
    }
    return skipped ? m : null;
  });
}

  /**
   * The training objective of ids (B, T) against targets (B, T) and its parts: `loss` (what
   * backward runs on), `ce` (the full model's CE), with organs `exitCe` and `distill` (organLoss
   * above), and `terms`, what the layers add under a training-terms collection (nn/training_terms.ts:
   * Spot's distillation KL "spotKL"), each added to the loss; `layerKeep` as in
   * Decoder.forwardWithExit (organ models only). What the trainer runs backward on; Decoder.loss is
   * the plain CE.
   */
export function trainingLoss(model: Decoder, ids: Tensor, targets: Tensor, opts: { layerKeep?: readonly (ArrayLike<number> | null | undefined)[] } = {}): { loss: Tensor; ce: Tensor; exitCe?: Tensor; distill?: Tensor; terms: Record<string, Tensor> } {
    const organs = model.config.organs;
    if (!organs && opts.layerKeep?.some((m) => m)) throw new ArgumentError('trainingLoss: layer dropout (layerKeep) needs a model with organs');
    return tidy(() => {
      const { value, terms } = collectTrainingTerms(() => (organs ? model.forwardWithExit(ids, organs.draftLayers, opts) : { logits: model.forward(ids), exitLogits: undefined }));
      const ce = organs ? undefined : crossEntropy(value.logits, targets);
      const parts = organs ? organLoss(value.logits, value.exitLogits!, targets, organs) : { loss: ce!, ce: ce! };
      const loss = Object.values(terms).reduce((s, t) => add(s, t), parts.loss);
      return { ...parts, loss, terms };
    });
  }
