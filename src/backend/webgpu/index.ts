/** Importing this module makes `initBackend('webgpu')` available. */
import { registerBackendFactory } from '../registry.ts';
import { WebGpuBackend } from './backend.ts';

registerBackendFactory('webgpu', () => WebGpuBackend.create());
export { WebGpuBackend };
