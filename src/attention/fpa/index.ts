/**
 * The `fpa` mechanism: First Passage Attention (fpa/fpa.ts, specs/fpa_depth.md §2): its config
 * entry and options (walk, the Pro options, shared walk, eviction, stack decoding), its cache
 * layout (φ, ℓ and W per KV head and position, the decode state as a side state, and the token
 * shift's with `tokenShift`), what `fon info` prints and why `fon export` cannot write it.
 */
import { ConfigError } from '../../errors.ts';
import type { MechanismDef } from '../mechanism.ts';
import { boolOption, checkKeys, choiceOption, show } from '../options.ts';
import { tokenShiftOption, tokenShiftSide } from '../common/token_shift.ts';
import { FPA_WALKS, FpaAttention, fpaLabel, type FpaSpec, type FpaWalk } from './fpa.ts';

export { FPA_WALKS, type FpaSpec, type FpaWalk };
import { attachFpaDecodeState, DEFAULT_EVICT, DEFAULT_STACK, type FpaCompaction, type FpaEvict } from './fpa_decode.ts';

/** A compaction rule's fields ('every', 'deadFraction'), defaulted from `base`. */
function compaction(o: Record<string, unknown>, key: string, at: string, base: FpaCompaction): FpaCompaction {
  const e = { ...base, ...o } as Record<string, unknown>;
  if (!Number.isInteger(e.every) || (e.every as number) < 1) throw new ConfigError(`${at}: '${key}.every' = ${show(e.every)}: expected an integer ≥ 1`);
  if (typeof e.deadFraction !== 'number' || !(e.deadFraction > 0 && e.deadFraction <= 1)) throw new ConfigError(`${at}: '${key}.deadFraction' = ${show(e.deadFraction)}: expected a number in (0, 1]`);
  return { every: e.every as number, deadFraction: e.deadFraction };
}

/** 'evict': true (the defaults) or {"tau"?: number > 0, "every"?: int ≥ 1, "deadFraction"?: number in (0, 1]}. */
function evictOption(v: unknown, at: string): FpaEvict {
  if (v === true) return { ...DEFAULT_EVICT };
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${at}: 'evict' = ${show(v)}: expected true or an object {"tau"?: number > 0, "every"?: integer ≥ 1, "deadFraction"?: number in (0, 1]}`);
  const o = v as Record<string, unknown>;
  checkKeys(o, 'evict', at, ['tau', 'every', 'deadFraction']);
  const tau = o.tau ?? DEFAULT_EVICT.tau;
  if (typeof tau !== 'number' || !Number.isFinite(tau) || tau <= 0) throw new ConfigError(`${at}: 'evict.tau' = ${show(tau)}: expected a finite number > 0`);
  return { tau, ...compaction(o, 'evict', at, DEFAULT_EVICT) };
}

/** 'stack': true (the defaults) or {"every"?: int ≥ 1, "deadFraction"?: number in (0, 1]}, the compaction rule. */
function stackOption(v: unknown, at: string): FpaCompaction {
  if (v === true) return { ...DEFAULT_STACK };
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${at}: 'stack' = ${show(v)}: expected true or an object {"every"?: integer ≥ 1, "deadFraction"?: number in (0, 1]}`);
  const o = v as Record<string, unknown>;
  checkKeys(o, 'stack', at, ['every', 'deadFraction']);
  return compaction(o, 'stack', at, DEFAULT_STACK);
}

function parse(o: Record<string, unknown>, at: string): FpaSpec {
  const walk = choiceOption(o, 'walk', at, FPA_WALKS, 'fox');
  const shared = boolOption(o, 'shared', at);
  const evict = o.evict === undefined || o.evict === false ? undefined : evictOption(o.evict, at);
  const stack = o.stack === undefined || o.stack === false ? undefined : stackOption(o.stack, at);
  if (stack && !shared) throw new ConfigError(`${at}: 'stack' = ${show(o.stack)} needs 'shared': true (the stack holds the alive keys only when field and level are the walk itself); got 'shared' = ${show(o.shared ?? false)}`);
  if (stack && evict) throw new ConfigError(`${at}: 'stack' and 'evict' exclude each other (the stack drops every key whose penalty is positive, evict those past τ); keep one`);
  return {
    type: 'fpa', walk, outputGate: boolOption(o, 'outputGate', at), ...tokenShiftOption(o, at),
    ...(shared ? { shared } : {}), ...(evict ? { evict } : {}), ...(stack ? { stack } : {}),
  };
}

export const fpaMechanism: MechanismDef<FpaSpec> = {
  type: 'fpa',
  summary: 'First Passage Attention: a key is forgotten by the deepest dip of a learned walk below its level; optional dead-key eviction (no positions)',
  keys: ['walk', 'outputGate', 'tokenShift', 'evict', 'shared', 'stack'],
  parse,
  positions: 'none',
  cache: (spec, dims) => ({
    perPosition: { phi: dims.nKvHeads, level: dims.nKvHeads, walk: dims.nKvHeads },
    side: { ...tokenShiftSide(spec.tokenShift), fpa: (slot) => attachFpaDecodeState(slot, { ...(spec.evict ? { evict: spec.evict } : {}), ...(spec.stack ? { stack: spec.stack } : {}) }) },
  }),
  build: (spec, ctx) => new FpaAttention(spec, ctx),
  describe: (spec) => ({
    label: fpaLabel(spec),
    notes: [
      ...(spec.evict ? [`dead-key eviction τ=${spec.evict.tau} (compact every ${spec.evict.every} steps or at ${spec.evict.deadFraction} dead)`] : []),
      ...(spec.stack ? [`stack decoding (shared walk, hard limit; compact every ${spec.stack.every} steps or at ${spec.stack.deadFraction} dead)`] : []),
    ],
    facts: { ...(spec.evict ? { evict: spec.evict } : {}), ...(spec.stack ? { stack: spec.stack } : {}) },
  }),
  hfExport: () => ({ unsupported: '"fpa" layers (First Passage Attention) have no Hugging Face counterpart' }),
};
