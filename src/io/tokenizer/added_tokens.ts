/**
 * Added tokens (Hugging Face `added_tokens`): strings such as "<|endoftext|>" that are cut out of
 * the text whole, before normalization and pre-tokenization, and map straight to their ids. The
 * match is leftmost-longest, and the `single_word`, `lstrip` and `rstrip` flags mean what they mean
 * in Hugging Face's AddedVocabulary (whitespace there is Unicode White_Space, a word character is
 * Rust regex's Unicode `\w`).
 */
import { escapeRegExp, WHITE_SPACE_CLASS } from './pretokenize.ts';

/** One entry of tokenizer.json's `added_tokens`. */
export interface AddedToken {
  readonly id: number;
  readonly content: string;
  /** Matches only where no word character touches it on either side. */
  readonly singleWord: boolean;
  /** Swallows the whitespace on its left. */
  readonly lstrip: boolean;
  /** Swallows the whitespace on its right. */
  readonly rstrip: boolean;
  /** Matched in the normalized text rather than the raw text. */
  readonly normalized: boolean;
  /** A control token (end of text, chat markers): matched only when the caller allows it. */
  readonly special: boolean;
}

const WORD_BEFORE = /[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]$/u;
const WORD_AFTER = /^[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]/u;
const SPACE_AT_END = new RegExp(`[${WHITE_SPACE_CLASS}]*$`, 'u');
const SPACE_AT_START = new RegExp(`^[${WHITE_SPACE_CLASS}]*`, 'u');

/** Finds a fixed set of added tokens in text. */
export class AddedTokenMatcher {
  private readonly re: RegExp;
  private readonly byContent: Map<string, AddedToken>;

  /** `tokens` must be non-empty; `contents` are the strings to look for (normalized ones for normalized tokens). */
  constructor(tokens: readonly AddedToken[], contents: readonly string[]) {
    this.byContent = new Map();
    tokens.forEach((t, i) => { if (contents[i].length > 0 && !this.byContent.has(contents[i])) this.byContent.set(contents[i], t); });
    // Longest first, so that the alternation takes the longest token at the leftmost position.
    const keys = [...this.byContent.keys()].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
    this.re = new RegExp(keys.map(escapeRegExp).join('|'), 'gu');
  }

  /** Cuts `text` into plain pieces (`emitText`, never empty) and added-token ids (`emitId`), in order. */
  split(text: string, emitText: (piece: string) => void, emitId: (id: number) => void): void {
    let done = 0;
    const re = this.re;
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      let start = m.index;
      let stop = start + m[0].length;
      const token = this.byContent.get(m[0])!;
      if (token.singleWord && ((start > 0 && WORD_BEFORE.test(text.slice(Math.max(0, start - 2), start))) ||
        (stop < text.length && WORD_AFTER.test(text.slice(stop, stop + 2))))) continue;
      if (token.lstrip) start = Math.max(SPACE_AT_END.exec(text.slice(done, start))!.index + done, done);
      if (token.rstrip) { stop += SPACE_AT_START.exec(text.slice(stop))![0].length; re.lastIndex = stop; }
      if (start > done) emitText(text.slice(done, start));
      emitId(token.id);
      done = stop;
    }
    if (done < text.length) emitText(text.slice(done));
  }
}
