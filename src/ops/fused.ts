/** Fused kernels with their own backward: RMSNorm, LayerNorm, RoPE, cross-entropy from logits. */
import { DTypeError, ShapeError } from '../errors.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { sum } from './reduce.ts';
import { cast } from './cast.ts';
import { backendOf, disposing, fmt, ref, requireDType, requireFloat, sizeOf, wrap, sameShape } from './run.ts';
import { div, ne } from './elementwise.ts';
import { reshape } from './layout.ts';

function normShapes(op: string, x: Tensor, w: Tensor): [number, number] {
  requireFloat(op, x);
  if (x.rank === 0) throw new ShapeError(`${op}: input must have rank ≥ 1 (normalised over its last axis), got shape ${fmt(x.shape)}`);
  if (w.dtype !== x.dtype) throw new DTypeError(`${op}: weight dtype ${w.dtype} must equal input dtype ${x.dtype}`);
  const cols = x.shape[x.rank - 1];
  if (w.rank !== 1 || w.shape[0] !== cols) throw new ShapeError(`${op}: weight shape ${fmt(w.shape)} must be [${cols}] for input ${fmt(x.shape)}`);
  return [x.size / cols, cols];
}

/** y = x / √(mean(x²) + eps) · w over the last axis; statistics in f32. */
export function rmsnorm(x: Tensor, weight: Tensor, eps = 1e-6): Tensor {
  const b = backendOf('rmsnorm', x, weight);
  const [rows, cols] = normShapes('rmsnorm', x, weight);
  const args = { rows, cols, eps };
  const [y, rstd] = b.rmsnorm(ref(x), ref(weight), args);
  const out = wrap(b, y, x.shape, x.dtype);
  const r = wrap(b, rstd, [rows], 'f32');
  record('rmsnorm', out, [x, weight], (g, [xs, ws, rs]) => {
    const [dx, dw] = b.rmsnormBackward(ref(xs), ref(ws), ref(rs), ref(g), args);
    return [wrap(b, dx, xs.shape, xs.dtype), wrap(b, dw, ws.shape, ws.dtype)];
  }, [x, weight, r]);
  r.dispose();
  return out;
}

/** y = (x − μ)/√(σ² + eps) · w + b over the last axis; statistics in f32. */
export function layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps = 1e-5): Tensor {
  const b = backendOf('layernorm', x, weight, bias);
  const [rows, cols] = normShapes('layernorm', x, weight);
  if (bias.dtype !== x.dtype) throw new DTypeError(`layernorm: bias dtype ${bias.dtype} must equal input dtype ${x.dtype}`);
  if (!sameShape(bias.shape, weight.shape)) throw new ShapeError(`layernorm: bias shape ${fmt(bias.shape)} must equal weight shape ${fmt(weight.shape)}`);
  const args = { rows, cols, eps };
  const [y, mu, rstd] = b.layernorm(ref(x), ref(weight), ref(bias), args);
  const out = wrap(b, y, x.shape, x.dtype);
  const m = wrap(b, mu, [rows], 'f32'), r = wrap(b, rstd, [rows], 'f32');
  record('layernorm', out, [x, weight, bias], (g, [xs, ws, ms, rs]) => {
    const [dx, dw, db] = b.layernormBackward(ref(xs), ref(ws), ref(ms), ref(rs), ref(g), args);
    return [wrap(b, dx, xs.shape, xs.dtype), wrap(b, dw, ws.shape, ws.dtype), wrap(b, db, ws.shape, ws.dtype)];
  }, [x, weight, m, r]);
  m.dispose(); r.dispose();
  return out;
}

export interface RopeOptions {
  /** Axis of x that indexes positions (default -2: x is (…, T, D)); axes between it and the last are heads. */
  seqAxis?: number;
  /** Pair (2j, 2j+1) as GPT-J; default pairs (j, j + D/2) as GPT-NeoX and Llama. */
  interleaved?: boolean;
}

