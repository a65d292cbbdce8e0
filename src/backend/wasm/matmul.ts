/**
 * The wasm backend's matmul: reads resident operands (runtime.ts) in place and copies the others
 * into wasm memory as f32 (16-bit inputs are widened first, as the CPU reference does), writes
 * the job record, packs B on all threads, runs the blocked GEMM on all threads into a resident
 * output (or the workspace, then copied out in the requested dtype). Products with at most
 * GEMV_MAX_ROWS rows of op(A) skip the packing and run the GEMV kernel instead.
 */
import type { MatmulArgs } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from '../cpu/host.ts';
import { GEMM_JOB_WORDS, GEMM_KC, GemmJob, planGemm } from './gemm_job.ts';
import { GEMV_CHUNK, GEMV_JOB_WORDS, GEMV_MAX_ROWS, GemvJob } from './gemv_kernel.ts';
import { JOB_ADDRESS, MAX_WORKSPACE_BYTES, SCRATCH_ADDRESS, SCRATCH_STRIDE, type WasmRuntime } from './runtime.ts';

const align64 = (bytes: number) => Math.ceil(bytes / 64) * 64;

export interface WasmMatmulOptions {
  /** Threads to use at most (the runtime's pool caps it). */
  threads: number;
  /** Problems below this many flops run on one thread (tests set 0 to exercise the pool). */
  minParallelFlops?: number;
}

/** C = op(A)·op(B) per batch, or null when the workspace would not fit the wasm address space. */
export function wasmMatmul(rt: WasmRuntime, a: CpuRef, b: CpuRef, args: MatmulArgs, options: WasmMatmulOptions): CpuHandle | null {
  const { batch, m, n, k, transA, transB, batchA, batchB } = args;
  const cLength = batch * m * n;
  if (cLength === 0 || k === 0) return store(new Float32Array(cLength), args.outDType);
  if (m <= GEMV_MAX_ROWS) return gemv(rt, a, b, args, options);

  const plan = planGemm(batch, m, n, k, Math.min(options.threads, rt.threads), options.minParallelFlops);
  const aBytes = batchA * m * k * 4, bBytes = batchB * k * n * 4, cBytes = cLength * 4;
  const packedBBytes = batchB * k * plan.nPadded * 4;
  const packABytes = align64(plan.mChunk * Math.min(GEMM_KC, k) * 4);
  // Resident operands are read in place and a resident output written in place; the rest go through the workspace.
  const aResident = rt.addressOf(a), bResident = rt.addressOf(b);
  const total = (aResident === null ? align64(aBytes) : 0) + (bResident === null ? align64(bBytes) : 0) + align64(cBytes) + align64(packedBBytes) + plan.threads * packABytes;
  if (total > MAX_WORKSPACE_BYTES) return null;
  rt.wake(plan.threads); // they wake while the operands are copied in
  const out = rt.residentOutput(cLength, args.outDType);

  const ws = rt.tryWorkspace(total);
  if (ws === null) { if (out) rt.recycle(out); return null; } // no room: the CPU reference takes the call
  let at = ws;
  const take = (bytes: number) => { const p = at; at += align64(bytes); return p; };
  const aAddress = aResident ?? take(aBytes), bAddress = bResident ?? take(bBytes);
  const cAddress = out ? out.byteOffset : take(cBytes), packedB = take(packedBBytes);
  const packA = at;

  const buffer = rt.buffer;
  if (aResident === null) new Float32Array(buffer, aAddress, aBytes / 4).set(f32(a));
  if (bResident === null) new Float32Array(buffer, bAddress, bBytes / 4).set(f32(b));

  const job = new Uint32Array(buffer, JOB_ADDRESS, GEMM_JOB_WORDS);
  job[GemmJob.threads] = plan.threads;
  job[GemmJob.a] = aAddress;
  job[GemmJob.aBatchStride] = batchA === 1 ? 0 : m * k * 4;
  job[GemmJob.aRowStride] = transA ? 4 : k * 4;
  job[GemmJob.aDepthStride] = transA ? m * 4 : 4;
  job[GemmJob.b] = bAddress;
  job[GemmJob.bBatchStride] = k * n * 4;
  job[GemmJob.bDepthStride] = transB ? 4 : n * 4;
  job[GemmJob.bColStride] = transB ? k * 4 : 4;
  job[GemmJob.bMatrices] = batchB;
  job[GemmJob.packedB] = packedB;
  job[GemmJob.packedBBatchStride] = batchB === 1 ? 0 : k * plan.nPadded * 4;
  job[GemmJob.nPadded] = plan.nPadded;
  job[GemmJob.c] = cAddress;
  job[GemmJob.cBatchStride] = m * n * 4;
  job[GemmJob.ldc] = n * 4;
  job[GemmJob.m] = m;
  job[GemmJob.n] = n;
  job[GemmJob.k] = k;
  job[GemmJob.batch] = batch;
  job[GemmJob.mChunk] = plan.mChunk;
  job[GemmJob.nChunk] = plan.nChunk;
  job[GemmJob.mItems] = plan.mItems;
  job[GemmJob.nItems] = plan.nItems;
  job[GemmJob.packA] = packA;
  job[GemmJob.packAStride] = packABytes;
  job[GemmJob.scratch] = SCRATCH_ADDRESS;
  job[GemmJob.scratchStride] = SCRATCH_STRIDE;

  rt.run('gemm_pack_b', JOB_ADDRESS, plan.threads);
  rt.run('gemm_compute', JOB_ADDRESS, plan.threads);
  return out ?? rt.readOut(cAddress, cLength, args.outDType);
}

