/**
 * The op case table (STYLE.md §3): every op exported by src/index.ts, as a list of cases, each
 * with its inputs (shape, dtype, a seeded generator), the function to run, which inputs are
 * differentiable and a forward tolerance. The table is backend-agnostic: `buildInputs(c, backend)`
 * makes a case's inputs on any backend from host-side generators, so every backend sees exactly the
 * same values. test/parity/run.ts runs the table (parity against the CPU reference, gradient
 * checks); test/parity/table.ts turns the results into docs/ops.md.
 *
 * Adding an op: add its cases here (a test fails while an exported function has none), with at
 * least one size that is not a multiple of any tile (1, 7, 33, 129) and, for differentiable ops,
 * an f32 case with `grad` listing the inputs whose gradient the finite-difference check verifies.
 * Inputs of non-smooth ops are generated away from their kinks (`away`, `distinct`) so that
 * central differences are valid; `ties` generates repeated values on purpose (stability, tie rules).
 */
import * as fon from '../../src/index.ts';
import type { Backend, DType, Tensor } from '../../src/index.ts';
import type { UnaryOp, BinaryOp } from '../../src/backend/backend.ts';
import { normalArray, uniformArray } from '../../src/ops/random.ts';

export interface Tol { readonly rtol: number; readonly atol: number }

/** How an input's values are made; every generator is a pure function of (seed, shape). */
export type Gen =
  | { readonly kind: 'randn'; readonly mean?: number; readonly std?: number }
  | { readonly kind: 'rand'; readonly low: number; readonly high: number }
  /** Integers in [low, high): i32 through fon.randint, other dtypes through the same stream. */
  | { readonly kind: 'randint'; readonly low: number; readonly high: number }
  /** |x| uniform in [min, max) with a random sign: away from the kinks of abs, relu, sign. */
  | { readonly kind: 'away'; readonly min: number; readonly max: number }
  /** A shuffled grid (i − n/2)·step + offset: no two values closer than `step` (max, sort, …). */
  | { readonly kind: 'distinct'; readonly step: number; readonly offset?: number }
  /** Small integers in [low, high) stored as floats: many ties on purpose. */
  | { readonly kind: 'ties'; readonly low: number; readonly high: number }
  /** Explicit values computed from the shape (rope tables, targets with ignored rows). */
  | { readonly kind: 'values'; readonly values: (shape: readonly number[]) => ArrayLike<number> };

export interface InputSpec {
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly gen: Gen;
  readonly seed: number;
}

export interface OpCase {
  /** Unique: `op/dtype/shapes[/note]`. */
  readonly name: string;
  /** The exported function under test: the row of the support table. */
  readonly op: string;
  /** The dtype the case exercises (the first input's, or the created one's). */
  readonly dtype: DType;
  readonly inputs: readonly InputSpec[];
  /** Runs the op on inputs made by buildInputs; creation ops use `backend`. */
  readonly run: (xs: readonly Tensor[], backend: Backend) => Tensor | readonly Tensor[];
  /** Inputs whose gradient is checked (empty: not differentiable). Only float outputs feed the loss. */
  readonly grad: readonly number[];
  /** Forward tolerance for float outputs (floored by the dtype's own, see DTYPE_TOL); ints are exact. */
  readonly tol: Tol;
  /** Central-difference step (default in run.ts). */
  readonly fdEps?: number;
  /** Why the finite-difference check cannot apply although the op is differentiable (counted as a skip). */
  readonly fdSkip?: string;
}

/** The loosest a float output of each dtype is ever compared at (about two units in the last place). */
export const DTYPE_TOL: Readonly<Record<DType, Tol>> = {
  f32: { rtol: 1e-5, atol: 1e-6 },
  f16: { rtol: 2e-3, atol: 1e-3 },
  bf16: { rtol: 1.6e-2, atol: 1e-2 },
  i32: { rtol: 0, atol: 0 },
  u8: { rtol: 0, atol: 0 },
};

/** Elementwise math (transcendentals may differ by a few ulp between backends). */
const EW: Tol = { rtol: 1e-4, atol: 1e-5 };
/** Anything that accumulates (sums, dot products, norms, softmax): summation order differs. */
const ACC: Tol = { rtol: 1e-4, atol: 1e-4 };
/** Pure data movement: the bits must match. */
const EXACT: Tol = { rtol: 0, atol: 0 };

// ---------------------------------------------------------------------------------------------
// Input generators

const randn = (std = 1, mean = 0): Gen => ({ kind: 'randn', std, mean });
const rand = (low: number, high: number): Gen => ({ kind: 'rand', low, high });
const randint = (low: number, high: number): Gen => ({ kind: 'randint', low, high });
const away = (min: number, max: number): Gen => ({ kind: 'away', min, max });
const distinct = (step = 0.05, offset = 0): Gen => ({ kind: 'distinct', step, offset });
const ties = (low: number, high: number): Gen => ({ kind: 'ties', low, high });
const values = (f: (shape: readonly number[]) => ArrayLike<number>): Gen => ({ kind: 'values', values: f });

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const isFloatDType = (d: DType) => d === 'f32' || d === 'f16' || d === 'bf16';

function hostValues(spec: InputSpec): ArrayLike<number> {
  const n = size(spec.shape);
  const g = spec.gen;
  switch (g.kind) {
    case 'randn': return normalArray(spec.seed, n, g.mean ?? 0, g.std ?? 1);
    case 'rand': return uniformArray(spec.seed, n, g.low, g.high);
    case 'randint': case 'ties': {
      const u = uniformArray(spec.seed, n);
      return Array.from(u, (v) => g.low + Math.floor(v * (g.high - g.low)));
    }
    case 'away': {
      const u = uniformArray(spec.seed, n), s = uniformArray(spec.seed + 1, n);
      return Array.from(u, (v, i) => (s[i] < 0.5 ? -1 : 1) * (g.min + v * (g.max - g.min)));
    }
    case 'distinct': {
      const u = uniformArray(spec.seed, n);
      const perm = Array.from({ length: n }, (_, i) => i);
      for (let i = n - 1; i > 0; i--) { const j = Math.floor(u[i] * (i + 1)); [perm[i], perm[j]] = [perm[j], perm[i]]; }
      return perm.map((p) => (p - Math.floor(n / 2)) * g.step + (g.offset ?? 0));
    }
    case 'values': return g.values(spec.shape);
  }
}

/** One input on `backend`: through fon.randn/rand/randint where they apply, else host values uploaded. */
export function buildInput(spec: InputSpec, backend: Backend): Tensor {
  const { shape, dtype, seed, gen } = spec;
  if (gen.kind === 'randn' && isFloatDType(dtype)) return fon.randn(shape, { seed, dtype, backend, mean: gen.mean, std: gen.std });
  if (gen.kind === 'rand' && isFloatDType(dtype)) return fon.rand(shape, { seed, dtype, backend, low: gen.low, high: gen.high });
  if (gen.kind === 'randint' && dtype === 'i32') return fon.randint(shape, gen.low, gen.high, { seed, backend });
  const v = hostValues(spec);
  const host = isFloatDType(dtype) ? Float32Array.from(v) : dtype === 'u8' ? Uint8Array.from(v) : Int32Array.from(v);
  return fon.tensor(host, shape, { dtype, backend });
}

