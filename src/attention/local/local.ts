/**
 * Local (sliding-window) causal attention: a query at position p sees keys p − window + 1 … p.
 * Same kernels as full attention with the window bound; the kernels skip key blocks wholly
 * outside the window, so the cost per query is O(window). The cache keeps every position (a
 * ring buffer of `window` rows would bound it; left for when a mechanism needs it).
 */
import { FullAttention } from '../full/full.ts';

export class LocalAttention extends FullAttention {
  override readonly name: string;
  override readonly window: number;

  constructor(window: number) {
    super();
    this.window = window;
    this.name = `local(window=${window})`;
  }
}
