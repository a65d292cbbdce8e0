/**
 * Focus (attention/focus, specs/focus_spot.md Part A) on the command line: the flags that add,
 * train and tune Focus layers, and what the commands report of them.
 *
 * - `fon train --add focus[:K=8,k=2,…]`: every full-attention layer of the model (an --init-from
 *   checkpoint's, or the preset's / --config's) becomes a Focus layer with those options over
 *   FOCUS_DEFAULTS; the stored tensors load and the Focus ones (named `layers.i.attn.focus.…`) are
 *   made fresh from --seed.
 * - `fon train --train-only focus`: W_g and C are trained, every other parameter is frozen.
 * - `fon eval|generate --focus-top-k k`: the k every Focus layer keeps at inference.
 * - the training log's dominance of each layer's largest group (collapse when one group holds
 *   nearly every token), `fon eval --json`'s blocks visited, `fon info`'s parameter count.
 */
import { composeFocus, FOCUS_DEFAULTS, focusComposesOnto, focusLayers, focusParameterCount, isFocusSpec, setFocusInference, type FocusSpec } from '../attention/focus/index.ts';
import { describeMechanism } from '../attention/table.ts';
import { layerAttention, parseModelConfig, type LayerAttention, type ModelConfig } from '../model/config.ts';
import type { Decoder } from '../model/decoder.ts';
import { numberFlag, UsageError } from './args.ts';

/** `--add`'s short option names and the Focus config keys they set. */
export const FOCUS_SHORT_NAMES = {
  K: 'groups', k: 'topK', dg: 'groupDim', w: 'window', tau: 'tau', N: 'sinkhornIters', gate: 'gate', lambda: 'lambda', beta: 'beta',
} as const satisfies Record<string, keyof Omit<FocusSpec, 'type'>>;

type ShortName = keyof typeof FOCUS_SHORT_NAMES;

/** What `--add` can add (only Focus layers for now). */
const ADDABLE = ['focus'] as const;

/** The options of a Focus entry that `--add focus:…` sets, by config key (the rest take FOCUS_DEFAULTS). */
export type FocusOptions = Partial<Record<keyof Omit<FocusSpec, 'type'>, number | string>>;

const knownShortNames = () => (Object.entries(FOCUS_SHORT_NAMES) as [ShortName, string][]).map(([s, k]) => `${s} (${k}, default ${FOCUS_DEFAULTS[k as keyof typeof FOCUS_DEFAULTS]})`).join(', ');

/**
 * `--add focus` or `--add focus:K=8,k=2,dg=16,w=128,tau=0.1,N=10,gate=mask,lambda=10,beta=0.5`:
 * the Focus options it sets. Another mechanism, an unknown or repeated short name, a missing `=`
 * or a value that is not a number (gate: a word) is a UsageError naming it. Ranges are the
 * mechanism's to check (its parse, when the config is made).
 */
export function parseAddFlag(value: string): FocusOptions {
  const colon = value.indexOf(':');
  const what = colon < 0 ? value : value.slice(0, colon);
  if (!(ADDABLE as readonly string[]).includes(what)) {
    throw new UsageError(`train: --add ${JSON.stringify(value)}: cannot add ${JSON.stringify(what)}; --add takes ${ADDABLE.join(', ')} (e.g. --add focus or --add focus:K=8,k=2)`);
  }
  const out: FocusOptions = {};
  if (colon < 0) return out;
  const seen = new Set<string>();
  for (const part of value.slice(colon + 1).split(',')) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq), raw = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (!Object.hasOwn(FOCUS_SHORT_NAMES, name)) {
      throw new UsageError(`train: --add ${value}: unknown Focus option ${JSON.stringify(name)}; known: ${knownShortNames()}`);
    }
    if (eq < 0 || raw === '') throw new UsageError(`train: --add ${value}: option ${name} has no value; expected ${name}=VALUE`);
    if (seen.has(name)) throw new UsageError(`train: --add ${value}: option ${name} is given twice`);
    seen.add(name);
    const key = FOCUS_SHORT_NAMES[name as ShortName];
    if (key === 'gate') { out.gate = raw; continue; }
    const n = Number(raw);
    if (!Number.isFinite(n)) throw new UsageError(`train: --add ${value}: ${name}=${raw}: expected a number`);
    out[key] = n;
  }
  return out;
}

/**
 * The config with every "full" layer replaced by a Focus entry of `options` over FOCUS_DEFAULTS
 * (other layers kept; a single entry for every layer stays one entry), validated as a config is
 * (an option out of range is the mechanism's ConfigError). No full layer: a UsageError.
 */
export function addFocusLayers(cfg: ModelConfig, options: FocusOptions, flag: string): ModelConfig {
  if (!cfg.attention.some(focusComposesOnto)) {
    const labels = [...new Set(Array.from({ length: cfg.nLayers }, (_, i) => describeMechanism(layerAttention(cfg, i)).label))];
    throw new UsageError(`train: --add ${flag}: the model has no layer with full attention (its layers: ${labels.join(', ')}); --add focus turns full-attention layers into Focus layers`);
  }
  const attention = cfg.attention.map((a) => composeFocus(a, options));
  // positions kept as they were: a new attention list must not switch a RoPE model to NoPE.
  return parseModelConfig({ attention, positions: cfg.positions }, cfg, `train: --add ${flag}`);
}

/** Whether some layer of the config is a Focus layer. */
export const hasFocusLayers = (cfg: ModelConfig): boolean => cfg.attention.some(isFocusSpec);

/** A Focus layer's parameter (W_g, C, the log-normalizers), by its full name: what --add makes fresh and --train-only focus trains. */
export const isFocusParameter = (name: string): boolean => name.includes('.attn.focus.');

/** What `--train-only` can name. */
export type TrainOnly = 'focus';

/** `--train-only focus` (the only part that can be trained alone); undefined when absent. */
export function trainOnlyFlag(value: string | undefined): TrainOnly | undefined {
  if (value === undefined) return undefined;
  if (value !== 'focus') throw new UsageError(`train: --train-only ${JSON.stringify(value)}: expected focus (train the Focus layers' W_g and C, freeze the rest)`);
  return value;
}

/** The UsageError of --train-only focus on a model without Focus layers. */
export function checkTrainOnly(trainOnly: TrainOnly | undefined, cfg: ModelConfig): void {
  if (trainOnly === 'focus' && !hasFocusLayers(cfg)) throw new UsageError('train: --train-only focus: the model has no Focus layers (add them with --add focus)');
}

/**
 * --train-only focus: requiresGrad off on every parameter that is not a Focus one (the Focus
 * log-normalizers are off already), so the Trainer's optimizer gets W_g and C only and the rest
 * of the model is saved as it was loaded. Returns the trained and the total scalar counts.
 */
export function freezeAllButFocus(model: Decoder): { trained: number; total: number } {
  let trained = 0, total = 0;
  for (const [name, p] of model.namedParameters()) {
    if (!isFocusParameter(name)) p.requiresGrad = false;
    if (p.requiresGrad) trained += p.size;
    total += p.size;
  }
  return { trained, total };
}

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
