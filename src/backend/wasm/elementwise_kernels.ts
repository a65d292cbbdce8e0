/**
 * SIMD elementwise kernels and the row softmax, emitted as wasm; each `(job, tid)` does thread
 * tid's share of a job record and returns, like the GEMM kernels.
 *
 * Unary and binary ops work on whole f32x4 vectors: the host pads the workspace to a multiple of
 * four floats, so there is no scalar tail (the padding lanes are computed and never read back).
 * Binary ops take two full operands or one full and one scalar (the common `x + c`); other
 * broadcasts stay on the CPU reference. Formulas are those of src/backend/cpu/elementwise.ts;
 * add/sub/mul/div, max/min and the comparisons give the same bits, the exp-based ops are within
 * a few ulp (simd_math.ts). Ops not listed (log, softplus, sin, cos, pow) use the CPU reference.
 */
import type { BinaryOp, UnaryOp } from '../backend.ts';
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';
import { SimdMath } from './simd_math.ts';

/** Word index of each field of an elementwise job record. */
export const ElementwiseJob = { threads: 0, a: 1, b: 2, out: 3, count: 4, mode: 5 } as const;
export const ELEMENTWISE_JOB_WORDS = 6;
/** `mode` of a binary job: which operand is a single value splat across the vector. */
export const BinaryMode = { bothFull: 0, bScalar: 1, aScalar: 2 } as const;

/** Word index of each field of a softmax job record: `rows` rows of `cols` f32, contiguous. */
export const SoftmaxJob = { threads: 0, x: 1, out: 2, rows: 3, cols: 4 } as const;
export const SOFTMAX_JOB_WORDS = 5;

const GELU_C = Math.sqrt(2 / Math.PI);

/** Each op pushes its result for the f32x4 in local x; `tmp` is a scratch v128 local. */
type UnaryEmitter = (f: FunctionBuilder, math: SimdMath, x: number, tmp: number) => void;

const UNARY: Partial<Record<UnaryOp, UnaryEmitter>> = {
  neg: (f, _m, x) => { f.get(x).f32x4Neg(); },
  abs: (f, _m, x) => { f.get(x).f32x4Abs(); },
  exp: (f, m, x) => { m.exp(x); },
  sqrt: (f, _m, x) => { f.get(x).f32x4Sqrt(); },
  rsqrt: (f, _m, x) => { f.f32x4Const(1).get(x).f32x4Sqrt().f32x4Div(); },
  tanh: (f, m, x) => { m.tanh(x); },
  sigmoid: (f, m, x) => { m.sigmoid(x); },
  // x·sigmoid(x): the reference's x/(1 + e^−x) within an ulp, without overflow for x ≪ 0.
  silu: (f, m, x) => { f.get(x); m.sigmoid(x); f.f32x4Mul(); },
  gelu: (f, m, x, tmp) => {
    // 0.5·x·(1 + tanh(u)) = x·sigmoid(2u), u = c·(x + 0.044715·x³): no cancellation for x ≪ 0.
    f.get(x).get(x).f32x4Mul().get(x).f32x4Mul().f32x4Const(0.044715).f32x4Mul().get(x).f32x4Add().f32x4Const(2 * GELU_C).f32x4Mul().set(tmp);
    f.get(x);
    m.sigmoid(tmp);
    f.f32x4Mul();
  },
  // pmax(0, x) = 0 < x ? x : 0, so NaN gives 0 as in the reference.
  relu: (f, _m, x) => { f.f32x4Const(0).get(x).f32x4Pmax(); },
  square: (f, _m, x) => { f.get(x).get(x).f32x4Mul(); },
  reciprocal: (f, _m, x) => { f.f32x4Const(1).get(x).f32x4Div(); },
  sign: (f, _m, x) => {
    f.f32x4Const(1).get(x).f32x4Const(0).f32x4Gt().v128And();
    f.f32x4Const(-1).get(x).f32x4Const(0).f32x4Lt().v128And();
    f.v128Or();
  },
};

/** Each op pushes its result for the f32x4 locals a and b. */
type BinaryEmitter = (f: FunctionBuilder, a: number, b: number) => void;
const compare = (cmp: (f: FunctionBuilder) => void): BinaryEmitter => (f, a, b) => { f.get(a).get(b); cmp(f); f.f32x4Const(1).v128And(); };

