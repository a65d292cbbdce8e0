/**
 * Composing a mechanism onto a trained model's layers from the command line, for every mechanism
 * whose def says how (attention/mechanism.ts MechanismComposition: Focus, Spot), read from the table:
 *
 * - `fon train --add NAME[:short=value,…]`: every layer of a type the mechanism composes onto (an
 *   --init-from checkpoint's, or the preset's / --config's) becomes a NAME layer with those options
 *   over its defaults; the stored tensors load and the mechanism's own (its `isParameter`) are made
 *   fresh from --seed.
 * - `fon train --train-only NAME`: the mechanism's own tensors are trained, every other one frozen
 *   and saved as it was loaded.
 */
import { MECHANISMS, describeMechanism, type MechanismType } from '../attention/table.ts';
import type { MechanismComposition, MechanismSpec } from '../attention/mechanism.ts';
import { layerAttention, parseModelConfig, type ModelConfig } from '../model/config.ts';
import type { Decoder } from '../model/decoder.ts';
import { UsageError } from './args.ts';

/** The mechanisms that compose onto trained layers, by name. */
export const COMPOSABLE: readonly MechanismType[] = (Object.keys(MECHANISMS) as MechanismType[]).filter((t) => MECHANISMS[t].compose !== undefined);

const composition = (type: string): MechanismComposition => MECHANISMS[type as MechanismType].compose!;

/** `--add`'s value: the mechanism and the options it sets, by config key (ranges are its parse's to check). */
export interface AddSpec { type: MechanismType; options: Record<string, number | string> }

/**
 * `--add focus`, `--add focus:K=8,k=2` or `--add spot:rule=top-k,fraction=0.5`. A mechanism that
 * does not compose, an unknown or repeated short name, a missing `=` or a value that is not a
 * number (where the option takes one) is a UsageError naming it.
 */
export function parseAddFlag(value: string): AddSpec {
  const colon = value.indexOf(':');
  const what = colon < 0 ? value : value.slice(0, colon);
  if (!(COMPOSABLE as readonly string[]).includes(what)) {
    throw new UsageError(`train: --add ${JSON.stringify(value)}: cannot add ${JSON.stringify(what)}; --add takes ${COMPOSABLE.join(', ')} (e.g. --add focus or --add focus:K=8,k=2)`);
  }
  const type = what as MechanismType, c = composition(type);
  const options: Record<string, number | string> = {};
  if (colon < 0) return { type, options };
  const known = () => Object.entries(c.shortNames).map(([s, k]) => `${s} (${k}, default ${c.defaults[k]})`).join(', ');
  const seen = new Set<string>();
  for (const part of value.slice(colon + 1).split(',')) {
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq), raw = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (!Object.hasOwn(c.shortNames, name)) throw new UsageError(`train: --add ${value}: unknown ${c.label} option ${JSON.stringify(name)}; known: ${known()}`);
    if (eq < 0 || raw === '') throw new UsageError(`train: --add ${value}: option ${name} has no value; expected ${name}=VALUE`);
    if (seen.has(name)) throw new UsageError(`train: --add ${value}: option ${name} is given twice`);
    seen.add(name);
    const key = c.shortNames[name];
    if (c.words.includes(key)) { options[key] = raw; continue; }
    const n = Number(raw);
    if (!Number.isFinite(n)) throw new UsageError(`train: --add ${value}: ${name}=${raw}: expected a number`);
    options[key] = n;
  }
  return { type, options };
}

/** Whether `--add` of `type` turns a layer of this entry into one of its own. */
export const composesOnto = (type: MechanismType, a: MechanismSpec): boolean => composition(type).onto.includes(a.type);

/** The layers (indices) `--add` of `type` changes in a config. */
export const composedLayers = (type: MechanismType, cfg: ModelConfig): number[] =>
  Array.from({ length: cfg.nLayers }, (_, i) => i).filter((i) => composesOnto(type, layerAttention(cfg, i)));

/**
 * The config with every layer the mechanism composes onto replaced by its entry of `options` over
 * its defaults (other layers kept; a single entry for every layer stays one entry), validated as a
 * config is (an option out of range is the mechanism's ConfigError). No such layer: a UsageError.
 */
export function addComposedLayers(cfg: ModelConfig, add: AddSpec, flag: string): ModelConfig {
  const c = composition(add.type);
  if (!cfg.attention.some((a) => c.onto.includes(a.type))) {
    const labels = [...new Set(Array.from({ length: cfg.nLayers }, (_, i) => describeMechanism(layerAttention(cfg, i)).label))];
    throw new UsageError(`train: --add ${flag}: the model has no layer with ${c.onto.join(' or ')} attention (its layers: ${labels.join(', ')}); --add ${add.type} turns ${c.onto.join(' and ')}-attention layers into ${c.label} layers`);
  }
  const attention = cfg.attention.map((a) => (c.onto.includes(a.type) ? { type: add.type, ...add.options } : a));
  // positions kept as they were: a new attention list must not switch a RoPE model to NoPE.
  return parseModelConfig({ attention, positions: cfg.positions }, cfg, `train: --add ${flag}`);
}

/** Whether a parameter (its full name) belongs to some composed mechanism: what --add makes fresh where a checkpoint lacks it. */
export const isComposedParameter = (name: string): boolean => COMPOSABLE.some((t) => composition(t).isParameter(name));

/** `--train-only NAME`: one of the composable mechanisms; undefined when absent. */
export function trainOnlyFlag(value: string | undefined): MechanismType | undefined {
  if (value === undefined) return undefined;
  if (!(COMPOSABLE as readonly string[]).includes(value)) {
    throw new UsageError(`train: --train-only ${JSON.stringify(value)}: expected one of ${COMPOSABLE.map((t) => `${t} (train ${composition(t).trains}, freeze the rest)`).join(', ')}`);
  }
  return value as MechanismType;
}

/** The UsageError of --train-only NAME on a model without NAME layers. */
export function checkTrainOnly(trainOnly: string | undefined, cfg: ModelConfig): void {
  if (trainOnly !== undefined && !cfg.attention.some((a) => a.type === trainOnly)) {
    throw new UsageError(`train: --train-only ${trainOnly}: the model has no ${composition(trainOnly).label} layers (add them with --add ${trainOnly})`);
  }
}

/**
 * --train-only NAME: requiresGrad off on every parameter that is not the mechanism's, so the
 * Trainer's optimizer gets those only and the rest of the model is saved as it was loaded.
 * Returns the trained and the total scalar counts.
 */
export function freezeAllBut(type: string, model: Decoder): { trained: number; total: number } {
  const own = composition(type).isParameter;
  let trained = 0, total = 0;
  for (const [name, p] of model.namedParameters()) {
    if (!own(name)) p.requiresGrad = false;
    if (p.requiresGrad) trained += p.size;
    total += p.size;
  }
  return { trained, total };
}

/** What --train-only NAME trains and the mechanism's name in prose, for the log. */
export const composedWords = (type: string): { label: string; trains: string } => composition(type);
