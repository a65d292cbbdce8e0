/** The `local` mechanism: causal sliding-window softmax attention (local/local.ts). */
import { PAGED_KV, type MechanismDef } from '../mechanism.ts';
import { intOption } from '../options.ts';
import { LocalAttention } from './local.ts';

/** The config entry of a sliding-window layer: a query sees itself and the `window − 1` keys before it. */
export interface LocalSpec { type: 'local'; window: number }

export const localMechanism: MechanismDef<LocalSpec> = {
  type: 'local',
  summary: 'causal sliding-window softmax attention: a query sees itself and the window − 1 keys before it',
  keys: ['window'],
  parse: (o, at) => ({ type: 'local', window: intOption(o, 'window', at, 1) }),
  cache: () => PAGED_KV,
  build: (spec) => new LocalAttention(spec.window),
  describe: (spec) => ({ label: `local(window=${spec.window})`, notes: [], facts: {} }),
  hfExport: (spec) => ({ kind: 'sliding', window: spec.window }),
};
