/**
 * A module: named parameters (full dotted names, as in a PyTorch state dict) and child modules.
 * Parameters are made through a ParamFactory (fresh or from a checkpoint) and owned by the
 * module until `dispose()`.
 */
import type { Tensor } from '../tensor/tensor.ts';
import type { Init, ParamFactory } from './params.ts';

export abstract class Module {
  private readonly own: [string, Tensor][] = [];
  private readonly kids: Module[] = [];

  /** Makes parameter `name` (full dotted name) and registers it. */
  protected param(f: ParamFactory, name: string, shape: readonly number[], init: Init): Tensor {
    const t = f.make(name, shape, init);
    this.own.push([name, t]);
    return t;
  }

  protected child<M extends Module>(m: M): M {
    this.kids.push(m);
    return m;
  }

  /** Every parameter of this module and its children, in construction order. */
  namedParameters(): [string, Tensor][] {
    return [...this.own, ...this.kids.flatMap((k) => k.namedParameters())];
  }

  parameters(): Tensor[] {
    return this.namedParameters().map(([, t]) => t);
  }

  /** Number of scalar parameters. */
  parameterCount(): number {
    return this.parameters().reduce((n, t) => n + t.size, 0);
  }

  dispose(): void {
    for (const [, t] of this.own) t.dispose();
    for (const k of this.kids) k.dispose();
  }
}
