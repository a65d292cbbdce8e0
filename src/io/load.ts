/**
 * fon.load: a model folder (a FON checkpoint or a Hugging Face folder) in one call, as a
 * LanguageModel, on the backend named (default 'auto': a hardware GPU through WebGPU if there is
 * one, else the WebAssembly CPU backend) or given. Node only for a path (an output directory's latest
 * checkpoint, a model named org/name in the Hugging Face cache); a ModelFolder (model_folder.ts) is
 * read as load_folder.ts loadFolder reads it, which is what a browser calls.
 */
import type { Backend } from '../backend/backend.ts';
import { BACKEND_CHOICES, initBackend, type BackendName } from '../backend/registry.ts';
import '../backend/wasm/index.ts';
import '../backend/webgpu/index.ts';
import { ArgumentError } from '../errors.ts';
import { LanguageModel } from '../infer/language_model.ts';
import { loadModel } from './model_checkpoint.ts';
import { loadFolderModel, type LoadModelOptions } from './load_folder.ts';
import type { ModelFolder } from './model_folder.ts';


export async function load(dir: string | ModelFolder, opts: { backend?: 'auto' | 'cpu' | 'wasm' | 'webgpu' | Backend } & LoadModelOptions = {}): Promise<LanguageModel> {
  const { backend: which, ...rest } = opts;
  if (typeof which === 'string' && !(BACKEND_CHOICES as readonly string[]).includes(which)) throw new ArgumentError(`load: backend ${JSON.stringify(which)}: expected one of ${BACKEND_CHOICES.join(', ')}, or a Backend`);
  const backend = typeof which === 'object' ? which : await initBackend((which ?? 'auto') as BackendName);
  return new LanguageModel(typeof dir === 'string' ? await loadModel(dir, backend, rest) : await loadFolderModel(dir, backend, rest));
}
