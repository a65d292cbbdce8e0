/**
 * The Node adapter for files (DESIGN.md: Node-only code sits behind small adapters): atomic
 * writes, directory fsync, listing and removal. Everything that touches the disk for checkpoints
 * goes through here, so the format code under io/ stays free of Node APIs. Every failure the
 * system reports is a FileError naming the path and saying in words what went wrong (`fileError`).
 *
 * Atomic means: a reader sees the old file or the new one, never a part. The bytes go to a
 * temporary name beside the target, are fsynced, then renamed over the target (rename is atomic
 * within one file system), and the directory is fsynced so the rename itself survives a crash.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { clip, FileError, FonError } from '../errors.ts';

/** The system's error codes in words, for FileError messages. */
const REASONS: Record<string, string> = {
  EISDIR: 'it is a folder, expected a file',
  ENOTDIR: 'a part of the path is not a folder',
  ELOOP: 'a loop of symbolic links',
  ENAMETOOLONG: 'a name in the path is too long for the file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or folder',
  EEXIST: 'it exists already',
  ENOSPC: 'no space left on the device',
  EROFS: 'the file system is read-only',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files',
  EIO: 'an input/output error',
  EBUSY: 'it is busy',
  ENXIO: 'no such device (a socket or a FIFO without a reader?)',
};

/**
 * The FileError for a failed file-system call on `path` ("cannot read", "cannot list", …);
 * a FonError passes unchanged. Every adapter that touches the disk maps its failures through this.
 */
export function fileError(path: string, action: string, e: unknown): FonError {
  if (e instanceof FonError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  const reason = code && REASONS[code] ? `${REASONS[code]} (${code})` : code ? `${code}: ${(e as Error).message}` : String((e as Error)?.message ?? e);
  return new FileError(`${clip(path)}: ${action}: ${reason}`);
}

/** Rejects a path the system could not take (a NUL byte, which Node reports as a TypeError) before any call. */
export function checkPath(path: string, action: string): void {
  if (typeof path !== 'string') throw new FileError(`${action}: expected a path as a string, got ${path === null ? 'null' : typeof path}`);
  if (path.includes('\0')) throw new FileError(`${clip(JSON.stringify(path))}: ${action}: a path with a NUL byte`);
}

/** `fn()` (a synchronous file-system call) with its failure as a fileError naming `path`. */
export function onPathSync<T>(path: string, action: string, fn: () => T): T {
  checkPath(path, action);
  try {
    return fn();
  } catch (e) {
    throw fileError(path, action, e);
  }
}

/** `fn()` with its failure as a fileError naming `path`. */
async function onPath<T>(path: string, action: string, fn: () => Promise<T>): Promise<T> {
  checkPath(path, action);
  try {
    return await fn();
  } catch (e) {
    throw fileError(path, action, e);
  }
}

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
  await onPath(path, 'cannot write', async () => {
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
  });
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
    await onPath(path, 'cannot replace', () => rename(tmp, path));
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  await fsyncDir(dirname(path));
}

/** mkdir -p. */
export async function makeDir(path: string): Promise<void> {
  await onPath(path, 'cannot make the folder', () => mkdir(path, { recursive: true }));
}

/** Creates a directory that must not exist yet. */
export async function makeNewDir(path: string): Promise<void> {
  await onPath(path, 'cannot make the folder', () => mkdir(path));
}

/** Renames a file or directory (atomic within one file system). */
export async function renamePath(from: string, to: string): Promise<void> {
  checkPath(from, 'cannot rename');
  await onPath(to, `cannot rename ${clip(from)} to it`, () => rename(from, to));
}

/** Removes a file or a directory tree; nothing happens if it is absent. */
export async function removePath(path: string): Promise<void> {
  await onPath(path, 'cannot remove', () => rm(path, { recursive: true, force: true }));
}

/** What is at `path` (symbolic links followed): 'file', 'dir', 'other', or null when nothing is there; a FileError when the system cannot tell (a link loop, a name too long). */
export async function pathKind(path: string): Promise<'file' | 'dir' | 'other' | null> {
  checkPath(path, 'cannot look up');
  try {
    const s = await stat(path);
    return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : 'other';
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw fileError(path, 'cannot look up', e);
  }
}

/** Names in a directory (not sorted by meaning: callers sort). */
export async function listDir(path: string): Promise<string[]> {
  return onPath(path, 'cannot list the folder', () => readdir(path));
}

/**
 * Whether a regular file is at `path` (symbolic links followed): false when nothing is there; a
 * folder, a FIFO, a socket or a device is a FileError (opening a FIFO would wait for a writer).
 */
export async function isRegularFile(path: string): Promise<boolean> {
  const kind = await pathKind(path);
  if (kind === null) return false;
  if (kind !== 'file') throw new FileError(`${clip(path)}: cannot read: ${kind === 'dir' ? 'it is a folder, expected a file' : 'not a regular file (a FIFO, a socket or a device)'}`);
  return true;
}

/** A file's bytes, or null when it does not exist; a folder, a link loop or any other failure is a FileError naming it. */
export async function readFileIfExists(path: string): Promise<Uint8Array | null> {
  checkPath(path, 'cannot read');
  if (!(await isRegularFile(path))) return null;
  try {
    const b = await readFile(path);
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw fileError(path, 'cannot read', e);
  }
}
