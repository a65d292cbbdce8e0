/** Token (or learned position) embedding table (V, C). */
import { embedding } from '../ops/indexing.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Module } from './module.ts';
import type { ParamFactory } from './params.ts';

export class Embedding extends Module {
  readonly weight: Tensor;

  constructor(f: ParamFactory, name: string, readonly count: number, readonly dim: number, std = 0.02) {
    super();
    this.weight = this.param(f, `${name}.weight`, [count, dim], { kind: 'normal', std });
  }

  /** ids i32 (…) → (…, C) */
  forward(ids: Tensor): Tensor {
    return embedding(this.weight, ids);
  }
}
