/**
 * The Node adapter for model folders (io/model_folder.ts): a directory on disk, each file opened
 * with a file handle and read at any offset, every failure a FileError naming the path (files.ts).
 * Also the path-taking forms of the safetensors readers, for Node callers.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { CheckpointError } from '../errors.ts';
import type { ModelFile, ModelFolder } from '../io/model_folder.ts';
import { SafetensorsFile, SafetensorsShards } from '../io/safetensors_file.ts';
import { fileError, isRegularFile, joinPath } from './files.ts';

/** Opens the file at `path` for reading; null when nothing is there; a folder, a FIFO or a link loop is a FileError. */
export async function openNodeFile(path: string): Promise<ModelFile | null> {
  if (!(await isRegularFile(path))) return null;
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw fileError(path, 'cannot read', e);
  }
  try {
    const { size } = await fh.stat().catch((e: unknown) => { throw fileError(path, 'cannot read', e); });
    return {
      path, size,
      read: async (position, length) => {
        const out = new Uint8Array(length);
        let done = 0;
        while (done < length) {
          const { bytesRead } = await fh.read(out, done, length - done, position + done).catch((e: unknown) => { throw fileError(path, 'cannot read', e); });
          if (bytesRead === 0) break; // the file ended: fewer bytes than asked for
          done += bytesRead;
        }
        return done === length ? out : out.slice(0, done);
      },
      close: () => fh.close(),
    };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

/** The directory `dir` as a model folder. */
export function nodeFolder(dir: string): ModelFolder {
  return { path: dir, pathOf: (name) => joinPath(dir, name), open: (name) => openNodeFile(joinPath(dir, name)) };
}

/** Opens the safetensors file at `path`: a missing one is a CheckpointError naming it (see SafetensorsFile.fromFile). */
export async function openSafetensorsFile(path: string): Promise<SafetensorsFile> {
  const file = await openNodeFile(path);
  if (!file) throw new CheckpointError(`${path}: no such file`);
  return SafetensorsFile.fromFile(file);
}

/** The weights of the directory `dir` (SafetensorsShards.fromFolder). */
export function openSafetensorsDir(dir: string): Promise<SafetensorsShards> {
  return SafetensorsShards.fromFolder(nodeFolder(dir));
}
