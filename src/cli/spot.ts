/**
 * SpotAttention (attention/spot, specs/focus_spot.md Part B) on the command line: the flags that set
 * the decoding rule of Spot layers and what the commands report of them (`--add spot` and
 * `--train-only spot` are cli/compose.ts's).
 *
 * - `fon eval|generate --spot-top-p p | --spot-top-k ρ`: every Spot layer decodes with dual top-p p
 *   or static top-K ρ (a fraction of the causal blocks; 1 reads every block, which is dense decoding);
 * - `fon generate --spot-decode auto|mask|gather`: how Spot layers read their blocks on WebGPU
 *   (SpotAttention.decodePath; gather under static top-K only);
 * - `fon generate --stats`: each Spot layer's budget, the tokens its selected blocks hold over the
 *   causal tokens, averaged over the decoding steps;
 * - `fon train`: the distillation KL on the validation windows (valSpotKL) beside the training
 *   steps' (spotKL), plotted in DIR/spot_kl.svg;
 * - `fon info`: the selectors' parameters and the selector-key bytes per token.
 */
import { setSpotInference, spotLayers, spotParameterCount, type SpotRule } from '../attention/spot/index.ts';
import { SPOT_DECODE_PATHS, type SpotDecodePath } from '../attention/spot/spot.ts';
import { spotKeyBytes } from '../attention/spot/key_cache.ts';
import { layerAttention, type ModelConfig } from '../model/config.ts';
import type { Decoder } from '../model/decoder.ts';
import { collectTrainingTerms } from '../nn/training_terms.ts';
import { tensor } from '../ops/creation.ts';
import { add } from '../ops/elementwise.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { noGrad, tidy } from '../tensor/scope.ts';
import { numberFlag, UsageError } from './args.ts';

/**
 * `--spot-top-p p` or `--spot-top-k ρ` of eval and generate (at most one; each a number in (0, 1]):
 * sets every Spot layer's rule. A model without Spot layers is a UsageError. Returns the rule, or
 * undefined when neither is given (the config's rule stays).
 */
export function applySpotRule(command: string, topP: string | undefined, topK: string | undefined, model: Decoder): SpotRule | undefined {
  if (topP === undefined && topK === undefined) return undefined;
  if (topP !== undefined && topK !== undefined) throw new UsageError(`${command}: --spot-top-p and --spot-top-k exclude each other; give one`);
  const name = topP !== undefined ? 'spot-top-p' : 'spot-top-k';
  const x = numberFlag(command, name, topP ?? topK, 0, {});
  if (!(x > 0 && x <= 1)) throw new UsageError(`${command}: --${name} ${JSON.stringify(topP ?? topK)}: expected a number in (0, 1]`);
  if (spotLayers(model).length === 0) throw new UsageError(`${command}: --${name} ${topP ?? topK}: the model has no Spot layers (the flag sets the blocks Spot layers read while decoding)`);
  const rule: SpotRule = topP !== undefined ? { kind: 'top-p', p: x } : { kind: 'top-k', fraction: x };
  setSpotInference(model, rule);
  return rule;
}

/**
 * `--spot-decode auto|mask|gather` of generate: every Spot layer's device decode path
 * (SpotAttention.decodePath; the CPU backends select on the host and read the blocks through a mask
 * either way). A model without Spot layers is a UsageError.
 */
export function applySpotDecode(command: string, path: string | undefined, model: Decoder): void {
  if (path === undefined) return;
  if (!(SPOT_DECODE_PATHS as readonly string[]).includes(path)) throw new UsageError(`${command}: --spot-decode ${JSON.stringify(path)}: expected ${SPOT_DECODE_PATHS.join(' or ')}`);
  if (spotLayers(model).length === 0) throw new UsageError(`${command}: --spot-decode ${path}: the model has no Spot layers (the flag sets how Spot layers read their blocks while decoding)`);
  for (const [, l] of spotLayers(model)) l.decodePath = path as SpotDecodePath;
}

/** One Spot layer's decoding budget since the last reset, and its mean recall where measured (SpotAttention.measureRecall). */
export interface SpotLayerBudget { layer: number; rows: number; budget: number; recall: number | null }

/** Each Spot layer's budget (tokens in its selected blocks over the causal tokens, over every row that selected), then reset; empty when none decoded. */
export async function spotBudgets(model: Decoder): Promise<SpotLayerBudget[]> {
  const out: SpotLayerBudget[] = [];
  for (const [i, s] of spotLayers(model)) {
    if (s.stats.tokens) {
      const [chosen, causal] = await s.stats.tokens.data();
      const [captured, rows] = s.stats.recall ? await s.stats.recall.data() : [0, 0];
      if (causal > 0) out.push({ layer: i, rows: s.stats.rows, budget: chosen / causal, recall: rows > 0 ? captured / rows : null });
    }
    s.resetStats();
  }
  return out;
}

/** `spot: decoding read 41.2% of the causal tokens (layers 0: 80.1%, 1: 12.3%)`. */
export function spotBudgetLine(b: readonly SpotLayerBudget[]): string {
  const mean = b.reduce((a, l) => a + l.budget, 0) / b.length;
  return `spot: decoding read ${(100 * mean).toFixed(1)}% of the causal tokens, mean over ${b.length} layer${b.length === 1 ? '' : 's'} (per layer ${b.map((l) => `${l.layer}: ${(100 * l.budget).toFixed(1)}%`).join(', ')})`;
}

/**
 * The distillation KL (the layers' mean "spotKL", as trained) over validation windows, without
 * gradients; null for a model without Spot layers.
 */
export async function spotValidationKL(model: Decoder, windows: Iterable<{ inputs: Int32Array }>): Promise<number | null> {
  if (spotLayers(model).length === 0) return null;
  // Summed on the device, read once.
  let total: Tensor | undefined, n = 0;
  for (const w of windows) {
    const next = noGrad(() => tidy(() => {
      const ids = tensor(w.inputs, [1, w.inputs.length], { dtype: 'i32', backend: model.embed.weight.backend });
      const kl = collectTrainingTerms(() => model.forward(ids, { lastOnly: true })).terms.spotKL;
      return total ? add(total, kl) : kl;
    }));
    total?.dispose();
    total = next;
    n++;
  }
  if (!total) return null;
  const sum = (await total.data())[0];
  total.dispose();
  return sum / n;
}

/** The selectors Spot layers add (W_Q, W_K, W_w), in how many layers, and their key bytes per token summed over those layers. */
export function spotParameters(cfg: ModelConfig): { count: number; layers: number; keyBytesPerToken: number } {
  let count = 0, layers = 0, keyBytesPerToken = 0;
  for (let i = 0; i < cfg.nLayers; i++) {
    const a = layerAttention(cfg, i);
    if (a.type !== 'spot') continue;
    count += spotParameterCount(a, cfg.dModel);
    keyBytesPerToken += spotKeyBytes(a.keys, a.dim);
    layers++;
  }
  return { count, layers, keyBytesPerToken };
}
