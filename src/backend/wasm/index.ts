/**
 * Importing this module makes the `wasm` backend available to `initBackend('wasm')` (and to
 * 'auto' after webgpu). In Node it runs on os.availableParallelism() threads (override with
 * FON_WASM_THREADS); elsewhere on one thread, since the Node adapter is loaded only in Node.
 */
import { registerBackendFactory } from '../registry.ts';
import { WasmBackend } from './backend.ts';

export { WasmBackend, type WasmBackendOptions } from './backend.ts';

registerBackendFactory('wasm', async () => {
  const isNode = typeof process !== 'undefined' && process.versions?.node !== undefined;
  if (!isNode) return WasmBackend.create({ threads: 1 });
  const { nodeSpawner, nodeThreadCount } = await import('../../platform/wasm_threads.ts');
  return WasmBackend.create({ threads: nodeThreadCount(), spawner: nodeSpawner });
});
