/**
 * Where a model's parameters come from: fresh seeded initialisation, or a checkpoint's tensors.
 * Modules ask the factory for each parameter by its full dotted name (PyTorch state-dict style),
 * so loading needs no second pass that swaps tensors inside modules, and a checkpoint with a
 * missing, extra or misshapen tensor is reported by name.
 */
import { ShapeError, ArgumentError, DTypeError } from '../errors.ts';
import type { Backend } from '../backend/backend.ts';
import { full, randn } from '../ops/creation.ts';
import { cast, clone } from '../ops/cast.ts';
import { keep, noGrad } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** How a fresh parameter is filled. */
export type Init = { kind: 'normal'; std: number } | { kind: 'zeros' } | { kind: 'ones' };

/** FNV-1a of a name, mixed with the model seed: each parameter has its own random stream. */
function nameSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export interface ParamFactoryOptions {
  backend: Backend;
  /** Storage dtype of the parameters (f32 unless mixed precision asks otherwise). */
  dtype?: FloatDType;
  /** Seed of fresh initialisation: parameter `name` is drawn from stream hash(seed, name). */
  seed?: number;
  /** Tensors to take instead of initialising (a checkpoint), by full name. */
  weights?: Record<string, Tensor>;
  /** Where the weights came from, for error messages. */
  source?: string;
  /**
   * Take the `weights` tensors instead of copying them: one already of the storage dtype becomes
   * the parameter itself (the caller must no longer dispose it), one of another dtype is cast and
   * then disposed. For loaders that made the tensors for this model alone, so that the weights
   * are not held twice; the caller still disposes those named by `unused()`.
   */
  adoptWeights?: boolean;
  /**
   * Names that may be initialised fresh (from `seed`, as without `weights`) when `weights` lacks
   * them: a model that adds layers to a checkpoint's (`fon train --init-from DIR --add focus`
   * makes the new Focus tensors this way). A name it refuses, or one that `weights` holds with
   * another shape, still fails with the ShapeError naming the tensor.
   */
  freshMissing?: (name: string) => boolean;
  /**
   * How a fresh normal parameter is drawn: (name, shape, std) → a tensor of that shape on `backend`
   * (any float dtype: it is cast to the storage dtype). Default: randn on the host from
   * hash(seed, name). Benches of large models draw on the device instead (a billion host draws
   * take about a minute).
   */
  draw?: (name: string, shape: readonly number[], std: number) => Tensor;
}

export class ParamFactory {
  readonly backend: Backend;
  readonly dtype: FloatDType;
  private readonly seed: number;
  private readonly weights?: Record<string, Tensor>;
  private readonly source: string;
  private readonly adopt: boolean;
  private readonly freshMissing?: (name: string) => boolean;
  private readonly draw?: (name: string, shape: readonly number[], std: number) => Tensor;
  private readonly made = new Set<string>();
  private readonly tensors: Tensor[] = [];
  /** Names made fresh although weights were given (freshMissing), in construction order. */
  readonly freshNames: string[] = [];

  constructor(opts: ParamFactoryOptions) {
    this.backend = opts.backend;
    this.dtype = opts.dtype ?? 'f32';
    this.seed = opts.seed ?? 0;
    this.weights = opts.weights;
    this.source = opts.source ?? 'weights';
    this.adopt = opts.adoptWeights ?? false;
    this.freshMissing = opts.freshMissing;
    this.draw = opts.draw;
  }

  /** A trainable leaf named `name`, kept out of every tidy scope (the module owns it). */
  make(name: string, shape: readonly number[], init: Init): Tensor {
    if (this.made.has(name)) throw new ArgumentError(`parameter '${name}' is defined twice`);
    this.made.add(name);
    const t = noGrad(() => this.weights && !this.mayBeFresh(name) ? this.load(name, shape) : this.fresh(name, shape, init));
    t.requiresGrad = true;
    this.tensors.push(t);
    return keep(t);
  }

  /** Whether `name` is made fresh although weights were given: absent from them and accepted by `freshMissing`. */
  private mayBeFresh(name: string): boolean {
    return this.freshMissing !== undefined && !Object.hasOwn(this.weights!, name) && this.freshMissing(name);
  }

  private fresh(name: string, shape: readonly number[], init: Init): Tensor {
    const opts = { backend: this.backend, dtype: this.dtype };
    if (this.weights) this.freshNames.push(name);
    if (init.kind === 'normal' && this.draw) return this.drawn(name, shape, init.std);
    if (init.kind === 'normal') return randn(shape, { ...opts, std: init.std, seed: nameSeed(this.seed, name) });
    return full(shape, init.kind === 'ones' ? 1 : 0, opts);
  }

  /** A `draw`n parameter, checked (shape, backend, a float dtype) and cast to the storage dtype. */
  private drawn(name: string, shape: readonly number[], std: number): Tensor {
    const w = this.draw!(name, shape, std);
    if (w.shape.join() !== shape.join() || w.backend !== this.backend || !w.isFloat) throw new ArgumentError(`ParamFactory: draw gave '${name}' shape [${w.shape}], dtype ${w.dtype} on '${w.backend.name}'; expected [${shape}], a float dtype on '${this.backend.name}'`);
    if (w.dtype === this.dtype) return w;
    const c = cast(w, this.dtype);
    w.dispose();
    return c;
  }

  private load(name: string, shape: readonly number[]): Tensor {
    const w = this.weights![name];
    if (!w) throw new ShapeError(`${this.source}: tensor '${name}' is missing (expected shape [${shape}])`);
    if (w.shape.join() !== shape.join()) throw new ShapeError(`${this.source}: tensor '${name}' has shape [${w.shape}], the config expects [${shape}]`);
    if (!w.isFloat) throw new DTypeError(`${this.source}: tensor '${name}' has dtype ${w.dtype}, expected a float dtype`);
    if (w.backend !== this.backend) throw new ArgumentError(`${this.source}: tensor '${name}' lives on backend '${w.backend.name}', the model on '${this.backend.name}'`);
    if (this.adopt) {
      if (w.dtype === this.dtype) return w;
      const c = cast(w, this.dtype);
      w.dispose();
      return c;
    }
    // The parameter owns its storage, so the caller may dispose the checkpoint's tensors.
    return w.dtype === this.dtype ? clone(w) : cast(w, this.dtype);
  }

  /** Disposes every parameter made so far (a model whose construction failed part-way). */
  disposeMade(): void {
    for (const t of this.tensors) t.dispose();
    this.tensors.length = 0;
  }

  /** Names in the checkpoint that no module asked for (an error when loading strictly). */
  unused(): string[] {
    return this.weights ? Object.keys(this.weights).filter((k) => !this.made.has(k)) : [];
  }
}