const BINARY: Partial<Record<BinaryOp, BinaryEmitter>> = {
  add: (f, a, b) => { f.get(a).get(b).f32x4Add(); },
  sub: (f, a, b) => { f.get(a).get(b).f32x4Sub(); },
  mul: (f, a, b) => { f.get(a).get(b).f32x4Mul(); },
  div: (f, a, b) => { f.get(a).get(b).f32x4Div(); },
  // The reference's (a >= b || isNaN(a)) ? a : b, signed zeros included.
  max: (f, a, b) => { f.get(a).get(b).get(a).get(b).f32x4Ge().get(a).get(a).f32x4Ne().v128Or().v128Bitselect(); },
  min: (f, a, b) => { f.get(a).get(b).get(a).get(b).f32x4Le().get(a).get(a).f32x4Ne().v128Or().v128Bitselect(); },
  eq: compare((f) => f.f32x4Eq()),
  ne: compare((f) => f.f32x4Ne()),
  lt: compare((f) => f.f32x4Lt()),
  le: compare((f) => f.f32x4Le()),
  gt: compare((f) => f.f32x4Gt()),
  ge: compare((f) => f.f32x4Ge()),
};

export const WASM_UNARY_OPS = Object.keys(UNARY) as UnaryOp[];
export const WASM_BINARY_OPS = Object.keys(BINARY) as BinaryOp[];
export const unaryKernelName = (op: UnaryOp) => `unary_${op}` as const;
export const binaryKernelName = (op: BinaryOp) => `binary_${op}` as const;
export const ELEMENTWISE_KERNELS: readonly string[] = [
  ...WASM_UNARY_OPS.map(unaryKernelName), ...WASM_BINARY_OPS.map(binaryKernelName), 'softmax',
];

/** Sets lo/hi (byte offsets) to thread tid's share of `vectors` f32x4 vectors. */
function vectorRange(f: FunctionBuilder, job: number, tid: number, lo: number, hi: number): void {
  const vectors = f.local('i32');
  const threads = f.local('i32');
  f.get(job).i32Load(ElementwiseJob.threads * 4).set(threads);
  f.get(job).i32Load(ElementwiseJob.count * 4).i32Const(3).i32Add().i32Const(2).i32ShrU().set(vectors);
  f.get(tid).get(vectors).i32Mul().get(threads).i32DivU().i32Const(16).i32Mul().set(lo);
  f.get(tid).i32Const(1).i32Add().get(vectors).i32Mul().get(threads).i32DivU().i32Const(16).i32Mul().set(hi);
}

function emitUnary(mb: WasmModuleBuilder, op: UnaryOp, emit: UnaryEmitter): void {
  const f = mb.function(unaryKernelName(op), ['i32', 'i32']);
  const [job, tid] = f.params;
  const lo = f.local('i32'), hi = f.local('i32'), at = f.local('i32'), src = f.local('i32'), dst = f.local('i32');
  const x = f.local('v128'), tmp = f.local('v128');
  const math = new SimdMath(f);
  vectorRange(f, job, tid, lo, hi);
  f.get(job).i32Load(ElementwiseJob.a * 4).set(src);
  f.get(job).i32Load(ElementwiseJob.out * 4).set(dst);
  f.forUp(at, () => f.get(lo), hi, 16, () => {
    f.get(src).get(at).i32Add().v128Load().set(x);
    f.get(dst).get(at).i32Add();
    emit(f, math, x, tmp);
    f.v128Store();
  });
}

function emitBinary(mb: WasmModuleBuilder, op: BinaryOp, emit: BinaryEmitter): void {
  const f = mb.function(binaryKernelName(op), ['i32', 'i32']);
  const [job, tid] = f.params;
  const lo = f.local('i32'), hi = f.local('i32'), at = f.local('i32');
  const pa = f.local('i32'), pb = f.local('i32'), dst = f.local('i32'), mode = f.local('i32');
  const a = f.local('v128'), b = f.local('v128');
  vectorRange(f, job, tid, lo, hi);
  f.get(job).i32Load(ElementwiseJob.a * 4).set(pa);
  f.get(job).i32Load(ElementwiseJob.b * 4).set(pb);
  f.get(job).i32Load(ElementwiseJob.out * 4).set(dst);
  f.get(job).i32Load(ElementwiseJob.mode * 4).set(mode);
  const loop = (loadA: boolean, loadB: boolean) => f.forUp(at, () => f.get(lo), hi, 16, () => {
    if (loadA) f.get(pa).get(at).i32Add().v128Load().set(a);
    if (loadB) f.get(pb).get(at).i32Add().v128Load().set(b);
    f.get(dst).get(at).i32Add();
    emit(f, a, b);
    f.v128Store();
  });
  f.get(mode).i32Const(BinaryMode.bothFull).i32Eq().if(
    () => loop(true, true),
    () => {
      f.get(mode).i32Const(BinaryMode.bScalar).i32Eq().if(
        () => { f.get(pb).v128Load32Splat().set(b); loop(true, false); },
        () => { f.get(pa).v128Load32Splat().set(a); loop(false, true); },
      );
    },
  );
}

