/**
 * The file access FON's training data needs, in one Node-only adapter (DESIGN.md: Node-only pieces
 * sit behind small adapters), so that a browser build can swap this file and keep the rest of
 * src/train/data. Everything here is plain `node:fs`; nothing above this file imports `node:*`.
 * A failure the system reports is a FileError naming the path (platform/files.ts `fileError`).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { fileError, onPathSync } from '../../platform/files.ts';

export type PathKind = 'file' | 'folder' | 'missing' | 'other';

/** What is at `p` (symbolic links followed); a FileError when the system cannot tell (a link loop, a name too long). */
export function pathKind(p: string): PathKind {
  const st = onPathSync(p, 'cannot look up', () => fs.statSync(p, { throwIfNoEntry: false }));
  if (!st) return 'missing';
  return st.isFile() ? 'file' : st.isDirectory() ? 'folder' : 'other';
}

/**
 * Every file under `folder`, depth-first with each folder's entries sorted by name (code-unit
 * order, so the order never depends on the file system or the locale). Names starting with '.'
 * (.git, .DS_Store) are skipped.
 */
export function listFiles(folder: string): string[] {
  const out: string[] = [];
  const names = onPathSync(folder, 'cannot list the folder', () => fs.readdirSync(folder)).filter((n) => !n.startsWith('.')).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const name of names) {
    const p = path.join(folder, name);
    const kind = pathKind(p);
    if (kind === 'file') out.push(p);
    else if (kind === 'folder') out.push(...listFiles(p));
  }
  return out;
}

/** `name`'s extension in lower case with the dot ('.jsonl'), or '' when it has none. */
export function extension(p: string): string {
  return path.extname(p).toLowerCase();
}

/**
 * A file's text as UTF-8, in pieces of about `chunkBytes` bytes, read one piece at a time so that
 * a file larger than memory streams through. A multi-byte character cut by a piece boundary is
 * decoded whole (TextDecoder in stream mode); a leading byte-order mark is dropped.
 */
export async function* readTextChunks(p: string, chunkBytes = 1 << 20): AsyncGenerator<string> {
  const handle = await fs.promises.open(p, 'r').catch((e: unknown) => { throw fileError(p, 'cannot read', e); });
  try {
    const decoder = new TextDecoder('utf-8');
    const buf = new Uint8Array(chunkBytes);
    for (;;) {
      const { bytesRead } = await handle.read(buf, 0, chunkBytes, null);
      if (bytesRead === 0) break;
      const text = decoder.decode(buf.subarray(0, bytesRead), { stream: true });
      if (text.length > 0) yield text;
    }
    const tail = decoder.decode();
    if (tail.length > 0) yield tail;
  } finally {
    await handle.close();
  }
}

/** A small file's whole text (the Brown Corpus files are about 20 kB each). */
export function readSmallTextFile(p: string): string {
  return onPathSync(p, 'cannot read', () => fs.readFileSync(p, 'utf8'));
}

/** The folder an installed npm package lives in, or undefined when it is not installed. */
export function packageFolder(name: string): string | undefined {
  try {
    return path.dirname(createRequire(import.meta.url).resolve(`${name}/package.json`));
  } catch {
    return undefined;
  }
}

/** The names in a folder, sorted (code-unit order). */
export function folderNames(folder: string): string[] {
  return onPathSync(folder, 'cannot list the folder', () => fs.readdirSync(folder)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A fresh path in the system's temporary folder. */
export function tempFilePath(prefix: string): string {
  return path.join(os.tmpdir(), `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}.bin`);
}

/**
 * A file written front to back under a temporary name beside `target` and renamed onto `target`
 * by `commit()`, so a reader never sees it half-written; `abort()` removes the temporary file.
 */
export class AtomicFileWriter {
  readonly target: string;
  readonly tempPath: string;
  private fd: number | undefined;

  constructor(target: string) {
    this.target = target;
    this.tempPath = `${target}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
    onPathSync(path.dirname(target), 'cannot make the folder', () => fs.mkdirSync(path.dirname(target), { recursive: true }));
    this.fd = onPathSync(this.tempPath, 'cannot write', () => fs.openSync(this.tempPath, 'w'));
  }

  write(bytes: Uint8Array): void {
    if (this.fd === undefined) throw new Error('AtomicFileWriter: write after commit or abort');
    let off = 0;
    while (off < bytes.length) off += fs.writeSync(this.fd, bytes, off, bytes.length - off);
  }

  /** Writes `bytes` at byte `position` (to fill in a header once the length is known). */
  writeAt(bytes: Uint8Array, position: number): void {
    if (this.fd === undefined) throw new Error('AtomicFileWriter: write after commit or abort');
    let off = 0;
    while (off < bytes.length) off += fs.writeSync(this.fd, bytes, off, bytes.length - off, position + off);
  }

  commit(): void {
    if (this.fd === undefined) return;
    fs.fsyncSync(this.fd);
    fs.closeSync(this.fd);
    this.fd = undefined;
    onPathSync(this.target, 'cannot replace', () => fs.renameSync(this.tempPath, this.target));
  }

  abort(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
    fs.rmSync(this.tempPath, { force: true });
  }
}

/** A file open for positional reads. */
export class RandomAccessFile {
  readonly size: number;
  private fd: number | undefined;

  constructor(readonly path: string) {
    this.fd = onPathSync(path, 'cannot read', () => fs.openSync(path, 'r'));
    this.size = fs.fstatSync(this.fd).size;
  }

  /** Fills `into` with the bytes starting at `position`; returns how many were read. */
  readAt(into: Uint8Array, position: number): number {
    if (this.fd === undefined) throw new Error(`RandomAccessFile: ${this.path} is closed`);
    let off = 0;
    while (off < into.length) {
      const n = fs.readSync(this.fd, into, off, into.length - off, position + off);
      if (n === 0) break;
      off += n;
    }
    return off;
  }

  close(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }
}

/** Removes a file if it exists. */
export function removeFile(p: string): void {
  fs.rmSync(p, { force: true });
}
