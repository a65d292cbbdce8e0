/** A contiguous part of a token store, itself a store (a held-out tail for validation). */
import { ArgumentError } from '../../errors.ts';
import type { TokenStore } from './token_store.ts';

export class TokenSlice implements TokenStore {
  constructor(private readonly base: TokenStore, private readonly start: number, readonly length: number) {
    if (!Number.isInteger(start) || !Number.isInteger(length) || start < 0 || length < 0 || start + length > base.length) {
      throw new ArgumentError(`TokenSlice: [${start}, ${start + length}) is not inside the store's ${base.length} ids`);
    }
  }

  read(start: number, n: number): Int32Array {
    if (!Number.isInteger(start) || !Number.isInteger(n) || start < 0 || n < 0 || start + n > this.length) {
      throw new ArgumentError(`TokenSlice.read(${start}, ${n}): expected whole numbers with 0 ≤ start and start + n ≤ length (${this.length})`);
    }
    return this.base.read(this.start + start, n);
  }

  /** The base store is closed by its owner. */
  close(): void {}
}
