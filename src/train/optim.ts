/**
 * Optimizers that update parameters in place on their own backend with one fused kernel per
 * parameter: AdamW (decoupled weight decay, PyTorch's formula) and SGD with momentum. Views of a
 * parameter (reshape, detach) share its storage and so see each step, as in PyTorch.
 * State tensors (f32) live beside the parameters; `stateDict()` exposes them for checkpoints and
 * `loadStateDict()` copies what it is given, so two optimizers never share state.
 */
import { ArgumentError, clip, showValue } from '../errors.ts';
import { clone } from '../ops/cast.ts';
import { zerosLike } from '../ops/creation.ts';
import { zeroGrad } from '../ops/grad.ts';
import { ref } from '../ops/run.ts';
import { keep, noGrad } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface Optimizer {
  readonly params: readonly Tensor[];
  /** Current learning rate; schedules set it before each step. */
  lr: number;
  /** Applies one update from the parameters' `.grad` (parameters without a gradient are skipped). */
  step(): void;
  /** Disposes and clears every parameter's gradient. */
  zeroGrad(): void;
  /** Named state tensors (moments, buffers) and scalars, for checkpoints. */
  stateDict(): { tensors: Record<string, Tensor>; scalars: Record<string, number> };
  loadStateDict(state: { tensors: Record<string, Tensor>; scalars: Record<string, number> }): void;
  dispose(): void;
}

function checkParams(op: string, params: readonly Tensor[]): void {
  if (params.length === 0) throw new ArgumentError(`${op}: no parameters to optimize`);
  for (const p of params) if (!p.requiresGrad) throw new ArgumentError(`${op}: parameter ${p} does not have requiresGrad set`);
}

abstract class BaseOptimizer implements Optimizer {
  /** Steps taken (the t of bias correction). */
  t = 0;
  constructor(readonly params: readonly Tensor[], public lr: number) {}
  abstract step(): void;
  abstract stateDict(): { tensors: Record<string, Tensor>; scalars: Record<string, number> };
  abstract loadStateDict(state: { tensors: Record<string, Tensor>; scalars: Record<string, number> }): void;
  abstract dispose(): void;
  zeroGrad(): void { zeroGrad(this.params); }
}

function stateLike(p: Tensor): Tensor {
  return keep(noGrad(() => zerosLike(p, { dtype: 'f32' })));
}

/** Checks `from[prefix.i]` for every state tensor of `into`: present, of its shape, f32, on its backend. */
function checkState(into: readonly Tensor[], from: Record<string, Tensor>, prefix: string): void {
  into.forEach((t, i) => {
    const key = `${prefix}.${i}`;
    const src = from[key];
    if (!src) throw new ArgumentError(`optimizer state: '${key}' is missing`);
    if (src.shape.join() !== t.shape.join()) throw new ArgumentError(`optimizer state: '${key}' has shape [${src.shape}], expected [${t.shape}]`);
    if (src.dtype !== 'f32') throw new ArgumentError(`optimizer state: '${key}' has dtype ${src.dtype}, expected f32`);
    if (src.backend !== t.backend) throw new ArgumentError(`optimizer state: '${key}' lives on backend '${src.backend.name}', the parameters on '${t.backend.name}'; move it with toBackend() first`);
  });
}

/** Replaces the state tensors `into` with copies of `from[prefix.i]`; called after checkState, so a bad state dict changes nothing. */
function copyState(into: Tensor[], from: Record<string, Tensor>, prefix: string): void {
  into.forEach((t, i) => {
    const copy = keep(noGrad(() => clone(from[`${prefix}.${i}`])));
    t.dispose();
    into[i] = copy;
  });
}

export interface AdamWOptions { lr?: number; betas?: [number, number]; eps?: number; weightDecay?: number }

export class AdamW extends BaseOptimizer {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  weightDecay: number;
  private m: Tensor[];
  private v: Tensor[];
  /** Multiplies every gradient before the update (e.g. 1/N for N accumulated micro-batches). */
  gradScale = 1;
  /**
   * Per parameter, whether weight decay applies (default: all). Language models usually decay
   * only matrices, not norm weights or biases (nanoGPT's parameter groups).
   */
  decayMask: readonly boolean[] | null = null;

  constructor(params: readonly Tensor[], opts: AdamWOptions = {}) {
    super(params, opts.lr ?? 1e-3);
    checkParams('AdamW', params);
    [this.beta1, this.beta2] = opts.betas ?? [0.9, 0.999];
    this.eps = opts.eps ?? 1e-8;
    this.weightDecay = opts.weightDecay ?? 0.01;
    this.m = params.map(stateLike);
    this.v = params.map(stateLike);
  }

