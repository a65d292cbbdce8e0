/**
 * Acquiring a WebGPU device with the adapter's own limits and every feature FON can use; which
 * fast paths exist is decided here, once, and read by the kernels from `GpuCaps`.
 */
import { DeviceError } from '../../errors.ts';

export interface GpuCaps {
  /** `shader-f16`: f16 arithmetic and native f16 storage arrays. */
  f16: boolean;
  subgroups: boolean;
  /** The fewest and most invocations a subgroup can hold (adapter.info.subgroupMinSize / MaxSize; 0 without subgroups or when not reported). */
  subgroupMinSize: number;
  subgroupMaxSize: number;
  /** Tensor-core tiles from `chromium-experimental-subgroup-matrix` (f16 in, f32 accumulate), if any. */
  subgroupMatrix: { m: number; n: number; k: number } | null;
  timestamps: boolean;
  maxBinding: number;
  maxBuffer: number;
  maxWorkgroupStorage: number;
  maxInvocations: number;
  /** Storage buffers one kernel may bind (WebGPU's default limit is 8). */
  maxStorageBuffers: number;
  minUniformAlignment: number;
  adapterName: string;
  /** A CPU implementation (SwiftShader, lavapipe): correct but slow; 'auto' prefers wasm over it. */
  software: boolean;
}

const WANTED_FEATURES = ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix', 'timestamp-query'];
const WANTED_LIMITS = [
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension',
] as const;

interface SubgroupMatrixConfig { componentType: string; resultComponentType: string; M: number; N: number; K: number }

export async function findGpu(): Promise<GPU | null> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return nav.gpu;
  if (typeof process !== 'undefined' && process.versions?.node) {
    const { nodeGpu } = await import('../../platform/node_gpu.ts');
    return nodeGpu();
  }
  return null;
}

export async function requestDevice(): Promise<{ device: GPUDevice; caps: GpuCaps }> {
  const gpu = await findGpu();
  if (!gpu) throw new DeviceError('webgpu: no WebGPU implementation here (no navigator.gpu, not Node)');
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new DeviceError('webgpu: no adapter found (on a machine without a GPU, install libvulkan1 and chromium and set VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json)');
  const features = WANTED_FEATURES.filter((f) => adapter.features.has(f)) as GPUFeatureName[];
  const requiredLimits: Record<string, number> = {};
  for (const l of WANTED_LIMITS) requiredLimits[l] = adapter.limits[l];
  const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
  const info = adapter.info as GPUAdapterInfo & { subgroupMatrixConfigs?: SubgroupMatrixConfig[] };
  const tile = features.includes('chromium-experimental-subgroup-matrix' as GPUFeatureName) && features.includes('shader-f16')
    ? (info.subgroupMatrixConfigs ?? []).find((c) => c.componentType === 'f16' && c.resultComponentType === 'f32' && c.M === 16 && c.N === 16 && c.K === 16)
      ?? (info.subgroupMatrixConfigs ?? []).find((c) => c.componentType === 'f16' && c.resultComponentType === 'f32')
    : undefined;
  const caps: GpuCaps = {
    f16: features.includes('shader-f16'),
    subgroups: features.includes('subgroups'),
    subgroupMinSize: features.includes('subgroups') ? (info as { subgroupMinSize?: number }).subgroupMinSize ?? 0 : 0,
    subgroupMaxSize: features.includes('subgroups') ? (info as { subgroupMaxSize?: number }).subgroupMaxSize ?? 0 : 0,
    subgroupMatrix: tile ? { m: tile.M, n: tile.N, k: tile.K } : null,
    timestamps: features.includes('timestamp-query'),
    maxBinding: device.limits.maxStorageBufferBindingSize,
    maxBuffer: device.limits.maxBufferSize,
    maxWorkgroupStorage: device.limits.maxComputeWorkgroupStorageSize,
    maxInvocations: device.limits.maxComputeInvocationsPerWorkgroup,
    maxStorageBuffers: device.limits.maxStorageBuffersPerShaderStage,
    minUniformAlignment: device.limits.minUniformBufferOffsetAlignment,
    adapterName: [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') || 'unknown adapter',
    software: !!(info as { isFallbackAdapter?: boolean }).isFallbackAdapter || /swiftshader|llvmpipe|lavapipe/i.test(`${info.architecture} ${info.description}`),
  };
  return { device, caps };
}
