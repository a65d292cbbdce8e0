/**
 * FON's typed errors. Every message names the bad value and what was expected (DESIGN.md,
 * "Conventions"); the CLI prints `message` without a stack trace and exits non-zero.
 */
export class FonError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Shapes that do not fit an op: the message names the op and every shape involved. */
export class ShapeError extends FonError {}

/** A dtype an op does not take, or two dtypes that should agree. */
export class DTypeError extends FonError {}

/** An op a backend does not implement (or not for that dtype). */
export class UnsupportedError extends FonError {}

/** A tensor used after `dispose()`. */
export class DisposedError extends FonError {}

/** An argument out of range or of the wrong kind (axis, index, option). */
export class ArgumentError extends FonError {}

/** The GPU device was lost, or an allocation failed (out of memory). */
export class DeviceError extends FonError {}

/** Autograd misuse: backward on a non-scalar without a gradient, on a tensor without a graph. */
export class GradError extends FonError {}

/** A model or training config that cannot be used: an unknown key, a wrong type, an impossible shape. */
export class ConfigError extends FonError {}

/**
 * A file or folder that could not be read, listed or written: the message names the path and says
 * in words what the system reported (a folder where a file was expected, a loop of symbolic links,
 * a name too long, no permission), with the system's code in brackets.
 */
export class FileError extends FonError {}

/** A checkpoint or model folder that is missing, malformed or could not be written; the message names the path. */
export class CheckpointError extends FonError {}

/** Quoted text for a message, cut to about `max` characters ("…" and the full length after a cut), so no message grows with its input. */
export function clip(text: string, max = 200): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length} characters)`;
}

/**
 * A value as a message shows it: JSON, cut to about `max` characters (`clip`), whatever the value
 * is — a BigInt (`12n`), a cycle or nesting too deep for JSON.stringify, a function or a symbol
 * never throw here — so a hostile config cannot crash or flood the error that names it.
 */
export function showValue(v: unknown, max = 120): string {
  if (typeof v === 'string') return v.length > max ? `${JSON.stringify(v.slice(0, max))}… (${v.length} characters)` : JSON.stringify(v);
  if (typeof v === 'bigint') return clip(`${v}n`, max);
  if (typeof v === 'number') return String(v); // NaN and ±Infinity as themselves, not JSON's null
  let text: string | undefined;
  try {
    text = JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));
  } catch (e) {
    return e instanceof RangeError ? `a ${Array.isArray(v) ? 'array' : 'value'} nested too deep to show` : `a ${typeof v} that JSON cannot show (${(e as Error).message.split('\n')[0].slice(0, 80)})`;
  }
  return clip(text ?? String(v), max);
}
