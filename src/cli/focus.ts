/**
 * Focus (attention/focus, specs/focus_spot.md Part A) on the command line: the flag that tunes
 * Focus layers and what the commands report of them (`--add focus` and `--train-only focus` are
 * cli/compose.ts's, for every mechanism that composes onto trained layers).
 *
 * - `fon eval|generate --focus-top-k k`: the k every Focus layer keeps at inference.
 * - the training log's dominance of each layer's largest group (collapse when one group holds
 *   nearly every token), `fon eval --json`'s blocks visited, `fon info`'s parameter count.
 */
import { focusLayers, focusParameterCount, setFocusInference } from '../attention/focus/index.ts';
import { layerAttention, type ModelConfig } from '../model/config.ts';
import type { Decoder } from '../model/decoder.ts';
import { numberFlag, UsageError } from './args.ts';

/**
 * `--focus-top-k k` of eval and generate: every Focus layer keeps k groups per token at
 * inference (setFocusInference). Not an integer, or a model without Focus layers: UsageError; k
 * outside [1, K]: setFocusInference's ConfigError naming the layer. Returns k, or undefined.
 */
export function applyFocusTopK(command: string, value: string | undefined, model: Decoder): number | undefined {
  if (value === undefined) return undefined;
  const k = numberFlag(command, 'focus-top-k', value, 0, { integer: true });
  if (focusLayers(model).length === 0) throw new UsageError(`${command}: --focus-top-k ${value}: the model has no Focus layers (the flag sets the groups a token keeps in Focus layers)`);
  setFocusInference(model, { topK: k });
  return k;
}

/** A layer's largest group, measured from its counts (FocusAttention.stats.counts). */
export interface FocusLayerDominance {
  layer: number;
  /** K and the k in force when the counts were taken (each token counts in k groups). */
  groups: number;
  topK: number;
  /** The largest group's share of all memberships: 1/K when balanced, 1/k at most. */
  dominance: number;
  /** The largest group's share of the tokens (dominance × k): 1 when every token is in it. */
  tokenShare: number;
}

export interface FocusDominance {
  /** Dominance averaged over the Focus layers that saw tokens. */
  mean: number;
  /** 1/K when every Focus layer has the same K (a balanced assignment), else null. */
  ideal: number | null;
  layers: FocusLayerDominance[];
  /** Layers where one group holds nearly every token (COLLAPSE of them, with k < K). */
  collapsed: number[];
}

/** A layer has collapsed when its largest group holds at least this share of the tokens. */
export const COLLAPSE = 0.9;

/** Forgets every Focus layer's counts and block figures, so the next measurement starts from zero. */
export function resetFocusStats(model: Decoder): void {
  for (const [, f] of focusLayers(model)) f.resetStats();
}

/**
 * The largest group's share in each Focus layer, read from the counts gathered since the last
 * reset (one read per layer), then reset. Null when the model has no Focus layer or none counted
 * a token. A layer collapses when k < K and its largest group holds ≥ COLLAPSE of the tokens (with
 * k = 1 that is dominance ≥ COLLAPSE; with k = K every group holds every token by definition).
 */
export async function measureFocusDominance(model: Decoder): Promise<FocusDominance | null> {
  const layers: FocusLayerDominance[] = [];
  for (const [i, f] of focusLayers(model)) {
    const counts = f.stats.counts;
    if (counts) {
      const c = (await counts.data()) as Float32Array;
      let sum = 0, max = 0;
      for (const x of c) { sum += x; max = Math.max(max, x); }
      if (sum > 0) layers.push({ layer: i, groups: f.spec.groups, topK: f.topK, dominance: max / sum, tokenShare: (max * f.topK) / sum });
    }
    f.resetStats();
  }
  if (layers.length === 0) return null;
  const ks = new Set(layers.map((l) => l.groups));
  return {
    mean: layers.reduce((a, l) => a + l.dominance, 0) / layers.length,
    ideal: ks.size === 1 ? 1 / layers[0].groups : null,
    layers,
    collapsed: layers.filter((l) => l.groups >= 2 && l.topK < l.groups && l.tokenShare >= COLLAPSE).map((l) => l.layer),
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** `focus: dominance 23.1% (ideal 12.5%), layers 14.2–31.0%`, then one line per collapsed layer. */
export function focusDominanceLines(d: FocusDominance): string[] {
  const lo = Math.min(...d.layers.map((l) => l.dominance)), hi = Math.max(...d.layers.map((l) => l.dominance));
  const lines = [`focus: dominance ${pct(d.mean)}${d.ideal !== null ? ` (ideal ${pct(d.ideal)})` : ''}, ${d.layers.length === 1 ? `layer ${d.layers[0].layer}` : `layers ${(100 * lo).toFixed(1)}–${pct(hi)}`}`];
  for (const l of d.layers) {
    if (!d.collapsed.includes(l.layer)) continue;
    lines.push(`focus: layer ${l.layer} collapsed: dominance ${pct(l.dominance)}${l.topK > 1 ? `, its largest group holds ${pct(l.tokenShare)} of the tokens` : ''} (one group holds nearly every token)`);
  }
  return lines;
}

/** The training log's fields: focusDominance (the mean), focusLayerDominance by layer, focusCollapsed when some layer collapsed. */
export function focusLogFields(d: FocusDominance | null): { focusDominance?: number; focusLayerDominance?: Record<string, number>; focusCollapsed?: number[] } {
  if (!d) return {};
  return {
    focusDominance: d.mean,
    focusLayerDominance: Object.fromEntries(d.layers.map((l) => [String(l.layer), l.dominance])),
    ...(d.collapsed.length ? { focusCollapsed: d.collapsed } : {}),
  };
}

/**
 * Key blocks the exact sparse prefill visited (set A, the group-sorted segments, plus set B, the
 * cross-group window band) over the blocks full causal attention visits at the same positions,
 * summed over the Focus layers since the last reset. Blocks, not pairs: a visited block may hold
 * pairs the rule masks, and set A runs over k copies of each token. Null when no sparse prefill
 * ran (the webgpu backend runs the dense masked form, which visits every causal block).
 */
export function focusBlocksVisitedFraction(model: Decoder): number | null {
  let visited = 0, causal = 0;
  for (const [, f] of focusLayers(model)) {
    visited += f.stats.blocks.blocksA + f.stats.blocks.blocksB;
    causal += f.stats.blocks.causalBlocks;
  }
  return causal > 0 ? visited / causal : null;
}

/**
 * The query–key pairs the hard rule kept (causal and within the window or sharing a group) over the
 * causal pairs, summed over the Focus layers since the last reset (FocusAttention.stats.pairs, on
 * every backend); null when no hard forward ran.
 */
export async function focusPairsRetained(model: Decoder): Promise<number | null> {
  let kept = 0, causal = 0;
  for (const [, f] of focusLayers(model)) {
    if (!f.stats.pairs) continue;
    const [k, c] = await f.stats.pairs.data();
    kept += k; causal += c;
  }
  return causal > 0 ? kept / causal : null;
}

/** The trained parameters Focus layers add (W_g and C, focusParameterCount) and in how many layers. */
export function focusParameters(cfg: ModelConfig): { count: number; layers: number } {
  let count = 0, layers = 0;
  for (let i = 0; i < cfg.nLayers; i++) {
    const a = layerAttention(cfg, i);
    if (a.type !== 'focus') continue;
    count += focusParameterCount(a, cfg.dModel);
    layers++;
  }
  return { count, layers };
}
