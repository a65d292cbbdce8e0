/**
 * A corpus as one flat sequence of token ids: each document's ids followed by the end-of-text id
 * (so the model learns where a document stops, and a training window that crosses into the next
 * document sees the separator). Small corpora stay in memory; one larger than `memoryTokens`
 * goes to a binary file, read back by position, so that training on a corpus larger than memory
 * holds only the windows it is reading.
 *
 * File layout (little-endian): 8 bytes "FONTOKS1", u32 bytes per token (2 when the vocabulary has
 * at most 65,536 ids, else 4), u32 vocabulary size, then the ids. The file is written under a
 * temporary name and renamed when complete, so a crash never leaves a half-written store.
 */
import { ArgumentError } from '../../errors.ts';
import { DataError } from './data_error.ts';
import { AtomicFileWriter, RandomAccessFile, removeFile, tempFilePath } from './files.ts';

/** The tokenizer surface a token store needs. */
export interface DocumentEncoder {
  encode(text: string): number[];
  readonly eosId: number;
  readonly vocabSize: number;
}

export interface TokenStore {
  /** Number of token ids, separators included. */
  readonly length: number;
  /** Ids `start` … `start + n - 1`. */
  read(start: number, n: number): Int32Array;
  /** Releases the file (and removes it when it was a temporary one); a no-op in memory. */
  close(): void;
}

export interface BuildTokenStoreOptions {
  /** Where the store is written when it outgrows `memoryTokens` (default: a temporary file, removed by `close()`). */
  file?: string;
  /** Most ids kept in memory (default 64 Mi = 128 MiB at 2 bytes per id); 0 always writes the file. */
  memoryTokens?: number;
  /** Called after each document with the documents and ids so far. */
  onProgress?: (documents: number, tokens: number) => void;
  /**
   * Where the end-of-text id goes: after every document (default: training packs documents so a
   * window may cross into the next one), or only between documents, so the store holds the text
   * and nothing after it (evaluation: the score of the text alone, as other tools compute it).
   */
  separator?: 'after' | 'between';
}

const MAGIC = 'FONTOKS1';
const HEADER_BYTES = 16;
/** Ids gathered before each write once the store is on disk. */
const WRITE_TOKENS = 1 << 20;

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
  throw new Error('token_store: the token file layout assumes a little-endian host');
}

type IdArray = Uint16Array | Int32Array;

function bytesPerToken(vocabSize: number): 2 | 4 {
  return vocabSize <= 65536 ? 2 : 4;
}

function newIds(width: 2 | 4, n: number): IdArray {
  return width === 2 ? new Uint16Array(n) : new Int32Array(n);
}

function checkRange(where: string, length: number, start: number, n: number): void {
  if (!Number.isInteger(start) || !Number.isInteger(n) || start < 0 || n < 0 || start + n > length) {
    throw new ArgumentError(`${where}.read(${start}, ${n}): expected whole numbers with 0 ≤ start and start + n ≤ length (${length})`);
  }
}

/** A token store held in a typed array. */
export class MemoryTokenStore implements TokenStore {
  constructor(private readonly ids: IdArray) {}

  get length(): number {
    return this.ids.length;
  }

  read(start: number, n: number): Int32Array {
    checkRange('MemoryTokenStore', this.ids.length, start, n);
    return Int32Array.from(this.ids.subarray(start, start + n));
  }

  close(): void {}
}

/** A token store in a file, read by position. */
export class FileTokenStore implements TokenStore {
  readonly length: number;
  readonly vocabSize: number;
  private readonly width: 2 | 4;
  private readonly file: RandomAccessFile;

  /** Opens a store file written by `buildTokenStore`; `removeOnClose` deletes it on `close()`. */
  constructor(readonly path: string, private readonly removeOnClose = false) {
    try {
      this.file = new RandomAccessFile(path);
    } catch (e) {
      throw new DataError(`token store ${path} cannot be opened (${(e as Error).message}); expected a file written by buildTokenStore`);
    }
    const header = new Uint8Array(HEADER_BYTES);
    const got = this.file.readAt(header, 0);
    const view = new DataView(header.buffer);
    const magic = new TextDecoder().decode(header.subarray(0, 8));
    const width = view.getUint32(8, true);
    if (got < HEADER_BYTES || magic !== MAGIC || (width !== 2 && width !== 4) || (this.file.size - HEADER_BYTES) % width !== 0) {
      this.file.close();
      throw new DataError(`${path} is not a FON token store: expected the header "${MAGIC}" with 2 or 4 bytes per token and whole tokens after it`);
    }
    this.width = width;
    this.vocabSize = view.getUint32(12, true);
    this.length = (this.file.size - HEADER_BYTES) / width;
  }