export function buildInputs(c: OpCase, backend: Backend): Tensor[] {
  const out: Tensor[] = [];
  try {
    for (const s of c.inputs) out.push(buildInput(s, backend));
  } catch (e) {
    for (const t of out) t.dispose();
    throw e;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Case construction

interface In { shape: readonly number[]; gen: Gen; dtype?: DType; seed?: number }
const inp = (shape: readonly number[], gen: Gen = randn(), dtype: DType = 'f32', seed?: number): In => ({ shape, gen, dtype, seed });

/** FNV-1a of the case name: each input's default seed, fixed by the name so cases can be reordered. */
function nameSeed(name: string, i: number): number {
  let h = 0x811c9dc5;
  for (const ch of `${name}#${i}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  return h >>> 0;
}

const fmtShape = (s: readonly number[]) => `[${s.join(',')}]`;

interface CaseDef {
  op: string;
  inputs: readonly In[];
  run: OpCase['run'];
  grad?: readonly number[];
  tol?: Tol;
  note?: string;
  dtype?: DType;
  fdEps?: number;
  fdSkip?: string;
}

const CASE_LIST: OpCase[] = [];

function add(def: CaseDef): void {
  const dtype = def.dtype ?? def.inputs[0]?.dtype ?? 'f32';
  const name = [def.op, dtype, def.inputs.map((i) => fmtShape(i.shape)).join('x') || '-', ...(def.note ? [def.note] : [])].join('/');
  const inputs = def.inputs.map((i, k): InputSpec => ({ shape: i.shape, dtype: i.dtype ?? 'f32', gen: i.gen, seed: i.seed ?? nameSeed(name, k) }));
  CASE_LIST.push({ name, op: def.op, dtype, inputs, run: def.run, grad: def.grad ?? [], tol: def.tol ?? EW, fdEps: def.fdEps, fdSkip: def.fdSkip });
}

/** Grad indices only when every one of them is an f32 input (gradient checks run in f32). */
const gradIf = (dtype: DType, idx: readonly number[]) => (dtype === 'f32' ? idx : []);

// ---------------------------------------------------------------------------------------------
// Creation (no inputs: the op itself makes the tensor on the backend)

for (const dtype of ['f32', 'f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'full', dtype, inputs: [], note: `${dtype}[7,33]`, run: (_, backend) => fon.full([7, 33], 2.75, { dtype, backend }), tol: EXACT });
}
add({ op: 'full', dtype: 'f32', inputs: [], note: 'size0', run: (_, backend) => fon.full([0, 3], -1.5, { backend }), tol: EXACT });
add({ op: 'zeros', dtype: 'f32', inputs: [], note: '[129]', run: (_, backend) => fon.zeros([129], { backend }), tol: EXACT });
add({ op: 'ones', dtype: 'bf16', inputs: [], note: '[1]', run: (_, backend) => fon.ones([1], { dtype: 'bf16', backend }), tol: EXACT });
add({ op: 'zerosLike', inputs: [inp([7, 33], randn(), 'f16')], run: ([x]) => fon.zerosLike(x), tol: EXACT });
add({ op: 'onesLike', inputs: [inp([2, 3, 5], randint(0, 9), 'i32')], run: ([x]) => fon.onesLike(x), tol: EXACT });
add({ op: 'arange', dtype: 'i32', inputs: [], note: '0..33', run: (_, backend) => fon.arange(0, 33, 1, { backend }), tol: EXACT });
add({ op: 'arange', dtype: 'f32', inputs: [], note: '5..-5step-0.5', run: (_, backend) => fon.arange(5, -5, -0.5, { dtype: 'f32', backend }), tol: EXACT });
add({ op: 'arange', dtype: 'i32', inputs: [], note: 'empty', run: (_, backend) => fon.arange(3, 3, 1, { backend }), tol: EXACT });
add({ op: 'randn', dtype: 'f32', inputs: [], note: '[7,33]', run: (_, backend) => fon.randn([7, 33], { seed: 11, backend }), tol: EXACT });
add({ op: 'randn', dtype: 'bf16', inputs: [], note: '[129]', run: (_, backend) => fon.randn([129], { seed: 12, dtype: 'bf16', backend, mean: 3, std: 0.5 }), tol: EXACT });
add({ op: 'rand', dtype: 'f32', inputs: [], note: '[33]', run: (_, backend) => fon.rand([33], { seed: 13, backend, low: -2, high: 5 }), tol: EXACT });
add({ op: 'randint', dtype: 'i32', inputs: [], note: '[7,33]', run: (_, backend) => fon.randint([7, 33], -5, 100, { seed: 14, backend }), tol: EXACT });
add({ op: 'tensor', dtype: 'f32', inputs: [], note: 'nested', run: (_, backend) => fon.tensor([[1, 2.5, -3], [4, 5, 6]], undefined, { backend }), tol: EXACT });
add({ op: 'tensor', dtype: 'f16', inputs: [], note: 'typed', run: (_, backend) => fon.tensor(new Float32Array([0.1, 1e-6, 70000, -2.5]), [2, 2], { dtype: 'f16', backend }), tol: EXACT });
add({ op: 'scalar', dtype: 'f32', inputs: [], note: '3.25', run: (_, backend) => fon.scalar(3.25, { backend }), tol: EXACT });

// ---------------------------------------------------------------------------------------------
// Unary elementwise

type UnaryName = UnaryOp;
const UNARY: Record<UnaryName, { fn: (x: Tensor) => Tensor; gen: Gen; diff: boolean }> = {
  neg: { fn: fon.neg, gen: randn(), diff: true },
  abs: { fn: fon.abs, gen: away(0.1, 2), diff: true },
  exp: { fn: fon.exp, gen: randn(), diff: true },
  log: { fn: fon.log, gen: rand(0.5, 3), diff: true },
  sqrt: { fn: fon.sqrt, gen: rand(0.5, 3), diff: true },
  rsqrt: { fn: fon.rsqrt, gen: rand(0.5, 3), diff: true },
  tanh: { fn: fon.tanh, gen: randn(), diff: true },
  sigmoid: { fn: fon.sigmoid, gen: randn(2), diff: true },
  silu: { fn: fon.silu, gen: randn(2), diff: true },
  gelu: { fn: fon.gelu, gen: randn(2), diff: true },
  relu: { fn: fon.relu, gen: away(0.1, 2), diff: true },
  softplus: { fn: fon.softplus, gen: randn(2), diff: true },
  square: { fn: fon.square, gen: randn(), diff: true },
  reciprocal: { fn: fon.reciprocal, gen: away(0.5, 2), diff: true },
  sign: { fn: fon.sign, gen: away(0.1, 2), diff: false },
  sin: { fn: fon.sin, gen: randn(2), diff: true },
  cos: { fn: fon.cos, gen: randn(2), diff: true },
};

// WGSL bounds sin and cos by an absolute error of 2⁻¹¹ on [−π, π] (not a relative one); the
// cases hold the GPU to that bound rather than to libm's.
const TRIG: Tol = { rtol: 1e-4, atol: 5e-4 };

for (const [op, { fn, gen, diff }] of Object.entries(UNARY) as [UnaryName, (typeof UNARY)[UnaryName]][]) {
  for (const shape of [[0], [1], [129], [7, 33], [2, 3, 5]]) {
    add({ op, inputs: [inp(shape, gen)], run: ([x]) => fn(x), grad: diff ? [0] : [], ...(op === 'sin' || op === 'cos' ? { tol: TRIG } : {}) });
  }
  for (const dtype of ['f16', 'bf16'] as const) add({ op, inputs: [inp([7, 33], gen, dtype)], run: ([x]) => fn(x) });
}
add({ op: 'sign', inputs: [inp([33], ties(-2, 3))], note: 'zeros', run: ([x]) => fon.sign(x) });
add({ op: 'softplus', inputs: [inp([129], randn(15))], note: 'wide', run: ([x]) => fon.softplus(x), grad: [0] });
add({ op: 'exp', inputs: [inp([33], randn(30))], note: 'overflow', run: ([x]) => fon.exp(x) });
add({ op: 'unary', inputs: [inp([7, 33], randn())], note: 'tanh', run: ([x]) => fon.unary(x, 'tanh'), grad: [0] });

// ---------------------------------------------------------------------------------------------
// Binary elementwise with broadcasting

type BinName = 'add' | 'sub' | 'mul' | 'div' | 'pow' | 'maximum' | 'minimum' | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge';
const BINARY: Record<BinName, { fn: (a: fon.Operand, b: fon.Operand) => Tensor; a: Gen; b: Gen; diff: boolean }> = {
  add: { fn: fon.add, a: randn(), b: randn(), diff: true },
  sub: { fn: fon.sub, a: randn(), b: randn(), diff: true },
  mul: { fn: fon.mul, a: randn(), b: randn(), diff: true },
  div: { fn: fon.div, a: randn(), b: away(0.5, 2), diff: true },
  pow: { fn: fon.pow, a: rand(0.5, 2), b: randn(), diff: true },
  maximum: { fn: fon.maximum, a: distinct(0.05), b: distinct(0.05, 0.025), diff: true },
  minimum: { fn: fon.minimum, a: distinct(0.05), b: distinct(0.05, 0.025), diff: true },
  eq: { fn: fon.eq, a: ties(-2, 3), b: ties(-2, 3), diff: false },
  ne: { fn: fon.ne, a: ties(-2, 3), b: ties(-2, 3), diff: false },
  lt: { fn: fon.lt, a: ties(-2, 3), b: ties(-2, 3), diff: false },
  le: { fn: fon.le, a: ties(-2, 3), b: ties(-2, 3), diff: false },
  gt: { fn: fon.gt, a: ties(-2, 3), b: ties(-2, 3), diff: false },
  ge: { fn: fon.ge, a: ties(-2, 3), b: ties(-2, 3), diff: false },
};

const BIN_SHAPES: readonly [readonly number[], readonly number[]][] = [
  [[7, 33], [7, 33]], [[7, 33], [33]], [[3, 1, 7], [5, 1]], [[1], [1]], [[129], []], [[0, 5], [1, 5]], [[7, 1], [1, 33]],
];
for (const [op, { fn, a, b, diff }] of Object.entries(BINARY) as [BinName, (typeof BINARY)[BinName]][]) {
  for (const [sa, sb] of BIN_SHAPES) add({ op, inputs: [inp(sa, a), inp(sb, b)], run: ([x, y]) => fn(x, y), grad: diff ? [0, 1] : [], tol: EW });
  for (const dtype of ['f16', 'bf16'] as const) add({ op, inputs: [inp([7, 33], a, dtype), inp([33], b, dtype)], run: ([x, y]) => fn(x, y) });
  // Same shape with a size that is a multiple of 4 (the vectorised path of GPU backends).
  add({ op, inputs: [inp([12, 33], a), inp([12, 33], b)], note: 'vec4', run: ([x, y]) => fn(x, y), grad: diff ? [0, 1] : [], tol: EW });
}
// Number operands on either side.
add({ op: 'mul', inputs: [inp([7, 33])], note: 'x*3', run: ([x]) => fon.mul(x, 3), grad: [0] });
add({ op: 'sub', inputs: [inp([7, 33])], note: '2-x', run: ([x]) => fon.sub(2, x), grad: [0] });
add({ op: 'div', inputs: [inp([33], away(0.5, 2))], note: '1/x', run: ([x]) => fon.div(1, x), grad: [0] });
add({ op: 'pow', inputs: [inp([33], rand(0.5, 2))], note: 'x^2.5', run: ([x]) => fon.pow(x, 2.5), grad: [0] });
add({ op: 'pow', inputs: [inp([33], randn())], note: '2^x', run: ([x]) => fon.pow(2, x), grad: [0] });
add({ op: 'lt', inputs: [inp([129], randn())], note: 'x<0', run: ([x]) => fon.lt(x, 0) });
add({ op: 'binary', inputs: [inp([7, 33]), inp([33])], note: 'add', run: ([x, y]) => fon.binary(x, y, 'add' satisfies BinaryOp), grad: [0, 1] });
// Integer arithmetic (division truncates toward zero; results wrap like C).
for (const dtype of ['i32', 'u8'] as const) {
  const lo = dtype === 'u8' ? 0 : -50;
  const ints: [BinName, Gen][] = [['add', randint(lo, 50)], ['sub', randint(lo, 50)], ['mul', randint(lo, 20)], ['div', randint(1, 9)],
    ['maximum', randint(lo, 50)], ['minimum', randint(lo, 50)], ['eq', randint(0, 3)], ['lt', randint(0, 3)], ['ge', randint(0, 3)]];
  for (const [op, gb] of ints) add({ op, inputs: [inp([7, 33], randint(lo, 50), dtype), inp([33], gb, dtype)], run: ([x, y]) => BINARY[op].fn(x, y) });
}

// where
add({ op: 'where', dtype: 'f32', inputs: [inp([7, 33], randint(0, 2), 'i32'), inp([7, 33]), inp([7, 33])], run: ([c, a, b]) => fon.where(c, a, b), grad: [1, 2] });
add({ op: 'where', dtype: 'f32', inputs: [inp([7, 1], ties(0, 2)), inp([33]), inp([])], run: ([c, a, b]) => fon.where(c, a, b), grad: [1, 2] });
add({ op: 'where', dtype: 'f32', inputs: [inp([3, 1, 7], randint(0, 2), 'u8'), inp([5, 1])], note: 'x-else-0', run: ([c, a]) => fon.where(c, a, 0), grad: [1] });
add({ op: 'where', dtype: 'f32', inputs: [inp([0, 4], randint(0, 2), 'i32'), inp([0, 4]), inp([4])], run: ([c, a, b]) => fon.where(c, a, b), grad: [1, 2] });
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  const g = isFloatDType(dtype) ? randn() : randint(0, 100);
  add({ op: 'where', dtype, inputs: [inp([7, 33], randint(0, 2), 'i32'), inp([7, 33], g, dtype), inp([33], g, dtype)], run: ([c, a, b]) => fon.where(c, a, b) });
}

// ---------------------------------------------------------------------------------------------
// Reductions

type Axes = number | readonly number[] | undefined;
const REDUCE_AXES: readonly [readonly number[], Axes, boolean][] = [
  [[7, 33], undefined, false], [[7, 33], 0, false], [[7, 33], -1, true], [[7, 33], [0, 1], true],
  [[2, 3, 5], [0, 2], false], [[2, 3, 5], 1, true], [[129], 0, false], [[1], undefined, false], [[2, 33, 7], [1], false],
];
const REDUCE = {
  sum: { fn: fon.sum, gen: randn() },
  mean: { fn: fon.mean, gen: randn() },
  max: { fn: fon.max, gen: distinct() },
  min: { fn: fon.min, gen: distinct() },
} as const;
const axesNote = (axes: Axes, keep: boolean) => `axes=${axes === undefined ? 'all' : Array.isArray(axes) ? axes.join('+') : axes}${keep ? ',keep' : ''}`;
for (const [op, { fn, gen }] of Object.entries(REDUCE)) {
  for (const [shape, axes, keepDims] of REDUCE_AXES) {
    add({ op, inputs: [inp(shape, gen)], note: axesNote(axes, keepDims), run: ([x]) => fn(x, axes, { keepDims }), grad: [0], tol: ACC });
  }
  add({ op, inputs: [inp([0, 4], gen)], note: 'axes=1', run: ([x]) => fn(x, 1), grad: [0], tol: ACC });
  add({ op, inputs: [inp([7, 33], gen, 'f16')], note: 'axes=1', run: ([x]) => fn(x, 1), tol: ACC });
  add({ op, inputs: [inp([7, 33], gen, 'bf16')], note: 'axes=0', run: ([x]) => fn(x, 0), tol: ACC });
}
add({ op: 'sum', inputs: [inp([3, 0])], note: 'empty-axis', run: ([x]) => fon.sum(x, 1), grad: [0] });
add({ op: 'mean', inputs: [inp([3, 0])], note: 'empty-axis', run: ([x]) => fon.mean(x, 1) });
add({ op: 'sum', inputs: [inp([7, 33], randint(-100, 100), 'i32')], note: 'axes=1', run: ([x]) => fon.sum(x, 1), tol: EXACT });
add({ op: 'max', inputs: [inp([7, 33], randint(-100, 100), 'i32')], note: 'axes=0', run: ([x]) => fon.max(x, 0), tol: EXACT });
// i32 beyond f32's exact integers (2^24): kernels must not round them through f32.
const BIG = randint(-(2 ** 30), 2 ** 30);
add({ op: 'sum', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => fon.sum(x, 1), tol: EXACT });
add({ op: 'max', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => fon.max(x, 1), tol: EXACT });
add({ op: 'min', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => fon.min(x, 0), tol: EXACT });
add({ op: 'max', inputs: [inp([7, 33], ties(-2, 3))], note: 'ties', run: ([x]) => fon.max(x, 1) });
add({ op: 'min', inputs: [inp([7, 33], ties(-2, 3))], note: 'ties', run: ([x]) => fon.min(x, 0, { keepDims: true }) });

// softmax family
const SOFTMAX_SHAPES: readonly [readonly number[], number][] = [[[7, 33], -1], [[7, 33], 0], [[2, 3, 129], 1], [[1], 0], [[0, 7], -1], [[4, 1], -1]];
for (const [shape, axis] of SOFTMAX_SHAPES) {
  add({ op: 'softmax', inputs: [inp(shape, randn(2))], note: `axis=${axis}`, run: ([x]) => fon.softmax(x, axis), grad: [0], tol: ACC });
  add({ op: 'logSoftmax', inputs: [inp(shape, randn(2))], note: `axis=${axis}`, run: ([x]) => fon.logSoftmax(x, axis), grad: [0], tol: ACC });
  add({ op: 'logsumexp', inputs: [inp(shape, randn(2))], note: `axis=${axis}`, run: ([x]) => fon.logsumexp(x, axis), grad: [0], tol: ACC });
}
add({ op: 'logsumexp', inputs: [inp([7, 33], randn(2))], note: 'axis=1,keep', run: ([x]) => fon.logsumexp(x, 1, { keepDims: true }), grad: [0], tol: ACC });
add({ op: 'logsumexp', inputs: [inp([3, 0])], note: 'empty-axis', run: ([x]) => fon.logsumexp(x, 1) });
for (const op of ['softmax', 'logSoftmax', 'logsumexp'] as const) {
  add({ op, inputs: [inp([7, 33], randn(30))], note: 'large', run: ([x]) => fon[op](x, -1), grad: [0], tol: ACC });
  for (const dtype of ['f16', 'bf16'] as const) add({ op, inputs: [inp([7, 33], randn(2), dtype)], run: ([x]) => fon[op](x, -1), tol: ACC });
}

// ---------------------------------------------------------------------------------------------
// Matmul and linear

const MATMUL: readonly [readonly number[], readonly number[], fon.MatmulOptions][] = [
  [[7, 33], [33, 129], {}],
  [[33, 7], [33, 5], { transA: true }],
  [[7, 33], [5, 33], { transB: true }],
  [[33, 7], [5, 33], { transA: true, transB: true }],
  [[3, 7, 9], [9, 5], {}],
  [[9, 7], [3, 5, 9], { transA: true, transB: true }],
  [[2, 1, 7, 9], [3, 9, 5], {}],
  [[2, 129], [129, 3], {}],
  [[1, 1], [1, 1], {}],
  [[4, 0], [0, 3], {}],
  [[0, 5], [5, 3], {}],
  [[0, 2, 3], [3, 4], {}],
];
for (const [sa, sb, o] of MATMUL) {
  const note = o.transA || o.transB ? `${o.transA ? 'A' : ''}${o.transB ? 'B' : ''}T` : undefined;
  add({ op: 'matmul', inputs: [inp(sa), inp(sb)], note, run: ([a, b]) => fon.matmul(a, b, o), grad: [0, 1], tol: ACC });
}
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'matmul', inputs: [inp([7, 33], randn(), dtype), inp([33, 5], randn(), dtype)], run: ([a, b]) => fon.matmul(a, b), tol: ACC });
  add({ op: 'matmul', inputs: [inp([2, 7, 33], randn(), dtype), inp([5, 33], randn(), dtype)], note: 'BT', run: ([a, b]) => fon.matmul(a, b, { transB: true }), tol: ACC });
}
add({ op: 'linear', inputs: [inp([2, 7, 33]), inp([5, 33]), inp([5])], note: 'out-in+bias', run: ([x, w, b]) => fon.linear(x, w, b), grad: [0, 1, 2], tol: ACC });
add({ op: 'linear', inputs: [inp([7, 33]), inp([33, 5])], note: 'in-out', run: ([x, w]) => fon.linear(x, w, undefined, false), grad: [0, 1], tol: ACC });
add({ op: 'linear', inputs: [inp([1, 1]), inp([1, 1]), inp([1])], run: ([x, w, b]) => fon.linear(x, w, b), grad: [0, 1, 2], tol: ACC });
add({ op: 'linear', inputs: [inp([3, 129], randn(), 'f16'), inp([7, 129], randn(), 'f16')], run: ([x, w]) => fon.linear(x, w), tol: ACC });
/** The fdSkip of a case whose result is rounded to 16 bits (its gradient parity across backends still runs). */
const ROUNDED = (to: string) => `the output is rounded to ${to}: central differences cannot resolve it (checked analytically in test/ops/grad.test.ts)`;
// A result in another dtype than the operands', written by the GEMM (few rows: a decoding step's
// projections, the few-rows kernel; and a tiled shape), with its gradient back in the operands'.
for (const [sa, out] of [[[1, 129], 'f16'], [[2, 7, 33], 'f16'], [[3, 129], 'bf16']] as const) {
  add({ op: 'matmul', inputs: [inp(sa), inp([5, sa[sa.length - 1]])], note: `BT→${out}`, run: ([a, b]) => fon.matmul(a, b, { transB: true, outDType: out }), grad: [0, 1], tol: ACC, fdSkip: ROUNDED(out) });
}
add({ op: 'matmul', inputs: [inp([2, 129], randn(), 'f16'), inp([6, 129], randn(), 'f16')], note: 'BT→f32', run: ([a, b]) => fon.matmul(a, b, { transB: true, outDType: 'f32' }), tol: ACC });
add({ op: 'linear', inputs: [inp([1, 1, 129]), inp([6, 129]), inp([6])], note: 'out f16+bias', run: ([x, w, b]) => fon.linear(x, w, b, true, { outDType: 'f16' }), grad: [0, 1, 2], tol: ACC, fdSkip: ROUNDED('f16') });
add({ op: 'linear', inputs: [inp([1, 129], randn(), 'f16'), inp([6, 129], randn(), 'f16')], note: 'out f32', run: ([x, w]) => fon.linear(x, w, undefined, true, { outDType: 'f32' }), tol: ACC });
// linears: several projections of one input (an output each); with gradients one linear each,
// under noGrad one Backend.matmulMany (one dispatch on webgpu).
add({ op: 'linears', inputs: [inp([2, 7, 33]), inp([5, 33]), inp([4, 33])], note: 'grad', run: ([x, a, b]) => fon.linears(x, [a, b]), grad: [0, 1, 2], tol: ACC });
add({ op: 'linears', inputs: [inp([1, 1, 132]), inp([7, 132]), inp([1, 132]), inp([33, 132])], note: 'noGrad, out f32/f32/f16', run: ([x, a, b, c]) => fon.noGrad(() => fon.linears(x, [a, b, c], ['f32', 'f32', 'f16'])), tol: ACC });
add({ op: 'linears', inputs: [inp([3, 64], randn(), 'f16'), inp([5, 64], randn(), 'f16'), inp([3, 64], randn(), 'f16')], note: 'noGrad f16, out f32/f16', run: ([x, a, b]) => fon.noGrad(() => fon.linears(x, [a, b], ['f32', 'f16'])), tol: ACC });

// ---------------------------------------------------------------------------------------------
// Layout

const ALL_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'u8'];
const genFor = (dtype: DType): Gen => (isFloatDType(dtype) ? randn() : randint(0, 200));

add({ op: 'reshape', inputs: [inp([7, 33])], note: '[33,7]', run: ([x]) => fon.reshape(x, [33, 7]), grad: [0], tol: EXACT });
add({ op: 'reshape', inputs: [inp([2, 3, 5])], note: '[6,-1]', run: ([x]) => fon.reshape(x, [6, -1]), grad: [0], tol: EXACT });
add({ op: 'reshape', inputs: [inp([0, 3])], note: '[3,0]', run: ([x]) => fon.reshape(x, [3, 0]), grad: [0], tol: EXACT });
add({ op: 'reshape', inputs: [inp([1])], note: '[]', run: ([x]) => fon.reshape(x, []), grad: [0], tol: EXACT });
add({ op: 'flatten', inputs: [inp([2, 3, 5])], run: ([x]) => fon.flatten(x), grad: [0], tol: EXACT });
add({ op: 'unsqueeze', inputs: [inp([7, 33])], note: 'axis=1', run: ([x]) => fon.unsqueeze(x, 1), grad: [0], tol: EXACT });
add({ op: 'unsqueeze', inputs: [inp([7, 33])], note: 'axis=-1', run: ([x]) => fon.unsqueeze(x, -1), grad: [0], tol: EXACT });
add({ op: 'squeeze', inputs: [inp([7, 1, 33])], note: 'axis=1', run: ([x]) => fon.squeeze(x, 1), grad: [0], tol: EXACT });
add({ op: 'squeeze', inputs: [inp([1, 7, 1])], note: 'all', run: ([x]) => fon.squeeze(x), grad: [0], tol: EXACT });
for (const dtype of ALL_DTYPES) {
  add({ op: 'permute', inputs: [inp([2, 3, 5], genFor(dtype), dtype)], note: '2,0,1', run: ([x]) => fon.permute(x, [2, 0, 1]), grad: gradIf(dtype, [0]), tol: EXACT });
}
add({ op: 'permute', inputs: [inp([7, 33])], note: '1,0', run: ([x]) => fon.permute(x, [1, 0]), grad: [0], tol: EXACT });
add({ op: 'permute', inputs: [inp([2, 3, 5, 7])], note: '3,1,0,2', run: ([x]) => fon.permute(x, [3, 1, 0, 2]), grad: [0], tol: EXACT });
add({ op: 'permute', inputs: [inp([0, 3, 2])], note: '2,0,1', run: ([x]) => fon.permute(x, [2, 0, 1]), grad: [0], tol: EXACT });
add({ op: 'permute', inputs: [inp([7, 33])], note: 'identity', run: ([x]) => fon.permute(x, [0, -1]), grad: [0], tol: EXACT });
add({ op: 'transpose', inputs: [inp([2, 7, 33])], run: ([x]) => fon.transpose(x), grad: [0], tol: EXACT });
add({ op: 'transpose', inputs: [inp([2, 7, 33], randint(0, 9), 'i32')], note: '0,2', run: ([x]) => fon.transpose(x, 0, 2), tol: EXACT });
add({ op: 'moveAxisLast', inputs: [inp([2, 3, 5])], note: 'axis=0', run: ([x]) => fon.moveAxisLast(x, 0)[0], grad: [0], tol: EXACT });
add({ op: 'slice', inputs: [inp([7, 33])], note: '[1,2]+[3,-1]', run: ([x]) => fon.slice(x, [1, 2], [3, -1]), grad: [0], tol: EXACT });
add({ op: 'slice', inputs: [inp([7, 33])], note: '[-3]', run: ([x]) => fon.slice(x, [-3]), grad: [0], tol: EXACT });
add({ op: 'slice', inputs: [inp([2, 3, 5])], note: '[0,1,1]+[2,1,3]', run: ([x]) => fon.slice(x, [0, 1, 1], [2, 1, 3]), grad: [0], tol: EXACT });
add({ op: 'slice', inputs: [inp([7, 33])], note: 'empty', run: ([x]) => fon.slice(x, [2, 0], [0, 5]), grad: [0], tol: EXACT });
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'slice', inputs: [inp([7, 33], genFor(dtype), dtype)], note: '[1,2]+[3,7]', run: ([x]) => fon.slice(x, [1, 2], [3, 7]), tol: EXACT });
}
add({ op: 'narrow', inputs: [inp([7, 33])], note: 'axis=1,5+7', run: ([x]) => fon.narrow(x, 1, 5, 7), grad: [0], tol: EXACT });
add({ op: 'narrow', inputs: [inp([7, 33])], note: 'axis=0,6+1', run: ([x]) => fon.narrow(x, 0, 6, 1), grad: [0], tol: EXACT });
add({ op: 'narrow', inputs: [inp([7, 33])], note: 'axis=-1,0+0', run: ([x]) => fon.narrow(x, -1, 0, 0), grad: [0], tol: EXACT });
add({ op: 'concat', inputs: [inp([2, 3]), inp([2, 5]), inp([2, 0])], note: 'axis=1', run: (xs) => fon.concat(xs, 1), grad: [0, 1, 2], tol: EXACT });
add({ op: 'concat', inputs: [inp([7, 33]), inp([1, 33])], note: 'axis=0', run: (xs) => fon.concat(xs, 0), grad: [0, 1], tol: EXACT });
add({ op: 'concat', inputs: [inp([2, 3, 5]), inp([2, 3, 5]), inp([2, 3, 1])], note: 'axis=-1', run: (xs) => fon.concat(xs, -1), grad: [0, 1, 2], tol: EXACT });
add({ op: 'concat', inputs: [inp([129])], note: 'single', run: (xs) => fon.concat(xs), grad: [0], tol: EXACT });
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'concat', inputs: [inp([3, 7], genFor(dtype), dtype), inp([3, 2], genFor(dtype), dtype)], note: 'axis=1', run: (xs) => fon.concat(xs, 1), tol: EXACT });
}
add({ op: 'stack', inputs: [inp([7, 33]), inp([7, 33]), inp([7, 33])], note: 'axis=0', run: (xs) => fon.stack(xs, 0), grad: [0, 1, 2], tol: EXACT });
add({ op: 'stack', inputs: [inp([7, 33]), inp([7, 33])], note: 'axis=2', run: (xs) => fon.stack(xs, 2), grad: [0, 1], tol: EXACT });
add({ op: 'stack', inputs: [inp([3], randint(0, 9), 'i32'), inp([3], randint(0, 9), 'i32')], note: 'axis=1', run: (xs) => fon.stack(xs, 1), tol: EXACT });
add({ op: 'split', inputs: [inp([7, 33])], note: '3+30,axis=1', run: ([x]) => fon.split(x, [3, 30], 1), grad: [0], tol: EXACT });
add({ op: 'split', inputs: [inp([7, 33])], note: '2+0+5,axis=0', run: ([x]) => fon.split(x, [2, 0, 5], 0), grad: [0], tol: EXACT });
add({ op: 'flip', inputs: [inp([7, 33])], note: 'axes=0', run: ([x]) => fon.flip(x, [0]), grad: [0], tol: EXACT });
add({ op: 'flip', inputs: [inp([7, 33])], note: 'axes=0+1', run: ([x]) => fon.flip(x, [0, 1]), grad: [0], tol: EXACT });
add({ op: 'flip', inputs: [inp([2, 3, 5])], note: 'axes=0+2', run: ([x]) => fon.flip(x, [0, 2]), grad: [0], tol: EXACT });
add({ op: 'flip', inputs: [inp([0, 3])], note: 'axes=0', run: ([x]) => fon.flip(x, [0]), grad: [0], tol: EXACT });
add({ op: 'flip', inputs: [inp([129], randint(0, 9), 'i32')], note: 'axes=-1', run: ([x]) => fon.flip(x, [-1]), tol: EXACT });
add({ op: 'flip', inputs: [inp([7, 33], randn(), 'bf16')], note: 'axes=1', run: ([x]) => fon.flip(x, [1]), tol: EXACT });
add({ op: 'broadcastTo', inputs: [inp([1, 7])], note: '[3,5,7]', run: ([x]) => fon.broadcastTo(x, [3, 5, 7]), grad: [0], tol: EXACT });
add({ op: 'broadcastTo', inputs: [inp([7, 1])], note: '[7,33]', run: ([x]) => fon.broadcastTo(x, [7, 33]), grad: [0], tol: EXACT });
add({ op: 'broadcastTo', inputs: [inp([])], note: '[2,3]', run: ([x]) => fon.broadcastTo(x, [2, 3]), grad: [0], tol: EXACT });
add({ op: 'broadcastTo', inputs: [inp([2, 3])], note: 'same', run: ([x]) => fon.broadcastTo(x, [2, 3]), grad: [0], tol: EXACT });
add({ op: 'broadcastTo', inputs: [inp([1, 3], randint(0, 9), 'u8')], note: '[4,3]', run: ([x]) => fon.broadcastTo(x, [4, 3]), tol: EXACT });
add({ op: 'sumTo', inputs: [inp([3, 5, 7])], note: '[5,1]', run: ([x]) => fon.sumTo(x, [5, 1]), grad: [0], tol: ACC });
add({ op: 'sumTo', inputs: [inp([7, 33])], note: '[33]', run: ([x]) => fon.sumTo(x, [33]), grad: [0], tol: ACC });

// ---------------------------------------------------------------------------------------------
// Indexing

add({ op: 'gather', inputs: [inp([7, 33]), inp([7, 5], randint(0, 33), 'i32')], note: 'axis=1', run: ([x, i]) => fon.gather(x, i, 1), grad: [0], tol: EXACT });
add({ op: 'gather', inputs: [inp([7, 33]), inp([40, 33], randint(0, 7), 'i32')], note: 'axis=0', run: ([x, i]) => fon.gather(x, i, 0), grad: [0], tol: EXACT });
add({ op: 'gather', inputs: [inp([2, 3, 5]), inp([2, 4, 5], randint(0, 3), 'i32')], note: 'axis=1', run: ([x, i]) => fon.gather(x, i, 1), grad: [0], tol: EXACT });
add({ op: 'gather', inputs: [inp([7, 33]), inp([7, 0], randint(0, 33), 'i32')], note: 'axis=1', run: ([x, i]) => fon.gather(x, i, 1), grad: [0], tol: EXACT });
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'gather', inputs: [inp([7, 33], genFor(dtype), dtype), inp([7, 9], randint(0, 33), 'i32')], note: 'axis=-1', run: ([x, i]) => fon.gather(x, i, -1), tol: EXACT });
}
// gatherRows: (B, H, T, D) rows per batch entry (repeats, odd widths); one list for all; a list per entry of a leading axis.
add({ op: 'gatherRows', inputs: [inp([2, 3, 11, 5]), inp([2, 7], randint(0, 11), 'i32')], note: 'axis=2, per batch entry', run: ([x, r]) => fon.gatherRows(x, r, 2), grad: [0], tol: EXACT });
add({ op: 'gatherRows', inputs: [inp([6, 33]), inp([1, 40], randint(0, 33), 'i32')], note: 'axis=-1, one list', run: ([x, r]) => fon.gatherRows(x, r, -1), grad: [0], tol: EXACT });
add({ op: 'gatherRows', inputs: [inp([4, 9, 3]), inp([4, 5], randint(0, 9), 'i32')], note: 'axis=1, a list each', run: ([x, r]) => fon.gatherRows(x, r, 1), grad: [0], tol: EXACT });
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'gatherRows', inputs: [inp([2, 2, 9, 7], genFor(dtype), dtype), inp([2, 5], randint(0, 9), 'i32')], note: 'axis=2, odd rows', run: ([x, r]) => fon.gatherRows(x, r, 2), tol: EXACT });
}
// Distinct rows (each list a fixed shuffle of [0, n) cut to M): invertRows and the gathers whose gradient goes through it.
const distinctRows = (n: number) => values(([s, m]) => Array.from({ length: s * m }, (_, i) => (Math.floor(i / m) * 5 + (i % m) * 7) % n));
/** f(inverse of r over n), the inverse freed after (what the op's graph saved of it stays). */
const viaInverse = (r: fon.Tensor, n: number, f: (inv: fon.Tensor) => fon.Tensor) => { const inv = fon.invertRows(r, n); const y = f(inv); inv.dispose(); return y; };
add({ op: 'invertRows', inputs: [inp([3, 5], distinctRows(11), 'i32')], note: 'n=11', run: ([r]) => fon.invertRows(r, 11), tol: EXACT });
add({ op: 'invertRows', inputs: [inp([1, 0], distinctRows(4), 'i32')], note: 'no rows, n=4', run: ([r]) => fon.invertRows(r, 4), tol: EXACT });
add({ op: 'gatherDistinctRows', inputs: [inp([2, 3, 11, 5]), inp([2, 7], distinctRows(11), 'i32')], note: 'axis=2, per batch entry', run: ([x, r]) => viaInverse(r, 11, (inv) => fon.gatherDistinctRows(x, r, inv, 2)), grad: [0], tol: EXACT });
add({ op: 'gatherDistinctRows', inputs: [inp([4, 9, 3], randn(), 'bf16'), inp([4, 9], distinctRows(9), 'i32')], note: 'axis=1, a permutation each', run: ([x, r]) => viaInverse(r, 9, (inv) => fon.gatherDistinctRows(x, r, inv, 1)), tol: EXACT });
add({ op: 'scatterDistinctRows', inputs: [inp([2, 3, 7, 5]), inp([2, 7], distinctRows(11), 'i32')], note: 'axis=2, n=11', run: ([y, r]) => viaInverse(r, 11, (inv) => fon.scatterDistinctRows(y, r, inv, 2)), grad: [0], tol: EXACT });
add({ op: 'scatterDistinctRows', inputs: [inp([6, 4]), inp([1, 4], distinctRows(33), 'i32')], note: 'axis=-1, one list, n=33', run: ([y, r]) => viaInverse(r, 33, (inv) => fon.scatterDistinctRows(y, r, inv, -1)), grad: [0], tol: EXACT });
// Pyramid rows (Lighthouse's pooled gather and its adjoint): 11 tokens padded to 12, levels of spans 1 and 4 (15 rows), 7 listed a list.
const poolLevels = [{ offset: 0, count: 12, span: 1, shift: 0, scale: 1 }, { offset: 12, count: 3, span: 4, shift: 0, scale: 0.25 }];
const deliverLevels = [{ offset: 0, count: 12, span: 1, shift: 0, scale: 1 }, { offset: 12, count: 3, span: 4, shift: 3, scale: 1 }];
add({ op: 'pyramidGather', inputs: [inp([2, 3, 11, 5]), inp([6, 7], distinctRows(15), 'i32')], note: 'pool, spans 1 and 4', run: ([x, r]) => viaInverse(r, 15, (inv) => fon.pyramidGather(x, r, inv, poolLevels)), grad: [0], tol: ACC });
add({ op: 'pyramidGather', inputs: [inp([1, 2, 11, 3], randn(), 'bf16'), inp([2, 7], distinctRows(15), 'i32')], note: 'pool', run: ([x, r]) => viaInverse(r, 15, (inv) => fon.pyramidGather(x, r, inv, poolLevels)), tol: ACC });
add({ op: 'pyramidScatter', inputs: [inp([2, 3, 7, 5]), inp([6, 7], distinctRows(15), 'i32')], note: 'deliver, n=11', run: ([y, r]) => viaInverse(r, 15, (inv) => fon.pyramidScatter(y, r, inv, deliverLevels, 11)), grad: [0], tol: ACC });
add({ op: 'pyramidScatter', inputs: [inp([1, 2, 7, 4], randn(), 'f16'), inp([2, 7], distinctRows(15), 'i32')], note: 'deliver, n=11', run: ([y, r]) => viaInverse(r, 15, (inv) => fon.pyramidScatter(y, r, inv, deliverLevels, 11)), tol: ACC });
add({ op: 'scatterAdd', inputs: [inp([7, 33]), inp([7, 40], randint(0, 33), 'i32'), inp([7, 40])], note: 'axis=1', run: ([b, i, s]) => fon.scatterAdd(b, i, s, 1), grad: [0, 2], tol: ACC });
add({ op: 'scatterAdd', inputs: [inp([7, 33]), inp([9, 33], randint(0, 7), 'i32'), inp([9, 33])], note: 'axis=0', run: ([b, i, s]) => fon.scatterAdd(b, i, s, 0), grad: [0, 2], tol: ACC });
add({ op: 'scatterAdd', inputs: [inp([1]), inp([3], randint(0, 1), 'i32'), inp([3])], note: 'axis=0', run: ([b, i, s]) => fon.scatterAdd(b, i, s, 0), grad: [0, 2], tol: ACC });
add({ op: 'scatterAdd', inputs: [inp([7, 33], randn(), 'f16'), inp([7, 5], randint(0, 33), 'i32'), inp([7, 5], randn(), 'f16')], note: 'axis=1', run: ([b, i, s]) => fon.scatterAdd(b, i, s, 1), tol: ACC });
add({ op: 'embedding', inputs: [inp([50, 16]), inp([2, 7], randint(0, 50), 'i32')], run: ([t, i]) => fon.embedding(t, i), grad: [0], tol: EXACT });
add({ op: 'embedding', inputs: [inp([7, 33]), inp([129], randint(0, 7), 'i32')], note: 'repeats', run: ([t, i]) => fon.embedding(t, i), grad: [0], tol: EXACT });
add({ op: 'embedding', inputs: [inp([1, 1]), inp([1], randint(0, 1), 'i32')], run: ([t, i]) => fon.embedding(t, i), grad: [0], tol: EXACT });
add({ op: 'embedding', inputs: [inp([5, 3]), inp([0], randint(0, 5), 'i32')], run: ([t, i]) => fon.embedding(t, i), grad: [0], tol: EXACT });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'embedding', inputs: [inp([50, 16], randn(), dtype), inp([7], randint(0, 50), 'i32')], run: ([t, i]) => fon.embedding(t, i), tol: EXACT });
}

// ---------------------------------------------------------------------------------------------
// Fused: norms, rope, cross-entropy

const NORM_SHAPES: readonly [readonly number[], Gen][] = [[[7, 33], randn()], [[2, 3, 129], randn()], [[5, 1], away(0.3, 2)], [[1, 7], randn()], [[0, 7], randn()]];
for (const [shape, gen] of NORM_SHAPES) {
  const c = shape[shape.length - 1];
  add({ op: 'rmsnorm', inputs: [inp(shape, gen), inp([c], randn(0.5, 1))], run: ([x, w]) => fon.rmsnorm(x, w), grad: [0, 1], tol: ACC });
  add({ op: 'layernorm', inputs: [inp(shape, gen), inp([c], randn(0.5, 1)), inp([c])], run: ([x, w, b]) => fon.layernorm(x, w, b), grad: [0, 1, 2], tol: ACC });
}
add({ op: 'rmsnorm', inputs: [inp([7, 33]), inp([33])], note: 'eps=0.1', run: ([x, w]) => fon.rmsnorm(x, w, 0.1), grad: [0, 1], tol: ACC });
add({ op: 'layernorm', inputs: [inp([7, 33], randn(3, 5)), inp([33]), inp([33])], note: 'eps=0.1', run: ([x, w, b]) => fon.layernorm(x, w, b, 0.1), grad: [0, 1, 2], tol: ACC });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'rmsnorm', inputs: [inp([7, 33], randn(), dtype), inp([33], randn(0.5, 1), dtype)], run: ([x, w]) => fon.rmsnorm(x, w), tol: ACC });
  add({ op: 'layernorm', inputs: [inp([7, 33], randn(), dtype), inp([33], randn(0.5, 1), dtype), inp([33], randn(), dtype)], run: ([x, w, b]) => fon.layernorm(x, w, b), tol: ACC });
}

// Fused attention (ops/attention.ts): q (B, H, Tq, D), k and v (B, Hkv, Tk, D); sizes off every tile.
add({ op: 'attention', inputs: [inp([1, 4, 7, 8]), inp([1, 2, 7, 8]), inp([1, 2, 7, 8])], note: 'causal, GQA 4/2', run: ([q, k, v]) => fon.attention(q, k, v), grad: [0, 1, 2], tol: ACC });
add({ op: 'attention', inputs: [inp([2, 2, 5, 6]), inp([2, 2, 9, 6]), inp([2, 2, 9, 6])], note: 'non-causal, kvLength 8 of 9', run: ([q, k, v]) => fon.attention(q, k, v, { causal: false, kvLength: 8 }), grad: [0, 1, 2], tol: ACC });
add({ op: 'attention', inputs: [inp([1, 3, 11, 4]), inp([1, 1, 11, 4]), inp([1, 1, 11, 4])], note: 'window 3, one kv head', run: ([q, k, v]) => fon.attention(q, k, v, { window: 3 }), grad: [0, 1, 2], tol: ACC });
add({ op: 'attention', inputs: [inp([1, 2, 1, 8]), inp([1, 2, 13, 8]), inp([1, 2, 13, 8])], note: 'decode: one query at position 9', run: ([q, k, v]) => fon.attention(q, k, v, { kvLength: 10 }), grad: [0, 1, 2], tol: ACC });
add({ op: 'attention', inputs: [inp([1, 2, 37, 16]), inp([1, 2, 37, 16]), inp([1, 2, 37, 16])], note: 'scale 0.5, T past a 32-row tile', run: ([q, k, v]) => fon.attention(q, k, v, { scale: 0.5 }), tol: ACC });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'attention', inputs: [inp([1, 4, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype)], run: ([q, k, v]) => fon.attention(q, k, v), tol: ACC });
}

// FoX attention (ops/fox_attention.ts): q (B, H, Tq, D), k and v (B, Hkv, Tk, D), c (B, H, Tk) f32; causal only.
add({ op: 'foxAttention', inputs: [inp([1, 4, 7, 8]), inp([1, 2, 7, 8]), inp([1, 2, 7, 8]), inp([1, 4, 7])], note: 'GQA 4/2', run: ([q, k, v, c]) => fon.foxAttention(q, k, v, c), grad: [0, 1, 2, 3], tol: ACC });
add({ op: 'foxAttention', inputs: [inp([2, 2, 5, 6]), inp([2, 2, 9, 6]), inp([2, 2, 9, 6]), inp([2, 2, 9])], note: 'kvLength 8 of 9, scale 0.3', run: ([q, k, v, c]) => fon.foxAttention(q, k, v, c, { kvLength: 8, scale: 0.3 }), grad: [0, 1, 2, 3], tol: ACC });
add({ op: 'foxAttention', inputs: [inp([1, 2, 1, 8]), inp([1, 1, 13, 8]), inp([1, 1, 13, 8]), inp([1, 2, 13])], note: 'decode: one query at position 9', run: ([q, k, v, c]) => fon.foxAttention(q, k, v, c, { kvLength: 10 }), grad: [0, 1, 2, 3], tol: ACC });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'foxAttention', inputs: [inp([1, 4, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype), inp([1, 4, 7])], run: ([q, k, v, c]) => fon.foxAttention(q, k, v, c), tol: ACC });
}

// FPA attention (ops/fpa_attention.ts): phi and level (B, Hkv, Tk) f32, lambda (Hkv) f32 > 0. The
// gradient cases keep φ on a grid of step 0.1 and ℓ on the same grid shifted by 0.05: no tie in a
// min and no relu at its kink within a central difference's reach. The `ties` case has both, forward only.
const phiGrid = distinct(0.1), levelGrid = distinct(0.1, 0.05);
add({ op: 'fpaAttention', inputs: [inp([1, 4, 7, 8]), inp([1, 2, 7, 8]), inp([1, 2, 7, 8]), inp([1, 2, 7], phiGrid), inp([1, 2, 7], levelGrid), inp([2], rand(0.5, 1.5))], note: 'GQA 4/2', run: ([q, k, v, f, l, lam]) => fon.fpaAttention(q, k, v, f, l, lam), grad: [0, 1, 2, 3, 4, 5], tol: ACC });
add({ op: 'fpaAttention', inputs: [inp([2, 2, 5, 6]), inp([2, 2, 9, 6]), inp([2, 2, 9, 6]), inp([2, 2, 9], phiGrid), inp([2, 2, 9], levelGrid), inp([2], rand(0.5, 1.5))], note: 'kvLength 8 of 9, scale 0.3', run: ([q, k, v, f, l, lam]) => fon.fpaAttention(q, k, v, f, l, lam, { kvLength: 8, scale: 0.3 }), grad: [0, 1, 2, 3, 4, 5], tol: ACC });
add({ op: 'fpaAttention', inputs: [inp([1, 2, 1, 8]), inp([1, 1, 13, 8]), inp([1, 1, 13, 8]), inp([1, 1, 13], phiGrid), inp([1, 1, 13], levelGrid), inp([1], rand(0.5, 1.5))], note: 'decode: one query at position 9', run: ([q, k, v, f, l, lam]) => fon.fpaAttention(q, k, v, f, l, lam, { kvLength: 10 }), grad: [0, 1, 2, 3, 4, 5], tol: ACC });
add({ op: 'fpaAttention', inputs: [inp([1, 3, 11, 4]), inp([1, 3, 11, 4]), inp([1, 3, 11, 4]), inp([1, 3, 11], ties(-2, 3)), inp([1, 3, 11], ties(-2, 3)), inp([3], rand(0.5, 1.5))], note: 'ties in phi and level', run: ([q, k, v, f, l, lam]) => fon.fpaAttention(q, k, v, f, l, lam), tol: ACC });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'fpaAttention', inputs: [inp([1, 4, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype), inp([1, 2, 7, 8], randn(), dtype), inp([1, 2, 7], phiGrid), inp([1, 2, 7], levelGrid), inp([2], rand(0.5, 1.5))], run: ([q, k, v, f, l, lam]) => fon.fpaAttention(q, k, v, f, l, lam), tol: ACC });
}

// Depth-Attention mixing (ops/depth_mix.ts): q (B, H, T, D), m keys and m values (B, Hkv, T, D), the current layer last.
const kvs = (m: number, shape: number[], dtype: DType = 'f32') => Array.from({ length: 2 * m }, () => inp(shape, randn(), dtype));
const mixRun = (m: number, scale?: number): OpCase['run'] => (xs) => fon.depthMix(xs[0], xs.slice(1, 1 + m), xs.slice(1 + m), { scale });
add({ op: 'depthMix', inputs: [inp([1, 4, 7, 8]), ...kvs(3, [1, 2, 7, 8])], note: 'GQA 4/2, 3 candidates', run: mixRun(3), grad: [0, 1, 2, 3, 4, 5, 6], tol: ACC });
add({ op: 'depthMix', inputs: [inp([2, 3, 5, 6]), ...kvs(2, [2, 3, 5, 6])], note: 'MHA, 2 candidates, scale 0.7', run: mixRun(2, 0.7), grad: [0, 1, 2, 3, 4], tol: ACC });
add({ op: 'depthMix', inputs: [inp([1, 2, 33, 4]), ...kvs(1, [1, 1, 33, 4])], note: 'self only: v exactly', run: mixRun(1), grad: [0, 1, 2], tol: EXACT });
add({ op: 'depthMix', inputs: [inp([1, 2, 1, 129]), ...kvs(5, [1, 1, 1, 129])], note: 'decode row, 5 candidates', run: mixRun(5), grad: [0, 1, 5, 6, 10], tol: ACC });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'depthMix', inputs: [inp([1, 4, 7, 8], randn(), dtype), ...kvs(3, [1, 2, 7, 8], dtype)], note: 'GQA 4/2, 3 candidates', run: mixRun(3), tol: ACC });
}

/** RoPE tables (T, D/2): θ(p, j) = p · base^(−2j/D), as in the RoFormer paper. */
export function ropeAngles(t: number, d: number, base = 10000): Float64Array {
  const half = d / 2;
  const out = new Float64Array(t * half);
  for (let p = 0; p < t; p++) for (let j = 0; j < half; j++) out[p * half + j] = p * Math.pow(base, (-2 * j) / d);
  return out;
}
const ropeCos = values(([t, h]) => Array.from(ropeAngles(t, 2 * h), Math.cos));
const ropeSin = values(([t, h]) => Array.from(ropeAngles(t, 2 * h), Math.sin));
const ROPE: readonly [readonly number[], number | undefined][] = [[[2, 7, 16], undefined], [[2, 7, 3, 8], 1], [[33, 4], -2], [[1, 1, 2], undefined], [[3, 5, 2, 6], 0], [[2, 0, 4], undefined]];
for (const [shape, seqAxis] of ROPE) {
  const r = shape.length;
  const t = shape[seqAxis === undefined ? r - 2 : seqAxis < 0 ? r + seqAxis : seqAxis], d = shape[r - 1];
  for (const interleaved of [false, true]) {
    add({
      op: 'rope', inputs: [inp(shape), inp([t, d / 2], ropeCos), inp([t, d / 2], ropeSin)],
      note: `${interleaved ? 'interleaved' : 'halves'}${seqAxis === undefined ? '' : `,seqAxis=${seqAxis}`}`,
      run: ([x, c, s]) => fon.rope(x, c, s, { interleaved, seqAxis }), grad: [0], tol: ACC,
    });
  }
}
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'rope', inputs: [inp([2, 7, 16], randn(), dtype), inp([7, 8], ropeCos), inp([7, 8], ropeSin)], run: ([x, c, s]) => fon.rope(x, c, s), tol: ACC });
}

/** Targets in [0, v) with every third row set to `ignore`. */
const targetsWithIgnored = (v: number, ignore: number) => values((shape) => Array.from({ length: size(shape) }, (_, i) => (i % 3 === 1 ? ignore : (i * 7 + 3) % v)));
add({ op: 'crossEntropy', inputs: [inp([7, 33], randn(2)), inp([7], randint(0, 33), 'i32')], note: 'mean', run: ([l, t]) => fon.crossEntropy(l, t), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([7, 33], randn(2)), inp([7], randint(0, 33), 'i32')], note: 'sum', run: ([l, t]) => fon.crossEntropy(l, t, { reduction: 'sum' }), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([7, 33], randn(2)), inp([7], targetsWithIgnored(33, -100), 'i32')], note: 'none,ignore', run: ([l, t]) => fon.crossEntropy(l, t, { reduction: 'none' }), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([7, 33], randn(2)), inp([7], targetsWithIgnored(33, -100), 'i32')], note: 'mean,ignore', run: ([l, t]) => fon.crossEntropy(l, t), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([2, 3, 129], randn(2)), inp([2, 3], targetsWithIgnored(129, 5), 'i32')], note: 'mean,ignore=5', run: ([l, t]) => fon.crossEntropy(l, t, { ignoreIndex: 5 }), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([1, 1]), inp([1], randint(0, 1), 'i32')], note: 'mean', run: ([l, t]) => fon.crossEntropy(l, t), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([0, 5]), inp([0], randint(0, 5), 'i32')], note: 'none', run: ([l, t]) => fon.crossEntropy(l, t, { reduction: 'none' }), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([0, 5]), inp([0], randint(0, 5), 'i32')], note: 'sum', run: ([l, t]) => fon.crossEntropy(l, t, { reduction: 'sum' }), grad: [0], tol: ACC });
add({ op: 'crossEntropy', inputs: [inp([3, 5]), inp([3], values(() => [-100, -100, -100]), 'i32')], note: 'mean,all-ignored', run: ([l, t]) => fon.crossEntropy(l, t) });
for (const dtype of ['f16', 'bf16'] as const) {
  add({ op: 'crossEntropy', inputs: [inp([7, 33], randn(2), dtype), inp([7], randint(0, 33), 'i32')], note: 'none', run: ([l, t]) => fon.crossEntropy(l, t, { reduction: 'none' }), tol: ACC });
}

// ---------------------------------------------------------------------------------------------
// Scans and sorting

const SCAN_SHAPES: readonly [readonly number[], number][] = [[[7, 33], -1], [[7, 33], 0], [[129], 0], [[2, 3, 5], 1], [[1], 0], [[0, 3], 0], [[3, 0], 1]];
for (const [shape, axis] of SCAN_SHAPES) {
  add({ op: 'cumsum', inputs: [inp(shape)], note: `axis=${axis}`, run: ([x]) => fon.cumsum(x, axis), grad: [0], tol: ACC });
  for (const op of ['cummax', 'cummin'] as const) {
    add({ op, inputs: [inp(shape, distinct())], note: `axis=${axis}`, run: ([x]) => { const r = fon[op](x, axis); return [r.values, r.indices]; }, grad: [0], tol: EXACT });
  }
}
for (const op of ['cummax', 'cummin'] as const) {
  add({ op, inputs: [inp([7, 33], ties(-2, 3))], note: 'ties', run: ([x]) => { const r = fon[op](x); return [r.values, r.indices]; }, tol: EXACT });
  for (const dtype of ['f16', 'bf16', 'i32'] as const) {
    add({ op, inputs: [inp([7, 33], isFloatDType(dtype) ? randn() : randint(-50, 50), dtype)], run: ([x]) => { const r = fon[op](x); return [r.values, r.indices]; }, tol: EXACT });
  }
}
add({ op: 'cumsum', inputs: [inp([7, 33], randint(-50, 50), 'i32')], note: 'axis=-1', run: ([x]) => fon.cumsum(x), tol: EXACT });
add({ op: 'cumsum', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => fon.cumsum(x), tol: EXACT });
add({ op: 'cummax', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => { const r = fon.cummax(x); return [r.values, r.indices]; }, tol: EXACT });
for (const dtype of ['f16', 'bf16'] as const) add({ op: 'cumsum', inputs: [inp([7, 33], randn(), dtype)], note: 'axis=-1', run: ([x]) => fon.cumsum(x), tol: ACC });

const SORT_SHAPES: readonly [readonly number[], number][] = [[[7, 33], -1], [[7, 33], 0], [[129], 0], [[2, 3, 5], 1], [[1], 0], [[0], 0]];
for (const [shape, axis] of SORT_SHAPES) {
  for (const descending of [false, true]) {
    const note = `axis=${axis}${descending ? ',desc' : ''}`;
    add({ op: 'sort', inputs: [inp(shape, distinct())], note, run: ([x]) => { const r = fon.sort(x, axis, { descending }); return [r.values, r.indices]; }, grad: [0], tol: EXACT });
    add({ op: 'argsort', inputs: [inp(shape, distinct())], note, run: ([x]) => fon.argsort(x, axis, { descending }), tol: EXACT });
  }
}
for (const descending of [false, true]) {
  const note = `ties${descending ? ',desc' : ''}`;
  add({ op: 'sort', inputs: [inp([7, 33], ties(-2, 3))], note, run: ([x]) => { const r = fon.sort(x, -1, { descending }); return [r.values, r.indices]; }, tol: EXACT });
  add({ op: 'argsort', inputs: [inp([7, 33], ties(-2, 3))], note, run: ([x]) => fon.argsort(x, -1, { descending }), tol: EXACT });
}
for (const dtype of ['f16', 'bf16', 'i32', 'u8'] as const) {
  add({ op: 'sort', inputs: [inp([7, 33], genFor(dtype), dtype)], run: ([x]) => { const r = fon.sort(x); return [r.values, r.indices]; }, tol: EXACT });
}
add({ op: 'sort', inputs: [inp([7, 33], BIG, 'i32')], note: 'big', run: ([x]) => { const r = fon.sort(x); return [r.values, r.indices]; }, tol: EXACT });
const TOPK: readonly [readonly number[], number, number, boolean][] = [[[7, 33], 5, -1, true], [[7, 33], 33, -1, false], [[7, 33], 3, 0, true], [[7, 33], 0, -1, true], [[129], 1, 0, false]];
for (const [shape, k, axis, largest] of TOPK) {
  add({ op: 'topk', inputs: [inp(shape, distinct())], note: `k=${k},axis=${axis}${largest ? '' : ',smallest'}`, run: ([x]) => { const r = fon.topk(x, k, axis, { largest }); return [r.values, r.indices]; }, grad: [0], tol: EXACT });
}
add({ op: 'topk', inputs: [inp([7, 33], ties(-2, 3))], note: 'k=9,ties', run: ([x]) => { const r = fon.topk(x, 9); return [r.values, r.indices]; }, tol: EXACT });
add({ op: 'topk', inputs: [inp([7, 33], randn(), 'f16')], note: 'k=4', run: ([x]) => { const r = fon.topk(x, 4); return [r.values, r.indices]; }, tol: EXACT });

// ---------------------------------------------------------------------------------------------
// Cast between every pair of dtypes

const castGen: Readonly<Record<DType, Gen>> = {
  f32: randn(60), f16: randn(60), bf16: randn(60), i32: randint(-300, 300), u8: randint(0, 256),
};
for (const from of ALL_DTYPES) {
  for (const to of ALL_DTYPES) {
    const float2float = isFloatDType(from) && isFloatDType(to);
    const diff = from === 'f32' && float2float;
    add({
      op: 'cast', inputs: [inp([7, 33], castGen[from], from)], note: `to-${to}`, run: ([x]) => fon.cast(x, to), tol: EXACT,
      grad: diff ? [0] : [],
      fdSkip: diff && to !== 'f32' ? `the output is rounded to ${to}: central differences cannot resolve it (checked analytically in test/ops/grad.test.ts)` : undefined,
    });
  }
}
for (const dtype of ALL_DTYPES) {
  add({ op: 'clone', inputs: [inp([7, 33], castGen[dtype], dtype)], run: ([x]) => fon.clone(x), grad: gradIf(dtype, [0]), tol: EXACT });
}
add({ op: 'clone', inputs: [inp([0, 3])], run: ([x]) => fon.clone(x), grad: [0], tol: EXACT });
for (const to of ['f32', 'bf16', 'u8'] as const) add({ op: 'cast', inputs: [inp([7, 33], BIG, 'i32')], note: `big-to-${to}`, run: ([x]) => fon.cast(x, to), tol: EXACT });
add({ op: 'cast', inputs: [inp([0], randn(), 'f32')], note: 'to-bf16', run: ([x]) => fon.cast(x, 'bf16'), tol: EXACT });
add({ op: 'cast', inputs: [inp([129], randn(1e-5), 'f32')], note: 'subnormal-to-f16', run: ([x]) => fon.cast(x, 'f16'), tol: EXACT });

// ---------------------------------------------------------------------------------------------

/** The table. */
export const CASES: readonly OpCase[] = CASE_LIST;

/**
 * Exported functions of src/index.ts that are not ops and so have no case, with where they are
 * tested instead. A test checks that every other export has cases and that this list holds no stale name.
 */
export const NOT_OPS: Readonly<Record<string, string>> = {
  backward: 'autograd entry point: test/tensor/autograd.test.ts',
  autocast: 'mixed-precision scope: test/train/precision.test.ts',
  autocastDType: 'mixed-precision scope: test/train/precision.test.ts',
  blockMask: 'block masks: test/attention/block_mask.test.ts',
  blockMaskFromLists: 'block masks: test/attention/block_mask.test.ts',
  // Not tensor ops: the language-model layers above them, tested in their own files.
  byteTokenizer: 'tokenizer: test/io/tokenizer.test.ts',
  chatTemplateOf: 'chat templates: test/io/chat_template.test.ts',
  parseMessages: 'chat templates: test/io/chat_template.test.ts',
  samplingDefaults: 'generation defaults: test/infer/language_model.test.ts',
  streamText: 'streaming generation: test/infer/stream.test.ts',
  trainBpe: 'tokenizer: test/io/tokenizer_train.test.ts',
  loadTokenizer: 'tokenizer: test/io/tokenizer_hf.test.ts',
  parseTokenizer: 'tokenizer: test/io/tokenizer.test.ts',
  encodeSafetensors: 'file format: test/io/safetensors.test.ts',
  decodeSafetensors: 'file format: test/io/safetensors.test.ts',
  tensorsToSafetensors: 'file format: test/io/safetensors.test.ts',
  safetensorsToTensors: 'file format: test/io/safetensors.test.ts',
  parseModelConfig: 'model config: test/model/config.test.ts',
  kvBytesPerToken: 'model config: test/model/config.test.ts',
  preset: 'model presets: test/model/config.test.ts',
  buildMechanism: 'the mechanism table: test/attention/table.test.ts',
  parseLayerAttention: 'the mechanism table: test/attention/table.test.ts',
  modelDims: 'model config: test/attention/table.test.ts',
  parseOrgans: 'organs config: test/model/organs.test.ts',
  checkDraftLayers: 'organs config: test/model/organs.test.ts',
  organLoss: 'the organ objective: test/train/organ_loss.test.ts',
  distillKl: 'the organ objective: test/train/organ_loss.test.ts',
  trainingLoss: 'the organ objective: test/train/organ_loss.test.ts',
  layerKeepMasks: 'layer dropout: test/train/organ_loss.test.ts',
  acceptDrafts: 'speculative acceptance: test/infer/speculative.test.ts',
  residual: 'speculative acceptance: test/infer/speculative.test.ts',
  drawFrom: 'speculative acceptance: test/infer/speculative.test.ts',
  draftLayersOf: 'draft–revise decoding: test/model/organs.test.ts',
  cachedStep: 'one cached decoding step: test/backend/webgpu_lm.test.ts',
  generationCache: 'the cache generate makes: test/backend/webgpu_lm.test.ts',
  generationDtype: 'the dtype of generate\'s cache: test/infer/paged_cache.test.ts',
  loadFolder: 'a model folder as a LanguageModel, browser-safe: test/io/model_folder.test.ts',
  loadFolderModel: 'a Hugging Face or FON folder\'s model: test/io/model_folder.test.ts',
  loadFonFolder: 'a FON checkpoint folder\'s model: test/io/model_folder.test.ts, test/io/model_checkpoint.test.ts',
  loadHfFolder: 'a Hugging Face folder\'s model: test/io/hf_load.test.ts, test/io/model_folder.test.ts',
  isHfFolder: 'whether a folder holds a Hugging Face model: test/io/hf_load.test.ts',
  memoryFolder: 'a model folder of bytes in memory: test/io/model_folder.test.ts',
  blobFolder: 'a model folder of Blobs or Files: test/io/model_folder.test.ts',
  urlFolder: 'a model folder at a URL (range requests): test/io/model_folder.test.ts',
  readFolderFile: 'a whole file of a model folder: test/io/model_folder.test.ts',
  defaultPageRows: 'page sizes: test/infer/paged_cache.test.ts',
  checkPageRows: 'page sizes: test/infer/paged_cache.test.ts',
  denseAttention: 'reference composed of matmul/softmax: test/ops/attention.test.ts, test/model/decoder.test.ts',
  evaluate: 'perplexity: test/eval/perplexity.test.ts',
  tokenByteLengths: 'bits per byte: test/eval/perplexity.test.ts, test/cli/train_cli.test.ts',
  generate: 'generation: test/infer/generate.test.ts',
  hfConfigToModelConfig: 'Hugging Face config mapping: test/io/hf_config.test.ts, test/io/hf_load.test.ts',
  parseGenerationConfig: 'Hugging Face generation_config.json: test/io/hf_config.test.ts',
  hfTokenizer: 'Hugging Face tokenizer folder: test/io/hf_config.test.ts, test/io/hf_load.test.ts',
  clipGradNorm: 'optimizer step: test/train/optim.test.ts',
  warmupCosine: 'schedule: test/train/optim.test.ts',
  constant: 'schedule: test/train/optim.test.ts',
  kvWrite: 'writes a KV cache in place and returns nothing: test/ops/attention.test.ts, test/backend/webgpu_attention.test.ts',
  kvWriteMany: 'writes several KV caches in place and returns nothing: test/ops/attention.test.ts, test/backend/webgpu_attention.test.ts',
  detach: 'autograd: test/tensor/autograd.test.ts',
  zeroGrad: 'autograd: test/tensor/autograd.test.ts and memory.test.ts',
  tidy: 'memory scope: test/tensor/memory.test.ts',
  keep: 'memory scope: test/tensor/memory.test.ts',
  noGrad: 'autograd switch: test/tensor/autograd.test.ts',
  isGradEnabled: 'autograd switch: test/tensor/autograd.test.ts',
  manualSeed: 'random stream: test/ops/forward.test.ts',
  toBackend: 'moves between two backends (async, not a kernel): test/ops/forward.test.ts',
  initBackend: 'backend registry, not an op',
  setBackend: 'backend registry, not an op',
  getBackend: 'backend registry, not an op',
  shutdownBackends: 'backend registry: syncs and destroys backends before exit',
  destroyBackends: 'backend registry, not an op',
  registerBackendFactory: 'backend registry, not an op',
};
