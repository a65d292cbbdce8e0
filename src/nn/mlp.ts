/**
 * The feed-forward half of a block: SwiGLU (Llama: down(silu(gate(x)) ∘ up(x))) or GELU
 * (GPT-2: down(gelu(up(x)))). Parameter names follow the Llama / GPT-NeoX convention
 * (`gate`, `up`, `down`) so imports map by renaming only.
 */
import { gelu, mul, silu } from '../ops/elementwise.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { Linear } from './linear.ts';
import { Module } from './module.ts';
import type { ParamFactory } from './params.ts';

export type MlpKind = 'swiglu' | 'gelu';

export class Mlp extends Module {
  readonly gate?: Linear;
  readonly up: Linear;
  readonly down: Linear;

  /** `outStd` scales the output projection's init (GPT-2: 0.02/√(2·layers)). */
  constructor(f: ParamFactory, name: string, readonly kind: MlpKind, dim: number, hidden: number, opts: { bias: boolean; outStd: number }) {
    super();
    if (kind === 'swiglu') this.gate = this.child(new Linear(f, `${name}.gate`, dim, hidden, { bias: opts.bias }));
    this.up = this.child(new Linear(f, `${name}.up`, dim, hidden, { bias: opts.bias }));
    this.down = this.child(new Linear(f, `${name}.down`, hidden, dim, { bias: opts.bias, std: opts.outStd }));
  }

  /** x (…, C) → (…, C); intermediates belong to the caller's tidy scope. */
  forward(x: Tensor): Tensor {
    const u = this.up.forward(x);
    const h = this.gate ? mul(silu(this.gate.forward(x)), u) : gelu(u);
    return this.down.forward(h);
  }
}
