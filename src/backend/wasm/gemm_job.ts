/**
 * The GEMM job: the record the host writes into wasm memory for the kernels to read (one layout
 * shared by the TypeScript that writes it and the code generator that emits the reads), and the
 * plan that cuts the work into items for the threads.
 *
 * Blocking (BLIS / Goto order): K is cut into slabs of KC; each thread takes items of at most
 * MC rows × nChunk columns of C, packs its MC×KC block of A (128 KiB, stays in L2) and streams
 * the packed B panels (KC×NR = 8 KiB, stays in L1) against it, one NR column panel at a time.
 * B is packed once per call by all threads together, before the items run.
 */
import { GEMM_TILE } from './gemm_micro_kernel.ts';

/** Word index (i32) of each field of a GEMM job record. Strides and addresses are in bytes. */
export const GemmJob = {
  threads: 0,
  /** A[b, i, l] at a + b·aBatchStride + i·aRowStride + l·aDepthStride (stride 0 broadcasts). */
  a: 1, aBatchStride: 2, aRowStride: 3, aDepthStride: 4,
  /** B[b, l, j] at b + b·bBatchStride + l·bDepthStride + j·bColStride; bMatrices of them. */
  b: 5, bBatchStride: 6, bDepthStride: 7, bColStride: 8, bMatrices: 9,
  /** Packed B: per matrix, K slabs of (KC × nPadded) floats; 0 batch stride when broadcast. */
  packedB: 10, packedBBatchStride: 11, nPadded: 12,
  /** C[b, i, j] at c + b·cBatchStride + i·ldc + 4j. */
  c: 13, cBatchStride: 14, ldc: 15,
  m: 16, n: 17, k: 18, batch: 19,
  /** Work items: per batch, mItems × nItems chunks of mChunk rows × nChunk columns. */
  mChunk: 20, nChunk: 21, mItems: 22, nItems: 23,
  /** Per-thread packed-A block and MR×NR edge tile: base + tid·stride. */
  packA: 24, packAStride: 25, scratch: 26, scratchStride: 27,
} as const;
export const GEMM_JOB_WORDS = 28;

/** K slab depth: a KC×NR B panel (8 KiB) fits L1 beside the A panel being streamed. */
export const GEMM_KC = 256;
/** Panels per B-packing item: 64 panels × KC rows = 512 KiB of packed B, written from L2. */
export const GEMM_PACK_B_GROUP = 64;
/** Rows per item: an MC×KC packed A block (128 KiB) stays in L2. */
export const GEMM_MC = 128;
/** Below this many flops one thread is faster than handing work to others (measured crossover: 96³ gains from 2 threads, 64³ does not). */
export const GEMM_PARALLEL_MIN_FLOPS = 1 << 21;

export interface GemmPlan {
  threads: number;
  mChunk: number; nChunk: number; mItems: number; nItems: number;
  nPadded: number;
}

const ceilDiv = (a: number, b: number) => Math.ceil(a / b);
const roundUp = (a: number, b: number) => ceilDiv(a, b) * b;

/**
 * Cuts batch × M × N into items: whole-width row chunks of at most MC rows, with the number of
 * items a multiple of the thread count where the rows allow; when there are too few rows for the
 * threads (decode-time GEMV-like shapes), the columns are split as well.
 */
export function planGemm(batch: number, m: number, n: number, k: number, maxThreads: number, minParallelFlops = GEMM_PARALLEL_MIN_FLOPS): GemmPlan {
  const { mr, nr } = GEMM_TILE;
  const flops = 2 * batch * m * n * k;
  const threads = flops < minParallelFlops ? 1 : Math.max(1, maxThreads);
  const nPadded = roundUp(n, nr);
  const mPanels = ceilDiv(m, mr);
  let mItems = ceilDiv(m, GEMM_MC);
  while ((batch * mItems) % threads !== 0 && mItems < mPanels) mItems++;
  const mChunk = roundUp(ceilDiv(m, mItems), mr);
  mItems = ceilDiv(m, mChunk);
  let nChunk = nPadded;
  let nItems = 1;
  if (batch * mItems < threads) {
    nItems = Math.min(nPadded / nr, ceilDiv(threads, batch * mItems));
    nChunk = roundUp(ceilDiv(n, nItems), nr);
    nItems = ceilDiv(n, nChunk);
  }
  return { threads: Math.min(threads, batch * mItems * nItems), mChunk, nChunk, mItems, nItems, nPadded };
}
