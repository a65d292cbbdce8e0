/**
 * Transcendental functions on f32x4 lanes, emitted inline into a kernel: exp (Cephes expf:
 * round to a multiple of ln 2, degree-6 polynomial, scale by 2ⁿ through the exponent bits;
 * rounding by the 1.5·2²³ trick and clamping with pmin/pmax, which V8 lowers to one instruction
 * each where IEEE min/max and float→int conversion take several),
 * a sigmoid that cannot overflow, and tanh (Cephes tanhf: odd polynomial below |x| = 0.625,
 * 1 − 2/(e^{2|x|}+1) above). Both are
 * within a few ulp of the f64 `Math` functions the CPU reference rounds to f32, keep NaN as
 * NaN, and give exact 0 / ±∞ / ±1 at the ends (masked softmax relies on exp(−∞) = 0).
 */
import type { FunctionBuilder } from './module_builder.ts';

const EXP_HI = 88.72283905206835;
/** Below this e^x is under half the smallest subnormal. */
const EXP_LO = -103.97208;
const LOG2E = 1.44269504088896341;
/** 1.5·2²³: adding it rounds an f32 of magnitude < 2²² to an integer (ties to even). */
const ROUND_MAGIC = 12582912;
const ROUND_MAGIC_BITS = 0x4b400000;
const LN2_HI = 0.693359375;
const LN2_LO = -2.12194440e-4;
const EXP_POLY = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
const TANH_POLY = [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1];
const TANH_SMALL = 0.625;

/** Emits SIMD math into `f`, with its own scratch locals (declared once per kernel). */
export class SimdMath {
  private readonly expR: number;
  private readonly expFx: number;
  private readonly expN: number;
  private readonly expHalfN: number;
  private readonly expY: number;
  private readonly tanhArg: number;
  private readonly tanhBig: number;
  private readonly tanhZ: number;
  private readonly sigmoidE: number;

  constructor(private readonly f: FunctionBuilder) {
    [this.expR, this.expFx, this.expN, this.expHalfN, this.expY, this.tanhArg, this.tanhBig, this.tanhZ, this.sigmoidE] =
      Array.from({ length: 9 }, () => f.local('v128'));
  }

  /** Pushes e^x for the v128 in local x (x is read, never written). */
  exp(x: number): void {
    const f = this.f;
    const r = this.expR, fx = this.expFx, n = this.expN, half = this.expHalfN, y = this.expY;
    // Clamp to the finite range with pmax/pmin (one instruction each; x first keeps NaN as NaN).
    f.get(x).f32x4Const(EXP_LO).f32x4Pmax().f32x4Const(EXP_HI).f32x4Pmin().set(r);
    // t = x·log2 e + 1.5·2²³ rounds to the nearest integer in t's low mantissa bits:
    // fx = t − 1.5·2²³ and n = bits(t) − bits(1.5·2²³), with no float→int conversion.
    f.get(r).f32x4Const(LOG2E).f32x4Mul().f32x4Const(ROUND_MAGIC).f32x4Add().set(n);
    f.get(n).f32x4Const(ROUND_MAGIC).f32x4Sub().set(fx);
    f.get(n).i32Const(ROUND_MAGIC_BITS).i32x4Splat().i32x4Sub().set(n);
    // r = x − fx·ln 2 in two parts; y = P(r)·r² + r + 1.
    f.get(r).get(fx).f32x4Const(LN2_HI).f32x4Mul().f32x4Sub().get(fx).f32x4Const(LN2_LO).f32x4Mul().f32x4Sub().set(r);
    f.f32x4Const(EXP_POLY[0]);
    for (const c of EXP_POLY.slice(1)) f.get(r).f32x4Mul().f32x4Const(c).f32x4Add();
    f.get(r).f32x4Mul().get(r).f32x4Mul().get(r).f32x4Add().f32x4Const(1).f32x4Add().set(y);
    // y·2ⁿ as y·2^(n/2)·2^(n − n/2), so n = 128 (top of the range) and n < −126 (subnormals) work.
    f.get(n).i32Const(1).i32x4ShrS().set(half);
    f.get(y);
    f.get(half).i32Const(127).i32x4Splat().i32x4Add().i32Const(23).i32x4Shl().f32x4Mul();
    f.get(n).get(half).i32x4Sub().i32Const(127).i32x4Splat().i32x4Add().i32Const(23).i32x4Shl().f32x4Mul();
    // Exact ends: 0 below the range, +∞ above it (NaN compares false and stays NaN).
    f.get(x).f32x4Const(EXP_LO).f32x4Lt().v128AndNot().set(y);
    f.f32x4Const(Infinity).get(y).get(x).f32x4Const(EXP_HI).f32x4Gt().v128Bitselect();
  }

  /**
   * Pushes 1/(1 + e^−x) for the v128 in local x, from e = e^−|x| so nothing overflows: 1/(1+e) for
   * x ≥ 0, e/(1+e) for x < 0 (tiny and subnormal results stay accurate).
   */
  sigmoid(x: number): void {
    const f = this.f;
    const e = this.sigmoidE;
    f.get(x).f32x4Abs().f32x4Neg().set(this.tanhArg);
    this.exp(this.tanhArg);
    f.set(e);
    f.get(e).get(e).f32x4Const(1).f32x4Add().f32x4Div();
    f.f32x4Const(1).get(e).f32x4Const(1).f32x4Add().f32x4Div();
    f.get(x).f32x4Const(0).f32x4Lt().v128Bitselect();
  }

  /** Pushes tanh(x) for the v128 in local x (x is read, never written). */
  tanh(x: number): void {
    const f = this.f;
    const arg = this.tanhArg, big = this.tanhBig, z = this.tanhZ;
    // |x| ≥ 0.625: 1 − 2/(e^{2|x|} + 1), with the sign of x put back.
    f.get(x).f32x4Abs().f32x4Const(2).f32x4Mul().set(arg);
    this.exp(arg);
    f.set(big);
    f.f32x4Const(1).f32x4Const(2).get(big).f32x4Const(1).f32x4Add().f32x4Div().f32x4Sub();
    f.get(x).f32x4Const(-0).v128And().v128Or().set(big);
    // |x| < 0.625: x + x·z·P(z), z = x².
    f.get(x).get(x).f32x4Mul().set(z);
    f.f32x4Const(TANH_POLY[0]);
    for (const c of TANH_POLY.slice(1)) f.get(z).f32x4Mul().f32x4Const(c).f32x4Add();
    f.get(z).f32x4Mul().get(x).f32x4Mul().get(x).f32x4Add();
    f.get(big);
    f.get(x).f32x4Abs().f32x4Const(TANH_SMALL).f32x4Lt();
    f.v128Bitselect();
  }
}
