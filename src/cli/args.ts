/**
 * Flag parsing shared by the commands: node:util parseArgs with strict checking, and numbers
 * that name the flag when they are not numbers.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { FonError } from '../errors.ts';

/** A bad command line: the message names the flag and what was expected. */
export class UsageError extends FonError {}

export type Options = NonNullable<ParseArgsConfig['options']>;

/** What parseFlags returns for options O (named, so that the declarations tsc emits can name it). */
export type ParsedFlags<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O & { help: { type: 'boolean'; short: 'h' } }; strict: true; allowPositionals: false }>>;

export function parseFlags<O extends Options>(command: string, argv: string[], options: O): ParsedFlags<O> {
  try {
    return parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false });
  } catch (e) {
    throw new UsageError(`${command}: ${(e as Error).message.split('\n')[0]} (fon ${command} --help lists the options)`);
  }
}

/** The number in flag `--name`, or `fallback` when absent. */
export function numberFlag(command: string, name: string, value: unknown, fallback: number, opts: { integer?: boolean; min?: number; max?: number } = {}): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  const bad = typeof value !== 'string' || value.trim() === '' || !Number.isFinite(n) || (opts.integer && !Number.isInteger(n))
    || (opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max);
  if (bad) {
    const range = [opts.min !== undefined ? `≥ ${opts.min}` : '', opts.max !== undefined ? `≤ ${opts.max}` : ''].filter(Boolean).join(' and ');
    throw new UsageError(`${command}: --${name} ${JSON.stringify(value)}: expected ${opts.integer ? 'an integer' : 'a number'}${range ? ` ${range}` : ''}`);
  }
  return n;
}

export function requireFlag(command: string, name: string, value: string | undefined): string {
  if (value === undefined || value === '') throw new UsageError(`${command}: --${name} is required (fon ${command} --help)`);
  return value;
}
