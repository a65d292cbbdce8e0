/** Batched matrix multiply with optional transposes and batch broadcasting, and its gradient. */
import { ShapeError } from '../errors.ts';
import { record } from '../tensor/autograd.ts';
import { isGradEnabled } from '../tensor/scope.ts';
import { autocastDType } from '../tensor/autocast.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import { cast } from './cast.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { add } from './elementwise.ts';
import { broadcastTo, reshape, sumTo } from './layout.ts';
import { backendOf, broadcastShapes, disposing, fmt, ref, requireFloat, requireSameDType, sizeOf, wrap } from './run.ts';

export interface MatmulOptions {
  transA?: boolean; transB?: boolean;
  /** The result's dtype (default the operands'): f16 operands with an f32 result under autocast. Accumulation is f32 regardless. */
  outDType?: FloatDType;
}

/**
 * C = op(A)·op(B) over the last two axes; leading axes broadcast (NumPy rules). Rank-1 operands
 * are not promoted: reshape them first. Accumulates in f32 on every backend.
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  const transA = !!opts.transA, transB = !!opts.transB;
  const be = backendOf('matmul', a, b);
  requireFloat('matmul', a);
  requireSameDType('matmul', a, b);
  if (a.rank < 2 || b.rank < 2) throw new ShapeError(`matmul: operands need rank ≥ 2, got ${fmt(a.shape)} and ${fmt(b.shape)}`);
  const [m, ka] = transA ? [a.shape[a.rank - 1], a.shape[a.rank - 2]] : [a.shape[a.rank - 2], a.shape[a.rank - 1]];
  const [kb, n] = transB ? [b.shape[b.rank - 1], b.shape[b.rank - 2]] : [b.shape[b.rank - 2], b.shape[b.rank - 1]];
  if (ka !== kb) throw new ShapeError(`matmul: inner dimensions differ: ${fmt(a.shape)}${transA ? 'ᵀ' : ''} · ${fmt(b.shape)}${transB ? 'ᵀ' : ''} (${ka} vs ${kb})`);
  const batchShape = broadcastShapes('matmul', a.shape.slice(0, -2), b.shape.slice(0, -2));
  const batch = sizeOf(batchShape);
  const aB = sizeOf(a.shape.slice(0, -2)), bB = sizeOf(b.shape.slice(0, -2));
  // A batch that is neither whole nor a single matrix (e.g. [2,1] vs [1,3]) is materialised first.
  const ea = aB === batch || aB === 1 ? a : expandBatch(a, batchShape);
  const eb = bB === batch || bB === 1 ? b : expandBatch(b, batchShape);
  const outShape = [...batchShape, m, n];
  const outDType = opts.outDType ?? (a.dtype as FloatDType);
  const out = wrap(be, be.matmul(ref(ea), ref(eb), {
    batch, m, n, k: ka, transA, transB, batchA: ea.size / (m * ka) || 1, batchB: eb.size / (kb * n) || 1, outDType,
  }), outShape, outDType);
  disposing(null, ...(ea !== a ? [ea] : []), ...(eb !== b ? [eb] : []));
  return record('matmul', out, [a, b], (g0, [sa, sb]) => {
    // A result of another dtype than the operands' sends its gradient back in theirs.
    const g = g0.dtype === sa.dtype ? g0 : cast(g0, sa.dtype);
    // dA = g·op(B)ᵀ (or its transpose), dB = op(A)ᵀ·g (or its transpose)
    const da = a.requiresGrad ? (transA ? matmul(sb, g, { transA: transB, transB: true }) : matmul(g, sb, { transB: !transB })) : null;
    const db = b.requiresGrad ? (transB ? matmul(g, sa, { transA: true, transB: transA }) : matmul(sa, g, { transA: !transA })) : null;
    return [da && sumTo(da, a.shape), db && sumTo(db, b.shape)];
  }, [a, b]);
}

function expandBatch(x: Tensor, batchShape: readonly number[]): Tensor {
  return broadcastTo(x, [...batchShape, ...x.shape.slice(-2)]);
}

/**
 * Several Linear projections of one input without bias: x (…, in) against weights (out_i, in) →
 * x·W_iᵀ (…, out_i), each in outDTypes[i] (default x's dtype). Where nothing asks for a gradient and
 * no autocast lowers the operands, one Backend.matmulMany (on webgpu one dispatch for a decoding
 * step's rows); else one `linear` each, the same products.
 */
