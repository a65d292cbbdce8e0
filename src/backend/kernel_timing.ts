/**
 * FON_DEBUG=2 on the CPU backends (cpu, wasm): each kernel call's wall time on stderr. Their
 * kernels run synchronously, so the time of the call is the kernel's; the instance's kernel
 * methods are wrapped once, when the backend is made (WebGPU times its dispatches on the GPU
 * instead: webgpu/runtime.ts).
 */
import { debugLine } from '../platform/debug.ts';
import type { Backend } from './backend.ts';

/** Backend members that are not kernels: memory, lifetime and capabilities. */
const NOT_KERNELS = new Set(['constructor', 'upload', 'read', 'readSync', 'free', 'sync', 'memory', 'destroy', 'precisions']);

export function timeKernels(b: Backend): Backend {
  // The CPU backends hold their kernels as instance fields (arrow functions), their memory and
  // lifetime methods on the prototype.
  const own = b as unknown as Record<string, unknown>;
  for (const name of Object.keys(own)) {
    const f = own[name];
    if (NOT_KERNELS.has(name) || typeof f !== 'function') continue;
    own[name] = (...args: unknown[]) => {
      const t0 = performance.now();
      const out = (f as (...a: unknown[]) => unknown)(...args);
      debugLine(`[${b.name}] ${(performance.now() - t0).toFixed(3)} ms ${name}`);
      return out;
    };
  }
  return b;
}
