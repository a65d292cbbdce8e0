/**
 * Refusing split patterns that backtrack exponentially, before they are compiled.
 *
 * A tokenizer.json is someone else's file, and its Split pattern runs over every text FON encodes.
 * JavaScript's regex engine backtracks, so a pattern such as `(a+)+$` takes time exponential in
 * the length of a run it fails on: a hostile (or careless) file hangs eval, generate and the
 * server. The two usual remedies do not fit here: a linear-time engine (RE2 and its ports) has no
 * lookahead, which every real pattern needs (`\s+(?!\S)` in GPT-2, Llama 3, Qwen2, GPT-4o and
 * DeepSeek); and a time budget cannot interrupt a synchronous regex in the browser (`vm`'s timeout
 * is Node's alone). So the pattern is read instead, and refused when a repeating quantifier (`*`,
 * `+`, `{n,}`, `{n,m}` with m > 1) applies to a group whose body can match one text in more than
 * one way: a body holding a quantifier or an alternation, at any depth — `(a+)+`, `(a|a)*`,
 * `(?:a?b?)*`. Back-references and Oniguruma's subexpression calls are refused too. None of the
 * published patterns nest like that (test/io/regex_backtracking.test.ts holds them).
 *
 * Variant: this is a sufficient condition for no exponential blow-up, not a full analysis; it may
 * refuse a harmless pattern such as `(?:ab|cd)+`, and it does not bound polynomial backtracking
 * (`a*a*a*b`, at most cubic), which no published pattern shows either.
 */
import { clip } from '../../errors.ts';

/** Why the pattern is refused, in words for a message, or undefined when it is safe to run. */
export function exponentialBacktracking(pattern: string): string | undefined {
  /** The open groups: where each began, and whether its body so far holds a quantifier or an alternation. */
  const open: Array<{ start: number; ambiguous: boolean }> = [{ start: 0, ambiguous: false }];
  /** The atom a following quantifier applies to: its source start, and whether it is an ambiguous group. */
  let last: { start: number; ambiguous: boolean } | undefined;
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i];
    const start = i;
    if (c === '\\') {
      const e = pattern[i + 1] ?? '';
      if (/[1-9]/.test(e) || e === 'k' || e === 'g') return `a back-reference or subexpression call ("${pattern.slice(i, i + 3)}" at ${i})`;
      i += 2;
      if ('pPx'.includes(e) && pattern[i] === '{') {
        const close = pattern.indexOf('}', i);
        i = close < 0 ? pattern.length : close + 1;
      }
      last = { start, ambiguous: false };
      continue;
    }
    if (c === '[') {
      i = classEnd(pattern, i);
      last = { start, ambiguous: false };
      continue;
    }
    if (c === '(') {
      open.push({ start, ambiguous: false });
      i = groupBodyStart(pattern, i);
      last = undefined;
      continue;
    }
    if (c === ')') {
      const group = open.length > 1 ? open.pop()! : { start: 0, ambiguous: false };
      if (group.ambiguous) open[open.length - 1].ambiguous = true;
      i++;
      last = { start: group.start, ambiguous: group.ambiguous };
      continue;
    }
    if (c === '|') {
      open[open.length - 1].ambiguous = true;
      i++;
      last = undefined;
      continue;
    }
    const q = quantifier(pattern, i);
    if (q !== undefined) {
      if (last?.ambiguous && q.max > 1) {
        return `the repeating quantifier "${pattern.slice(i, q.end)}" at ${i} on the group "${clip(pattern.slice(last.start, i), 60)}", whose body can match one text in more than one way (exponential backtracking)`;
      }
      open[open.length - 1].ambiguous = true;
      i = q.end;
      last = undefined;
      continue;
    }
    i++;
    last = { start, ambiguous: false };
  }
  return undefined;
}

/** The index just past the character class that opens at `i` (nested classes and escapes skipped; a leading `]` is literal). */
function classEnd(pattern: string, i: number): number {
  let depth = 0;
  for (let j = i; j < pattern.length; j++) {
    const c = pattern[j];
    if (c === '\\') { j++; continue; }
    if (c === '[') {
      depth++;
      if (pattern[j + 1] === '^') j++;
      if (pattern[j + 1] === ']') j++;
    } else if (c === ']' && --depth === 0) return j + 1;
  }
  return pattern.length;
}

/** The index just past a group's opening: `(`, `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`, `(?i:`, `(?i-m:`. */
function groupBodyStart(pattern: string, open: number): number {
  if (pattern[open + 1] !== '?') return open + 1;
  const m = /^\(\?(?:<[=!]|<[^>]*>|[A-Za-z-]*[:=!]?)/.exec(pattern.slice(open, open + 80));
  return open + (m?.[0].length ?? 2);
}

/** The quantifier at `i` (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`, `{,m}`, each with an optional lazy `?` or possessive `+`), or undefined when `i` holds none. */
function quantifier(pattern: string, i: number): { max: number; end: number } | undefined {
  const c = pattern[i];
  let max: number;
  let end: number;
  if (c === '*' || c === '+') { max = Infinity; end = i + 1; }
  else if (c === '?') { max = 1; end = i + 1; }
  else if (c === '{') {
    const m = /^\{(\d*)(,(\d*))?\}/.exec(pattern.slice(i, i + 40));
    if (m === null || (m[1] === '' && m[3] === undefined) || (m[1] === '' && m[3] === '')) return undefined; // a literal '{'
    max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
    end = i + m[0].length;
  } else return undefined;
  if (pattern[end] === '?' || pattern[end] === '+') end++;
  return { max, end };
}