/** Rotary position embedding; cos and sin are (T, D/2) f32 tables (see ropeTables). */
export function rope(x: Tensor, cos: Tensor, sin: Tensor, opts: RopeOptions = {}): Tensor {
  const b = backendOf('rope', x, cos, sin);
  requireFloat('rope', x);
  requireDType('rope', 'cos', cos, 'f32');
  requireDType('rope', 'sin', sin, 'f32');
  const seqAxis = (opts.seqAxis ?? -2) < 0 ? x.rank + (opts.seqAxis ?? -2) : opts.seqAxis!;
  if (!Number.isInteger(seqAxis) || seqAxis >= x.rank - 1 || seqAxis < 0) throw new ShapeError(`rope: seqAxis ${opts.seqAxis} must come before the last axis of ${fmt(x.shape)}`);
  const d = x.shape[x.rank - 1];
  const t = x.shape[seqAxis];
  if (d % 2 !== 0) throw new ShapeError(`rope: last dimension ${d} of ${fmt(x.shape)} must be even`);
  if (!sameShape(cos.shape, [t, d / 2]) || !sameShape(sin.shape, [t, d / 2])) throw new ShapeError(`rope: cos/sin must be [${t}, ${d / 2}] for input ${fmt(x.shape)}, got ${fmt(cos.shape)} and ${fmt(sin.shape)}`);
  const o = sizeOf(x.shape.slice(0, seqAxis)), inner = sizeOf(x.shape.slice(seqAxis + 1, -1));
  const il = !!opts.interleaved;
  const out = wrap(b, b.rope(ref(x), ref(cos), ref(sin), o, t, inner, d, il, false), x.shape, x.dtype);
  return record('rope', out, [x], (g, [c, s]) => [wrap(b, b.rope(ref(g), ref(c), ref(s), o, t, inner, d, il, true), g.shape, g.dtype)], [cos, sin]);
}

export interface CrossEntropyOptions {
  /** Targets equal to this are skipped (no loss, no gradient, not counted in the mean). */
  ignoreIndex?: number;
  /** 'mean' over non-ignored rows (default), 'sum', or 'none' (per row). */
  reduction?: 'mean' | 'sum' | 'none';
}

/** Cross-entropy from logits (N, V) (or (…, V)) and i32 targets (N) (or (…)); fused log-softmax. */
export function crossEntropy(logits: Tensor, targets: Tensor, opts: CrossEntropyOptions = {}): Tensor {
  const b = backendOf('crossEntropy', logits, targets);
  requireFloat('crossEntropy', logits);
  requireDType('crossEntropy', 'targets', targets, 'i32');
  if (logits.rank === 0) throw new ShapeError(`crossEntropy: logits must have rank ≥ 1 (…, V), got shape ${fmt(logits.shape)}`);
  const v = logits.shape[logits.rank - 1];
  const n = logits.size / v;
  if (!sameShape(targets.shape, logits.shape.slice(0, -1))) throw new ShapeError(`crossEntropy: targets shape ${fmt(targets.shape)} must be logits shape ${fmt(logits.shape)} without its last axis`);
  const ignore = opts.ignoreIndex ?? -100;
  const [lossH, lseH] = b.crossEntropy(ref(logits), ref(targets), n, v, ignore);
  const rows = wrap(b, lossH, [n], 'f32');
  const lse = wrap(b, lseH, [n], 'f32');
  const perRow = record('crossEntropy', rows, [logits], (g, [ls, ts, ss]) => [wrap(b, b.crossEntropyBackward(ref(ls), ref(ts), ref(ss), ref(g), n, v, ignore), ls.shape, ls.dtype)], [logits, targets, lse]);
  lse.dispose();
  const reduction = opts.reduction ?? 'mean';
  if (reduction === 'none') return disposing(reshape(perRow, targets.shape), perRow);
  const total = sum(perRow);
  if (reduction === 'sum') return disposing(total, perRow);
  // The count of non-ignored rows is data-dependent: it is computed on the device, no read-back.
  const keptMask = ne(targets, ignore);
  const keptF = cast(keptMask, 'f32');
  const count = sum(keptF);
  return disposing(div(total, count), perRow, total, keptMask, keptF, count);
}
