/**
 * What this engine's WebAssembly can do, found by validating tiny modules (never by version
 * sniffing): fixed-width SIMD is required; relaxed SIMD adds a fused multiply-add (Node ≥ 22,
 * recent browsers; Node 20 only behind a flag); shared memory is what worker threads need
 * (browsers hide SharedArrayBuffer unless the page is cross-origin isolated).
 */
import { WasmModuleBuilder } from './module_builder.ts';

export interface WasmFeatures {
  simd: boolean;
  relaxedSimd: boolean;
  sharedMemory: boolean;
}

function validates(emit: (mb: WasmModuleBuilder) => void, shared = false): boolean {
  if (typeof WebAssembly === 'undefined') return false;
  const mb = new WasmModuleBuilder({ module: 'env', name: 'memory', initialPages: 1, maximumPages: 1, shared });
  emit(mb);
  try { return WebAssembly.validate(mb.build()); } catch { return false; }
}

function canCreateSharedMemory(): boolean {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  try {
    return new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }).buffer instanceof SharedArrayBuffer;
  } catch {
    return false;
  }
}

let detected: WasmFeatures | null = null;

export function detectWasmFeatures(): WasmFeatures {
  if (detected) return detected;
  const simd = validates((mb) => {
    const f = mb.function('f', ['i32']);
    f.get(f.params[0]).get(f.params[0]).v128Load().get(f.params[0]).v128Load().f32x4Add().v128Store();
  });
  const relaxedSimd = simd && validates((mb) => {
    const f = mb.function('f', ['i32']);
    const p = f.params[0];
    f.get(p).get(p).v128Load().get(p).v128Load().get(p).v128Load().f32x4RelaxedMadd().v128Store();
  });
  const sharedMemory = canCreateSharedMemory() && validates(() => {}, true);
  detected = { simd, relaxedSimd, sharedMemory };
  return detected;
}