/**
 * softmax(job, tid): per row, max (NaN propagates), then e = exp(x − max) stored and summed in
 * f32x4 lanes, then out = e / Σe. Rows need not be 16-byte aligned; a row's last cols % 4
 * elements go through the same exp one lane at a time.
 */
function emitSoftmax(mb: WasmModuleBuilder): void {
  const f = mb.function('softmax', ['i32', 'i32']);
  const [job, tid] = f.params;
  const threads = f.local('i32'), rows = f.local('i32'), cols = f.local('i32'), src = f.local('i32'), dst = f.local('i32');
  const row = f.local('i32'), lo = f.local('i32'), hi = f.local('i32');
  const rowBytes = f.local('i32'), vectorBytes = f.local('i32'), at = f.local('i32'), xRow = f.local('i32'), oRow = f.local('i32');
  const max = f.local('f32'), sum = f.local('f32');
  const v = f.local('v128'), acc = f.local('v128'), e = f.local('v128'), splat = f.local('v128');
  const math = new SimdMath(f);
  f.get(job).i32Load(SoftmaxJob.threads * 4).set(threads);
  f.get(job).i32Load(SoftmaxJob.x * 4).set(src);
  f.get(job).i32Load(SoftmaxJob.out * 4).set(dst);
  f.get(job).i32Load(SoftmaxJob.rows * 4).set(rows);
  f.get(job).i32Load(SoftmaxJob.cols * 4).set(cols);
  f.get(cols).i32Const(4).i32Mul().set(rowBytes);
  f.get(cols).i32Const(-4).i32And().i32Const(4).i32Mul().set(vectorBytes);
  f.get(tid).get(rows).i32Mul().get(threads).i32DivU().set(lo);
  f.get(tid).i32Const(1).i32Add().get(rows).i32Mul().get(threads).i32DivU().set(hi);
  const lanes = (reduce: () => void) => {
    f.get(acc).f32x4ExtractLane(0);
    for (let lane = 1; lane < 4; lane++) { f.get(acc).f32x4ExtractLane(lane); reduce(); }
  };
  f.forUp(row, () => f.get(lo), hi, 1, () => {
    f.get(src).get(row).get(rowBytes).i32Mul().i32Add().set(xRow);
    f.get(dst).get(row).get(rowBytes).i32Mul().i32Add().set(oRow);
    // max
    f.f32x4Const(-Infinity).set(acc);
    f.forUp(at, () => f.i32Const(0), vectorBytes, 16, () => {
      f.get(acc).get(xRow).get(at).i32Add().v128Load().f32x4Max().set(acc);
    });
    lanes(() => f.f32Max());
    f.set(max);
    f.forUp(at, () => f.get(vectorBytes), rowBytes, 4, () => {
      f.get(max).get(xRow).get(at).i32Add().f32Load().f32Max().set(max);
    });
    // exp and sum
    f.get(max).f32x4Splat().set(splat);
    f.v128Zero().set(acc);
    f.forUp(at, () => f.i32Const(0), vectorBytes, 16, () => {
      f.get(xRow).get(at).i32Add().v128Load().get(splat).f32x4Sub().set(v);
      math.exp(v);
      f.set(e);
      f.get(oRow).get(at).i32Add().get(e).v128Store();
      f.get(acc).get(e).f32x4Add().set(acc);
    });
    lanes(() => f.f32Add());
    f.set(sum);
    f.forUp(at, () => f.get(vectorBytes), rowBytes, 4, () => {
      f.get(xRow).get(at).i32Add().f32Load().get(max).f32Sub().f32x4Splat().set(v);
      math.exp(v);
      f.set(e);
      f.get(oRow).get(at).i32Add().get(e).f32x4ExtractLane(0).f32Store();
      f.get(sum).get(e).f32x4ExtractLane(0).f32Add().set(sum);
    });
    // normalise
    f.get(sum).f32x4Splat().set(splat);
    f.forUp(at, () => f.i32Const(0), vectorBytes, 16, () => {
      f.get(oRow).get(at).i32Add().get(oRow).get(at).i32Add().v128Load().get(splat).f32x4Div().v128Store();
    });
    f.forUp(at, () => f.get(vectorBytes), rowBytes, 4, () => {
      f.get(oRow).get(at).i32Add().get(oRow).get(at).i32Add().f32Load().get(sum).f32Div().f32Store();
    });
  });
}

/** Emits every elementwise kernel and softmax into the module. */
export function emitElementwise(mb: WasmModuleBuilder): void {
  for (const op of WASM_UNARY_OPS) emitUnary(mb, op, UNARY[op] as UnaryEmitter);
  for (const op of WASM_BINARY_OPS) emitBinary(mb, op, BINARY[op] as BinaryEmitter);
  emitSoftmax(mb);
}
