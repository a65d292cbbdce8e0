/**
 * Host side of the wasm attention kernels (attention_kernels.ts): Backend.attention and
 * attentionBackward with the semantics of the CPU reference (cpu/attention.ts: causal with
 * qOffset, sliding window, GQA, kvLength, scale), for every float dtype (computed in f32 as the
 * reference does, stored back in the input's dtype).
 *
 * A call lays the operands out in wasm memory (padded as the kernels expect), computes each
 * query tile's visible key range with the reference's own `visibleKeys`, runs the kernel on the
 * threads (forward over (batch, head) items, backward over (batch, kv head) items) and copies
 * the results out. The logsumexp is formed here from the kernel's row max and sum (wasm has no log), in f64
 * as the reference does; δ = rowsum(dO ⊙ O) of the backward likewise.
 *
 * The kernels are part of the runtime's one module (kernel_module.ts) and run on its worker pool,
 * as the GEMM and elementwise kernels do.
 */
import type { AttentionArgs } from '../backend.ts';
import { visibleKeys } from '../cpu/attention.ts';
import { f32, type CpuHandle, type CpuRef } from '../cpu/host.ts';
import { f32ToHost, isFloat, type DType } from '../../tensor/dtype.ts';
import {
  ATTENTION_D_MULTIPLE, ATTENTION_JOB_WORDS, ATTENTION_KERNELS, ATTENTION_KEY_MULTIPLE, ATTENTION_ROWS, AttentionJob,
  attentionScratchBytes,
} from './attention_kernels.ts';
import { JOB_ADDRESS, type WasmRuntime } from './runtime.ts';

/**
 * Below this many multiply-adds of QKᵀ (B·H·Tq·Tk·D) one thread runs the call: waking a worker
 * costs up to ~0.2 ms, the work ~0.1 ms per 2²⁰ at the kernels' speed.
 */
export const ATTENTION_PARALLEL_MIN_WORK = 1 << 20;

export interface WasmAttentionOptions {
  /** Calls with less work run on one thread; tests set 0 to exercise the pool. */
  minParallelWork?: number;
}

const roundUp = (x: number, m: number) => Math.ceil(x / m) * m;
const align64 = (x: number) => roundUp(x, 64);

/** Byte offsets of a call's regions in the workspace, one after another, 64-byte aligned. */
class Regions {
  private end = 0;
  take(bytes: number): number { const at = this.end; this.end = align64(this.end + bytes); return at; }
  get bytes(): number { return this.end; }
}

/** Shape of the padded operands (see attention_kernels.ts). */
interface Padded {
  tqP: number; tkP: number; dP: number; tiles: number;
  /** B·H query heads, B·Hkv kv heads. */
  qHeads: number; kvHeadsAll: number;
}

function paddedShape(a: AttentionArgs): Padded {
  const tqP = roundUp(a.tq, ATTENTION_ROWS);
  return {
    tqP, tkP: roundUp(a.tk, ATTENTION_KEY_MULTIPLE) + ATTENTION_KEY_MULTIPLE, dP: roundUp(a.d, ATTENTION_D_MULTIPLE),
    tiles: tqP / ATTENTION_ROWS, qHeads: a.batch * a.heads, kvHeadsAll: a.batch * a.kvHeads,
  };
}

/** Per tile: the union [lo, lo + n) of its rows' visible keys (n in bytes, and padded to 8 keys); per row its own range in bytes from lo. */
function tileRanges(a: AttentionArgs, p: Padded): { rowLo: Int32Array; rowHi: Int32Array; tileLo: Int32Array; tileBytes: Int32Array; tileKeyBytes: Int32Array } {
  const rowLo = new Int32Array(p.tqP), rowHi = new Int32Array(p.tqP);
  const tileLo = new Int32Array(p.tiles), tileBytes = new Int32Array(p.tiles), tileKeyBytes = new Int32Array(p.tiles);
  const lo = new Int32Array(ATTENTION_ROWS), hi = new Int32Array(ATTENTION_ROWS);
  for (let t = 0; t < p.tiles; t++) {
    let first = Infinity, last = -Infinity;
    for (let r = 0; r < ATTENTION_ROWS; r++) {
      const i = t * ATTENTION_ROWS + r;
      [lo[r], hi[r]] = i < a.tq ? visibleKeys(a.qOffset + i, a) : [0, 0];
      if (hi[r] > lo[r]) { first = Math.min(first, lo[r]); last = Math.max(last, hi[r]); }
    }
    if (first === Infinity) continue; // every row empty: n = 0, rows [0, 0)
    tileLo[t] = first;
    tileBytes[t] = roundUp(last - first, ATTENTION_KEY_MULTIPLE) * 4;
    tileKeyBytes[t] = (last - first) * 4;
    for (let r = 0; r < ATTENTION_ROWS; r++) {
      if (hi[r] <= lo[r]) continue;
      rowLo[t * ATTENTION_ROWS + r] = (lo[r] - first) * 4;
      rowHi[t * ATTENTION_ROWS + r] = (hi[r] - first) * 4;
    }
  }
  return { rowLo, rowHi, tileLo, tileBytes, tileKeyBytes };
}

