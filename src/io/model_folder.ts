/**
 * A model folder as the loaders read it, whatever holds it: files by name, each read at any offset,
 * so a large safetensors file is read one tensor at a time and never held whole. Node's adapter reads
 * a directory (platform/node_folder.ts); here are the ones a browser has: a base URL (HTTP range
 * requests where the server answers them, the whole file where it does not), a set of Blobs or Files
 * (an <input type="file" webkitdirectory> or a drop), and bytes in memory.
 *
 * Every loader message names a file by `folder.pathOf(name)`: the path on disk, or the URL.
 */
import { CheckpointError, FileError } from '../errors.ts';

/** One file of a folder, open for reading. */
export interface ModelFile {
  /** Its path or URL (messages start with it). */
  readonly path: string;
  /** Its size in bytes. */
  readonly size: number;
  /** Bytes [position, position + length), a fresh array; fewer than asked for only where the file ended. */
  read(position: number, length: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

export interface ModelFolder {
  /** The folder's path or URL. */
  readonly path: string;
  /** Where file `name` of the folder is (for messages). */
  pathOf(name: string): string;
  /** Opens file `name` of the folder; null when there is no such file. */
  open(name: string): Promise<ModelFile | null>;
}

/** The whole of file `name` of `folder`, or null when it has none. */
export async function readFolderFile(folder: ModelFolder, name: string): Promise<Uint8Array | null> {
  const f = await folder.open(name);
  if (!f) return null;
  try {
    const bytes = await f.read(0, f.size);
    if (bytes.length !== f.size) throw new FileError(`${f.path}: cannot read: it ended after ${bytes.length} of its ${f.size} bytes`);
    return bytes;
  } finally {
    await f.close();
  }
}

/** The whole of file `name` of `folder`; a CheckpointError naming it when the folder has none. */
export async function readRequiredFile(folder: ModelFolder, name: string): Promise<Uint8Array> {
  const bytes = await readFolderFile(folder, name);
  if (bytes === null) throw new CheckpointError(`checkpoint ${folder.path} has no ${name} (looked for ${folder.pathOf(name)})`);
  return bytes;
}

/** File `name` of `folder` as UTF-8 text; a CheckpointError naming it when the folder has none. */
export async function readRequiredText(folder: ModelFolder, name: string): Promise<string> {
  return new TextDecoder().decode(await readRequiredFile(folder, name));
}

/** A file held in memory (a Uint8Array, or a fetched body). */
function bytesFile(path: string, bytes: Uint8Array): ModelFile {
  return {
    path, size: bytes.length,
    read: async (position, length) => bytes.slice(position, Math.min(bytes.length, position + length)),
    close: async () => {},
  };
}

const joinName = (base: string, name: string) => (base.endsWith('/') ? base + name : `${base}/${name}`);

/** A folder of files held in memory, by name (tests, and callers that fetched the files themselves). */
export function memoryFolder(path: string, files: Readonly<Record<string, Uint8Array>>): ModelFolder {
  return {
    path,
    pathOf: (name) => joinName(path, name),
    open: async (name) => (Object.hasOwn(files, name) ? bytesFile(joinName(path, name), files[name]) : null),
  };
}

/** The part of a Blob (or File) a folder needs: its size and a slice's bytes. */
export interface BlobLike { readonly size: number; slice(start: number, end: number): { arrayBuffer(): Promise<ArrayBuffer> } }

/**
 * A folder of Blobs or Files by name (a browser's file input or drop: each File's name, or the last
 * part of its webkitRelativePath). Each read slices the Blob, so the file is never held whole.
 */
export function blobFolder(path: string, files: Iterable<readonly [string, BlobLike]>): ModelFolder {
  const byName = new Map(files);
  return {
    path,
    pathOf: (name) => joinName(path, name),
    open: async (name) => {
      const blob = byName.get(name);
      if (!blob) return null;
      const where = joinName(path, name);
      return {
        path: where, size: blob.size,
        read: async (position, length) => {
          try {
            return new Uint8Array(await blob.slice(position, Math.min(blob.size, position + length)).arrayBuffer());
          } catch (e) {
            throw new FileError(`${where}: cannot read: ${(e as Error).message ?? String(e)}`);
          }
        },
        close: async () => {},
      };
    },
  };
}

/** The fetch a URL folder uses (the global one by default; tests pass their own). */
export type FetchLike = (url: string, init?: { headers?: Record<string, string> }) => Promise<{
  status: number; ok: boolean; headers: { get(name: string): string | null }; arrayBuffer(): Promise<ArrayBuffer>;
}>;

/**
 * A folder at a base URL (a model's files served over HTTP, e.g. a Hugging Face repo's
 * `…/resolve/main/`). A file is opened with a range request for its first byte: a 206 with a
 * Content-Range total gives its size and each read is its own range request; a 200 (a server
 * without ranges) brings the whole file, which is then read in memory; a 404 is no such file;
 * anything else a FileError naming the URL and the status.
 */
export function urlFolder(base: string, fetchFn: FetchLike = globalThis.fetch as unknown as FetchLike): ModelFolder {
  if (typeof fetchFn !== 'function') throw new FileError(`urlFolder: no fetch in this environment to read ${base}`);
  const get = async (url: string, headers?: Record<string, string>) => {
    try {
      return await fetchFn(url, headers ? { headers } : undefined);
    } catch (e) {
      throw new FileError(`${url}: cannot read: ${(e as Error).message ?? String(e)}`);
    }
  };
  return {
    path: base,
    pathOf: (name) => joinName(base, encodeURIComponent(name)),
    open: async (name) => {
      const url = joinName(base, encodeURIComponent(name));
      const first = await get(url, { Range: 'bytes=0-0' });
      if (first.status === 404) return null;
      if (first.status === 200) return bytesFile(url, new Uint8Array(await first.arrayBuffer()));
      const total = Number(/\/(\d+)$/.exec(first.headers.get('content-range') ?? '')?.[1]);
      if (first.status !== 206 || !Number.isSafeInteger(total)) {
        throw new FileError(`${url}: cannot read: the server answered ${first.status}${first.status === 206 ? ' without a Content-Range total' : ''}`);
      }
      return {
        path: url, size: total,
        read: async (position, length) => {
          const end = Math.min(total, position + length);
          if (end <= position) return new Uint8Array(0);
          const r = await get(url, { Range: `bytes=${position}-${end - 1}` });
          if (r.status !== 206) throw new FileError(`${url}: cannot read bytes ${position}–${end - 1}: the server answered ${r.status}`);
          return new Uint8Array(await r.arrayBuffer());
        },
        close: async () => {},
      };
    },
  };
}
