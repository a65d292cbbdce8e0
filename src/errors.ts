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
