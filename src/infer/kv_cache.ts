/**
 * The KV cache of one generation: per layer k and v (B, Hkv, Tmax, D), plus the per-position
 * state the layer's mechanism keeps (attention/registry.ts mechanismCacheState: FoX's c, FPA's
 * φ, ℓ and walk, each f32 (B, heads, Tmax, 1)), allocated once when the sequence starts and
 * written in place (ops/attention.ts kvWrite), never re-allocated per token. `length` is the
 * number of positions already written.
 */
import type { LayerKv } from '../attention/mechanism.ts';
import { mechanismCacheState } from '../attention/registry.ts';
import type { Backend } from '../backend/backend.ts';
import { ArgumentError } from '../errors.ts';
import { zeros } from '../ops/creation.ts';
import { layerAttention, type ModelConfig } from '../model/config.ts';
import { keep } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';

export class KvCache {
  readonly layers: LayerKv[];
  /** Positions written so far. */
  length = 0;

  constructor(readonly config: ModelConfig, readonly batch: number, readonly maxLength: number, backend: Backend, readonly dtype: FloatDType = 'f32') {
    if (!Number.isInteger(maxLength) || maxLength < 1 || maxLength > config.contextLength) {
      throw new ArgumentError(`KvCache: maxLength ${maxLength} must be an integer in [1, ${config.contextLength}] (the model's context length)`);
    }
    const shape = [batch, config.nKvHeads, maxLength, config.headDim];
    this.layers = Array.from({ length: config.nLayers }, (_, i) => {
      const layout = Object.entries(mechanismCacheState(layerAttention(config, i), config));
      const slot: LayerKv = { k: keep(zeros(shape, { backend, dtype })), v: keep(zeros(shape, { backend, dtype })) };
      if (layout.length) slot.state = Object.fromEntries(layout.map(([name, heads]) => [name, keep(zeros([batch, heads, maxLength, 1], { backend, dtype: 'f32' }))]));
      return slot;
    });
  }

  /** Bytes held by the cache on its device. */
  get bytes(): number {
    const per = this.dtype === 'f32' ? 4 : 2;
    let n = 0;
    for (const l of this.layers) {
      n += (l.k.size + l.v.size) * per;
      for (const s of Object.values(l.state ?? {})) n += s.size * 4;
    }
    return n;
  }

  dispose(): void {
    for (const l of this.layers) {
      l.k.dispose();
      l.v.dispose();
      for (const s of Object.values(l.state ?? {})) s.dispose();
    }
  }
}
