/**
 * Small validators the mechanisms' `parse` share: every error is a ConfigError naming where the
 * entry is, the key and the value, and what was expected.
 */
import { ConfigError, showValue } from '../errors.ts';

export const show = (v: unknown): string => showValue(v);

/** o[key] as a boolean, `fallback` when absent. */
export function boolOption(o: Record<string, unknown>, key: string, at: string, fallback = false): boolean {
  const v = o[key] ?? fallback;
  if (typeof v !== 'boolean') throw new ConfigError(`${at}: '${key}' = ${show(v)}: expected true or false`);
  return v;
}

/** o[key] as an integer ≥ min (required unless `fallback` is given). */
export function intOption(o: Record<string, unknown>, key: string, at: string, min: number, fallback?: number): number {
  const v = o[key] ?? fallback;
  if (!Number.isInteger(v) || (v as number) < min) throw new ConfigError(`${at}: '${key}' = ${show(o[key])}: expected ${min === 1 ? 'a positive integer' : `an integer ≥ ${min}`}`);
  return v as number;
}

/** o[key] as a finite number (> 0 with `positive`), `fallback` when absent. */
export function numberOption(o: Record<string, unknown>, key: string, at: string, fallback: number, positive: boolean): number {
  const v = o[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || (positive && v <= 0)) throw new ConfigError(`${at}: '${key}' = ${show(o[key])}: expected a finite number${positive ? ' > 0' : ''}`);
  return v;
}

/** o[key] as a fraction in (0, 1], `fallback` when absent. */
export function fractionOption(o: Record<string, unknown>, key: string, at: string, fallback: number): number {
  const v = o[key] ?? fallback;
  if (typeof v !== 'number' || !(v > 0 && v <= 1)) throw new ConfigError(`${at}: '${key}' = ${show(o[key])}: expected a number in (0, 1]`);
  return v;
}

/** o[key] as one of `choices`, `fallback` when absent. */
export function choiceOption<T extends string>(o: Record<string, unknown>, key: string, at: string, choices: readonly T[], fallback: T): T {
  const v = o[key] ?? fallback;
  if (!choices.includes(v as T)) throw new ConfigError(`${at}: '${key}' = ${show(v)}: expected one of ${choices.map(show).join(', ')}`);
  return v as T;
}

/** A nested object option's keys: an unknown one is a ConfigError naming `key.sub`. */
export function checkKeys(o: Record<string, unknown>, key: string, at: string, keys: readonly string[]): void {
  for (const k of Object.keys(o)) if (!keys.includes(k)) throw new ConfigError(`${at}: unknown key '${key}.${k}'; expected ${keys.join(', ')}`);
}
