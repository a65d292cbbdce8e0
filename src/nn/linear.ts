/** Linear layer y = x·Wᵀ (+ b) with W stored (out, in) as in PyTorch, so checkpoints map 1:1. */
import { linear } from '../ops/matmul.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Module } from './module.ts';
import type { ParamFactory } from './params.ts';

export class Linear extends Module {
  readonly weight: Tensor;
  readonly bias?: Tensor;

  /** `name` is the prefix: parameters are `name.weight` and `name.bias`. std defaults to 0.02 (GPT-2). */
  constructor(f: ParamFactory, name: string, readonly inFeatures: number, readonly outFeatures: number, opts: { bias?: boolean; std?: number } = {}) {
    super();
    this.weight = this.param(f, `${name}.weight`, [outFeatures, inFeatures], { kind: 'normal', std: opts.std ?? 0.02 });
    if (opts.bias) this.bias = this.param(f, `${name}.bias`, [outFeatures], { kind: 'zeros' });
  }

  /** x (…, in) → (…, out), in `outDType` where given (ops/matmul.ts linear: the GEMM writes it, bar a bias's final cast). */
  forward(x: Tensor, outDType?: FloatDType): Tensor {
    return linear(x, this.weight, this.bias, true, outDType ? { outDType } : {});
  }
}