  read(start: number, n: number): Int32Array {
    checkRange('FileTokenStore', this.length, start, n);
    const bytes = new Uint8Array(n * this.width);
    this.file.readAt(bytes, HEADER_BYTES + start * this.width);
    return this.width === 2 ? Int32Array.from(new Uint16Array(bytes.buffer)) : new Int32Array(bytes.buffer);
  }

  close(): void {
    this.file.close();
    if (this.removeOnClose) removeFile(this.path);
  }
}

function header(width: 2 | 4, vocabSize: number): Uint8Array {
  const h = new Uint8Array(HEADER_BYTES);
  h.set(new TextEncoder().encode(MAGIC), 0);
  const view = new DataView(h.buffer);
  view.setUint32(8, width, true);
  view.setUint32(12, vocabSize, true);
  return h;
}

function bytesOf(ids: IdArray, n: number): Uint8Array {
  return new Uint8Array(ids.buffer, ids.byteOffset, n * ids.BYTES_PER_ELEMENT);
}

/**
 * Encodes `docs` and packs them, each followed by `tok.eosId` (or with it between them:
 * `options.separator`), into a token store: in memory while the total stays within
 * `memoryTokens`, else in a file (see the file header).
 */
export async function buildTokenStore(
  docs: AsyncIterable<string> | Iterable<string>,
  tok: DocumentEncoder,
  options: BuildTokenStoreOptions = {},
): Promise<TokenStore> {
  const { vocabSize, eosId } = tok;
  if (!Number.isInteger(vocabSize) || vocabSize < 1 || vocabSize > 2 ** 31) {
    throw new ArgumentError(`buildTokenStore: vocabSize ${vocabSize} must be a whole number in [1, 2^31]`);
  }
  if (!Number.isInteger(eosId) || eosId < 0 || eosId >= vocabSize) {
    throw new ArgumentError(`buildTokenStore: eosId ${eosId} must be a whole number in [0, vocabSize = ${vocabSize})`);
  }
  const memoryTokens = options.memoryTokens ?? 1 << 26;
  if (!Number.isInteger(memoryTokens) || memoryTokens < 0) {
    throw new ArgumentError(`buildTokenStore: memoryTokens ${memoryTokens} must be a whole number ≥ 0`);
  }
  const width = bytesPerToken(vocabSize);
  let buf = newIds(width, Math.min(Math.max(memoryTokens, 1), 1 << 16));
  let used = 0; // ids in buf
  let total = 0; // ids in the store
  let documents = 0;
  let textIds = 0; // ids of the documents themselves, separators not counted
  const between = options.separator === 'between';
  let writer: AtomicFileWriter | undefined;
  const temporary = options.file === undefined;

  const toDisk = () => {
    writer = new AtomicFileWriter(options.file ?? tempFilePath('fon-tokens'));
    writer.write(header(width, vocabSize));
    writer.write(bytesOf(buf, used));
    used = 0;
    if (buf.length < WRITE_TOKENS) buf = newIds(width, WRITE_TOKENS);
  };
  const push = (id: number) => {
    if (used === buf.length) {
      if (writer) {
        writer.write(bytesOf(buf, used));
        used = 0;
      } else if (total >= memoryTokens) {
        toDisk(); // this id makes the store longer than memoryTokens
      } else {
        const grown = newIds(width, Math.min(buf.length * 2, memoryTokens));
        grown.set(buf);
        buf = grown;
      }
    }
    buf[used++] = id;
    total++;
  };

  try {
    for await (const doc of docs) {
      const ids = tok.encode(doc);
      if (between && documents > 0) push(eosId);
      textIds += ids.length;
      for (const id of ids) {
        if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
          throw new ArgumentError(`buildTokenStore: document ${documents} encoded to id ${id}; expected whole numbers in [0, vocabSize = ${vocabSize})`);
        }
        push(id);
      }
      if (!between) push(eosId);
      documents++;
      options.onProgress?.(documents, total);
    }
    if (textIds === 0) {
      const got = documents === 0 ? 'no documents' : `${documents} document(s) that encoded to no tokens`;
      throw new DataError(`buildTokenStore: the corpus is empty (${got}); expected documents with some text`);
    }
    if (!writer && total > memoryTokens) toDisk();
    if (!writer) return new MemoryTokenStore(buf.slice(0, used));
    const w: AtomicFileWriter = writer;
    w.write(bytesOf(buf, used));
    w.commit();
    return new FileTokenStore(w.target, temporary);
  } catch (e) {
    writer?.abort();
    throw e;
  }
}

/** Reopens a token store file that `buildTokenStore` wrote (kept, not removed, by `close()`). */
export function openTokenStore(path: string): TokenStore {
  return new FileTokenStore(path);
}
