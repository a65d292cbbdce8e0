/**
 * Node adapter for WebGPU: Dawn through the npm package `webgpu`, with the toggles FON needs
 * (DESIGN.md, "Backends"): `allow_unsafe_apis` unlocks subgroup matrices, and
 * `vulkan_enable_f16_on_nvidia` un-hides shader-f16 on NVIDIA. Node-only; the browser uses
 * `navigator.gpu` and never loads this file.
 *
 * `disable_robustness` is on by default: Dawn's robustness pass clamps every storage and
 * workgroup-memory index and bounds-checks every subgroup-matrix load, which cost about 10% of
 * the f32 GEMM and 45% of the tensor-core GEMM on the H200 (dev/kernels/gemm.ts). FON's kernels
 * guard their own edges and are checked against the CPU reference at ragged sizes;
 * FON_WEBGPU_ROBUST=1 turns the pass back on (for debugging a kernel that may read out of bounds).
 */
import { existsSync, readdirSync } from 'node:fs';
import { DeviceError } from '../errors.ts';
import { env } from './env.ts';

/**
 * Linux without GPU device nodes and without an explicit Vulkan driver (VK_ICD_FILENAMES for
 * SwiftShader, VK_DRIVER_FILES as .gpu/enter sets) has no adapter Dawn would take; asking anyway
 * makes Dawn print a warning about each software Vulkan driver it rejects (Mesa's lavapipe).
 */
function noGpuHere(): boolean {
  if (process.platform !== 'linux' || env('VK_ICD_FILENAMES') || env('VK_DRIVER_FILES')) return false;
  if (existsSync('/dev/dri')) return false;
  try { return !readdirSync('/dev').some((d) => d.startsWith('nvidia')); } catch { return false; }
}

// The instance stays referenced for the life of the process: once it is garbage-collected, the
// devices it made crash (SIGSEGV / SIGABRT in Dawn's event processing) at a later map or submit.
let instance: GPU | null = null;

export async function nodeGpu(): Promise<GPU> {
  if (instance) return instance;
  if (noGpuHere()) throw new DeviceError('webgpu: no adapter found: this machine has no GPU device (/dev/dri, /dev/nvidia*); for WebGPU on the CPU install libvulkan1 and chromium and set VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json');
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  process.env.XDG_RUNTIME_DIR ??= '/tmp';
  const toggles = ['allow_unsafe_apis', 'vulkan_enable_f16_on_nvidia', ...(env('FON_WEBGPU_ROBUST') === '1' ? [] : ['disable_robustness'])];
  // Full-precision timestamps for the profiler (webgpu/profile.ts): Dawn may quantise them, a guard
  // against timing attacks that matters in a browser, not in a Node process. (Decode and training
  // ran at the same speed with and without this toggle on the H200, 2026-11-30.)
  instance = create([`enable-dawn-features=${toggles.join(',')}`, 'disable-dawn-features=timestamp_quantization']) as GPU;
  return instance;
}