/**
 * GEMV runs on the calling thread by default: it is bound by memory, and B was just copied in by
 * this thread, so it sits in this core's cache; on the 2-core Xeon it was measured slower on two
 * threads (1×4096·4096ᵀ: 29–40 ms vs 34–49 ms). A `minParallelFlops` option still splits it.
 */
const GEMV_PARALLEL_MIN_FLOPS = Number.POSITIVE_INFINITY;

/** Few rows of op(A): A's rows copied contiguously (transposed here when transA), B as it is. */
function gemv(rt: WasmRuntime, a: CpuRef, b: CpuRef, args: MatmulArgs, options: WasmMatmulOptions): CpuHandle | null {
  const { batch, m, n, k, transA, transB, batchA, batchB } = args;
  const flops = 2 * batch * m * n * k;
  const items = batch * Math.ceil(n / GEMV_CHUNK);
  const threads = flops < (options.minParallelFlops ?? GEMV_PARALLEL_MIN_FLOPS) ? 1 : Math.max(1, Math.min(options.threads, rt.threads, items));
  const aBytes = batchA * m * k * 4, bBytes = batchB * k * n * 4, cBytes = batch * m * n * 4;
  // A is rearranged when transposed; otherwise resident operands are read in place.
  const aResident = transA ? null : rt.addressOf(a), bResident = rt.addressOf(b);
  const total = (aResident === null ? align64(aBytes) : 0) + (bResident === null ? align64(bBytes) : 0) + align64(cBytes);
  if (total > MAX_WORKSPACE_BYTES) return null;
  rt.wake(threads);
  const out = rt.residentOutput(batch * m * n, args.outDType);
  const ws = rt.tryWorkspace(total);
  if (ws === null) { if (out) rt.recycle(out); return null; } // no room: the CPU reference takes the call
  let at = ws;
  const take = (bytes: number) => { const p = at; at += align64(bytes); return p; };
  const aAddress = aResident ?? take(aBytes), bAddress = bResident ?? take(bBytes), cAddress = out ? out.byteOffset : take(cBytes);
  const buffer = rt.buffer;
  if (aResident === null) {
    const av = f32(a);
    const aRows = new Float32Array(buffer, aAddress, batchA * m * k);
    if (!transA) aRows.set(av);
    else for (let p = 0; p < batchA; p++) for (let i = 0; i < m; i++) for (let l = 0; l < k; l++) aRows[(p * m + i) * k + l] = av[(p * k + l) * m + i];
  }
  if (bResident === null) new Float32Array(buffer, bAddress, bBytes / 4).set(f32(b));

  const job = new Uint32Array(buffer, JOB_ADDRESS, GEMV_JOB_WORDS);
  job[GemvJob.threads] = threads;
  job[GemvJob.a] = aAddress;
  job[GemvJob.aBatchStride] = batchA === 1 ? 0 : m * k * 4;
  job[GemvJob.b] = bAddress;
  job[GemvJob.bBatchStride] = batchB === 1 ? 0 : k * n * 4;
  job[GemvJob.transB] = transB ? 1 : 0;
  job[GemvJob.c] = cAddress;
  job[GemvJob.cBatchStride] = m * n * 4;
  job[GemvJob.m] = m;
  job[GemvJob.n] = n;
  job[GemvJob.k] = k;
  job[GemvJob.batch] = batch;
  rt.run('gemv', JOB_ADDRESS, threads);
  return out ?? rt.readOut(cAddress, batch * m * n, args.outDType);
}