  step(): void {
    this.t++;
    const args = {
      lr: this.lr, beta1: this.beta1, beta2: this.beta2, eps: this.eps, weightDecay: this.weightDecay,
      bias1: 1 - this.beta1 ** this.t, bias2: 1 - this.beta2 ** this.t, gradScale: this.gradScale,
    };
    if (this.decayMask && this.decayMask.length !== this.params.length) {
      throw new ArgumentError(`AdamW: decayMask has ${this.decayMask.length} entries for ${this.params.length} parameters`);
    }
    const noDecay = { ...args, weightDecay: 0 };
    this.params.forEach((p, i) => {
      if (!p.grad) return;
      p.backend.adamw(ref(p), ref(p.grad), ref(this.m[i]), ref(this.v[i]), this.decayMask && !this.decayMask[i] ? noDecay : args);
    });
  }

  stateDict() {
    const tensors: Record<string, Tensor> = {};
    this.m.forEach((t, i) => { tensors[`m.${i}`] = t; });
    this.v.forEach((t, i) => { tensors[`v.${i}`] = t; });
    return { tensors, scalars: { t: this.t, lr: this.lr } };
  }

  /** Takes exactly what stateDict gives: m.i and v.i for every parameter, and the scalars t and lr; anything else is an ArgumentError. */
  loadStateDict(state: { tensors: Record<string, Tensor>; scalars: Record<string, number> }): void {
    const n = this.params.length;
    const extra = Object.keys(state.tensors).filter((k) => !/^[mv]\.(0|[1-9]\d*)$/.test(k) || Number(k.slice(2)) >= n);
    if (extra.length) throw new ArgumentError(`optimizer state: unexpected tensor '${clip(extra[0], 80)}'${extra.length > 1 ? ` (and ${extra.length - 1} more)` : ''}; AdamW holds m.0 … m.${n - 1} and v.0 … v.${n - 1}`);
    checkState(this.m, state.tensors, 'm');
    checkState(this.v, state.tensors, 'v');
    for (const k of Object.keys(state.scalars)) if (k !== 't' && k !== 'lr') throw new ArgumentError(`optimizer state: unknown scalar '${clip(k, 80)}'; AdamW holds t and lr`);
    const t = state.scalars.t;
    if (!Number.isInteger(t) || t < 0) throw new ArgumentError(`optimizer state: t = ${showValue(t)}; expected the number of steps taken, an integer ≥ 0`);
    copyState(this.m, state.tensors, 'm');
    copyState(this.v, state.tensors, 'v');
    this.t = t;
    if (state.scalars.lr !== undefined) this.lr = state.scalars.lr;
  }

  dispose(): void { for (const t of [...this.m, ...this.v]) t.dispose(); }
}

export interface SGDOptions { lr?: number; momentum?: number; weightDecay?: number; nesterov?: boolean }

export class SGD extends BaseOptimizer {
  momentum: number;
  weightDecay: number;
  nesterov: boolean;
  /** Multiplies every gradient before the update (e.g. 1/N for N accumulated micro-batches). */
  gradScale = 1;
  private buf: Tensor[];

  constructor(params: readonly Tensor[], opts: SGDOptions = {}) {
    super(params, opts.lr ?? 1e-2);
    checkParams('SGD', params);
    this.momentum = opts.momentum ?? 0;
    this.weightDecay = opts.weightDecay ?? 0;
    this.nesterov = opts.nesterov ?? false;
    if (this.nesterov && this.momentum <= 0) throw new ArgumentError('SGD: nesterov needs momentum > 0');
    this.buf = params.map(stateLike);
  }

  step(): void {
    this.t++;
    const args = { lr: this.lr, momentum: this.momentum, weightDecay: this.weightDecay, nesterov: this.nesterov, gradScale: this.gradScale };
    this.params.forEach((p, i) => {
      if (p.grad) p.backend.sgd(ref(p), ref(p.grad), ref(this.buf[i]), args);
    });
  }

  stateDict() {
    const tensors: Record<string, Tensor> = {};
    this.buf.forEach((t, i) => { tensors[`buf.${i}`] = t; });
    return { tensors, scalars: { t: this.t, lr: this.lr } };
  }

  loadStateDict(state: { tensors: Record<string, Tensor>; scalars: Record<string, number> }): void {
    checkState(this.buf, state.tensors, 'buf');
    copyState(this.buf, state.tensors, 'buf');
    this.t = state.scalars.t ?? 0;
    if (state.scalars.lr !== undefined) this.lr = state.scalars.lr;
  }

  dispose(): void { for (const t of this.buf) t.dispose(); }
}