/** Writes src viewed as (outer, rows, d) into mem at `at` as (outer, rowsP, dP), zero padded. */
function writePadded(mem: Float32Array, at: number, src: Float32Array, outer: number, rows: number, rowsP: number, d: number, dP: number): void {
  let o4 = at >> 2;
  for (let o = 0; o < outer; o++, o4 += rowsP * dP) {
    const s = o * rows * d;
    if (d === dP) mem.set(src.subarray(s, s + rows * d), o4);
    else for (let i = 0; i < rows; i++) {
      mem.set(src.subarray(s + i * d, s + (i + 1) * d), o4 + i * dP);
      mem.fill(0, o4 + i * dP + d, o4 + (i + 1) * dP);
    }
    mem.fill(0, o4 + rows * dP, o4 + rowsP * dP);
  }
}

/** Workspace regions of the per-row key ranges and per-tile bounds that both kernels read. */
function takeRanges(r: Regions, p: ReturnType<typeof paddedShape>) {
  return { rowLo: r.take(p.tqP * 4), rowHi: r.take(p.tqP * 4), tileLo: r.take(p.tiles * 4), tileBytes: r.take(p.tiles * 4), tileKeyBytes: r.take(p.tiles * 4) };
}

/** Writes the ranges into their regions and their addresses into the job. */
function placeRanges(memI: Int32Array, job: Int32Array, ranges: ReturnType<typeof tileRanges>, at: ReturnType<typeof takeRanges>, addr: (x: number) => number): void {
  const J = AttentionJob;
  for (const key of ['rowLo', 'rowHi', 'tileLo', 'tileBytes', 'tileKeyBytes'] as const) {
    memI.set(ranges[key], addr(at[key]) >> 2);
    job[J[key]] = addr(at[key]);
  }
}

/** Reads (outer, rowsP, dP) at `at` back as (outer, rows, d) in `dtype`. */
function readPadded(rt: WasmRuntime, at: number, outer: number, rows: number, rowsP: number, d: number, dP: number, dtype: DType): CpuHandle {
  if (rows === rowsP && d === dP) return rt.readOut(at, outer * rows * d, dtype);
  const mem = new Float32Array(rt.buffer, at, outer * rowsP * dP);
  const out = new Float32Array(outer * rows * d);
  for (let o = 0; o < outer; o++) for (let i = 0; i < rows; i++) {
    const from = (o * rowsP + i) * dP;
    out.set(mem.subarray(from, from + d), (o * rows + i) * d);
  }
  return f32ToHost(out, dtype);
}

export class WasmAttention {
  constructor(private readonly rt: WasmRuntime, private readonly options: WasmAttentionOptions = {}) {}

  /** Threads a call may use, the caller included. */
  get threads(): number { return this.rt.threads; }

  private threadsFor(a: AttentionArgs, items: number): number {
    const work = a.batch * a.heads * a.tq * a.kvLength * a.d;
    if (work < (this.options.minParallelWork ?? ATTENTION_PARALLEL_MIN_WORK)) return 1;
    return Math.max(1, Math.min(this.threads, items));
  }

  private run(kernel: (typeof ATTENTION_KERNELS)[number], threads: number): void {
    this.rt.run(kernel, JOB_ADDRESS, threads);
  }

  /** The cases the kernels take; others go to the CPU reference (null). */
  private takes(q: CpuRef, a: AttentionArgs): boolean {
    return isFloat(q.dtype) && a.batch * a.heads * a.tq * a.d > 0 && a.heads % a.kvHeads === 0;
  }

