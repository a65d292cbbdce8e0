/**
 * The Node adapter for files (DESIGN.md: Node-only code sits behind small adapters): atomic
 * writes, directory fsync, listing and removal. Everything that touches the disk for checkpoints
 * goes through here, so the format code under io/ stays free of Node APIs.
 *
 * Atomic means: a reader sees the old file or the new one, never a part. The bytes go to a
 * temporary name beside the target, are fsynced, then renamed over the target (rename is atomic
 * within one file system), and the directory is fsynced so the rename itself survives a crash.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

let tempCounter = 0;

/** Marker in the names of temporary files and directories (`<target>.tmp-<pid>-<n>`). */
export const TEMP_MARKER = '.tmp-';

/** A fresh temporary name beside `path`: unique within this process and across processes. */
export function tempPathFor(path: string): string {
  return `${path}${TEMP_MARKER}${process.pid}-${tempCounter++}`;
}

export const joinPath = join;
export const parentDir = dirname;
export const baseName = basename;

function asBytes(data: Uint8Array | string): Uint8Array {
  if (typeof data === 'string') return new TextEncoder().encode(data);
  if (data instanceof Uint8Array) return data;
  throw new TypeError(`expected file contents as a Uint8Array or a string, got ${data === null ? 'null' : typeof data}`);
}

/** Writes `data` to a new file at `path` (which must not exist) and fsyncs it. */
export async function writeNewFileSynced(path: string, data: Uint8Array | string): Promise<void> {
  const bytes = asBytes(data);
  const fh = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o644);
  try {
    let done = 0;
    while (done < bytes.length) {
      const { bytesWritten } = await fh.write(bytes, done, bytes.length - done);
      done += bytesWritten;
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Flushes a directory's entries (new names, renames) to disk. Some platforms (Windows) cannot
 * open a directory for this; there the step is skipped, as rename is all they offer.
 */
export async function fsyncDir(path: string): Promise<void> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY);
  } catch {
    return;
  }
  try {
    await fh.sync().catch(() => undefined);
  } finally {
    await fh.close();
  }
}

/**
 * Replaces `path` with `data` atomically: writes `path.tmp-<pid>-<n>`, fsyncs, renames, fsyncs
 * the directory. On any error the temporary file is removed and the error passes on; `path`
 * keeps its old contents (or stays absent).
 */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = tempPathFor(path);
  try {
    await writeNewFileSynced(tmp, data);
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  await fsyncDir(dirname(path));
}

/** mkdir -p. */
export async function makeDir(path: string): Promise<void> {
  await mkdir(path, { recursive: true });
}

/** Creates a directory that must not exist yet. */
export async function makeNewDir(path: string): Promise<void> {
  await mkdir(path);
}

/** Renames a file or directory (atomic within one file system). */
export async function renamePath(from: string, to: string): Promise<void> {
  await rename(from, to);
}

/** Removes a file or a directory tree; nothing happens if it is absent. */
export async function removePath(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

/** What is at `path`: 'file', 'dir', 'other', or null when nothing is there. */
export async function pathKind(path: string): Promise<'file' | 'dir' | 'other' | null> {
  try {
    const s = await stat(path);
    return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : 'other';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw e;
  }
}

/** Names in a directory (not sorted by meaning: callers sort). */
export async function listDir(path: string): Promise<string[]> {
  return readdir(path);
}

/** A file's bytes, or null when it does not exist (other errors pass on). */
export async function readFileIfExists(path: string): Promise<Uint8Array | null> {
  try {
    const b = await readFile(path);
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}
