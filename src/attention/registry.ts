/** The mechanism of a layer from its config entry (model/config.ts LayerAttention). */
import { FullAttention } from './full.ts';
import { LocalAttention } from './local.ts';
import type { AttentionMechanism, LayerAttention } from './mechanism.ts';

export function createMechanism(spec: LayerAttention): AttentionMechanism {
  switch (spec.type) {
    case 'full': return new FullAttention();
    case 'local': return new LocalAttention(spec.window);
  }
}
