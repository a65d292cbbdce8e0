/**
 * The `focus` mechanism (focus/focus.ts, specs/focus_spot.md Part A): its config entry and options
 * (K groups, k memberships at inference, d_g, the window w, τ, Sinkhorn's N, the training gate and
 * its λ and β), its cache layout (contiguous k and v, the membership one-hot per position, the
 * group lists), what `fon info` prints, why `fon export` cannot write it, and the switch that eval
 * and generate use to pick the inference k (`--focus-top-k`).
 */
import { ConfigError } from '../../errors.ts';
import type { AttentionMechanism, MechanismDef, MechanismSpec } from '../mechanism.ts';
import { choiceOption, intOption, numberOption } from '../options.ts';
import { FocusAttention, focusLabel, type FocusSpec } from './focus.ts';
import { FocusGroupLists } from './group_lists.ts';

export { FocusAttention, type FocusSpec };

/** The defaults of specs/focus_spot.md A2 (K = 8, d_g = 16, w = 128, τ = 0.1, N = 10); k = 2, the paper's quality-preserving retrofit; λ = 10, β = 0.5 (A3's proposal). */
export const FOCUS_DEFAULTS: Omit<FocusSpec, 'type'> = { groups: 8, topK: 2, groupDim: 16, window: 128, tau: 0.1, sinkhornIters: 10, gate: 'mask', lambda: 10, beta: 0.5 };

/** The most groups: membership is a 32-bit word per token. */
export const FOCUS_MAX_GROUPS = 32;

function parse(o: Record<string, unknown>, at: string): FocusSpec {
  const d = FOCUS_DEFAULTS;
  const groups = intOption(o, 'groups', at, 1, d.groups);
  if (groups > FOCUS_MAX_GROUPS) throw new ConfigError(`${at}: 'groups' = ${groups}: expected at most ${FOCUS_MAX_GROUPS} (a token's groups are one 32-bit word)`);
  const topK = intOption(o, 'topK', at, 1, Math.min(d.topK, groups));
  if (topK > groups) throw new ConfigError(`${at}: 'topK' = ${topK}: expected k in [1, K = ${groups}]`);
  return {
    type: 'focus', groups, topK, groupDim: intOption(o, 'groupDim', at, 1, d.groupDim), window: intOption(o, 'window', at, 0, d.window),
    tau: numberOption(o, 'tau', at, d.tau, true), sinkhornIters: intOption(o, 'sinkhornIters', at, 0, d.sinkhornIters),
    gate: choiceOption(o, 'gate', at, ['literal', 'mask'] as const, d.gate), lambda: numberOption(o, 'lambda', at, d.lambda, true), beta: numberOption(o, 'beta', at, d.beta, false),
  };
}

/** Parameters a Focus layer adds to a model of width dModel: W_g (d_g × C) and C (K × d_g); the log-normalizers (K) are not trained. */
export const focusParameterCount = (s: FocusSpec, dModel: number): number => s.groupDim * dModel + s.groups * s.groupDim;

export const focusMechanism: MechanismDef<FocusSpec> = {
  type: 'focus',
  summary: 'Focus: learned centroid groups; a query sees its last w keys and, beyond them, keys that share one of its k groups (exact sparse at inference)',
  keys: ['groups', 'topK', 'groupDim', 'window', 'tau', 'sinkhornIters', 'gate', 'lambda', 'beta'],
  parse,
  cache: (spec) => ({ perPosition: { member: spec.groups }, side: { focus: (slot) => FocusGroupLists.forSlot(slot, spec.groups) } }),
  build: (spec, ctx) => new FocusAttention(spec, ctx),
  describe: (spec) => ({
    label: focusLabel(spec),
    notes: [`groups: K=${spec.groups}, k=${spec.topK} at inference, d_g=${spec.groupDim}, τ=${spec.tau}, Sinkhorn N=${spec.sinkhornIters}; training gate "${spec.gate}" (λ=${spec.lambda}${spec.gate === 'mask' ? `, β=${spec.beta}` : ''})`],
    facts: { groups: spec.groups, topK: spec.topK, groupDim: spec.groupDim, window: spec.window, tau: spec.tau, sinkhornIters: spec.sinkhornIters, gate: spec.gate, lambda: spec.lambda, beta: spec.beta },
  }),
  hfExport: () => ({ unsupported: '"focus" layers (learned-centroid sparse attention) have no Hugging Face counterpart' }),
  compose: {
    onto: ['full'],
    shortNames: { K: 'groups', k: 'topK', dg: 'groupDim', w: 'window', tau: 'tau', N: 'sinkhornIters', gate: 'gate', lambda: 'lambda', beta: 'beta' },
    words: ['gate'],
    isParameter: (name) => name.includes('.attn.focus.'),
    label: 'Focus',
    trains: 'W_g and C',
    defaults: FOCUS_DEFAULTS,
  },
};

/** Whether a layer entry is a Focus layer. */
export const isFocusSpec = (a: MechanismSpec): a is FocusSpec => a.type === 'focus';

/** A model's Focus layers, by layer index (the mechanisms of model.layers[i].attn). */
export function focusLayers(model: { layers: readonly { attn: { mechanism: AttentionMechanism } }[] }): [number, FocusAttention][] {
  return model.layers.flatMap((l, i) => (l.attn.mechanism instanceof FocusAttention ? [[i, l.attn.mechanism] as [number, FocusAttention]] : []));
}

/**
 * Sets the inference mode and k of every Focus layer (eval and generate: `--focus-top-k k`):
 * k in [1, K] of each layer, refused naming the layer otherwise. `mode` forces soft or hard.
 */
export function setFocusInference(model: { layers: readonly { attn: { mechanism: AttentionMechanism } }[] }, o: { topK?: number; mode?: 'soft' | 'hard' }): void {
  const layers = focusLayers(model);
  for (const [i, f] of layers) {
    if (o.topK !== undefined && (!Number.isInteger(o.topK) || o.topK < 1 || o.topK > f.spec.groups)) {
      throw new ConfigError(`focus top-k ${o.topK}: layer ${i} has K = ${f.spec.groups} groups; expected k in [1, ${f.spec.groups}]`);
    }
  }
  for (const [, f] of layers) f.override = { ...f.override, ...o };
}
