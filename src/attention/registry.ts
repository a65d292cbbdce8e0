/**
 * The mechanism of a layer from its config entry (model/config.ts LayerAttention), and what each
 * keeps in the KV cache besides k and v, per position and per sequence (infer/kv_cache.ts
 * allocates both, model/config.ts counts the per-position state).
 */
import type { ModelConfig } from '../model/config.ts';
import { FoxAttention } from './fox.ts';
import { FpaAttention } from './fpa.ts';
import { FullAttention } from './full.ts';
import { LocalAttention } from './local.ts';
import type { AttentionMechanism, CacheRowLayout, CacheStateLayout, LayerAttention, MechanismContext } from './mechanism.ts';
import { TokenShift } from './token_shift.ts';

/** Builds layer attention `spec`; mechanisms with parameters make them through ctx.f under ctx.name. */
export function createMechanism(spec: LayerAttention, ctx: MechanismContext): AttentionMechanism {
  switch (spec.type) {
    case 'full': return new FullAttention();
    case 'local': return new LocalAttention(spec.window);
    case 'fox': return new FoxAttention(spec, ctx);
    case 'fpa': return new FpaAttention(spec, ctx);
  }
}

/** The cache state of a layer with attention `spec` besides k and v: name → heads per position (f32). */
export function mechanismCacheState(spec: LayerAttention, c: ModelConfig): CacheStateLayout {
  switch (spec.type) {
    case 'full': case 'local': return {};
    case 'fox': return FoxAttention.cacheState(c);
    case 'fpa': return FpaAttention.cacheState(c);
  }
}

/** The per-sequence cache rows of a layer with attention `spec` (the token shift's last k and v): name → [heads, width] (f32). */
export function mechanismCacheRows(spec: LayerAttention, c: ModelConfig): CacheRowLayout {
  switch (spec.type) {
    case 'full': case 'local': return {};
    case 'fox': case 'fpa': return spec.tokenShift ? TokenShift.cacheRows(c) : {};
  }
}
