/** RMSNorm and LayerNorm over the last axis, both as fused kernels (ops/fused.ts). */
import { layernorm, rmsnorm } from '../ops/fused.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Module } from './module.ts';
import type { ParamFactory } from './params.ts';

export type NormKind = 'rmsnorm' | 'layernorm';

export class Norm extends Module {
  readonly weight: Tensor;
  readonly bias?: Tensor;

  constructor(f: ParamFactory, name: string, readonly kind: NormKind, readonly dim: number, readonly eps: number) {
    super();
    this.weight = this.param(f, `${name}.weight`, [dim], { kind: 'ones' });
    if (kind === 'layernorm') this.bias = this.param(f, `${name}.bias`, [dim], { kind: 'zeros' });
  }

  forward(x: Tensor): Tensor {
    return this.kind === 'rmsnorm' ? rmsnorm(x, this.weight, this.eps) : layernorm(x, this.weight, this.bias!, this.eps);
  }
}
