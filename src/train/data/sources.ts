/**
 * User training data: documents read from a path, streamed so that a file larger than memory
 * passes through in pieces.
 *
 *  - a folder: its files, depth-first, each folder's entries sorted by name, names starting with
 *    '.' skipped; each file read by the rules below;
 *  - a .jsonl file: one document per non-blank line, the line's JSON object's string `text` field
 *    (other fields are ignored; an empty `text` is skipped);
 *  - any other file: UTF-8 text. A line that is exactly `<|endoftext|>` (the separator of GPT-2-era
 *    text dumps such as TinyStories) ends a document; a file without one is a single document.
 *    Blank lines at a document's start and whitespace at its end are dropped; an empty document is
 *    skipped.
 *
 * A document longer than `maxDocumentChars` (16 Mi characters by default) is handed on in pieces
 * of about that size, cut at line ends where a line end exists, each piece counted as a document:
 * it costs one separator token per piece and keeps memory bounded whatever the file.
 */
import { showValue } from '../../errors.ts';
import { DataError } from './data_error.ts';
import { extension, listFiles, pathKind, readTextChunks } from './files.ts';
import { parseJson } from '../../io/json.ts';

export const DOCUMENT_SEPARATOR_LINE = '<|endoftext|>';

export interface ReadDocumentsOptions {
  /** Longest piece handed on at once, in UTF-16 characters (default 16 Mi). */
  maxDocumentChars?: number;
  /** Bytes read from a file at a time (default 1 MiB). */
  chunkBytes?: number;
  /**
   * A text file is one document of its exact text (a leading byte-order mark dropped): no split at
   * separator lines, nothing trimmed, no length cut (`fon eval --file` scores the file as written).
   * .jsonl lines stay documents of their own.
   */
  exact?: boolean;
}

const EXPECTED = 'a text file, a .jsonl file with a "text" field on each line, or a folder of them';

/** A file's lines (without their '\n' or '\r\n'), streamed; a line longer than `maxChars` comes in pieces marked `partial`. */
async function* lines(file: string, chunkBytes: number, maxChars: number): AsyncGenerator<{ text: string; partial: boolean }> {
  let rest = '';
  for await (const chunk of readTextChunks(file, chunkBytes)) {
    rest += chunk;
    let start = 0;
    for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n', start)) {
      const end = nl > start && rest.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      yield { text: rest.slice(start, end), partial: false };
      start = nl + 1;
    }
    rest = rest.slice(start);
    if (rest.length > maxChars) {
      yield { text: rest, partial: true };
      rest = '';
    }
  }
  if (rest.length > 0) yield { text: rest.endsWith('\r') ? rest.slice(0, -1) : rest, partial: false };
}

/** Drops blank lines at the start and whitespace at the end. */
function tidyDocument(text: string): string {
  return text.replace(/^(?:[ \t\r]*\n)+/, '').trimEnd();
}

async function* textFileDocuments(file: string, chunkBytes: number, maxChars: number): AsyncGenerator<string> {
  let parts: string[] = [];
  let size = 0;
  let lastWasPartial = false;
  const flush = function* (): Generator<string> {
    const doc = tidyDocument(parts.join(''));
    parts = [];
    size = 0;
    if (doc.length > 0) yield doc;
  };
  for await (const line of lines(file, chunkBytes, maxChars)) {
    if (!line.partial && !lastWasPartial && line.text.trimEnd() === DOCUMENT_SEPARATOR_LINE) {
      yield* flush();
      continue;
    }
    if (size > 0 && !lastWasPartial) {
      parts.push('\n');
      size += 1;
    }
    parts.push(line.text);
    size += line.text.length;
    lastWasPartial = line.partial;
    if (size >= maxChars) yield* flush();
  }
  yield* flush();
}

async function* jsonlDocuments(file: string, chunkBytes: number): AsyncGenerator<string> {
  let lineNo = 0;
  // A JSONL line is one document and must be parsed whole, so lines are never cut here.
  for await (const { text: line } of lines(file, chunkBytes, Infinity)) {
    lineNo++;
    if (line.trim().length === 0) continue;
    const value = parseJson(line, (why) => new DataError(`${file}:${lineNo}: ${why}; expected one JSON object with a string "text" field per line`));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new DataError(`${file}:${lineNo}: expected a JSON object with a string "text" field, got ${Array.isArray(value) ? 'an array' : showValue(value)}`);
    }
    const text = (value as { text?: unknown }).text;
    if (typeof text !== 'string') {
      throw new DataError(`${file}:${lineNo}: expected a string "text" field, got ${text === undefined ? 'no "text" field' : typeof text}`);
    }
    if (text.length > 0) yield text;
  }
}

/** A text file's whole text as one document (ReadDocumentsOptions.exact); none when the file is empty. */
async function* exactText(file: string, chunkBytes: number): AsyncGenerator<string> {
  const parts: string[] = [];
  for await (const chunk of readTextChunks(file, chunkBytes)) parts.push(chunk);
  const text = parts.join('');
  if (text.length > 0) yield text;
}

/**
 * The documents at `path` (see the file header for the rules), in a fixed order. Throws DataError
 * when the path does not exist or holds no text at all.
 */
export async function* readDocuments(path: string, options: ReadDocumentsOptions = {}): AsyncGenerator<string> {
  const maxChars = options.maxDocumentChars ?? 1 << 24;
  const chunkBytes = options.chunkBytes ?? 1 << 20;
  const kind = pathKind(path);
  if (kind === 'missing') throw new DataError(`corpus ${path} does not exist; expected ${EXPECTED}`);
  if (kind === 'other') throw new DataError(`corpus ${path} is neither a file nor a folder; expected ${EXPECTED}`);
  const files = kind === 'folder' ? listFiles(path) : [path];
  let count = 0;
  for (const file of files) {
    const docs = extension(file) === '.jsonl' ? jsonlDocuments(file, chunkBytes) : options.exact ? exactText(file, chunkBytes) : textFileDocuments(file, chunkBytes, maxChars);
    for await (const doc of docs) {
      count++;
      yield doc;
    }
  }
  if (count === 0) {
    const what = kind === 'folder' ? (files.length === 0 ? 'a folder with no files' : `a folder whose ${files.length} file(s) hold no text`) : 'a file with no text';
    throw new DataError(`corpus ${path} is empty (${what}); expected ${EXPECTED}`);
  }
}
