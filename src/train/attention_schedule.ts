/**
 * An attention schedule (`fon train --attention-schedule lighthouse:0.8,full`): the layers whose
 * mechanism is the target (here `full`) run Lighthouse Attention (attention/lighthouse) for the
 * first fraction of the training steps, then their own mechanism — the recovery phase of
 * specs/lighthouse_fon.md §1.13. Lighthouse has no parameters, so the model's parameters, and the
 * optimizer's state over them, are the same in both phases: the switch changes only which mechanism
 * a layer's AttentionBlock runs (its `standIn`). A target with parameters of its own (Focus, FPA)
 * keeps them idle, untouched by the optimizer (no gradient reaches them), until the switch; the
 * recovery into a sparse target is a model whose layers are that target (`--config`, or `--add
 * focus`) with this schedule. The phase follows from the step, so a run resumed on either side of
 * the switch continues as the uninterrupted one.
 *
 * Grammar: STANDIN:F,TARGET[:G] with STANDIN `lighthouse`, F in (0, 1) and, where given, G = 1 − F
 * (the phases' fractions add up to 1); the Lighthouse options come from the mechanism's own config
 * entry (`--lighthouse levels=3,pool=4,topk=1536`).
 */
import { ArgumentError } from '../errors.ts';
import { LighthouseAttention } from '../attention/lighthouse/lighthouse.ts';
import type { LighthouseSpec } from '../attention/lighthouse/index.ts';
import { MECHANISMS, type MechanismType } from '../attention/table.ts';
import { layerAttention } from '../model/config.ts';
import type { Decoder } from '../model/decoder.ts';

/** A parsed schedule: Lighthouse stands in for the target's layers during the first `fraction` of the steps. */
export interface AttentionSchedule { fraction: number; target: MechanismType; lighthouse: LighthouseSpec }

const EXAMPLE = 'expected STANDIN:FRACTION,TARGET such as lighthouse:0.8,full';

/** The schedule `text` with the Lighthouse entry `lighthouse`; errors (ArgumentError) name the part and what was expected. */
export function parseAttentionSchedule(text: string, lighthouse: LighthouseSpec, what = '--attention-schedule'): AttentionSchedule {
  const parts = text.split(',');
  if (parts.length !== 2) throw new ArgumentError(`${what} ${JSON.stringify(text)}: ${EXAMPLE} (two phases)`);
  const [standIn, f] = parts[0].split(':');
  if (!Object.hasOwn(MECHANISMS, standIn)) throw new ArgumentError(`${what} ${JSON.stringify(text)}: unknown mechanism ${JSON.stringify(standIn)}; the first phase takes lighthouse`);
  if (standIn !== 'lighthouse') throw new ArgumentError(`${what} ${JSON.stringify(text)}: ${JSON.stringify(standIn)} cannot stand in for a phase; the first phase takes lighthouse (the training-only mechanism)`);
  const fraction = Number(f);
  if (f === undefined || f.trim() === '' || !Number.isFinite(fraction) || fraction <= 0 || fraction >= 1) {
    throw new ArgumentError(`${what} ${JSON.stringify(text)}: the first phase's fraction ${JSON.stringify(f ?? '')}: expected a number in (0, 1) (the target takes the rest)`);
  }
  const [target, g, ...extra] = parts[1].split(':');
  if (extra.length || !Object.hasOwn(MECHANISMS, target)) {
    throw new ArgumentError(`${what} ${JSON.stringify(text)}: unknown target ${JSON.stringify(parts[1])}; expected one of ${Object.keys(MECHANISMS).filter((m) => m !== 'lighthouse').join(', ')}`);
  }
  if (target === 'lighthouse') throw new ArgumentError(`${what} ${JSON.stringify(text)}: the target must be another mechanism than lighthouse (the one the layers recover into)`);
  if (g !== undefined) {
    const rest = Number(g);
    if (!Number.isFinite(rest) || Math.abs(fraction + rest - 1) > 1e-9) throw new ArgumentError(`${what} ${JSON.stringify(text)}: the fractions ${f} + ${g} = ${fraction + rest}: expected them to add up to 1`);
  }
  return { fraction, target: target as MechanismType, lighthouse };
}

/** The step after which the layers switch to their own mechanism: round(F · steps), at least 1 and below `steps`. */
export function switchStep(s: AttentionSchedule, steps: number): number {
  return Math.min(Math.max(1, Math.round(s.fraction * steps)), Math.max(1, steps - 1));
}

/** The layers (indices) of `model` whose mechanism is the schedule's target; an ArgumentError when there are none. */
export function scheduledLayers(s: AttentionSchedule, model: Decoder): number[] {
  const layers = model.layers.map((_, i) => i).filter((i) => layerAttention(model.config, i).type === s.target);
  if (!layers.length) {
    const types = [...new Set(model.layers.map((_, i) => layerAttention(model.config, i).type))].join(', ');
    throw new ArgumentError(`--attention-schedule: the model has no ${s.target} layers to recover into (its layers are ${types})`);
  }
  return layers;
}

/** Puts the schedule's phase for `step` (completed steps) on `model`: Lighthouse on its layers before the switch, their own mechanism from it on. */
export function applyPhase(s: AttentionSchedule, model: Decoder, step: number, steps: number): 'lighthouse' | 'target' {
  const first = step < switchStep(s, steps);
  for (const i of scheduledLayers(s, model)) model.layers[i].attn.standIn = first ? new LighthouseAttention(s.lighthouse) : null;
  return first ? 'lighthouse' : 'target';
}
