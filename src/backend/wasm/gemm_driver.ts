/**
 * The GEMM loops around the micro-kernel, emitted as wasm so a worker thread needs nothing but
 * the module: `gemm_pack_b(job, tid)` and `gemm_compute(job, tid)` each do thread `tid`'s share
 * of the job record (gemm_job.ts) and return. The host runs the first on every thread, waits,
 * then runs the second.
 */
import { GEMM_KC, GEMM_PACK_B_GROUP, GemmJob } from './gemm_job.ts';
import { emitEdgeTile, emitMicroKernel, type MicroTile } from './gemm_micro_kernel.ts';
import { emitPackBlock, emitPackPanel, emitPackRows } from './gemm_pack.ts';
import type { FunctionBuilder, WasmModuleBuilder } from './module_builder.ts';

export const GEMM_KERNELS = ['gemm_pack_b', 'gemm_compute'] as const;

/** Pushes min(x, y) of two unsigned i32 locals. */
function minU(f: FunctionBuilder, x: number, y: number): void {
  f.get(x).get(y).get(x).get(y).i32LtU().select();
}

/** Loads job field `field` into a new local. */
function field(f: FunctionBuilder, job: number, index: number): number {
  const local = f.local('i32');
  f.get(job).i32Load(index * 4).set(local);
  return local;
}

/** Sets lo/hi to thread tid's share [tid·total/T, (tid+1)·total/T) of `total` items. */
function threadRange(f: FunctionBuilder, tid: number, threads: number, total: number, lo: number, hi: number): void {
  f.get(tid).get(total).i32Mul().get(threads).i32DivU().set(lo);
  f.get(tid).i32Const(1).i32Add().get(total).i32Mul().get(threads).i32DivU().set(hi);
}

