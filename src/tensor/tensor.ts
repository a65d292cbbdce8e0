/**
 * Tensor: shape, dtype and a reference-counted storage on one backend, plus the autograd fields.
 * Tensors are always contiguous (row-major). Ops never write into their inputs: each returns a
 * new tensor. They are not immutable, though, as in PyTorch: optimizers update parameters in
 * place, and views — `reshape`, `detach` and a `cast` to the same dtype — share storage with
 * their source, so an in-place update shows through every tensor on that storage. Every other
 * layout change copies. `dispose()` frees the tensor's hold on its storage; the storage itself
 * goes when the last holder (tensor or autograd node) lets go, so a graph can outlive the
 * tensors a user disposed. Using a disposed tensor throws DisposedError.
 */
import { DisposedError, UnsupportedError } from '../errors.ts';
import type { Backend } from '../backend/backend.ts';
import { isFloat, type AnyHostArray, type DType } from './dtype.ts';
import { trackInScope, untrackFromScope } from './scope.ts';
import type { GradNode } from './autograd.ts';
import { sizeOf } from './shape.ts';

/** Brand on every Tensor (shared across module copies via the global symbol registry). */
const TENSOR_BRAND: unique symbol = Symbol.for('fon.Tensor') as never;

/**
 * Whether `v` is a Tensor, by brand rather than by class name or `instanceof` (both break under
 * minification, subclassing or a second copy of the module).
 */
export function isTensor(v: unknown): v is Tensor {
  return typeof v === 'object' && v !== null && (v as { [TENSOR_BRAND]?: unknown })[TENSOR_BRAND] === true;
}

/** Backend memory held by one or more tensors; freed when `refs` reaches zero. */
export class Storage {
  refs = 1;
  constructor(readonly backend: Backend, readonly handle: unknown, readonly dtype: DType, readonly size: number) {}
  retain(): this { this.refs++; return this; }
  release(): void {
    if (--this.refs === 0) this.backend.free(this.handle);
  }
}

let nextId = 1;

export class Tensor {
  /** @internal the brand `isTensor` looks for. */
  get [TENSOR_BRAND](): true { return true; }
  readonly id = nextId++;
  readonly shape: readonly number[];
  readonly size: number;
  /** Whether gradients flow to this tensor (leaves: set by the user; results: set by recording). */
  requiresGrad = false;
  /** Accumulated gradient of a leaf after `backward()`; owned by this tensor. */
  grad: Tensor | null = null;
  /** @internal the op that made this tensor, while its graph is alive. */
  node: GradNode | null = null;
  /** @internal */
  storage: Storage | null;

  /** @internal use the creation functions in ops/creation.ts. */
  constructor(storage: Storage, shape: readonly number[], tracked = true) {
    this.storage = storage;
    this.shape = Object.freeze(shape.slice());
    this.size = sizeOf(shape);
    if (tracked) trackInScope(this);
  }

  get dtype(): DType { return this.live().dtype; }
  get backend(): Backend { return this.live().backend; }
  get rank(): number { return this.shape.length; }
  get disposed(): boolean { return this.storage === null; }
  get isFloat(): boolean { return isFloat(this.dtype); }

  /** @internal the storage, or DisposedError. */
  live(): Storage {
    if (this.storage === null) throw new DisposedError(`tensor #${this.id} of shape [${this.shape}] was disposed and cannot be used`);
    return this.storage;
  }

  /** @internal the backend handle. */
  get handle(): unknown { return this.live().handle; }

  /** Reads the values back to the host (f16/bf16 as raw bits in a Uint16Array). */
  async data(): Promise<AnyHostArray> {
    const s = this.live();
    return s.backend.read(s.handle, s.dtype, s.size);
  }

  /** Synchronous read, only on backends that have one (cpu, wasm). */
  dataSync(): AnyHostArray {
    const s = this.live();
    if (!s.backend.readSync) throw new UnsupportedError(`dataSync: backend '${s.backend.name}' reads asynchronously; use await tensor.data()`);
    return s.backend.readSync(s.handle, s.dtype, s.size);
  }

  /** Frees this tensor's hold on its storage and its gradient; idempotent. */
  dispose(): void {
    if (this.storage === null) return;
    untrackFromScope(this);
    this.storage.release();
    this.storage = null;
    if (this.node) { this.node.drop(); this.node = null; }
    if (this.grad) { this.grad.dispose(); this.grad = null; }
  }

  toString(): string {
    return `Tensor(#${this.id}, [${this.shape}], ${this.storage ? this.storage.dtype : 'disposed'}${this.requiresGrad ? ', requiresGrad' : ''})`;
  }
}

/** @internal a new tensor on a fresh handle owned by it. */
export function fromHandle(backend: Backend, handle: unknown, shape: readonly number[], dtype: DType): Tensor {
  return new Tensor(new Storage(backend, handle, dtype, sizeOf(shape)), shape);
}

/** @internal a second tensor over the same storage (reshape, saved-for-backward copies). */
export function shareStorage(t: Tensor, shape: readonly number[], tracked = true): Tensor {
  return new Tensor(t.live().retain(), shape, tracked);
}
