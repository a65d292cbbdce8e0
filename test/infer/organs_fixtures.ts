/**
 * Models for the draft–revise tests: random weights loud enough (every matrix normal(0, std)) that
 * the draft organ and the whole network often disagree, so drafts are both accepted and rejected.
 */
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { ParamFactory } from '../../src/nn/params.ts';

/** The layer configs every draft–revise test walks: each mechanism, the Pro token shift, FPA eviction, Depth-Attention. */
export const ORGAN_CASES: Record<string, object> = {
  full: { attention: { type: 'full' } },
  local: { attention: { type: 'local', window: 4 } },
  fox: { attention: { type: 'fox', outputGate: true } },
  'fox+tokenShift': { attention: { type: 'fox', tokenShift: true } },
  fpa: { attention: { type: 'fpa' } },
  'fpa evict': { attention: { type: 'fpa', evict: { tau: 2, every: 2, deadFraction: 0.1 } } },
  'mixed + depth': { attention: [{ type: 'local', window: 3 }, { type: 'fpa', walk: 'tanh' }, { type: 'full' }], depth: { stride: 1 } },
};

export function organsConfig(extra: object, vocabSize = 257, contextLength = 64): ModelConfig {
  return parseModelConfig({ vocabSize, dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength, ...extra });
}

/** A model of `cfg` on `backend` with every matrix normal(0, std) and the rest as initialised. */
export function loudModel(cfg: ModelConfig, backend: Backend, seed = 3, std = 0.3): Decoder {
  const base = new Decoder(cfg, new ParamFactory({ backend, seed }));
  const weights = Object.fromEntries(base.namedParameters().map(([n, t], i) => [n, t.rank >= 2 ? fon.randn(t.shape, { backend, std, seed: seed * 1000 + i }) : fon.add(t, 0)]));
  base.dispose();
  const m = new Decoder(cfg, new ParamFactory({ backend, weights }));
  for (const t of Object.values(weights)) t.dispose();
  return m;
}
