/**
 * Dynamic loss scaling for f16 training (Micikevicius et al., "Mixed Precision Training", 2018, and
 * PyTorch's GradScaler): the loss is multiplied by `scale` before the backward pass so that small
 * gradients survive f16's range; a step whose gradients overflowed (a non-finite norm) is skipped
 * and the scale halved; after `interval` finite steps in a row the scale doubles. The state (scale,
 * finite steps since the last change) is saved with the trainer so that a resumed run scales as the
 * uninterrupted one.
 */
import { ConfigError, showValue } from '../errors.ts';

export interface LossScaleState { scale: number; goodSteps: number }

export const LOSS_SCALE_INIT: LossScaleState = { scale: 2 ** 16, goodSteps: 0 };

export class DynamicLossScale {
  scale: number;
  goodSteps: number;

  constructor(state: LossScaleState = LOSS_SCALE_INIT, readonly interval = 2000, readonly min = 1, readonly max = 2 ** 24) {
    this.scale = state.scale;
    this.goodSteps = state.goodSteps;
  }

  /** After a step: `finite` says whether its gradients were all finite (then it was taken). */
  update(finite: boolean): void {
    if (!finite) {
      this.scale = Math.max(this.min, this.scale / 2);
      this.goodSteps = 0;
      return;
    }
    if (++this.goodSteps >= this.interval) {
      this.scale = Math.min(this.max, this.scale * 2);
      this.goodSteps = 0;
    }
  }

  state(): LossScaleState {
    return { scale: this.scale, goodSteps: this.goodSteps };
  }
}

/** A saved LossScaleState, checked (a ConfigError naming `where` and the bad field). */
export function parseLossScale(value: unknown, where: string): LossScaleState {
  const o = (typeof value === 'object' && value !== null && !Array.isArray(value) ? value : null) as Record<string, unknown> | null;
  if (!o) throw new ConfigError(`${where}: expected {"scale", "goodSteps"}, got ${showValue(value)}`);
  for (const k of Object.keys(o)) if (k !== 'scale' && k !== 'goodSteps') throw new ConfigError(`${where}: unknown key '${k.slice(0, 80)}'; expected scale, goodSteps`);
  const { scale, goodSteps } = o;
  if (typeof scale !== 'number' || !(scale >= 1) || !Number.isFinite(scale)) throw new ConfigError(`${where}: 'scale' = ${showValue(scale)}: expected a finite number ≥ 1`);
  if (typeof goodSteps !== 'number' || !Number.isInteger(goodSteps) || goodSteps < 0) throw new ConfigError(`${where}: 'goodSteps' = ${showValue(goodSteps)}: expected an integer ≥ 0`);
  return { scale, goodSteps };
}