  /** Writes the fields every call shares; returns the views of the job record. */
  private writeJob(a: AttentionArgs, p: Padded, items: number, threads: number, scratch: number, scratchStride: number): Int32Array {
    const job = new Int32Array(this.rt.buffer, JOB_ADDRESS, ATTENTION_JOB_WORDS);
    const jobF = new Float32Array(this.rt.buffer, JOB_ADDRESS, ATTENTION_JOB_WORDS);
    const J = AttentionJob;
    job[J.threads] = threads;
    job[J.items] = items;
    job[J.heads] = a.heads;
    job[J.kvHeads] = a.kvHeads;
    job[J.group] = a.heads / a.kvHeads;
    job[J.tiles] = p.tiles;
    job[J.dpBytes] = p.dP * 4;
    job[J.tkpBytes] = p.tkP * 4;
    job[J.qSlice] = p.tqP * p.dP * 4;
    job[J.kvSlice] = a.tk * p.dP * 4;
    job[J.keysBytes] = a.tk * 4;
    job[J.scratch] = scratch;
    job[J.scratchStride] = scratchStride;
    jobF[J.scale] = a.scale;
    jobF.fill(1, J.ones, J.ones + 4);
    return job;
  }

  /** out (B, H, Tq, D) in q's dtype and the logsumexp (B, H, Tq) f32, as cpu/attention.ts; null when not taken. */
  forward(q: CpuRef, k: CpuRef, v: CpuRef, a: AttentionArgs): [CpuHandle, CpuHandle] | null {
    if (!this.takes(q, a)) return null;
    const p = paddedShape(a);
    const threads = this.threadsFor(a, p.qHeads);
    this.wake(threads);
    const ranges = tileRanges(a, p);
    const scratchBytes = attentionScratchBytes(p.dP * 4, p.tkP * 4);
    const qBytes = p.qHeads * p.tqP * p.dP * 4, kvBytes = p.kvHeadsAll * a.tk * p.dP * 4;
    const rowBytes = p.qHeads * p.tqP * 4;
    const r = new Regions();
    const at = {
      q: r.take(qBytes), k: r.take(kvBytes), v: r.take(kvBytes), out: r.take(qBytes),
      rowMax: r.take(rowBytes), rowSum: r.take(rowBytes),
      ...takeRanges(r, p),
      scratch: r.take(threads * scratchBytes),
    };
    const base = this.rt.tryWorkspace(r.bytes); // null past the address space or the room left
    if (base === null) return null;
    const addr = (x: number) => base + x;
    const mem = new Float32Array(this.rt.buffer);
    const memI = new Int32Array(this.rt.buffer);
    writePadded(mem, addr(at.q), f32(q), p.qHeads, a.tq, p.tqP, a.d, p.dP);
    writePadded(mem, addr(at.k), f32(k), p.kvHeadsAll, a.tk, a.tk, a.d, p.dP);
    writePadded(mem, addr(at.v), f32(v), p.kvHeadsAll, a.tk, a.tk, a.d, p.dP);
    const job = this.writeJob(a, p, p.qHeads, threads, addr(at.scratch), scratchBytes);
    const J = AttentionJob;
    job[J.q] = addr(at.q); job[J.k] = addr(at.k); job[J.v] = addr(at.v); job[J.out] = addr(at.out);
    job[J.rowMax] = addr(at.rowMax); job[J.rowSum] = addr(at.rowSum);
    placeRanges(memI, job, ranges, at, addr);
    this.run('attention_forward', threads);

    const out = readPadded(this.rt, addr(at.out), p.qHeads, a.tq, p.tqP, a.d, p.dP, q.dtype);
    const rowMax = new Float32Array(this.rt.buffer, addr(at.rowMax), p.qHeads * p.tqP);
    const rowSum = new Float32Array(this.rt.buffer, addr(at.rowSum), p.qHeads * p.tqP);
    const lse = new Float32Array(p.qHeads * a.tq);
    for (let h = 0; h < p.qHeads; h++) for (let i = 0; i < a.tq; i++) {
      const row = h * p.tqP + i;
      lse[h * a.tq + i] = rowSum[row] > 0 ? rowMax[row] + Math.log(rowSum[row]) : -Infinity;
    }
    return [out, lse];
  }

