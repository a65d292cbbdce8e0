/**
 * Pre-tokenization: cutting text into the words BPE runs on, as Hugging Face `tokenizers` does it.
 * Hugging Face compiles its patterns with Oniguruma (Ruby syntax); `compileOnigPattern` rewrites
 * the parts that differ in JavaScript so the same text gets the same cuts:
 *   - `(?i:…)` groups (no inline modifiers in Node 20) become explicit case classes, with the
 *     Unicode simple folds of s (ſ U+017F) and k (K U+212A) that Oniguruma honours;
 *   - `\s` is Unicode White_Space in Oniguruma (it has U+0085 NEL, not U+FEFF) but not in
 *     JavaScript, so it is spelled out; `\S` outside a class likewise (inside a class `\S` stays
 *     JavaScript's, the one case left approximate);
 *   - `^` and `$` are line anchors in Ruby syntax (before/after '\n' only) and are spelled so.
 * Anything JavaScript still cannot compile is an UnsupportedError naming the pattern, and so is a
 * pattern that could backtrack exponentially (regex_backtracking.ts): a hostile tokenizer.json must
 * not hang every encode.
 */
import { showValue, UnsupportedError } from '../../errors.ts';
import { exponentialBacktracking } from './regex_backtracking.ts';

/** GPT-2's split pattern, the one Hugging Face's ByteLevel pre-tokenizer uses when `use_regex` is on. */
export const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/** Unicode White_Space, the meaning of `\s` in Oniguruma and in Rust's `regex` (class body). */
export const WHITE_SPACE_CLASS = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** How a Split pre-tokenizer treats the pieces its pattern matches (Hugging Face's names). */
export type SplitBehavior = 'Removed' | 'Isolated' | 'MergedWithPrevious' | 'MergedWithNext' | 'Contiguous';
export const SPLIT_BEHAVIORS: readonly SplitBehavior[] = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];

/** One pre-tokenizer stage: cuts a piece and emits the non-empty sub-pieces in order. */
/** A pre-tokenizer: cuts `piece` into words for `emit`; `atStart` says whether the piece begins the text (Metaspace's prepend_scheme "first"). */
export type PreTokenizeStep = (piece: string, emit: (sub: string) => void, atStart?: boolean) => void;

const isAsciiLetter = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

/** The characters a letter matches case-insensitively (simple Unicode case folding). */
function caseVariants(c: string): string {
  const lower = c.toLowerCase();
  return lower + lower.toUpperCase() + (lower === 's' ? '\u017f' : lower === 'k' ? '\u212a' : '');
}

/** Rewrites an Oniguruma (Ruby syntax) pattern as a global, Unicode JavaScript RegExp (see file header). */
export function compileOnigPattern(pattern: string, where: string): RegExp {
  let out = '';
  let inClass = false;
  const groupIsCaseless: boolean[] = [];
  let caseless = 0;
  const unsupported = (what: string) =>
    new UnsupportedError(`${where}: regex ${showValue(pattern, 200)} uses ${what}, which FON cannot translate to JavaScript`);
  const blowUp = exponentialBacktracking(pattern);
  if (blowUp !== undefined) throw new UnsupportedError(`${where}: regex ${showValue(pattern, 200)} is refused: it has ${blowUp}; FON runs only patterns without nested repetition`);
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i];
    if (c === '\\') {
      const e = pattern[i + 1];
      if (e === undefined) throw unsupported('a trailing backslash');
      if (e === 's') out += inClass ? WHITE_SPACE_CLASS : `[${WHITE_SPACE_CLASS}]`;
      else if (e === 'S') out += inClass ? '\\S' : `[^${WHITE_SPACE_CLASS}]`;
      else if ((e === 'p' || e === 'P' || e === 'x') && pattern[i + 2] === '{') {
        const close = pattern.indexOf('}', i);
        if (close < 0) throw unsupported(`an unterminated \\${e}{`);
        out += (e === 'x' ? '\\u' : `\\${e}`) + pattern.slice(i + 2, close + 1);
        i = close + 1;
        continue;
      } else out += c + e;
      i += 2;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      else if (c === '[') throw unsupported('a nested character class');
      else if (caseless > 0 && isAsciiLetter(c)) {
        if (pattern[i + 1] === '-' && isAsciiLetter(pattern[i + 2] ?? '')) {
          const hi = pattern[i + 2];
          const swap = (x: string) => (x === x.toLowerCase() ? x.toUpperCase() : x.toLowerCase());
          out += `${c}-${hi}${swap(c)}-${swap(hi)}`;
          i += 3;
          continue;
        }
        out += caseVariants(c);
        i++;
        continue;
      }
      out += c;
      i++;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      i++;
      if (pattern[i] === '^') { out += '^'; i++; }
      if (pattern[i] === ']') { out += '\\]'; i++; } // a leading ']' is literal in Oniguruma
      continue;
    }
    if (c === '(') {
      if (pattern.startsWith('(?i:', i)) {
        groupIsCaseless.push(true);
        caseless++;
        out += '(?:';
        i += 4;
        continue;
      }
      if (pattern[i + 1] === '?' && !':=!<'.includes(pattern[i + 2] ?? '')) throw unsupported(`the inline option group "${pattern.slice(i, i + 4)}"`);
      groupIsCaseless.push(false);
    } else if (c === ')') {
      if (groupIsCaseless.pop()) caseless--;
    } else if (c === '^') { out += '(?<![^\\n])'; i++; continue; }
    else if (c === '$') { out += '(?![^\\n])'; i++; continue; }
    else if (caseless > 0 && isAsciiLetter(c)) { out += `[${caseVariants(c)}]`; i++; continue; }
    out += c;
    i++;
  }
  try {
    return new RegExp(out, 'gu');
  } catch (err) {
    throw unsupported(`syntax JavaScript rejects (${(err as Error).message})`);
  }
}

