/** Learning-rate schedules: a function from the step (0-based) to the learning rate. */
import { ArgumentError } from '../errors.ts';

export type Schedule = (step: number) => number;

export function constant(lr: number): Schedule {
  return () => lr;
}

/**
 * Linear warm-up from 0 to `lr` over `warmup` steps, then cosine decay to `minLr` at
 * `total` steps, and `minLr` after (nanoGPT's schedule).
 */
export function warmupCosine(lr: number, warmup: number, total: number, minLr = lr / 10): Schedule {
  if (!(total > 0) || warmup < 0 || warmup > total) throw new ArgumentError(`warmupCosine: need 0 ≤ warmup (${warmup}) ≤ total (${total}) and total > 0`);
  return (step) => {
    if (step < warmup) return (lr * (step + 1)) / warmup;
    if (step >= total) return minLr;
    const p = (step - warmup) / Math.max(1, total - warmup);
    return minLr + 0.5 * (1 + Math.cos(Math.PI * p)) * (lr - minLr);
  };
}
