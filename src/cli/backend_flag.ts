/** The --backend flag: cpu, wasm, webgpu or auto (a hardware GPU if there is one, else wasm). */
import type { Backend } from '../backend/backend.ts';
import { initBackend, type BackendName } from '../backend/registry.ts';
import '../backend/wasm/index.ts';
import '../backend/webgpu/index.ts';
import { UsageError } from './args.ts';

const NAMES = ['cpu', 'wasm', 'webgpu', 'auto'];

export async function backendFromFlag(command: string, value: string | undefined): Promise<Backend> {
  const name = value ?? 'auto';
  if (!NAMES.includes(name)) throw new UsageError(`${command}: --backend ${JSON.stringify(name)}: expected one of ${NAMES.join(', ')}`);
  return initBackend(name as BackendName);
}
