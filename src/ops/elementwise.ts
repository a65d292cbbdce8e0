/** Elementwise ops: unary math, broadcasting binary arithmetic and comparisons, where — with gradients. */
import { ArgumentError } from '../errors.ts';
import type { BinaryOp, UnaryOp } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { full } from './creation.ts';
import { sumTo } from './layout.ts';
import { backendOf, broadcastShapes, disposing, ref, requireFloat, requireSameDType, wrap } from './run.ts';

export type Operand = Tensor | number;

function rawUnary(x: Tensor, op: UnaryOp): Tensor {
  const b = x.backend;
  return wrap(b, b.unary(ref(x), op), x.shape, x.dtype);
}

/** Gradient rules: dL/dx given x, y = f(x) and the output gradient g, written with ops. */
const unaryGrads: Record<UnaryOp, (x: Tensor, y: Tensor, g: Tensor) => Tensor> = {
  neg: (_x, _y, g) => neg(g),
  abs: (x, _y, g) => mul(g, sign(x)),
  exp: (_x, y, g) => mul(g, y),
  log: (x, _y, g) => div(g, x),
  sqrt: (_x, y, g) => div(g, mul(y, 2)),
  rsqrt: (_x, y, g) => mul(g, mul(pow(y, 3), -0.5)),
  tanh: (_x, y, g) => mul(g, sub(1, square(y))),
  sigmoid: (_x, y, g) => mul(g, mul(y, sub(1, y))),
  silu: (x, _y, g) => {
    const s = sigmoid(x);
    return mul(g, mul(s, add(1, mul(x, sub(1, s)))));
  },
  gelu: (x, _y, g) => {
    // d/dx of 0.5·x·(1 + tanh(u)), u = c·(x + 0.044715·x³)
    const c = Math.sqrt(2 / Math.PI);
    const t = tanh(mul(add(x, mul(pow(x, 3), 0.044715)), c));
    const du = mul(add(1, mul(square(x), 3 * 0.044715)), c);
    const d = add(mul(add(1, t), 0.5), mul(mul(x, 0.5), mul(sub(1, square(t)), du)));
    return mul(g, d);
  },
  relu: (x, _y, g) => mul(g, gt(x, 0)),
  softplus: (x, _y, g) => mul(g, sigmoid(x)),
  square: (x, _y, g) => mul(g, mul(x, 2)),
  reciprocal: (_x, y, g) => mul(g, neg(square(y))),
  sign: () => { throw new Error('unreachable: sign has no gradient'); },
  sin: (x, _y, g) => mul(g, cos(x)),
  cos: (x, _y, g) => mul(g, neg(sin(x))),
};

export function unary(x: Tensor, op: UnaryOp): Tensor {
  requireFloat(op, x);
  const y = rawUnary(x, op);
  if (op === 'sign') return y;
  return record(op, y, [x], (g, [xs, ys]) => [unaryGrads[op](xs, ys, g)], [x, y]);
}

export const neg = (x: Tensor) => unary(x, 'neg');
export const abs = (x: Tensor) => unary(x, 'abs');
export const exp = (x: Tensor) => unary(x, 'exp');
export const log = (x: Tensor) => unary(x, 'log');
export const sqrt = (x: Tensor) => unary(x, 'sqrt');
export const rsqrt = (x: Tensor) => unary(x, 'rsqrt');
export const tanh = (x: Tensor) => unary(x, 'tanh');
export const sigmoid = (x: Tensor) => unary(x, 'sigmoid');
export const silu = (x: Tensor) => unary(x, 'silu');
export const gelu = (x: Tensor) => unary(x, 'gelu');
export const relu = (x: Tensor) => unary(x, 'relu');
export const softplus = (x: Tensor) => unary(x, 'softplus');
export const square = (x: Tensor) => unary(x, 'square');
export const reciprocal = (x: Tensor) => unary(x, 'reciprocal');
export const sign = (x: Tensor) => unary(x, 'sign');
export const sin = (x: Tensor) => unary(x, 'sin');
export const cos = (x: Tensor) => unary(x, 'cos');

/** A number operand becomes a scalar tensor of the other operand's dtype and backend. */
function operands(op: string, a: Operand, b: Operand): [Tensor, Tensor] {
  if (typeof a === 'number' && typeof b === 'number') throw new ArgumentError(`${op}: at least one operand must be a tensor, got two numbers (${a}, ${b})`);
  const ta = typeof a === 'number' ? full([], a, { dtype: (b as Tensor).dtype, backend: (b as Tensor).backend }) : a;
  const tb = typeof b === 'number' ? full([], b, { dtype: ta.dtype, backend: ta.backend }) : b;
  return [ta, tb];
}

