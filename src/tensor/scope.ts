/**
 * Scopes that free every intermediate tensor they created (like `tf.tidy`), and the no-grad
 * switch. A tensor returned from `tidy` (alone, or inside arrays and plain objects) moves to the
 * enclosing scope; `keep` takes a tensor out of scope tracking for good.
 */
import { ArgumentError } from '../errors.ts';
import { isTensor, type Tensor } from './tensor.ts';

const scopes: Set<Tensor>[] = [];

export function trackInScope(t: Tensor): void {
  if (scopes.length) scopes[scopes.length - 1].add(t);
}

export function untrackFromScope(t: Tensor): void {
  for (let i = scopes.length - 1; i >= 0; i--) if (scopes[i].delete(t)) return;
}

/** Removes `t` from every scope so no `tidy` disposes it. */
export function keep<T extends Tensor>(t: T): T {
  for (const s of scopes) s.delete(t);
  return t;
}

function collect(value: unknown, out: Set<Tensor>, seen = new Set<unknown>()): void {
  if (value === null || typeof value !== 'object' || seen.has(value)) return;
  seen.add(value);
  if (isTensor(value)) { out.add(value); return; }
  if (Array.isArray(value)) { for (const v of value) collect(v, out, seen); return; }
  if (Object.getPrototypeOf(value) === Object.prototype) for (const v of Object.values(value)) collect(v, out, seen);
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return v instanceof Promise || (v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function');
}

/** Runs fn; disposes every tensor it created except those in its result. */
export function tidy<T>(fn: () => T): T {
  const scope = new Set<Tensor>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    // Nothing made in a failed scope can be returned: free it all (as tf.tidy does).
    scopes.pop();
    for (const t of scope) t.dispose();
    throw e;
  }
  scopes.pop();
  if (isThenable(result)) {
    // Whatever the async fn made before its first await is freed; the promise's own outcome is moot.
    for (const t of scope) t.dispose();
    result.then(undefined, () => {});
    throw new ArgumentError('tidy: fn must be synchronous, got a function that returned a Promise; await outside the scope');
  }
  const kept = new Set<Tensor>();
  collect(result, kept);
  for (const t of scope) if (!kept.has(t)) t.dispose();
  for (const t of kept) if (scope.has(t)) trackInScope(t);
  return result;
}

let gradEnabled = true;

export function isGradEnabled(): boolean { return gradEnabled; }

/** Runs fn with gradient recording off (inference, optimizer updates). */
export function noGrad<T>(fn: () => T): T {
  const prev = gradEnabled;
  gradEnabled = false;
  try { return fn(); } finally { gradEnabled = prev; }
}
