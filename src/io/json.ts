/**
 * JSON text from files other people made, parsed with a bound on nesting: a scan of the text
 * counts the depth of arrays and objects (outside strings) before JSON.parse runs, so a file nested
 * thousands deep is refused up front instead of reaching the recursive code that reads configs and
 * tokenizers (or formats their values) and overflowing the stack. Every loader parses through here.
 */
import { CheckpointError, clip, type FonError } from '../errors.ts';

/** The deepest nesting of arrays and objects a file may have; real configs and tokenizers use under 10. */
export const MAX_JSON_DEPTH = 64;

/**
 * `text` as a JSON value. A failure is `fail(why)`, why being "not valid JSON (…)" or "arrays and
 * objects nested more than N deep (…)", so the caller's error names its file first.
 */
export function parseJson(text: string, fail: (why: string) => FonError, maxDepth = MAX_JSON_DEPTH): unknown {
  const at = tooDeep(text, maxDepth);
  if (at >= 0) throw fail(`arrays and objects nested more than ${maxDepth} deep (at character ${at}): expected at most ${maxDepth} levels`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw fail(`not valid JSON (${clip((e as Error).message)})`);
  }
}

/** The JSON `text` of a checkpoint's or model folder's file `file`: a failure is a CheckpointError naming the file. */
export function parseCheckpointJson(text: string, file: string): unknown {
  return parseJson(text, (why) => new CheckpointError(`${file}: ${why}`));
}

/** The index of the bracket that opens level maxDepth + 1, or −1. Brackets inside strings do not count. */
function tooDeep(text: string, maxDepth: number): number {
  let depth = 0, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) { if (++depth > maxDepth) return i; }
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return -1;
}