/**
 * Escapes a literal string for use in a JavaScript RegExp with the `u` flag, outside a character
 * class: the syntax characters and '/' only, since `u` rejects any other escape (`\-` is a
 * SyntaxError there, which once made a token such as `<|im-start|>` unloadable).
 */
export function escapeRegExp(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

/**
 * Hugging Face's `NormalizedString::split`: the text is cut into alternating unmatched and matched
 * spans (each match its own span, empty matches included), merged by `behavior`, and the empty
 * pieces are dropped. `invert` swaps which spans count as matches.
 */
export function splitByPattern(text: string, re: RegExp, behavior: SplitBehavior, invert: boolean, emit: (piece: string) => void): void {
  if (text.length === 0) return;
  if (behavior === 'Isolated') { // every span is a piece: the hot path, no span list
    let prev = 0;
    for (const m of text.matchAll(re)) {
      const start = m.index!;
      if (start > prev) emit(text.slice(prev, start));
      if (m[0].length > 0) emit(m[0]);
      prev = start + m[0].length;
    }
    if (prev < text.length) emit(text.slice(prev));
    return;
  }
  const spans: Array<[number, number, boolean]> = []; // [start, end, isMatch]
  let prev = 0;
  for (const m of text.matchAll(re)) {
    const start = m.index!;
    if (start > prev) spans.push([prev, start, invert]);
    spans.push([start, start + m[0].length, !invert]);
    prev = start + m[0].length;
  }
  if (prev < text.length) spans.push([prev, text.length, invert]);

  let pieces: Array<[number, number]> = [];
  if (behavior === 'Removed') {
    pieces = spans.filter((s) => !s[2]).map((s) => [s[0], s[1]]);
  } else if (behavior === 'Contiguous' || behavior === 'MergedWithPrevious') {
    let previousMatch = false;
    for (const [start, end, isMatch] of spans) {
      const joins = behavior === 'Contiguous' ? isMatch === previousMatch : isMatch && !previousMatch;
      if (joins && pieces.length > 0) pieces[pieces.length - 1][1] = end;
      else pieces.push([start, end]);
      previousMatch = isMatch;
    }
  } else { // MergedWithNext: the same fold from the right
    let previousMatch = false;
    for (let k = spans.length - 1; k >= 0; k--) {
      const [start, end, isMatch] = spans[k];
      if (isMatch && !previousMatch && pieces.length > 0) pieces[pieces.length - 1][0] = start;
      else pieces.push([start, end]);
      previousMatch = isMatch;
    }
    pieces.reverse();
  }
  for (const [start, end] of pieces) if (end > start) emit(text.slice(start, end));
}

/** A Split pre-tokenizer stage. */
export function splitStep(re: RegExp, behavior: SplitBehavior, invert: boolean): PreTokenizeStep {
  return (piece, emit) => splitByPattern(piece, re, behavior, invert, emit);
}

/**
 * The cutting half of Hugging Face's ByteLevel pre-tokenizer: a space is put before a piece that
 * does not start with one (`add_prefix_space`), then the piece is cut by the GPT-2 pattern
 * (`use_regex`). The byte mapping itself happens in the BPE model.
 */
export function byteLevelStep(addPrefixSpace: boolean, useRegex: boolean): PreTokenizeStep {
  const re = useRegex ? compileOnigPattern(GPT2_PATTERN, 'ByteLevel pre-tokenizer') : null;
  return (piece, emit) => {
    if (piece.length === 0) return;
    const text = addPrefixSpace && !piece.startsWith(' ') ? ' ' + piece : piece;
    if (re) splitByPattern(text, re, 'Isolated', false, emit);
    else emit(text);
  };
}

/** Stages run in order, each on every piece the one before it emitted (a Sequence pre-tokenizer). */
export function sequenceSteps(steps: readonly PreTokenizeStep[]): PreTokenizeStep {
  if (steps.length === 1) return steps[0];
  return steps.reduceRight<PreTokenizeStep>((rest, step) => (piece, emit) => step(piece, (sub) => rest(sub, emit)), (piece, emit) => emit(piece));
}
