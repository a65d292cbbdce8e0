/**
 * The mechanisms, one line each (DESIGN.md: a mechanism is one self-describing unit). Config
 * (model/config.ts), the cache (infer/kv_cache.ts), `fon info` and `fon export` read this table;
 * nothing else names a mechanism. Adding one: a folder under attention/ exporting its
 * MechanismDef, and its line here. `satisfies` checks each entry against MechanismDef under its
 * own key, so an entry missing a member, or filed under another name, fails to compile.
 */
import { ConfigError } from '../errors.ts';
import type { AttentionMechanism, CacheLayout, MechanismContext, MechanismDef, MechanismInfo, MechanismSpec, ModelDims, HfAttentionKind } from './mechanism.ts';
import { show } from './options.ts';
import { fullMechanism } from './full/index.ts';
import { localMechanism } from './local/index.ts';
import { foxMechanism } from './fox/index.ts';
import { fpaMechanism } from './fpa/index.ts';
import { focusMechanism } from './focus/index.ts';
import { spotMechanism } from './spot/index.ts';
import { lighthouseMechanism } from './lighthouse/index.ts';

export const MECHANISMS = {
  full: fullMechanism,
  local: localMechanism,
  fox: foxMechanism,
  fpa: fpaMechanism,
  focus: focusMechanism,
  spot: spotMechanism,
  lighthouse: lighthouseMechanism,
} as const satisfies { [K in string]: MechanismDef<MechanismSpec & { type: K }> };

export type MechanismType = keyof typeof MECHANISMS;

/** The config entry of one layer's sequence mixing: one of the mechanisms' specs. */
export type LayerAttention = { [K in MechanismType]: Parameters<(typeof MECHANISMS)[K]['build']>[0] }[MechanismType];

/** The def of `spec`'s mechanism, typed for it. */
function defOf(spec: LayerAttention): MechanismDef<LayerAttention> {
  return MECHANISMS[spec.type] as unknown as MechanismDef<LayerAttention>;
}

/** One attention entry from its JSON form (an object, or a bare type name): type and keys checked, then the mechanism's own parse. */
export function parseLayerAttention(a: unknown, at: string): LayerAttention {
  if (typeof a === 'string') a = { type: a };
  if (a === null || typeof a !== 'object' || Array.isArray(a)) throw new ConfigError(`${at} = ${show(a)}: expected an object like {"type": "full"} or {"type": "local", "window": 128}`);
  const o = a as Record<string, unknown>;
  if (typeof o.type !== 'string' || !Object.hasOwn(MECHANISMS, o.type)) {
    throw new ConfigError(`${at}: 'type' = ${show(o.type)}: expected one of ${Object.keys(MECHANISMS).map(show).join(', ')}`);
  }
  const def = MECHANISMS[o.type as MechanismType] as unknown as MechanismDef<LayerAttention>;
  for (const k of Object.keys(o)) {
    if (k !== 'type' && !def.keys.includes(k)) throw new ConfigError(`${at}: unknown key '${k}' for attention type ${show(o.type)}${def.keys.length ? `; expected ${def.keys.join(', ')}` : ''}`);
  }
  return def.parse(o, at);
}

/** Builds the layer of `spec`; its parameters go through ctx.f under ctx.name. */
export const buildMechanism = (spec: LayerAttention, ctx: MechanismContext): AttentionMechanism => defOf(spec).build(spec, ctx);

/** The cache layout of a layer with entry `spec`. */
export const mechanismCache = (spec: LayerAttention, dims: ModelDims): CacheLayout => defOf(spec).cache(spec, dims);

/** What `fon info` shows of a layer with entry `spec`. */
export const describeMechanism = (spec: LayerAttention): MechanismInfo => defOf(spec).describe(spec);

/** The Hugging Face attention of a layer with entry `spec`, or why none computes it. */
export const mechanismHfExport = (spec: LayerAttention): HfAttentionKind | { unsupported: string } => defOf(spec).hfExport(spec);

/** Whether some layer's mechanism runs without positional encoding by design (FoX, FPA). */
export const wantsNoPE = (attention: readonly LayerAttention[]): boolean => attention.some((a) => defOf(a).positions === 'none');
