/**
 * Matrix–vector products for GEMMs with a few rows of A (decoding one token: x·Wᵀ), where
 * packing B would cost as much as the product itself: B is read once, straight from its copy.
 *
 * `gemv(job, tid)` takes thread tid's share of (batch, column chunk) items. With Bᵀ stored
 * (N×K, a linear layer's weight) each output is a dot product of two contiguous K-vectors
 * (16 lanes of partial sums); with B stored (K×N) each row of B is added, scaled, into a
 * chunk of the output rows that stays in L1 (all of A's rows per B row, so B streams once).
 * A's m rows are contiguous (the host transposes Aᵀ, which is small).
 */
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';

/** Word index of each field of a GEMV job record; addresses and strides in bytes. */
export const GemvJob = {
  threads: 0,
  /** A: batchA × (m × k) rows, contiguous; aBatchStride 0 when broadcast. */
  a: 1, aBatchStride: 2,
  /** B: (n × k) when transB, else (k × n); bBatchStride 0 when broadcast. */
  b: 3, bBatchStride: 4, transB: 5,
  c: 6, cBatchStride: 7,
  m: 8, n: 9, k: 10, batch: 11,
} as const;
export const GEMV_JOB_WORDS = 12;
/** Output columns per work item (a 1 KiB chunk of each output row). */
export const GEMV_CHUNK = 256;
/** GEMMs with at most this many rows of op(A) take the GEMV kernel. */
export const GEMV_MAX_ROWS = 4;

/** Emits `(pa, pb, k) → f32`: Σ pa[l]·pb[l], four f32x4 partial sums, scalar tail. */
function emitDot(mb: WasmModuleBuilder, fma: boolean): FunctionBuilder {
  const f = mb.function('gemv_dot', ['i32', 'i32', 'i32'], ['f32'], false);
  const [pa, pb, k] = f.params;
  const acc = Array.from({ length: 4 }, () => f.local('v128'));
  const at = f.local('i32'), end16 = f.local('i32'), end = f.local('i32'), sum = f.local('f32');
  for (const x of acc) f.v128Zero().set(x);
  f.get(k).i32Const(-16).i32And().i32Const(4).i32Mul().set(end16);
  f.get(k).i32Const(4).i32Mul().set(end);
  f.forUp(at, () => f.i32Const(0), end16, 64, () => {
    for (let v = 0; v < 4; v++) {
      if (fma) {
        f.get(pa).get(at).i32Add().v128Load(v * 16).get(pb).get(at).i32Add().v128Load(v * 16).get(acc[v]).f32x4RelaxedMadd().set(acc[v]);
      } else {
        f.get(acc[v]).get(pa).get(at).i32Add().v128Load(v * 16).get(pb).get(at).i32Add().v128Load(v * 16).f32x4Mul().f32x4Add().set(acc[v]);
      }
    }
  });
  f.get(acc[0]).get(acc[1]).f32x4Add().get(acc[2]).get(acc[3]).f32x4Add().f32x4Add().set(acc[0]);
  f.get(acc[0]).f32x4ExtractLane(0).get(acc[0]).f32x4ExtractLane(1).f32Add();
  f.get(acc[0]).f32x4ExtractLane(2).get(acc[0]).f32x4ExtractLane(3).f32Add().f32Add().set(sum);
  f.forUp(at, () => f.get(end16), end, 4, () => {
    f.get(sum).get(pa).get(at).i32Add().f32Load().get(pb).get(at).i32Add().f32Load().f32Mul().f32Add().set(sum);
  });
  f.get(sum);
  return f;
}

/** Emits `(out, pb, alpha, count)`: out[0:count] += alpha·pb[0:count]. */
function emitAxpy(mb: WasmModuleBuilder, fma: boolean): FunctionBuilder {
  const f = mb.function('gemv_axpy', ['i32', 'i32', 'f32', 'i32'], [], false);
  const [out, pb, alpha, count] = f.params;
  const at = f.local('i32'), end4 = f.local('i32'), end = f.local('i32'), splat = f.local('v128');
  f.get(alpha).f32x4Splat().set(splat);
  f.get(count).i32Const(-4).i32And().i32Const(4).i32Mul().set(end4);
  f.get(count).i32Const(4).i32Mul().set(end);
  f.forUp(at, () => f.i32Const(0), end4, 16, () => {
    f.get(out).get(at).i32Add();
    if (fma) f.get(splat).get(pb).get(at).i32Add().v128Load().get(out).get(at).i32Add().v128Load().f32x4RelaxedMadd();
    else f.get(out).get(at).i32Add().v128Load().get(splat).get(pb).get(at).i32Add().v128Load().f32x4Mul().f32x4Add();
    f.v128Store();
  });
  f.forUp(at, () => f.get(end4), end, 4, () => {
    f.get(out).get(at).i32Add().get(out).get(at).i32Add().f32Load().get(alpha).get(pb).get(at).i32Add().f32Load().f32Mul().f32Add().f32Store();
  });
  return f;
}

