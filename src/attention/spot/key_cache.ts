/**
 * SpotAttention's selector keys in the KV cache (specs/focus_spot.md B2, B5): one d_I-wide key per
 * cached position (the selector's W_K x_t), a named side state of the layer's slot that follows the
 * cache protocol (attention/mechanism.ts CacheSideState): cached steps write positions in order,
 * `truncate` forgets positions from a length on (rejected drafts; rows past it are overwritten by
 * the next write, so the keys stay exact), `settle` has nothing to commit.
 *
 * Two forms, both tensors on the cache's device:
 * - "f16": (B, Tmax, d_I) f16, 2·d_I bytes a position, read as stored;
 * - "int4": INT4 microscale codes (ops/int4.ts: groups of 32 along d_I, one f16 scale each), codes
 *   (B, Tmax, d_I/8) i32 and scales (B, Tmax, d_I/32) f16: d_I/2 + d_I/16 bytes a position (72 for
 *   d_I = 128, 3.56× fewer). A write quantizes the new keys; a step's block scores read the codes
 *   as stored (Backend.indexBlockScores with scales: 3.56× fewer bytes than f16 keys, no dequantized
 *   copy); `read` dequantizes the positions asked for into f16.
 */
import { ArgumentError } from '../../errors.ts';
import { cast } from '../../ops/cast.ts';
import { zeros } from '../../ops/creation.ts';
import { kvWriteMany } from '../../ops/attention.ts';
import { dequantizeInt4, quantizeInt4 } from '../../ops/int4.ts';
import { narrow, reshape } from '../../ops/layout.ts';
import { keep } from '../../tensor/scope.ts';
import type { Backend } from '../../backend/backend.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CacheSideState, LayerKv } from '../mechanism.ts';
import { int4KeyBytes, INT4_GROUP } from './int4_keys.ts';

/** How selector keys are stored. */
export type SpotKeyFormat = 'f16' | 'int4';

/** Bytes one position's selector key takes in `format`. */
export const spotKeyBytes = (format: SpotKeyFormat, dim: number): number => (format === 'f16' ? 2 * dim : int4KeyBytes(dim));

export class SpotKeyCache implements CacheSideState {
  /** Positions held (the same for every batch entry). */
  length = 0;
  /** f16: the keys (B, 1, Tmax, d_I); int4: the codes (B, 1, Tmax, d_I/8) and scales (B, 1, Tmax, d_I/32). */
  private readonly parts: Tensor[];

  constructor(readonly batch: number, readonly capacity: number, readonly dim: number, readonly format: SpotKeyFormat, backend: Backend) {
    if (format === 'int4' && dim % INT4_GROUP !== 0) throw new ArgumentError(`spot: INT4 selector keys need a width that is a multiple of ${INT4_GROUP}; got ${dim}`);
    this.parts = format === 'f16'
      ? [keep(zeros([batch, 1, capacity, dim], { backend, dtype: 'f16' }))]
      : [keep(zeros([batch, 1, capacity, dim / 8], { backend, dtype: 'i32' })), keep(zeros([batch, 1, capacity, dim / INT4_GROUP], { backend, dtype: 'f16' }))];
  }

  /** The state of a slot whose k is (B, Hkv, Tmax, D). */
  static forSlot(slot: LayerKv, dim: number, format: SpotKeyFormat): SpotKeyCache {
    return new SpotKeyCache(slot.k.shape[0], slot.k.shape[2], dim, format, slot.k.backend);
  }

  /** Writes keys (B, n, d_I) at positions pos … pos + n − 1; pos must be at most the length held. */
  write(pos: number, keys: Tensor): void {
    kvWriteMany(this.writes(pos, keys), pos);
  }

  /**
   * What `write` writes, as (cache part, rows) pairs for ops/attention.ts kvWriteMany, counted as
   * written: a decoding step writes them in one call with its K and V.
   */
  writes(pos: number, keys: Tensor): [Tensor, Tensor][] {
    const [b, n, d] = keys.shape;
    if (b !== this.batch || d !== this.dim) throw new ArgumentError(`spot: selector keys (${keys.shape.join(', ')}) for a cache of (${this.batch}, ${this.capacity}, ${this.dim})`);
    if (pos > this.length) throw new ArgumentError(`spot: the selector keys hold ${this.length} positions; a step at ${pos} must follow them`);
    if (pos + n > this.capacity) throw new ArgumentError(`spot: positions up to ${pos + n - 1} pass the cache's ${this.capacity}`);
    const rows = (x: Tensor) => reshape(x, [b, 1, n, x.shape[2]]);
    this.length = pos + n;
    if (this.format === 'f16') return [[this.parts[0], rows(cast(keys, 'f16'))]];
    const q = quantizeInt4(keys);
    return [[this.parts[0], rows(q.codes)], [this.parts[1], rows(q.scales)]];
  }

  /** The keys of positions 0 … length − 1, (B, length, d_I) f16 (the INT4 form dequantized). */
  read(length: number): Tensor {
    if (length > this.length) throw new ArgumentError(`spot: ${length} selector keys asked for; the cache holds ${this.length}`);
    const [first, second] = this.parts.map((p) => reshape(narrow(p, 2, 0, length), [this.batch, length, p.shape[3]]));
    return this.format === 'f16' ? first : dequantizeInt4(first, second, 'f16');
  }

  /**
   * The keys of positions 0 … length − 1 for Backend.indexBlockScores (ops/select.ts), without a
   * copy: the whole store, of which the first `length` rows are read; f16, the keys (B, Tmax, d_I);
   * INT4, the codes (B, Tmax, d_I/8) as `keys` and the scales (B, Tmax, d_I/32).
   */
  scoring(length: number): { keys: Tensor; scales?: Tensor } {
    if (length > this.length) throw new ArgumentError(`spot: ${length} selector keys asked for; the cache holds ${this.length}`);
    const whole = (p: Tensor) => reshape(p, [this.batch, this.capacity, p.shape[3]]);
    return this.format === 'f16' ? { keys: whole(this.parts[0]) } : { keys: whole(this.parts[0]), scales: whole(this.parts[1]) };
  }

  truncate(length: number): void {
    if (!Number.isInteger(length) || length < 0) throw new ArgumentError(`spot: truncate to ${length}: expected an integer ≥ 0`);
    this.length = Math.min(this.length, length);
  }

  async settle(): Promise<void> {}

  get bytes(): number {
    return this.batch * this.capacity * spotKeyBytes(this.format, this.dim);
  }

  dispose(): void {
    for (const p of this.parts) p.dispose();
  }
}
