/**
 * Freed f32 output arrays kept for reuse. A fresh multi-megabyte typed array costs page faults
 * and, churned every call, V8's external-memory GCs: copying a 1024² GEMM result into a new array
 * took 4–5 ms against 0.5 ms into a reused one. Handles are plain host arrays the backend owns
 * once freed, so the backend can hand a freed one out again as a later kernel's output.
 */

/** Arrays shorter than this are cheap to allocate and not kept. */
const MIN_POOLED_LENGTH = 1 << 14;

export class HostArrayPool {
  private free = new Map<number, Float32Array[]>();
  private bytes = 0;

  /** @param capacityBytes the most bytes kept; an array that would exceed it is dropped. */
  constructor(private readonly capacityBytes: number) {}

  /** An f32 array of `length` elements, reused when one was given back (contents undefined). */
  take(length: number): Float32Array {
    const list = this.free.get(length);
    const reused = list?.pop();
    if (!reused) return new Float32Array(length);
    this.bytes -= reused.byteLength;
    return reused;
  }

  /** Keeps a freed array for `take`, if it is an f32 array worth keeping and there is room. */
  give(array: unknown): void {
    if (!(array instanceof Float32Array) || array.length < MIN_POOLED_LENGTH) return;
    if (array.byteOffset !== 0 || array.buffer.byteLength !== array.byteLength || array.buffer instanceof SharedArrayBuffer) return;
    if (this.bytes + array.byteLength > this.capacityBytes) return;
    let list = this.free.get(array.length);
    if (!list) { list = []; this.free.set(array.length, list); }
    list.push(array);
    this.bytes += array.byteLength;
  }

  get pooledBytes(): number { return this.bytes; }

  clear(): void {
    this.free.clear();
    this.bytes = 0;
  }
}