  /** dq, dk, dv as cpu/attention.ts (dk, dv summed over a GQA group, zero past kvLength); null when not taken. */
  backward(q: CpuRef, k: CpuRef, v: CpuRef, o: CpuRef, lse: CpuRef, dout: CpuRef, a: AttentionArgs): [CpuHandle, CpuHandle, CpuHandle] | null {
    if (!this.takes(q, a)) return null;
    const p = paddedShape(a);
    const threads = this.threadsFor(a, p.kvHeadsAll);
    this.wake(threads);
    const ranges = tileRanges(a, p);
    const scratchBytes = attentionScratchBytes(p.dP * 4, p.tkP * 4);
    const qBytes = p.qHeads * p.tqP * p.dP * 4, kvBytes = p.kvHeadsAll * a.tk * p.dP * 4;
    const rowBytes = p.qHeads * p.tqP * 4;
    const r = new Regions();
    const at = {
      q: r.take(qBytes), dout: r.take(qBytes), dq: r.take(qBytes),
      k: r.take(kvBytes), v: r.take(kvBytes), dk: r.take(kvBytes), dv: r.take(kvBytes),
      lse: r.take(rowBytes), delta: r.take(rowBytes),
      ...takeRanges(r, p),
      scratch: r.take(threads * scratchBytes),
    };
    const base = this.rt.tryWorkspace(r.bytes); // null past the address space or the room left
    if (base === null) return null;
    const addr = (x: number) => base + x;
    const mem = new Float32Array(this.rt.buffer);
    const memI = new Int32Array(this.rt.buffer);
    const qv = f32(q), kv = f32(k), vv = f32(v), ov = f32(o), lv = f32(lse), gv = f32(dout);
    writePadded(mem, addr(at.q), qv, p.qHeads, a.tq, p.tqP, a.d, p.dP);
    writePadded(mem, addr(at.dout), gv, p.qHeads, a.tq, p.tqP, a.d, p.dP);
    writePadded(mem, addr(at.k), kv, p.kvHeadsAll, a.tk, a.tk, a.d, p.dP);
    writePadded(mem, addr(at.v), vv, p.kvHeadsAll, a.tk, a.tk, a.d, p.dP);
    // Per row: lse (+∞ for a row that sees no key, so exp(s − lse) = 0) and δ = dO·O (f64 sum, as the reference).
    const lseAt = addr(at.lse) >> 2, deltaAt = addr(at.delta) >> 2;
    for (let h = 0; h < p.qHeads; h++) {
      for (let i = 0; i < a.tq; i++) {
        const row = h * a.tq + i, off = row * a.d;
        let delta = 0;
        for (let c = 0; c < a.d; c++) delta += gv[off + c] * ov[off + c];
        mem[lseAt + h * p.tqP + i] = lv[row] === -Infinity ? Infinity : lv[row];
        mem[deltaAt + h * p.tqP + i] = delta;
      }
      mem.fill(Infinity, lseAt + h * p.tqP + a.tq, lseAt + (h + 1) * p.tqP);
      mem.fill(0, deltaAt + h * p.tqP + a.tq, deltaAt + (h + 1) * p.tqP);
    }
    const job = this.writeJob(a, p, p.kvHeadsAll, threads, addr(at.scratch), scratchBytes);
    const J = AttentionJob;
    job[J.q] = addr(at.q); job[J.dout] = addr(at.dout); job[J.out] = addr(at.dq);
    job[J.k] = addr(at.k); job[J.v] = addr(at.v); job[J.dk] = addr(at.dk); job[J.dv] = addr(at.dv);
    job[J.lse] = addr(at.lse); job[J.delta] = addr(at.delta);
    placeRanges(memI, job, ranges, at, addr);
    this.run('attention_backward', threads);

    const dq = readPadded(this.rt, addr(at.dq), p.qHeads, a.tq, p.tqP, a.d, p.dP, q.dtype);
    const dk = readPadded(this.rt, addr(at.dk), p.kvHeadsAll, a.tk, a.tk, a.d, p.dP, k.dtype);
    const dv = readPadded(this.rt, addr(at.dv), p.kvHeadsAll, a.tk, a.tk, a.d, p.dP, v.dtype);
    return [dq, dk, dv];
  }

  /** Gets the workers spinning before the host's copies, so they react at once (ThreadPool.wake). */
  private wake(threads: number): void {
    this.rt.wake(threads);
  }
}
