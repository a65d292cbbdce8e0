/**
 * The WebGPU backend's one attention entry (Backend.attention / attentionBackward): softmax
 * attention (attention.ts: the plan's kernel; block masks on every kernel) or a score modifier's
 * kernels (fox_fpa_attention.ts: FoX, FPA), chosen by the call's extras.
 */
import { checkAttentionExtras } from '../../attention_extras.ts';
import type { KernelTable, WebGpuBackend } from '../backend.ts';
import { attention, attentionBackward } from './attention.ts';
import { foxAttention, foxAttentionBackward, fpaAttention, fpaAttentionBackward } from './fox_fpa_attention.ts';

export function attentionEntry(be: WebGpuBackend): Pick<KernelTable, 'attention' | 'attentionBackward'> {
  return {
    attention: (q, k, v, a, x) => {
      checkAttentionExtras('webgpu', a, x);
      const m = x?.modifier;
      if (m?.kind === 'fox') return foxAttention(be, q, k, v, m.c, a);
      if (m?.kind === 'fpa') return fpaAttention(be, q, k, v, m.phi, m.level, m.lambda, a);
      return attention(be, q, k, v, a, x?.mask);
    },
    attentionBackward: (q, k, v, o, lse, g, a, x) => {
      checkAttentionExtras('webgpu', a, x);
      const m = x?.modifier;
      if (m?.kind === 'fox') return foxAttentionBackward(be, q, k, v, m.c, o, lse, g, a);
      if (m?.kind === 'fpa') return fpaAttentionBackward(be, q, k, v, m.phi, m.level, m.lambda, o, lse, g, a);
      return attentionBackward(be, q, k, v, o, lse, g, a, undefined, false, x?.mask);
    },
  };
}
