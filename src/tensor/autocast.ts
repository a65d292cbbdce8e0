/**
 * Mixed precision (`fon train --precision`): inside `autocast(dtype, fn)`, matrix products
 * (ops/matmul.ts `linear`) and attention (ops/attention.ts, fox_attention.ts, fpa_attention.ts)
 * take f32 inputs as copies in `dtype` (f16 or bf16, on the tensor cores where the device has them)
 * and hand f32 results back, so everything else — norms, softmax statistics, losses, the master
 * weights, their gradients and the optimizer state — stays f32. Gradients flow back through the
 * casts: a weight's gradient arrives in f32. The scope is synchronous, like noGrad; the backward
 * pass needs no scope of its own (the casts are in the graph).
 */
import type { FloatDType } from './dtype.ts';

/** The precisions training offers: f32 throughout, or matmuls and attention in a 16-bit dtype. */
export type Precision = 'f32' | 'bf16' | 'f16';
export const PRECISIONS: readonly Precision[] = ['f32', 'bf16', 'f16'];

let current: Exclude<FloatDType, 'f32'> | null = null;

/** Runs fn with matmuls and attention computing in `dtype` ('f32': as they would outside any scope). */
export function autocast<T>(dtype: Precision, fn: () => T): T {
  const outer = current;
  current = dtype === 'f32' ? null : dtype;
  try {
    return fn();
  } finally {
    current = outer;
  }
}

/** The 16-bit dtype matmuls and attention compute in here, or null outside an autocast scope (or inside an f32 one). */
export function autocastDType(): Exclude<FloatDType, 'f32'> | null {
  return current;
}
