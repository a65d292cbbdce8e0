/**
 * Training terms a layer adds to the objective from inside a forward (SpotAttention's distillation
 * KL, attention/spot): the trainer runs the model's forward under `collectTrainingTerms`, a layer
 * asks `collectingTrainingTerms()` before it spends work on a term and hands it over with
 * `addTrainingTerm(name, t)`. Outside a collection nothing is computed and nothing is kept, so
 * evaluation and generation never pay for them. Terms of one name are averaged over the layers
 * that added them (each layer's term weighs the same whatever the depth of the model).
 */
import { add, mul } from '../ops/elementwise.ts';
import { keep, trackInScope } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

const collections: Map<string, Tensor[]>[] = [];

/** Whether a forward now runs under collectTrainingTerms (a layer computes its term only then). */
export const collectingTrainingTerms = (): boolean => collections.length > 0;

/** Hands a scalar term to the innermost collection (none: the term is dropped). It outlives the layer's scope until collected. */
export function addTrainingTerm(name: string, t: Tensor): void {
  const c = collections[collections.length - 1];
  if (!c) return;
  const list = c.get(name) ?? [];
  list.push(keep(t));
  c.set(name, list);
}

/**
 * Runs fn (a forward) collecting the terms its layers add: its value, and per name the mean of the
 * terms (scalar tensors in the caller's scope, differentiable). The terms added belong to the
 * caller's scope afterwards, as if made there.
 */
export function collectTrainingTerms<T>(fn: () => T): { value: T; terms: Record<string, Tensor> } {
  const c = new Map<string, Tensor[]>();
  collections.push(c);
  let value: T;
  try {
    value = fn();
  } finally {
    collections.pop();
    for (const list of c.values()) for (const t of list) trackInScope(t);
  }
  const terms: Record<string, Tensor> = {};
  for (const [name, list] of c) {
    const total = list.reduce((s, t) => add(s, t));
    terms[name] = list.length === 1 ? total : mul(total, 1 / list.length);
  }
  return { value, terms };
}
