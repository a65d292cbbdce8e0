/**
 * FON's tokenizers: byte-level BPE in the Hugging Face tokenizer.json format.
 *   - `byteTokenizer()`: ids 0..255 are the bytes, 256 is <|endoftext|>;
 *   - `trainBpe(docs, vocabSize)`: learns merges on the documents (bpe_train.ts);
 *   - `loadTokenizer(json)`: reads a GPT-2, Llama-3 or Qwen2 style tokenizer.json (hf_json.ts).
 * All three are the same class, built from a tokenizer.json object, so `toJSON()` of any of them
 * loads back into a tokenizer that gives the same ids. For FON's own tokenizers, ids 0..255 are
 * the byte values, learned tokens follow, special tokens come last, and
 * `decode(encode(s)) === s` for every well-formed string s (a lone surrogate cannot be written in
 * UTF-8 and comes back as U+FFFD).
 */
import { ArgumentError } from '../../errors.ts';
import { BYTE_CHARS } from './byte_level.ts';
import { countWords, learnBpe } from './bpe_train.ts';
import { byteLevelBpeJson, tokenizerFromJson, type LoadTokenizerOptions } from './hf_json.ts';
import { parseJson } from '../json.ts';

export type { LoadTokenizerOptions } from './hf_json.ts';

export interface EncodeOptions {
  /**
   * Recognise special tokens (such as "<|endoftext|>") written in the text. Off by default: user
   * text can never inject a separator; its spelling is encoded as ordinary bytes.
   */
  readonly allowSpecial?: boolean;
}

export interface StreamDecoder {
  /** Adds one id; returns the text completed by it (incomplete UTF-8 sequences are held back). */
  push(id: number): string;
  /** Ends the stream: returns what was held back (as U+FFFD if it never completed). */
  flush(): string;
}

export interface Tokenizer {
  /** One past the largest id. */
  readonly vocabSize: number;
  /** The end-of-text / document separator id (e.g. <|endoftext|>). */
  readonly eosId: number;
  /**
   * Ids a Hugging Face tokenizer.json's post-processor puts before a text (Llama 3's
   * <|begin_of_text|>; none for GPT-2, Qwen and FON's own tokenizers). `encode` never adds them.
   */
  readonly prefixIds: readonly number[];
  /** Text → ids; special tokens in the text are plain text unless `opts.allowSpecial`. */
  encode(text: string, opts?: EncodeOptions): number[];
  /** Ids → text; an unknown id is an ArgumentError. */
  decode(ids: readonly number[]): string;
  /**
   * Streaming decoder: push ids one by one, get the text completed so far (holds back incomplete
   * UTF-8 sequences). `continuation`: the ids go on from earlier text (generation after a prompt),
   * so a decoder that drops the text's first space (SentencePiece's) keeps it.
   */
  streamDecoder(opts?: { continuation?: boolean }): StreamDecoder;
  /** The id of a token given by its vocabulary spelling (or an added token's content). */
  tokenToId(token: string): number | undefined;
  /** The vocabulary spelling of an id (an added token's content for added tokens). */
  idToToken(id: number): string | undefined;
  /** The Hugging Face tokenizer.json object. */
  toJSON(): object;
}

export const END_OF_TEXT = '<|endoftext|>';

/** Bytes as tokens: ids 0..255 are byte values, 256 is <|endoftext|>; vocabSize 257. A BPE with no merges. */
export function byteTokenizer(): Tokenizer {
  return tokenizerFromJson(byteLevelBpeJson(BYTE_CHARS, [], [END_OF_TEXT]), 'byteTokenizer()');
}

export interface TrainBpeOptions {
  /** Added after <|endoftext|> (which is always the first special token, the eos). */
  readonly specialTokens?: readonly string[];
  /** Called as merges are learned: (new tokens so far, new tokens wanted). */
  readonly onProgress?: (done: number, total: number) => void;
}

/**
 * Trains a byte-level BPE of `vocabSize` ids in all: 256 bytes, learned tokens, then the special
 * tokens. When the documents run out of pairs to merge first, the vocabulary is smaller.
 */
export function trainBpe(docs: Iterable<string>, vocabSize: number, opts: TrainBpeOptions = {}): Tokenizer {
  const specials = [END_OF_TEXT, ...(opts.specialTokens ?? []).filter((s) => s !== END_OF_TEXT)];
  if (new Set(specials).size !== specials.length) throw new ArgumentError(`trainBpe: specialTokens ${JSON.stringify(opts.specialTokens)} holds a token twice`);
  const empty = specials.find((s) => s.length === 0);
  if (empty !== undefined) throw new ArgumentError('trainBpe: a special token is the empty string');
  if (!Number.isInteger(vocabSize) || vocabSize < 256 + specials.length) {
    throw new ArgumentError(`trainBpe: vocabSize ${vocabSize} must be an integer of at least ${256 + specials.length} (256 bytes + ${specials.length} special tokens)`);
  }
  const learned = learnBpe(countWords(docs), vocabSize - specials.length, opts.onProgress);
  return tokenizerFromJson(byteLevelBpeJson(learned.tokens, learned.merges, specials), 'trainBpe()');
}

/** A tokenizer from a parsed tokenizer.json; `source` names it in error messages. */
export function loadTokenizer(json: unknown, source?: string, opts?: LoadTokenizerOptions): Tokenizer {
  return tokenizerFromJson(json, source, opts);
}

/** A tokenizer from the text of a tokenizer.json; invalid JSON is an ArgumentError naming `source`. */
export function parseTokenizer(text: string, source = 'tokenizer.json', opts?: LoadTokenizerOptions): Tokenizer {
  const json = parseJson(text, (why) => new ArgumentError(`${source}: ${why}`));
  return tokenizerFromJson(json, source, opts);
}