export function linears(x: Tensor, weights: readonly Tensor[], outDTypes: readonly (FloatDType | undefined)[] = []): Tensor[] {
  const inF = x.shape[x.rank - 1];
  const be = backendOf('linears', x, ...weights);
  requireFloat('linears', x);
  for (const w of weights) {
    if (w.rank !== 2 || w.shape[1] !== inF) throw new ShapeError(`linears: weight ${fmt(w.shape)} for inputs ${fmt(x.shape)}: expected (out, ${inF})`);
    requireSameDType('linears', x, w);
  }
  const grad = isGradEnabled() && (x.requiresGrad || weights.some((w) => w.requiresGrad));
  const lowered = !!autocastDType() && x.dtype === 'f32' && weights[0]?.dtype === 'f32';
  if (grad || lowered || weights.length < 2) return weights.map((w, i) => linear(x, w, undefined, true, outDTypes[i] ? { outDType: outDTypes[i] } : {}));
  const m = x.size / inF, lead = x.shape.slice(0, -1);
  const outs = weights.map((_, i) => outDTypes[i] ?? (x.dtype as FloatDType));
  const hs = be.matmulMany(ref(x), weights.map(ref), { m, k: inF, ns: weights.map((w) => w.shape[0]), outDTypes: outs });
  return hs.map((h, i) => wrap(be, h, [...lead, weights[i].shape[0]], outs[i]));
}

/**
 * x·W (+ bias): x (…, in), weight (in, out) or, with transposed weights as in PyTorch, (out, in).
 * Inside an autocast scope, f32 x and W are multiplied as copies in its dtype, the result in f32.
 * `opts.outDType` asks for the result in another float dtype, written by the GEMM itself (a
 * decoding step's selector keys go straight to f16, its scores' inputs to f32; a backend that
 * cannot store the dtype writes f32 and packs it); with a bias, the f32 product plus the bias is
 * rounded once, by a cast at the end.
 */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor, weightIsOutIn = true, opts: { outDType?: FloatDType } = {}): Tensor {
  const inF = x.shape[x.rank - 1];
  const x2 = reshape(x, [-1, inF]);
  const low = autocastDType();
  const lowered = !!low && x.dtype === 'f32' && weight.dtype === 'f32';
  // Another dtype than the result's own (f32 under autocast, else x's): the GEMM writes it itself;
  // with a bias, f32 (the sum rounded once, by the cast below).
  const to = opts.outDType === (lowered ? 'f32' : x.dtype) ? undefined : opts.outDType;
  const gemmOut = to && bias ? 'f32' : to;
  let y2: Tensor;
  if (lowered) {
    const xl = cast(x2, low), wl = cast(weight, low);
    try {
      y2 = matmul(xl, wl, { transB: weightIsOutIn, outDType: gemmOut ?? 'f32' });
    } finally {
      xl.dispose();
      wl.dispose();
    }
  } else y2 = matmul(x2, weight, { transB: weightIsOutIn, ...(gemmOut ? { outDType: gemmOut } : {}) });
  const outF = y2.shape[1];
  const y = disposing(reshape(y2, [...x.shape.slice(0, -1), outF]), x2, y2);
  if (!bias) return y;
  const b = to && bias.dtype !== y.dtype ? cast(bias, y.dtype) : bias; // (without outDType a bias of another dtype is refused by add)
  const sum = disposing(add(y, b), y, ...(b !== bias ? [b] : []));
  return to && sum.dtype !== to ? disposing(cast(sum, to), sum) : sum;
}
