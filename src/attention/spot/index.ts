/**
 * The `spot` mechanism (spot/spot.ts, specs/focus_spot.md Part B): its config entry and options
 * (the selector's heads and width, the selector keys' form, the decoding rule and its number, the
 * distillation loss and K_train), its cache layout (contiguous k and v, the selector keys), what
 * `fon info` prints, why `fon export` does not write it (the selector has no Hugging Face
 * counterpart; the attention is the full attention of the checkpoint it was added to), and the
 * switch generate uses to pick the rule (`--spot-top-p`, `--spot-top-k`).
 */
import { ConfigError } from '../../errors.ts';
import type { AttentionMechanism, MechanismDef } from '../mechanism.ts';
import { choiceOption, fractionOption, intOption } from '../options.ts';
import { spotKeyBytes, SpotKeyCache } from './key_cache.ts';
import { checkSpotRule, type SpotRule } from './selection.ts';
import { SpotAttention, spotLabel, specRule, type SpotSpec } from './spot.ts';
import { INT4_GROUP } from './int4_keys.ts';

export { SpotAttention, type SpotSpec, type SpotRule };

/** B2's selector (4 × 128), B4's dual top-p 0.9, f16 keys, B3's SparseKL with K_train = L/2. */
export const SPOT_DEFAULTS: Omit<SpotSpec, 'type'> = { heads: 4, dim: 128, keys: 'f16', rule: 'top-p', p: 0.9, fraction: 0.5, loss: 'sparse', trainFraction: 0.5 };

function parse(o: Record<string, unknown>, at: string): SpotSpec {
  const d = SPOT_DEFAULTS;
  const keys = choiceOption(o, 'keys', at, ['f16', 'int4'] as const, d.keys);
  const dim = intOption(o, 'dim', at, 1, d.dim);
  if (keys === 'int4' && dim % INT4_GROUP !== 0) throw new ConfigError(`${at}: 'dim' = ${dim}: INT4 selector keys need a multiple of ${INT4_GROUP}`);
  return {
    type: 'spot', heads: intOption(o, 'heads', at, 1, d.heads), dim, keys,
    rule: choiceOption(o, 'rule', at, ['top-p', 'top-k'] as const, d.rule), p: fractionOption(o, 'p', at, d.p), fraction: fractionOption(o, 'fraction', at, d.fraction),
    loss: choiceOption(o, 'loss', at, ['sparse', 'dense'] as const, d.loss), trainFraction: fractionOption(o, 'trainFraction', at, d.trainFraction),
  };
}

/** Parameters a Spot layer adds to a model of width dModel: W_Q (H_I·d_I × C), W_K (d_I × C), W_w (H_I × C). */
export const spotParameterCount = (s: SpotSpec, dModel: number): number => dModel * (s.heads * s.dim + s.dim + s.heads);

export const spotMechanism: MechanismDef<SpotSpec> = {
  type: 'spot',
  summary: 'SpotAttention: full causal attention whose decoding reads only the 16-token key blocks a KL-distilled selector picks (dual top-p or static top-K)',
  keys: ['heads', 'dim', 'keys', 'rule', 'p', 'fraction', 'loss', 'trainFraction'],
  parse,
  cache: (spec) => ({ perPosition: {}, side: { spot: (slot) => SpotKeyCache.forSlot(slot, spec.dim, spec.keys) } }),
  build: (spec, ctx) => new SpotAttention(spec, ctx),
  describe: (spec) => ({
    label: spotLabel(spec),
    notes: [`selector: ${spec.heads} index heads × ${spec.dim}, 16-token blocks; keys ${spec.keys} (${spotKeyBytes(spec.keys, spec.dim)} bytes a token); decoding ${spec.rule === 'top-p' ? `dual top-p ${spec.p}` : `static top-K ${spec.fraction}`} (sink 128, recency 256 tokens reserved); trained by ${spec.loss === 'sparse' ? `SparseKL (K_train = ${spec.trainFraction}·T)` : 'DenseKL'}`],
    facts: { heads: spec.heads, dim: spec.dim, keys: spec.keys, keyBytesPerToken: spotKeyBytes(spec.keys, spec.dim), rule: spec.rule, p: spec.p, fraction: spec.fraction, loss: spec.loss, trainFraction: spec.trainFraction },
  }),
  hfExport: () => ({ unsupported: '"spot" layers carry a selector that Hugging Face formats have no place for (their attention is full: export the checkpoint the selectors were added to)' }),
  compose: {
    onto: ['full'],
    shortNames: { heads: 'heads', dim: 'dim', keys: 'keys', rule: 'rule', p: 'p', fraction: 'fraction', loss: 'loss', ktrain: 'trainFraction' },
    words: ['keys', 'rule', 'loss'],
    isParameter: (name) => name.includes('.attn.spot.'),
    label: 'Spot',
    trains: 'selectors (W_Q, W_K, W_w)',
    defaults: SPOT_DEFAULTS,
  },
};

/** A model's Spot layers, by layer index. */
export function spotLayers(model: { layers: readonly { attn: { mechanism: AttentionMechanism } }[] }): [number, SpotAttention][] {
  return model.layers.flatMap((l, i) => (l.attn.mechanism instanceof SpotAttention ? [[i, l.attn.mechanism] as [number, SpotAttention]] : []));
}

/** Sets the decoding rule of every Spot layer (eval and generate: --spot-top-p p, --spot-top-k ρ); undefined: each layer's config rule. */
export function setSpotInference(model: { layers: readonly { attn: { mechanism: AttentionMechanism } }[] }, rule?: SpotRule): void {
  if (rule) checkSpotRule(rule);
  for (const [, s] of spotLayers(model)) s.setRule(rule ?? specRule(s.spec));
}
