/**
 * The KV cache of one generation: per layer k and v (B, Hkv, Tmax, D), plus the per-position
 * state the layer's mechanism keeps (attention/registry.ts mechanismCacheState: FoX's c, FPA's
 * φ, ℓ and walk, each f32 (B, heads, Tmax, 1)) and per sequence (mechanismCacheRows: the token
 * shift's last pre-shift k and v, f32 (B, Hkv, 1, D)), allocated once when the sequence starts and
 * written in place (ops/attention.ts kvWrite), never re-allocated per token. `length` is the
 * number of positions already written.
 *
 * FPA layers also get a decode state (attention/fpa_decode.ts: running minima, and with eviction
 * the surviving keys, compacted to the front of k and v); `kept()` reports the fraction of the
 * cache each layer and KV head keeps, and `settle()` finishes what such a state defers on a device
 * read asynchronously (webgpu: generate awaits it after every step).
 */
import { attachFpaDecodeState, peekFpaDecodeState, type FpaDecodeOptions } from '../attention/fpa_decode.ts';
import type { LayerKv } from '../attention/mechanism.ts';
import { mechanismCacheRows, mechanismCacheState } from '../attention/registry.ts';
import type { Backend } from '../backend/backend.ts';
import { ArgumentError } from '../errors.ts';
import { zeros } from '../ops/creation.ts';
import { layerAttention, type ModelConfig } from '../model/config.ts';
import { keep } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';

/** Options of a KvCache's FPA layers (attention/fpa_decode.ts). */
export type KvCacheOptions = FpaDecodeOptions;

export class KvCache {
  readonly layers: LayerKv[];
  /** Positions written so far. */
  length = 0;

  constructor(readonly config: ModelConfig, readonly batch: number, readonly maxLength: number, backend: Backend, readonly dtype: FloatDType = 'f32', opts: KvCacheOptions = {}) {
    if (!Number.isInteger(maxLength) || maxLength < 1 || maxLength > config.contextLength) {
      throw new ArgumentError(`KvCache: maxLength ${maxLength} must be an integer in [1, ${config.contextLength}] (the model's context length)`);
    }
    const shape = [batch, config.nKvHeads, maxLength, config.headDim];
    this.layers = Array.from({ length: config.nLayers }, (_, i) => {
      const spec = layerAttention(config, i);
      const perPosition = Object.entries(mechanismCacheState(spec, config)).map(([name, heads]) => [name, [batch, heads, maxLength, 1]] as const);
      const perSequence = Object.entries(mechanismCacheRows(spec, config)).map(([name, [heads, width]]) => [name, [batch, heads, 1, width]] as const);
      const layout = [...perPosition, ...perSequence];
      const slot: LayerKv = { k: keep(zeros(shape, { backend, dtype })), v: keep(zeros(shape, { backend, dtype })) };
      if (layout.length) slot.state = Object.fromEntries(layout.map(([name, s]) => [name, keep(zeros(s, { backend, dtype: 'f32' }))]));
      if (spec.type === 'fpa') attachFpaDecodeState(slot, opts);
      return slot;
    });
  }

  /** Bytes held by the cache on its device: maxLength × kvBytesPerToken plus the per-sequence rows (token shift). */
  get bytes(): number {
    const per = this.dtype === 'f32' ? 4 : 2;
    let n = 0;
    for (const l of this.layers) {
      n += (l.k.size + l.v.size) * per;
      for (const s of Object.values(l.state ?? {})) n += s.size * 4;
    }
    return n;
  }

  /**
   * Per layer, per KV head: the fraction of the positions seen whose keys the cache keeps (1 for
   * layers that keep every key; below 1 for FPA layers with eviction once keys die).
   */
  kept(): number[][] {
    return this.layers.map((l) => peekFpaDecodeState(l)?.kept() ?? new Array<number>(this.config.nKvHeads).fill(1));
  }

  /**
   * Finishes the work that decode states living on an asynchronously read device defer to between
   * steps (FPA eviction on webgpu: the kept counts behind kept(), and compacting dead keys;
   * attention/fpa_decode.ts); nothing to do elsewhere. generate awaits it with each step's logits.
   */
  async settle(): Promise<void> {
    await Promise.all(this.layers.map((l) => peekFpaDecodeState(l)?.settle(l)));
  }

  dispose(): void {
    for (const l of this.layers) {
      peekFpaDecodeState(l)?.dispose();
      l.k.dispose();
      l.v.dispose();
      for (const s of Object.values(l.state ?? {})) s.dispose();
    }
  }
}
