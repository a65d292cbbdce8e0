/**
 * The `webgpu` backend: tensors live in pooled GPU buffers whose byte layout equals the host's
 * (f16/bf16 two per word, u8 four per word), kernels are WGSL files under kernels/, and nothing
 * is read back inside a step. Fast paths (shader-f16, subgroup-matrix GEMM) are chosen once from
 * the device's features; each has a plain fallback.
 */
import { DeviceError } from '../../errors.ts';
import { bytesPerElement, type AnyHostArray, type DType } from '../../tensor/dtype.ts';
import type { Backend, PrecisionSupport, Ref } from '../backend.ts';
import { tensorCores16 } from './kernels/subgroup_matrix.ts';
import { requestDevice, type GpuCaps } from './device.ts';
import { GpuRuntime } from './runtime.ts';
import { loadSources } from './sources.ts';
import { KERNEL_FILES, gpuKernels } from './kernels/index.ts';
import { copyBytes } from './kernels/elementwise.ts';
import { env } from '../../platform/env.ts';

export interface GpuHandle {
  readonly buffer: GPUBuffer;
  /** Bytes of tensor data (the buffer may be larger: pool size classes, 4-byte padding). */
  readonly bytes: number;
}
export type GpuRef = Ref<GpuHandle>;

type KernelTable = Omit<Backend<GpuHandle>, 'name' | 'upload' | 'read' | 'readSync' | 'free' | 'sync' | 'memory' | 'destroy' | 'precisions'>;

export class WebGpuBackend implements Backend<GpuHandle> {
  readonly name = 'webgpu';
  readonly caps: GpuCaps;
  private destroyed = false;

  /**
   * f32 and bf16 everywhere; f16 with `shader-f16`. Fastest: f16 where the tensor cores take it
   * (matmul_tc.wgsl, attention_tc*.wgsl), else f32 (16-bit storage saves bandwidth but the ALU
   * kernels compute in f32 and pack and unpack on top).
   */
  precisions(): PrecisionSupport {
    const f16 = this.caps.f16;
    return {
      offered: f16 ? ['f32', 'bf16', 'f16'] : ['f32', 'bf16'],
      fastest: f16 && tensorCores16(this.caps) ? 'f16' : 'f32',
      ...(f16 ? {} : { missing: `${this.caps.adapterName} lacks shader-f16` }),
    };
  }

  private constructor(readonly rt: GpuRuntime) {
    this.caps = rt.caps;
    Object.assign(this, gpuKernels(this));
  }

  /** Requests a device; FON_WEBGPU_NO_F16 / FON_WEBGPU_NO_SUBGROUP_MATRIX force the fallbacks. */
  static async create(): Promise<WebGpuBackend> {
    await loadSources(KERNEL_FILES);
    const { device, caps } = await requestDevice();
    if (env('FON_WEBGPU_NO_F16') === '1') caps.f16 = false;
    if (env('FON_WEBGPU_NO_F16') === '1' || env('FON_WEBGPU_NO_SUBGROUP_MATRIX') === '1') caps.subgroupMatrix = null;
    return new WebGpuBackend(new GpuRuntime(device, caps));
  }

  alloc(dtype: DType, size: number, what: string): GpuHandle {
    if (this.destroyed) throw new DeviceError(`webgpu: backend destroyed; cannot allocate for ${what}`);
    const bytes = size * bytesPerElement(dtype);
    // Buffers are sized in whole 4-byte words and bound whole.
    if (Math.ceil(bytes / 4) * 4 > this.caps.maxBinding) throw new DeviceError(`webgpu: ${what} needs ${bytes} bytes (${size} × ${dtype}), above this device's maxStorageBufferBindingSize of ${this.caps.maxBinding} bytes`);
    return { buffer: this.rt.pool.acquire(bytes, `${what} (${size} × ${dtype})`), bytes };
  }

  /** A device-side copy of the first `size` elements of h. */
  copy(h: GpuHandle, size: number, dtype: DType): GpuHandle {
    const out = this.alloc(dtype, size, 'copy');
    if (out.bytes > 0) copyBytes(this, h.buffer, out.buffer, out.bytes);
    return out;
  }

  upload(data: AnyHostArray, dtype: DType): GpuHandle {
    const h = this.alloc(dtype, data.length, 'upload');
    if (h.bytes > 0) this.rt.write(h.buffer, data, h.bytes);
    return h;
  }

  async read(h: GpuHandle, dtype: DType, size: number): Promise<AnyHostArray> {
    const bytes = size * bytesPerElement(dtype);
    const raw = bytes === 0 ? new ArrayBuffer(0) : await this.rt.read(h.buffer, bytes);
    switch (dtype) {
      case 'f32': return new Float32Array(raw);
      case 'i32': return new Int32Array(raw);
      case 'u8': return new Uint8Array(raw);
      case 'f16': case 'bf16': return new Uint16Array(raw);
    }
  }

  free(h: GpuHandle): void {
    if (!this.destroyed) this.rt.pool.release(h.buffer);
  }

  sync(): Promise<void> { return this.rt.sync(); }

  memory() {
    const p = this.rt.pool;
    return { liveBytes: p.liveBytes, liveHandles: p.liveBuffers, pooledBytes: p.pooledBytes };
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.rt.destroy();
  }
}

// The kernel methods are attached in the constructor from gpuKernels(); this declaration gives
// them their types, and gpuKernels' return type (KernelTable) makes a missing one a compile error.
export interface WebGpuBackend extends KernelTable {}
export type { KernelTable };
