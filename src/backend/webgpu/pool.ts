/**
 * GPU buffer pool: freed storage buffers are parked by size class and handed out again, so a
 * training loop that allocates the same shapes every step stops calling createBuffer after
 * its first step and its footprint stays flat.
 *
 * Of the parked buffers of a class, acquire hands out the oldest (the lowest creation number), not
 * the last one parked. A step that allocates and frees the same sequence as the step before then
 * gets the same buffers in the same places, so the runtime's bind groups (cached per set of
 * buffers) repeat: with last-parked-first, each decode step of the tiny model permuted its
 * buffers and still needed 30–65 new bind groups of its 71 dispatches after 24 steps.
 */
import { DeviceError } from '../../errors.ts';

/**
 * Size classes: 256-byte steps up to 64 KiB, then four classes per power of two, never past
 * `maxBinding` rounded down to 4 bytes for a request that fits it. Every storage buffer is bound
 * whole, so a class above the binding limit could not be bound though its contents fit: on the
 * H200 (limit 2³¹ − 4) a request of 1.75–2 GiB rounded up to exactly 2³¹ bytes and its bind group
 * was invalid (FPA's backward at 32K tokens).
 */
export function sizeClass(bytes: number, maxBinding = Infinity): number {
  const b = Math.max(16, bytes);
  let c: number;
  if (b <= 65536) c = Math.ceil(b / 256) * 256;
  else {
    const step = 2 ** Math.floor(Math.log2(b)) / 4;
    c = Math.ceil(b / step) * step;
  }
  const cap = Math.floor(maxBinding / 4) * 4;
  return b <= cap ? Math.min(c, cap) : c;
}

export class BufferPool {
  private free = new Map<number, GPUBuffer[]>();
  /** Creation number of each buffer this pool made. */
  private ids = new WeakMap<GPUBuffer, number>();
  private created = 0;
  pooledBytes = 0;
  liveBytes = 0;
  liveBuffers = 0;
  /** Allocations that failed validation or memory, checked at the next sync point. */
  pendingErrors: Promise<GPUError | null>[] = [];

  constructor(private device: GPUDevice, private maxBuffer: number, private maxBinding = Infinity) {}

  acquire(bytes: number, what: string): GPUBuffer {
    const size = sizeClass(bytes, this.maxBinding);
    if (size > this.maxBuffer) throw new DeviceError(`webgpu: cannot allocate ${bytes} bytes for ${what}: above this device's maxBufferSize of ${this.maxBuffer} bytes`);
    let buf = this.takeOldest(this.free.get(size));
    if (buf) this.pooledBytes -= size;
    else {
      this.device.pushErrorScope('out-of-memory');
      buf = this.device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
      this.ids.set(buf, this.created++);
      const scope = this.device.popErrorScope();
      this.pendingErrors.push(scope.then((e) => (e ? new DeviceError(`webgpu: out of memory allocating ${size} bytes for ${what}: ${e.message}`) as unknown as GPUError : null)));
    }
    this.liveBytes += size;
    this.liveBuffers++;
    return buf;
  }

  /** Removes and returns the buffer of `list` with the lowest creation number (undefined if none). */
  private takeOldest(list: GPUBuffer[] | undefined): GPUBuffer | undefined {
    if (!list || list.length === 0) return undefined;
    let at = 0, best = this.ids.get(list[0]) ?? 0;
    for (let i = 1; i < list.length; i++) {
      const id = this.ids.get(list[i]) ?? 0;
      if (id < best) { best = id; at = i; }
    }
    const buf = list[at];
    list[at] = list[list.length - 1];
    list.pop();
    return buf;
  }

  release(buf: GPUBuffer): void {
    const size = buf.size;
    this.liveBytes -= size;
    this.liveBuffers--;
    let list = this.free.get(size);
    if (!list) { list = []; this.free.set(size, list); }
    list.push(buf);
    this.pooledBytes += size;
  }

  /** Throws the first allocation failure seen since the last check. */
  async check(): Promise<void> {
    const pending = this.pendingErrors;
    this.pendingErrors = [];
    for (const e of await Promise.all(pending)) if (e) throw e;
  }

  /**
   * Destroys parked buffers. Internal: a parked buffer may still be bound by commands in the
   * runtime's pending encoder, so only GpuRuntime.trimPool (which submits them first) calls this.
   */
  destroyParked(): void {
    for (const list of this.free.values()) for (const b of list) b.destroy();
    this.free.clear();
    this.pooledBytes = 0;
  }
}
