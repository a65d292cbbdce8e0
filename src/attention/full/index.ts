/** The `full` mechanism: causal softmax attention over every earlier key (full/full.ts). */
import { PAGED_KV, type MechanismDef } from '../mechanism.ts';
import { FullAttention } from './full.ts';

/** The config entry of a full-attention layer: {"type": "full"}. */
export interface FullSpec { type: 'full' }

export const fullMechanism: MechanismDef<FullSpec> = {
  type: 'full',
  summary: 'causal softmax attention over every earlier key (the baseline and the distillation teacher)',
  keys: [],
  parse: () => ({ type: 'full' }),
  cache: () => PAGED_KV,
  build: () => new FullAttention(),
  describe: () => ({ label: 'full', notes: [], facts: {} }),
  hfExport: () => ({ kind: 'full' }),
};
