/**
 * fon.load: a model folder (a FON checkpoint or a Hugging Face folder) in one call, as a
 * LanguageModel, on the backend named (default 'auto': a hardware GPU through WebGPU if there is
 * one, else the WebAssembly CPU backend) or given. Node only (it reads the folder from disk).
 */
import type { Backend } from '../backend/backend.ts';
import { initBackend, type BackendName } from '../backend/registry.ts';
import '../backend/wasm/index.ts';
import '../backend/webgpu/index.ts';
import { ArgumentError } from '../errors.ts';
import { LanguageModel } from '../infer/language_model.ts';
import { loadModel, type LoadModelOptions } from './model_checkpoint.ts';

const NAMES = ['auto', 'cpu', 'wasm', 'webgpu'];

export async function load(dir: string, opts: { backend?: 'auto' | 'cpu' | 'wasm' | 'webgpu' | Backend } & LoadModelOptions = {}): Promise<LanguageModel> {
  const { backend: which, ...rest } = opts;
  if (typeof which === 'string' && !NAMES.includes(which)) throw new ArgumentError(`load: backend ${JSON.stringify(which)}: expected one of ${NAMES.join(', ')}, or a Backend`);
  const backend = typeof which === 'object' ? which : await initBackend((which ?? 'auto') as BackendName);
  return new LanguageModel(await loadModel(dir, backend, rest));
}