export function emitGemm(mb: WasmModuleBuilder, tile: MicroTile, fma: boolean): void {
  const { mr, nr } = tile;
  const microStore = emitMicroKernel(mb, 'gemm_micro_store', tile, fma, false);
  const microAccumulate = emitMicroKernel(mb, 'gemm_micro_accumulate', tile, fma, true);
  const edgeTile = emitEdgeTile(mb, 'gemm_edge_tile', tile);
  const packA = emitPackBlock(mb, 'gemm_pack_block_a', mr, emitPackPanel(mb, 'gemm_pack_panel_a', mr), emitPackRows(mb, 'gemm_pack_rows_a', mr));
  const packB = emitPackBlock(mb, 'gemm_pack_block_b', nr, emitPackPanel(mb, 'gemm_pack_panel_b', nr), emitPackRows(mb, 'gemm_pack_rows_b', nr));

  // gemm_block(pa, pb, pc, ldc, mc, nc, kc, scratch, accumulate): one packed mc×kc A block times
  // the packed kc×nc B slab; NR column panels outer so each B panel stays in L1.
  const block = mb.function('gemm_block', ['i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32', 'i32'], [], false);
  {
    const f = block;
    const [pa, pb, pc, ldc, mc, nc, kc, scratch, accumulate] = f.params;
    const jp = f.local('i32'), ip = f.local('i32');
    const pbPanel = f.local('i32'), paPanel = f.local('i32'), cTile = f.local('i32');
    const rows = f.local('i32'), cols = f.local('i32');
    const tileMr = f.local('i32'), tileNr = f.local('i32');
    const rest = f.local('i32');
    f.i32Const(mr).set(tileMr);
    f.i32Const(nr).set(tileNr);
    f.forUp(jp, () => f.i32Const(0), nc, nr, () => {
      f.get(pb).get(jp).get(kc).i32Mul().i32Const(4).i32Mul().i32Add().set(pbPanel);
      f.get(nc).get(jp).i32Sub().set(rest);
      minU(f, tileNr, rest); f.set(cols);
      f.forUp(ip, () => f.i32Const(0), mc, mr, () => {
        f.get(pa).get(ip).get(kc).i32Mul().i32Const(4).i32Mul().i32Add().set(paPanel);
        f.get(mc).get(ip).i32Sub().set(rest);
        minU(f, tileMr, rest); f.set(rows);
        f.get(pc).get(ip).get(ldc).i32Mul().i32Add().get(jp).i32Const(4).i32Mul().i32Add().set(cTile);
        f.get(rows).i32Const(mr).i32Eq().get(cols).i32Const(nr).i32Eq().i32And();
        f.if(
          () => {
            f.get(accumulate).if(
              () => { f.get(paPanel).get(pbPanel).get(cTile).get(ldc).get(kc).call(microAccumulate); },
              () => { f.get(paPanel).get(pbPanel).get(cTile).get(ldc).get(kc).call(microStore); },
            );
          },
          () => {
            f.get(paPanel).get(pbPanel).get(scratch).i32Const(nr * 4).get(kc).call(microStore);
            f.get(scratch).get(cTile).get(ldc).get(rows).get(cols).get(accumulate).call(edgeTile);
          },
        );
      });
    });
  }

  // gemm_pack_b(job, tid): packs this thread's share of all (matrix, K slab, group of
  // GEMM_PACK_B_GROUP panels) items.
  {
    const f = mb.function('gemm_pack_b', ['i32', 'i32']);
    const [job, tid] = f.params;
    const threads = field(f, job, GemmJob.threads);
    const b = field(f, job, GemmJob.b), bBatch = field(f, job, GemmJob.bBatchStride);
    const bDepth = field(f, job, GemmJob.bDepthStride), bCol = field(f, job, GemmJob.bColStride);
    const matrices = field(f, job, GemmJob.bMatrices);
    const packed = field(f, job, GemmJob.packedB), packedBatch = field(f, job, GemmJob.packedBBatchStride);
    const nPadded = field(f, job, GemmJob.nPadded), n = field(f, job, GemmJob.n), k = field(f, job, GemmJob.k);
    const kcMax = f.local('i32'), groupColumns = f.local('i32');
    f.i32Const(GEMM_KC).set(kcMax);
    f.i32Const(GEMM_PACK_B_GROUP * nr).set(groupColumns);
    const slabs = f.local('i32'), groups = f.local('i32'), perMatrix = f.local('i32'), total = f.local('i32');
    const lo = f.local('i32'), hi = f.local('i32'), item = f.local('i32');
    const matrix = f.local('i32'), rest = f.local('i32'), slab = f.local('i32'), group = f.local('i32');
    const k0 = f.local('i32'), j0 = f.local('i32'), kc = f.local('i32'), columns = f.local('i32');
    f.get(k).get(kcMax).i32Add().i32Const(1).i32Sub().get(kcMax).i32DivU().set(slabs);
    f.get(n).get(groupColumns).i32Add().i32Const(1).i32Sub().get(groupColumns).i32DivU().set(groups);
    f.get(slabs).get(groups).i32Mul().set(perMatrix);
    f.get(matrices).get(perMatrix).i32Mul().set(total);
    threadRange(f, tid, threads, total, lo, hi);
    f.forUp(item, () => f.get(lo), hi, 1, () => {
      f.get(item).get(perMatrix).i32DivU().set(matrix);
      f.get(item).get(matrix).get(perMatrix).i32Mul().i32Sub().set(rest);
      f.get(rest).get(groups).i32DivU().set(slab);
      f.get(rest).get(slab).get(groups).i32Mul().i32Sub().set(group);
      f.get(slab).get(kcMax).i32Mul().set(k0);
      f.get(group).get(groupColumns).i32Mul().set(j0);
      f.get(k).get(k0).i32Sub().set(rest);
      minU(f, kcMax, rest); f.set(kc);
      f.get(n).get(j0).i32Sub().set(rest);
      minU(f, groupColumns, rest); f.set(columns);
      // src: B[matrix, k0, j0]
      f.get(b).get(matrix).get(bBatch).i32Mul().i32Add();
      f.get(k0).get(bDepth).i32Mul().i32Add();
      f.get(j0).get(bCol).i32Mul().i32Add();
      // dst: the slab's panels start at k0·nPadded floats; panel j0/NR at j0·kc floats within it.
      f.get(packed).get(matrix).get(packedBatch).i32Mul().i32Add();
      f.get(k0).get(nPadded).i32Mul().get(j0).get(kc).i32Mul().i32Add().i32Const(4).i32Mul().i32Add();
      f.get(columns).get(kc).get(bCol).get(bDepth).call(packB);
    });
  }

  // gemm_compute(job, tid): for each of this thread's items, per K slab: pack A, run the block.
  {
    const f = mb.function('gemm_compute', ['i32', 'i32']);
    const [job, tid] = f.params;
    const threads = field(f, job, GemmJob.threads);
    const a = field(f, job, GemmJob.a), aBatch = field(f, job, GemmJob.aBatchStride);
    const aRow = field(f, job, GemmJob.aRowStride), aDepth = field(f, job, GemmJob.aDepthStride);
    const packed = field(f, job, GemmJob.packedB), packedBatch = field(f, job, GemmJob.packedBBatchStride);
    const nPadded = field(f, job, GemmJob.nPadded);
    const c = field(f, job, GemmJob.c), cBatch = field(f, job, GemmJob.cBatchStride), ldc = field(f, job, GemmJob.ldc);
    const m = field(f, job, GemmJob.m), n = field(f, job, GemmJob.n), k = field(f, job, GemmJob.k);
    const batch = field(f, job, GemmJob.batch);
    const kcMax = f.local('i32');
    f.i32Const(GEMM_KC).set(kcMax);
    const mChunk = field(f, job, GemmJob.mChunk), nChunk = field(f, job, GemmJob.nChunk);
    const mItems = field(f, job, GemmJob.mItems), nItems = field(f, job, GemmJob.nItems);
    const pa = f.local('i32'), scratch = f.local('i32');
    f.get(job).i32Load(GemmJob.packA * 4).get(tid).get(job).i32Load(GemmJob.packAStride * 4).i32Mul().i32Add().set(pa);
    f.get(job).i32Load(GemmJob.scratch * 4).get(tid).get(job).i32Load(GemmJob.scratchStride * 4).i32Mul().i32Add().set(scratch);
    const perBatch = f.local('i32'), total = f.local('i32'), lo = f.local('i32'), hi = f.local('i32');
    const item = f.local('i32'), bi = f.local('i32'), rest = f.local('i32'), mi = f.local('i32'), ni = f.local('i32');
    const i0 = f.local('i32'), j0 = f.local('i32'), mc = f.local('i32'), nc = f.local('i32');
    const aBase = f.local('i32'), cBase = f.local('i32'), pbBase = f.local('i32');
    const k0 = f.local('i32'), kc = f.local('i32');
    f.get(mItems).get(nItems).i32Mul().set(perBatch);
    f.get(batch).get(perBatch).i32Mul().set(total);
    threadRange(f, tid, threads, total, lo, hi);
    f.forUp(item, () => f.get(lo), hi, 1, () => {
      f.get(item).get(perBatch).i32DivU().set(bi);
      f.get(item).get(bi).get(perBatch).i32Mul().i32Sub().set(rest);
      f.get(rest).get(nItems).i32DivU().set(mi);
      f.get(rest).get(mi).get(nItems).i32Mul().i32Sub().set(ni);
      f.get(mi).get(mChunk).i32Mul().set(i0);
      f.get(ni).get(nChunk).i32Mul().set(j0);
      f.get(m).get(i0).i32Sub().set(rest);
      minU(f, mChunk, rest); f.set(mc);
      f.get(n).get(j0).i32Sub().set(rest);
      minU(f, nChunk, rest); f.set(nc);
      f.get(a).get(bi).get(aBatch).i32Mul().i32Add().get(i0).get(aRow).i32Mul().i32Add().set(aBase);
      f.get(c).get(bi).get(cBatch).i32Mul().i32Add().get(i0).get(ldc).i32Mul().i32Add().get(j0).i32Const(4).i32Mul().i32Add().set(cBase);
      f.get(packed).get(bi).get(packedBatch).i32Mul().i32Add().set(pbBase);
      f.forUp(k0, () => f.i32Const(0), k, GEMM_KC, () => {
        f.get(k).get(k0).i32Sub().set(rest);
        minU(f, kcMax, rest); f.set(kc);
        // Pack this item's rows of the slab, MR rows per panel.
        f.get(aBase).get(k0).get(aDepth).i32Mul().i32Add();
        f.get(pa).get(mc).get(kc).get(aRow).get(aDepth).call(packA);
        f.get(pa);
        f.get(pbBase).get(k0).get(nPadded).i32Mul().get(j0).get(kc).i32Mul().i32Add().i32Const(4).i32Mul().i32Add();
        f.get(cBase).get(ldc).get(mc).get(nc).get(kc).get(scratch);
        f.get(k0).i32Const(0).i32Ne();
        f.call(block);
      });
    });
  }
}
