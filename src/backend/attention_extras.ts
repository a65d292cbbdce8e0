/**
 * What every backend's attention entry checks of its extras before it picks a kernel: a score
 * modifier (FoX, FPA) comes with causal attention and no window, and not (yet) with a block mask —
 * no backend's FoX or FPA kernels read masks, so the pair is refused by name rather than run unmasked.
 */
import { ArgumentError, UnsupportedError } from '../errors.ts';
import type { AttentionArgs, AttentionExtras } from './backend.ts';

export function checkAttentionExtras<H>(backend: string, a: AttentionArgs, extras: AttentionExtras<H> | undefined): void {
  // A mask is its table (extras.mask) and its shape (args.mask), always both.
  if (!!a.mask !== !!extras?.mask) throw new ArgumentError(`${backend}: a block mask needs its table and its shape together; got ${a.mask ? 'the shape (args.mask) without the table' : 'the table without its shape (args.mask)'}`);
  const m = extras?.modifier;
  if (!m) return;
  if (!a.causal || a.window !== 0) throw new UnsupportedError(`${backend}: the ${m.kind} score modifier takes causal attention without a window, got causal ${a.causal}, window ${a.window}`);
  if (extras.mask || a.mask) throw new UnsupportedError(`${backend}: block masks with the ${m.kind} score modifier are not implemented (the ${m.kind} kernels do not read masks)`);
}
