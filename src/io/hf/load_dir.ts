/** A Hugging Face model folder on disk (Node): load.ts over platform/node_folder.ts. */
import type { Backend } from '../../backend/backend.ts';
import { nodeFolder } from '../../platform/node_folder.ts';
import { pathKind } from '../../platform/files.ts';
import type { LoadModelOptions } from '../load_folder.ts';
import { isHfFolder, loadHfFolder, type LoadedHfModel } from './load.ts';

/** Whether `dir` is a directory holding a Hugging Face model (load.ts isHfFolder). Never throws. */
export async function isHfModelDir(dir: string): Promise<boolean> {
  try {
    if ((await pathKind(dir)) !== 'dir') return false;
  } catch {
    return false;
  }
  return isHfFolder(nodeFolder(dir));
}

/** The Hugging Face model in directory `dir` (load.ts loadHfFolder: what it reads and how it fails). */
export function loadHfModel(dir: string, backend: Backend, opts: LoadModelOptions = {}): Promise<LoadedHfModel> {
  return loadHfFolder(nodeFolder(dir), backend, opts);
}
