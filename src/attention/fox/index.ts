/** The `fox` mechanism: the Forgetting Transformer's forget-gate attention (fox/fox.ts, specs/fpa_depth.md §1). */
import type { MechanismDef } from '../mechanism.ts';
import { boolOption } from '../options.ts';
import { tokenShiftOption, tokenShiftSide } from '../common/token_shift.ts';
import { FoxAttention, type FoxSpec } from './fox.ts';

export type { FoxSpec };

export const foxMechanism: MechanismDef<FoxSpec> = {
  type: 'fox',
  summary: 'the Forgetting Transformer: softmax attention with a learned forget gate per head (no positions)',
  keys: ['outputGate', 'tokenShift'],
  parse: (o, at) => ({ type: 'fox', outputGate: boolOption(o, 'outputGate', at), ...tokenShiftOption(o, at) }),
  positions: 'none',
  cache: (spec, dims) => ({ perPosition: { c: dims.nHeads }, side: tokenShiftSide(spec.tokenShift) }),
  build: (spec, ctx) => new FoxAttention(spec, ctx),
  describe: (spec) => {
    const opts = [spec.outputGate && 'outputGate', spec.tokenShift && 'tokenShift'].filter(Boolean);
    return { label: opts.length ? `fox(${opts.join(', ')})` : 'fox', notes: [], facts: {} };
  },
  hfExport: () => ({ unsupported: '"fox" layers (forget-gate attention) have no Hugging Face counterpart' }),
};
