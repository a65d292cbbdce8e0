/**
 * The CPU backends' one attention entry (Backend.attention / attentionBackward): softmax attention
 * (attention.ts, block masks included) or a score modifier's reference (fox_attention.ts,
 * fpa_attention.ts), chosen by the call's extras.
 */
import type { AttentionArgs, AttentionExtras } from '../backend.ts';
import { checkAttentionExtras } from '../attention_extras.ts';
import { attention, attentionBackward } from './attention.ts';
import { foxAttention, foxAttentionBackward } from './fox_attention.ts';
import { fpaAttention, fpaAttentionBackward } from './fpa_attention.ts';
import type { CpuHandle, CpuRef } from './host.ts';

export function attentionEntry(q: CpuRef, k: CpuRef, v: CpuRef, a: AttentionArgs, x?: AttentionExtras<CpuHandle>): [CpuHandle, CpuHandle] {
  checkAttentionExtras('cpu', a, x);
  const m = x?.modifier;
  if (m?.kind === 'fox') return foxAttention(q, k, v, m.c, a);
  if (m?.kind === 'fpa') return fpaAttention(q, k, v, m.phi, m.level, m.lambda, a);
  return attention(q, k, v, a, x?.mask);
}

export function attentionBackwardEntry(q: CpuRef, k: CpuRef, v: CpuRef, o: CpuRef, lse: CpuRef, g: CpuRef, a: AttentionArgs, x?: AttentionExtras<CpuHandle>): CpuHandle[] {
  checkAttentionExtras('cpu', a, x);
  const m = x?.modifier;
  if (m?.kind === 'fox') return foxAttentionBackward(q, k, v, m.c, o, lse, g, a);
  if (m?.kind === 'fpa') return fpaAttentionBackward(q, k, v, m.phi, m.level, m.lambda, o, lse, g, a);
  return attentionBackward(q, k, v, o, lse, g, a, x?.mask);
}
