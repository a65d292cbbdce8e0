/**
 * SpotAttention's selector keys in the KV cache (specs/focus_spot.md B2, B5): one d_I-wide key per
 * cached position (the selector's W_K x_t), a named side state of the layer's slot that follows the
 * cache protocol (attention/mechanism.ts CacheSideState): cached steps write positions in order,
 * `truncate` forgets positions from a length on (rejected drafts; rows past it are overwritten by
 * the next write, so the keys stay exact), `settle` has nothing to commit.
 *
 * Two forms:
 * - "f16": a (B, Tmax, d_I) f16 tensor on the cache's device, 2·d_I bytes a position;
 * - "int4": the INT4 microscale form of int4_keys.ts (groups of 32 along d_I, one f16 scale each),
 *   d_I/2 + d_I/16 bytes a position (72 for d_I = 128, 3.56× fewer), held on the host, so on the
 *   backends whose reads are synchronous (cpu, wasm); a read dequantizes the positions asked for.
 */
import { ArgumentError, UnsupportedError } from '../../errors.ts';
import { cast } from '../../ops/cast.ts';
import { tensor, zeros } from '../../ops/creation.ts';
import { kvWrite } from '../../ops/attention.ts';
import { narrow, reshape } from '../../ops/layout.ts';
import { keep } from '../../tensor/scope.ts';
import type { Backend } from '../../backend/backend.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import type { CacheSideState, LayerKv } from '../mechanism.ts';
import { dequantizeKeysInt4, int4KeyBytes, quantizeKeysInt4, INT4_GROUP } from './int4_keys.ts';

/** How selector keys are stored. */
export type SpotKeyFormat = 'f16' | 'int4';

/** Bytes one position's selector key takes in `format`. */
export const spotKeyBytes = (format: SpotKeyFormat, dim: number): number => (format === 'f16' ? 2 * dim : int4KeyBytes(dim));

export class SpotKeyCache implements CacheSideState {
  /** Positions held (the same for every batch entry). */
  length = 0;
  private readonly keys?: Tensor;
  private readonly codes?: Uint32Array[];
  private readonly scales?: Uint16Array[];

  constructor(readonly batch: number, readonly capacity: number, readonly dim: number, readonly format: SpotKeyFormat, private readonly backend: Backend) {
    if (format === 'f16') {
      this.keys = keep(zeros([batch, 1, capacity, dim], { backend, dtype: 'f16' }));
    } else {
      if (!backend.readSync) throw new UnsupportedError(`spot: INT4 selector keys are kept on the host and need a backend with synchronous reads (cpu, wasm); '${backend.name}' has none: use "keys": "f16"`);
      if (dim % INT4_GROUP !== 0) throw new ArgumentError(`spot: INT4 selector keys need a width that is a multiple of ${INT4_GROUP}; got ${dim}`);
      this.codes = Array.from({ length: batch }, () => new Uint32Array((capacity * dim) / 8));
      this.scales = Array.from({ length: batch }, () => new Uint16Array((capacity * dim) / INT4_GROUP));
    }
  }

  /** The state of a slot whose k is (B, Hkv, Tmax, D). */
  static forSlot(slot: LayerKv, dim: number, format: SpotKeyFormat): SpotKeyCache {
    return new SpotKeyCache(slot.k.shape[0], slot.k.shape[2], dim, format, slot.k.backend);
  }

  /** Writes keys (B, n, d_I) at positions pos … pos + n − 1; pos must be at most the length held. */
  write(pos: number, keys: Tensor): void {
    const [b, n, d] = keys.shape;
    if (b !== this.batch || d !== this.dim) throw new ArgumentError(`spot: selector keys (${keys.shape.join(', ')}) for a cache of (${this.batch}, ${this.capacity}, ${this.dim})`);
    if (pos > this.length) throw new ArgumentError(`spot: the selector keys hold ${this.length} positions; a step at ${pos} must follow them`);
    if (pos + n > this.capacity) throw new ArgumentError(`spot: positions up to ${pos + n - 1} pass the cache's ${this.capacity}`);
    if (this.keys) kvWrite(this.keys, reshape(cast(keys, 'f16'), [b, 1, n, d]), pos);
    else {
      const host = keys.dataSync() as Float32Array;
      for (let bb = 0; bb < b; bb++) {
        const q = quantizeKeysInt4(host.subarray(bb * n * d, (bb + 1) * n * d), d);
        this.codes![bb].set(q.codes, (pos * d) / 8);
        this.scales![bb].set(q.scales, (pos * d) / INT4_GROUP);
      }
    }
    this.length = pos + n;
  }

  /** The keys of positions 0 … length − 1, (B, length, d_I): f16 as stored, or the INT4 form dequantized to f32. */
  read(length: number): Tensor {
    if (length > this.length) throw new ArgumentError(`spot: ${length} selector keys asked for; the cache holds ${this.length}`);
    const d = this.dim;
    if (this.keys) return reshape(narrow(this.keys, 2, 0, length), [this.batch, length, d]);
    const out = new Float32Array(this.batch * length * d);
    for (let bb = 0; bb < this.batch; bb++) {
      const words = this.codes![bb].subarray(0, (length * d) / 8), scales = this.scales![bb].subarray(0, (length * d) / INT4_GROUP);
      out.set(dequantizeKeysInt4({ n: length, d, codes: words, scales }), bb * length * d);
    }
    return tensor(out, [this.batch, length, d], { backend: this.backend });
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
    this.keys?.dispose();
  }
}