export function binary(a: Operand, b: Operand, op: BinaryOp): Tensor {
  const [ta, tb] = operands(op, a, b);
  const be = backendOf(op, ta, tb);
  requireSameDType(op, ta, tb);
  const shape = broadcastShapes(op, ta.shape, tb.shape);
  const out = wrap(be, be.binary(ref(ta), ref(tb), op, shape), shape, ta.dtype);
  const grad = binaryGrads[op];
  if (grad) {
    // Save only what this op's rule reads, so the graph keeps no activation it does not need.
    const from: Record<SavedName, Tensor> = { a: ta, b: tb, y: out };
    record(op, out, [ta, tb], (g, saved) => {
      const s: Partial<Record<SavedName, Tensor>> = {};
      grad.save.forEach((k, i) => { s[k] = saved[i]; });
      const [ga, gb] = grad.rule(s as Record<SavedName, Tensor>, g, tb.requiresGrad);
      return [ga && ta.requiresGrad ? sumTo(ga, ta.shape) : null, gb && tb.requiresGrad ? sumTo(gb, tb.shape) : null];
    }, grad.save.map((k) => from[k]));
  }
  return disposing(out, ...scalarsMade(a, b, ta, tb));
}

/** The scalar tensors `operands` made from numbers (the op disposes them once it has run). */
function scalarsMade(a: Operand, b: Operand, ta: Tensor, tb: Tensor): Tensor[] {
  return [...(typeof a === 'number' ? [ta] : []), ...(typeof b === 'number' ? [tb] : [])];
}

type SavedName = 'a' | 'b' | 'y';
/**
 * A binary op's gradient: `save` names the tensors its rule reads (inputs a, b, output y) and
 * only those are kept by the graph; the rule sees them by name (entries not saved are absent).
 * `needB`: whether b wants a gradient (the saved copies never carry requiresGrad themselves).
 */
interface BinaryGrad {
  save: readonly SavedName[];
  rule: (s: Record<SavedName, Tensor>, g: Tensor, needB: boolean) => [Tensor | null, Tensor | null];
}
const binaryGrads: Partial<Record<BinaryOp, BinaryGrad>> = {
  add: { save: [], rule: (_s, g) => [g, g] },
  sub: { save: [], rule: (_s, g) => [g, neg(g)] },
  mul: { save: ['a', 'b'], rule: ({ a, b }, g) => [mul(g, b), mul(g, a)] },
  div: { save: ['b', 'y'], rule: ({ b, y }, g) => [div(g, b), neg(mul(g, div(y, b)))] },
  pow: {
    save: ['a', 'b', 'y'],
    rule: ({ a, b, y }, g, needB) => {
      // As PyTorch: d/da is 0 where b == 0 (not 0·a^-1 = NaN at a = 0), and d/db = y·log(a) is 0
      // where a == 0 and b ≥ 0 (not 0·(−∞) = NaN).
      const da = where(eq(b, 0), 0, mul(b, pow(a, sub(b, 1))));
      if (!needB) return [mul(g, da), null];
      const t = mul(y, log(a));
      const db = where(eq(a, 0), where(ge(b, 0), 0, t), t);
      return [mul(g, da), mul(g, db)];
    },
  },
  // Ties send the gradient to the first operand, as max(a, b) picks a on ties.
  max: { save: ['a', 'b'], rule: ({ a, b }, g) => { const m = ge(a, b); return [mul(g, m), mul(g, sub(1, m))]; } },
  min: { save: ['a', 'b'], rule: ({ a, b }, g) => { const m = le(a, b); return [mul(g, m), mul(g, sub(1, m))]; } },
};

export const add = (a: Operand, b: Operand) => binary(a, b, 'add');
export const sub = (a: Operand, b: Operand) => binary(a, b, 'sub');
export const mul = (a: Operand, b: Operand) => binary(a, b, 'mul');
export const div = (a: Operand, b: Operand) => binary(a, b, 'div');
export const pow = (a: Operand, b: Operand) => binary(a, b, 'pow');
export const maximum = (a: Operand, b: Operand) => binary(a, b, 'max');
export const minimum = (a: Operand, b: Operand) => binary(a, b, 'min');
export const eq = (a: Operand, b: Operand) => binary(a, b, 'eq');
export const ne = (a: Operand, b: Operand) => binary(a, b, 'ne');
export const lt = (a: Operand, b: Operand) => binary(a, b, 'lt');
export const le = (a: Operand, b: Operand) => binary(a, b, 'le');
export const gt = (a: Operand, b: Operand) => binary(a, b, 'gt');
export const ge = (a: Operand, b: Operand) => binary(a, b, 'ge');

/** Elementwise select: cond ≠ 0 ? a : b, all three broadcast together. */
export function where(cond: Tensor, a: Operand, b: Operand): Tensor {
  const [ta, tb] = operands('where', a, b);
  const be = backendOf('where', cond, ta, tb);
  requireSameDType('where', ta, tb);
  const shape = broadcastShapes('where', cond.shape, ta.shape, tb.shape);
  const out = wrap(be, be.where(ref(cond), ref(ta), ref(tb), shape), shape, ta.dtype);
  record('where', out, [ta, tb], (g, [c]) => [
    ta.requiresGrad ? sumTo(where(c, g, 0), ta.shape) : null,
    tb.requiresGrad ? sumTo(where(c, 0, g), tb.shape) : null,
  ], [cond]);
  return disposing(out, ...scalarsMade(a, b, ta, tb));
}
