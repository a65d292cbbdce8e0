/**
 * GPU buffer pool: freed storage buffers are parked by size class and handed out again, so a
 * training loop that allocates the same shapes every step stops calling createBuffer after
 * its first step and its footprint stays flat.
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
  pooledBytes = 0;
  liveBytes = 0;
  liveBuffers = 0;
  /** Allocations that failed validation or memory, checked at the next sync point. */
  pendingErrors: Promise<GPUError | null>[] = [];

  constructor(private device: GPUDevice, private maxBuffer: number, private maxBinding = Infinity) {}

  acquire(bytes: number, what: string): GPUBuffer {
    const size = sizeClass(bytes, this.maxBinding);
    if (size > this.maxBuffer) throw new DeviceError(`webgpu: cannot allocate ${bytes} bytes for ${what}: above this device's maxBufferSize of ${this.maxBuffer} bytes`);
    const list = this.free.get(size);
    let buf = list?.pop();
    if (buf) this.pooledBytes -= size;
    else {
      this.device.pushErrorScope('out-of-memory');
      buf = this.device.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
      const scope = this.device.popErrorScope();
      this.pendingErrors.push(scope.then((e) => (e ? new DeviceError(`webgpu: out of memory allocating ${size} bytes for ${what}: ${e.message}`) as unknown as GPUError : null)));
    }
    this.liveBytes += size;
    this.liveBuffers++;
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
