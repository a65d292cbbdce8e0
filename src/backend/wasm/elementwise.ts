/**
 * Host side of the wasm elementwise kernels and softmax: read resident operands in place and copy
 * the others into wasm memory as f32 (padded to whole f32x4 vectors), run the kernel on the
 * threads when the tensor is large, write a resident f32 output in place or copy the result out
 * in the input's dtype. Each returns null when the case is not one the
 * kernels take (integer dtypes, other broadcasts, ops without a kernel); the backend then uses
 * the CPU reference.
 */
import type { BinaryOp, UnaryOp } from '../backend.ts';
import { f32, sizeOf, type CpuHandle, type CpuRef } from '../cpu/host.ts';
import { isFloat } from '../../tensor/dtype.ts';
import {
  BinaryMode, binaryKernelName, ELEMENTWISE_JOB_WORDS, ElementwiseJob, SOFTMAX_JOB_WORDS, SoftmaxJob, unaryKernelName,
  WASM_BINARY_OPS, WASM_UNARY_OPS,
} from './elementwise_kernels.ts';
import { JOB_ADDRESS, type WasmRuntime } from './runtime.ts';

/** Below this many elements a call's fixed ~2 µs (views, job, copies) costs more than the CPU loop. */
export const ELEMENTWISE_MIN_ELEMENTS = 256;
/** From this many elements the work is split over the threads. */
export const ELEMENTWISE_PARALLEL_MIN_ELEMENTS = 1 << 16;

const wasmUnary = new Set<UnaryOp>(WASM_UNARY_OPS);
const wasmBinary = new Set<BinaryOp>(WASM_BINARY_OPS);
const paddedBytes = (count: number) => Math.ceil(count / 4) * 16;

/** Thresholds (tests set both to 0 to run every case through the kernels and the pool). */
export interface ElementwiseOptions {
  minElements?: number;
  minParallelElements?: number;
}

function threadsFor(rt: WasmRuntime, elements: number, options: ElementwiseOptions): number {
  return elements >= (options.minParallelElements ?? ELEMENTWISE_PARALLEL_MIN_ELEMENTS) ? rt.threads : 1;
}

function tooSmall(elements: number, options: ElementwiseOptions): boolean {
  return elements < (options.minElements ?? ELEMENTWISE_MIN_ELEMENTS);
}

/** Copies f32 values of `x` to `address`. */
function copyIn(rt: WasmRuntime, address: number, x: CpuRef): void {
  new Float32Array(rt.buffer, address, x.h.length).set(f32(x));
}

/**
 * Where a call's operands and output sit: resident handles (runtime.ts) in place, the rest copied
 * into workspace slots of `bytes` each. Returns the addresses and the resident output, if any;
 * null when the memory has no room for the workspace.
 */
function place(rt: WasmRuntime, inputs: readonly CpuRef[], count: number, dtype: CpuRef['dtype']): { at: number[]; out: CpuHandle | null; dst: number } | null {
  const bytes = paddedBytes(count);
  const resident = inputs.map((x) => rt.addressOf(x));
  const out = rt.residentOutput(count, dtype);
  const slots = resident.filter((a) => a === null).length + (out ? 0 : 1);
  const ws = slots > 0 ? rt.tryWorkspace(slots * bytes) : 0;
  if (ws === null) { if (out) rt.recycle(out); return null; } // no room: the CPU reference takes the call
  let free = ws;
  const slot = () => { const p = free; free += bytes; return p; };
  const at = inputs.map((x, i) => {
    const r = resident[i];
    if (r !== null) return r;
    const p = slot();
    copyIn(rt, p, x);
    return p;
  });
  return { at, out, dst: out ? (out as Float32Array).byteOffset : slot() };
}

export function unaryWasm(rt: WasmRuntime, x: CpuRef, op: UnaryOp, options: ElementwiseOptions = {}): CpuHandle | null {
  const count = x.h.length;
  if (!isFloat(x.dtype) || !wasmUnary.has(op) || tooSmall(count, options)) return null;
  const threads = threadsFor(rt, count, options);
  rt.wake(threads);
  const placed = place(rt, [x], count, x.dtype);
  if (!placed) return null;
  const { at: [src], out, dst } = placed;
  const job = new Uint32Array(rt.buffer, JOB_ADDRESS, ELEMENTWISE_JOB_WORDS);
  job[ElementwiseJob.threads] = threads;
  job[ElementwiseJob.a] = src;
  job[ElementwiseJob.out] = dst;
  job[ElementwiseJob.count] = count;
  rt.run(unaryKernelName(op), JOB_ADDRESS, threads);
  return out ?? rt.readOut(dst, count, x.dtype);
}

export function binaryWasm(rt: WasmRuntime, a: CpuRef, b: CpuRef, op: BinaryOp, outShape: readonly number[], options: ElementwiseOptions = {}): CpuHandle | null {
  const count = sizeOf(outShape);
  if (!isFloat(a.dtype) || a.dtype !== b.dtype || !wasmBinary.has(op) || tooSmall(count, options)) return null;
  const aFull = a.h.length === count, bFull = b.h.length === count;
  const mode = aFull && bFull ? BinaryMode.bothFull
    : aFull && b.h.length === 1 ? BinaryMode.bScalar
    : bFull && a.h.length === 1 ? BinaryMode.aScalar
    : null;
  if (mode === null) return null;
  const threads = threadsFor(rt, count, options);
  rt.wake(threads);
  const placed = place(rt, [a, b], count, a.dtype);
  if (!placed) return null;
  const { at: [pa, pb], out, dst } = placed;
  const job = new Uint32Array(rt.buffer, JOB_ADDRESS, ELEMENTWISE_JOB_WORDS);
  job[ElementwiseJob.threads] = threads;
  job[ElementwiseJob.a] = pa;
  job[ElementwiseJob.b] = pb;
  job[ElementwiseJob.out] = dst;
  job[ElementwiseJob.count] = count;
  job[ElementwiseJob.mode] = mode;
  rt.run(binaryKernelName(op), JOB_ADDRESS, threads);
  return out ?? rt.readOut(dst, count, a.dtype);
}

export function softmaxWasm(rt: WasmRuntime, x: CpuRef, rows: number, cols: number, options: ElementwiseOptions = {}): CpuHandle | null {
  const count = rows * cols;
  if (!isFloat(x.dtype) || tooSmall(count, options)) return null;
  const threads = Math.max(1, Math.min(threadsFor(rt, count, options), rows));
  rt.wake(threads);
  const placed = place(rt, [x], count, x.dtype);
  if (!placed) return null;
  const { at: [src], out, dst } = placed;
  const job = new Uint32Array(rt.buffer, JOB_ADDRESS, SOFTMAX_JOB_WORDS);
  job[SoftmaxJob.threads] = threads;
  job[SoftmaxJob.x] = src;
  job[SoftmaxJob.out] = dst;
  job[SoftmaxJob.rows] = rows;
  job[SoftmaxJob.cols] = cols;
  rt.run('softmax', JOB_ADDRESS, threads);
  return out ?? rt.readOut(dst, count, x.dtype);
}
