/**
 * f32 handles that live in the wasm memory itself, so kernels read their inputs and write their
 * outputs in place instead of copying between JS arrays and the memory on every op (the copies
 * were a fifth of a training step of the tiny model). A handle is an ordinary Float32Array view
 * of the shared memory: the CPU reference kernels, `slice`, and every other host code read it
 * as any f32 array.
 *
 * Only for a shared memory: growing a shared WebAssembly.Memory never detaches the views made
 * before (a plain one would). Blocks come from a bump pointer and are never given back to it;
 * a freed view waits in the free list of its block's size class (sizes rounded up to 1/8 of a
 * power of two) for a later handle of that class, so a workload whose sizes vary wastes at most
 * an eighth. Past `capacityBytes` of blocks, `take` returns null and the caller makes a plain
 * array (the handle is then copied in and out, as before).
 */

/** Handles shorter than this stay plain arrays: their copies are cheap and there are many. */
export const MIN_RESIDENT_LENGTH = 1024;

/** Bytes of a block that holds `bytes`: multiples of 64 up to 1 KiB, then 8 classes per power of two. */
export function blockBytes(bytes: number): number {
  if (bytes <= 1024) return Math.max(64, Math.ceil(bytes / 64) * 64);
  const step = 2 ** (Math.floor(Math.log2(bytes)) - 3);
  return Math.ceil(bytes / step) * step;
}

export class ResidentHeap {
  /** Free views by block bytes; a view's block is its byteOffset and blockBytes(its padded bytes). */
  private free = new Map<number, Float32Array[]>();
  private freeBytes = 0;
  private mine = new WeakSet<Float32Array>();
  private used = 0;

  /**
   * @param reserve makes room for `bytes` more at the top and returns its address, or null when it cannot.
   * @param view makes a Float32Array of `length` at `address` of the memory.
   */
  constructor(
    private readonly capacityBytes: number,
    private readonly reserve: (bytes: number) => number | null,
    private readonly view: (address: number, length: number) => Float32Array,
  ) {}

  /** Bytes a handle of `length` occupies: whole f32x4 vectors (the SIMD kernels read and write them), in its block class. */
  private static bytesOf(length: number): number { return blockBytes(Math.ceil(length / 4) * 16); }

  /** A resident f32 view of `length` elements (contents undefined), or null when it would pass the capacity. */
  take(length: number): Float32Array | null {
    if (length < MIN_RESIDENT_LENGTH) return null;
    const bytes = ResidentHeap.bytesOf(length);
    const list = this.free.get(bytes);
    const reused = list?.pop();
    if (reused) {
      this.freeBytes -= bytes;
      if (reused.length === length) return reused;
      this.mine.delete(reused); // the block now belongs to the new view alone
      const v = this.view(reused.byteOffset, length);
      this.mine.add(v);
      return v;
    }
    if (this.used + bytes > this.capacityBytes) return null;
    const address = this.reserve(bytes);
    if (address === null) return null;
    this.used += bytes;
    const v = this.view(address, length);
    this.mine.add(v);
    return v;
  }

  /** Whether `h` is a view this heap handed out (and so has a wasm address, its byteOffset). */
  owns(h: unknown): h is Float32Array { return h instanceof Float32Array && this.mine.has(h); }

  /** Takes back a view that nothing holds any more; false for one this heap did not make. */
  give(h: unknown): boolean {
    if (!this.owns(h)) return false;
    const bytes = ResidentHeap.bytesOf(h.length);
    let list = this.free.get(bytes);
    if (!list) { list = []; this.free.set(bytes, list); }
    list.push(h);
    this.freeBytes += bytes;
    return true;
  }

  /** Bytes of freed blocks waiting for reuse. */
  get pooledBytes(): number { return this.freeBytes; }

  clear(): void {
    this.free.clear();
    this.freeBytes = 0;
  }
}