export function emitGemv(mb: WasmModuleBuilder, fma: boolean): void {
  const dot = emitDot(mb, fma);
  const axpy = emitAxpy(mb, fma);
  const f = mb.function('gemv', ['i32', 'i32']);
  const [job, tid] = f.params;
  const load = (index: number) => { const l = f.local('i32'); f.get(job).i32Load(index * 4).set(l); return l; };
  const threads = load(GemvJob.threads), a = load(GemvJob.a), aBatch = load(GemvJob.aBatchStride);
  const b = load(GemvJob.b), bBatch = load(GemvJob.bBatchStride), transB = load(GemvJob.transB);
  const c = load(GemvJob.c), cBatch = load(GemvJob.cBatchStride);
  const m = load(GemvJob.m), n = load(GemvJob.n), k = load(GemvJob.k), batch = load(GemvJob.batch);
  const chunks = f.local('i32'), total = f.local('i32'), lo = f.local('i32'), hi = f.local('i32'), item = f.local('i32');
  const bi = f.local('i32'), j0 = f.local('i32'), j1 = f.local('i32'), j = f.local('i32'), i = f.local('i32'), l = f.local('i32');
  const aBase = f.local('i32'), bBase = f.local('i32'), cBase = f.local('i32'), width = f.local('i32'), rest = f.local('i32');
  const chunk = f.local('i32'), aRowBytes = f.local('i32'), bRowBytes = f.local('i32'), cRowBytes = f.local('i32');
  f.i32Const(GEMV_CHUNK).set(chunk);
  f.get(n).get(chunk).i32Add().i32Const(1).i32Sub().get(chunk).i32DivU().set(chunks);
  f.get(batch).get(chunks).i32Mul().set(total);
  f.get(tid).get(total).i32Mul().get(threads).i32DivU().set(lo);
  f.get(tid).i32Const(1).i32Add().get(total).i32Mul().get(threads).i32DivU().set(hi);
  f.get(k).i32Const(4).i32Mul().set(aRowBytes);
  f.get(n).i32Const(4).i32Mul().set(cRowBytes);
  f.get(n).i32Const(4).i32Mul().set(bRowBytes);
  f.forUp(item, () => f.get(lo), hi, 1, () => {
    f.get(item).get(chunks).i32DivU().set(bi);
    f.get(item).get(bi).get(chunks).i32Mul().i32Sub().get(chunk).i32Mul().set(j0);
    f.get(n).get(j0).i32Sub().set(rest);
    f.get(chunk).get(rest).get(chunk).get(rest).i32LtU().select().set(width);
    f.get(j0).get(width).i32Add().set(j1);
    f.get(a).get(bi).get(aBatch).i32Mul().i32Add().set(aBase);
    f.get(b).get(bi).get(bBatch).i32Mul().i32Add().set(bBase);
    f.get(c).get(bi).get(cBatch).i32Mul().i32Add().set(cBase);
    f.get(transB).if(
      () => {
        // c[i, j] = dot(a_i, B[j, :]); B's row j stays in L1 across A's rows.
        f.forUp(j, () => f.get(j0), j1, 1, () => {
          f.forUp(i, () => f.i32Const(0), m, 1, () => {
            f.get(cBase).get(i).get(cRowBytes).i32Mul().i32Add().get(j).i32Const(4).i32Mul().i32Add();
            f.get(aBase).get(i).get(aRowBytes).i32Mul().i32Add();
            f.get(bBase).get(j).get(aRowBytes).i32Mul().i32Add();
            f.get(k).call(dot);
            f.f32Store();
          });
        });
      },
      () => {
        // c[i, j0:j1] = Σ_l a[i, l]·B[l, j0:j1], output chunk in L1, each B row read once.
        f.forUp(i, () => f.i32Const(0), m, 1, () => {
          f.get(cBase).get(i).get(cRowBytes).i32Mul().i32Add().get(j0).i32Const(4).i32Mul().i32Add();
          f.i32Const(0).get(width).i32Const(4).i32Mul().memoryFill();
        });
        f.forUp(l, () => f.i32Const(0), k, 1, () => {
          f.forUp(i, () => f.i32Const(0), m, 1, () => {
            f.get(cBase).get(i).get(cRowBytes).i32Mul().i32Add().get(j0).i32Const(4).i32Mul().i32Add();
            f.get(bBase).get(l).get(bRowBytes).i32Mul().i32Add().get(j0).i32Const(4).i32Mul().i32Add();
            f.get(aBase).get(i).get(aRowBytes).i32Mul().i32Add().get(l).i32Const(4).i32Mul().i32Add().f32Load();
            f.get(width).call(axpy);
          });
        });
      },
    );
  });
}
