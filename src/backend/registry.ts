/**
 * Which backends exist and which one new tensors land on. `cpu` and `wasm` are ready at once;
 * `webgpu` needs an async device request, so `initBackend('webgpu')` (or 'auto') comes first.
 */
import { ArgumentError, UnsupportedError } from '../errors.ts';
import type { Backend } from './backend.ts';
import { CpuBackend } from './cpu/backend.ts';
import { timeKernels } from './kernel_timing.ts';
import { debugLevel } from '../platform/debug.ts';

export type BackendName = 'cpu' | 'wasm' | 'webgpu';

/** The names initBackend takes: the backends and 'auto' (a hardware GPU if there is one, else wasm). */
export const BACKEND_CHOICES = ['auto', 'cpu', 'wasm', 'webgpu'] as const;
const ready = new Map<string, Backend>();
/** Backends being created: a second initBackend of the same name awaits the first's device. */
const starting = new Map<string, Promise<Backend>>();
let current: Backend | null = null;

type Factory = () => Promise<Backend>;
const factories = new Map<string, Factory>([['cpu', async () => new CpuBackend()]]);

/** FON_DEBUG=2: the CPU backends' kernel calls timed (WebGPU times its own dispatches). */
function withDebug(b: Backend): Backend {
  return debugLevel() >= 2 && b.name !== 'webgpu' ? timeKernels(b) : b;
}

/** Lets the wasm and webgpu modules register themselves without the core importing Node-only code. */
export function registerBackendFactory(name: string, factory: Factory): void {
  factories.set(name, factory);
}

/**
 * Creates (once) and returns the named backend; 'auto' picks a hardware WebGPU adapter, then
 * wasm, then cpu (a software WebGPU adapter such as SwiftShader is slower than wasm).
 */
export async function initBackend(name: BackendName | 'auto'): Promise<Backend> {
  if (name === 'auto') {
    for (const n of ['webgpu', 'wasm', 'cpu'] as const) {
      if (!factories.has(n)) continue;
      const existed = ready.has(n) || starting.has(n);
      try {
        const b = await initBackend(n);
        if ((b as { caps?: { software?: boolean } }).caps?.software) {
          // Skipped: a software device made only for this probe is released, not left in `ready`.
          if (!existed && ready.get(n) === b) {
            ready.delete(n);
            if (current === b) current = null;
            b.destroy();
          }
          continue;
        }
        return b;
      } catch { /* try the next one */ }
    }
    throw new UnsupportedError('initBackend: no backend could start');
  }
  const have = ready.get(name);
  if (have) return have;
  const f = factories.get(name);
  if (!f) throw new ArgumentError(`initBackend: unknown backend '${name}', expected one of ${[...factories.keys()].join(', ')} (import its module first)`);
  let p = starting.get(name);
  if (!p) {
    p = f().then((b) => { ready.set(name, withDebug(b)); return b; }).finally(() => { starting.delete(name); });
    starting.set(name, p);
  }
  return p;
}

/** Makes `b` (or the named, already initialised backend) the default for new tensors. */
export function setBackend(b: Backend | BackendName): Backend {
  if (typeof b === 'string') {
    const have = ready.get(b);
    if (!have) throw new ArgumentError(`setBackend: backend '${b}' is not initialised; await initBackend('${b}') first`);
    b = have;
  }
  current = b;
  return b;
}

export function getBackend(): Backend {
  if (!current) {
    let cpu = ready.get('cpu');
    if (!cpu) { cpu = withDebug(new CpuBackend()); ready.set('cpu', cpu); }
    current = cpu;
  }
  return current;
}

/** Destroys every initialised backend (call before process exit when WebGPU was used). */
export function destroyBackends(): void {
  for (const b of ready.values()) b.destroy();
  ready.clear();
  current = null;
}

/**
 * Waits for every backend's queued work, then destroys them: the clean way to end a process
 * that used WebGPU (Dawn's Node binding keeps the process alive, and tearing a device down while
 * its driver threads still work can crash at exit).
 */
export async function shutdownBackends(): Promise<void> {
  for (const b of ready.values()) await b.sync().catch(() => {});
  destroyBackends();
}
