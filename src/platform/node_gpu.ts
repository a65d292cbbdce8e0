/**
 * Node adapter for WebGPU: Dawn through the npm package `webgpu`, with the two toggles FON
 * needs (DESIGN.md, "Backends"): `allow_unsafe_apis` unlocks subgroup matrices, and
 * `vulkan_enable_f16_on_nvidia` un-hides shader-f16 on NVIDIA. Node-only; the browser uses
 * `navigator.gpu` and never loads this file.
 */
// The instance stays referenced for the life of the process: once it is garbage-collected, the
// devices it made crash (SIGSEGV / SIGABRT in Dawn's event processing) at a later map or submit.
let instance: GPU | null = null;

export async function nodeGpu(): Promise<GPU> {
  if (instance) return instance;
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  process.env.XDG_RUNTIME_DIR ??= '/tmp';
  instance = create(['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia']) as GPU;
  return instance;
}
