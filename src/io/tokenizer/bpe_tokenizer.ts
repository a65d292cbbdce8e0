/**
 * A BPE tokenizer (byte-level, or SentencePiece-style with byte fallback) assembled from the parts
 * of a Hugging Face tokenizer.json, run in Hugging Face's order: added tokens are cut out of the raw text, the rest is normalized, added
 * tokens marked `normalized` are cut out of that, the remaining pieces are pre-tokenized into
 * words, and each word goes through the BPE model.
 */
import { ArgumentError } from '../../errors.ts';
import { AddedTokenMatcher, type AddedToken } from './added_tokens.ts';
import { byteLevelToBytes } from './byte_level.ts';
import type { BpeModel } from './bpe.ts';
import type { PreTokenizeStep } from './pretokenize.ts';
import type { EncodeOptions, StreamDecoder, Tokenizer } from './tokenizer.ts';

/** What `hf_json.ts` reads out of a tokenizer.json. */
export interface TokenizerParts {
  /** The tokenizer.json object itself, returned (copied) by `toJSON`. */
  readonly json: object;
  /** The normalizer, or null for none. */
  readonly normalize: ((text: string) => string) | null;
  readonly addedTokens: readonly AddedToken[];
  readonly preTokenize: PreTokenizeStep;
  readonly model: BpeModel;
  readonly eosId: number;
  /** Ids the post-processor puts before a text (hf_json.ts readPostProcessor). */
  readonly prefixIds: readonly number[];
  /** 'bytes': byte-level tokens; 'chars': SentencePiece-style (▁ for a space, <0xXX> byte pieces). Default 'bytes'. */
  readonly symbols?: 'bytes' | 'chars';
  /** Decoding drops the space the first token begins with (the ▁ SentencePiece put before the text). */
  readonly stripFirstSpace?: boolean;
}

export class BpeTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly eosId: number;
  readonly prefixIds: readonly number[];
  private readonly parts: TokenizerParts;
  private readonly addedById = new Map<number, AddedToken>();
  private readonly addedByContent = new Map<string, AddedToken>();
  /** Matchers indexed by [normalized ? 1 : 0][allowSpecial ? 1 : 0]; null where no token applies. */
  private readonly matchers: Array<Array<AddedTokenMatcher | null>>;
  private readonly addedBytes = new Map<number, Uint8Array>();

  constructor(parts: TokenizerParts) {
    this.parts = parts;
    this.eosId = parts.eosId;
    this.prefixIds = parts.prefixIds;
    let size = parts.model.tokens.length;
    for (const t of parts.addedTokens) {
      if (!this.addedById.has(t.id)) this.addedById.set(t.id, t);
      if (!this.addedByContent.has(t.content)) this.addedByContent.set(t.content, t);
      size = Math.max(size, t.id + 1);
    }
    this.vocabSize = size;
    const build = (normalized: boolean, allowSpecial: boolean) => {
      const chosen = parts.addedTokens.filter((t) => t.normalized === normalized && (allowSpecial || !t.special) && t.content.length > 0);
      if (chosen.length === 0) return null;
      const contents = chosen.map((t) => (normalized && parts.normalize ? parts.normalize(t.content) : t.content));
      return new AddedTokenMatcher(chosen, contents);
    };
    this.matchers = [[build(false, false), build(false, true)], [build(true, false), build(true, true)]];
  }

  /**
   * Text → ids. By default special tokens (added tokens marked `special`, such as "<|endoftext|>")
   * are NOT recognised in the text: their spelling is encoded as ordinary bytes, so user text can
   * never inject a document separator or a chat marker. `{ allowSpecial: true }` recognises them,
   * which is what Hugging Face `tokenizers` does by default. Non-special added tokens are always
   * recognised. No template tokens (BOS and the like from the post-processor) are added: the ids
   * equal Hugging Face's `encode(text, add_special_tokens=False)`.
   */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    const out: number[] = [];
    const allow = opts.allowSpecial === true ? 1 : 0;
    const rawMatcher = this.matchers[0][allow];
    const normalizedMatcher = this.matchers[1][allow];
    const { model, normalize, preTokenize } = this.parts;
    const encodeWord = (word: string) => model.encodeWord(word, out);
    // Whether the piece at hand begins the text (nothing, not even an added token, came before it).
    let atStart = true;
    const emitId = (id: number) => { out.push(id); atStart = false; };
    const preTokenized = (piece: string) => { preTokenize(piece, encodeWord, atStart); atStart = false; };
    const plain = (piece: string) => {
      const text = normalize ? normalize(piece) : piece;
      if (text.length === 0) return;
      if (normalizedMatcher) normalizedMatcher.split(text, preTokenized, emitId);
      else preTokenized(text);
    };
    if (text.length === 0) return out;
    if (rawMatcher) rawMatcher.split(text, plain, emitId);
    else plain(text);
    return out;
  }

  /**
   * Ids → text: the bytes of every token (added tokens included, as Hugging Face's ByteLevel
   * decoder treats them; SentencePiece-style: ▁ a space, <0xXX> a byte, the first space dropped
   * where the decoder strips it), decoded as UTF-8 with U+FFFD for invalid sequences. Unlike Hugging Face,
   * which skips unknown ids, an id outside the vocabulary is an ArgumentError.
   */
  decode(ids: readonly number[]): string {
    const pieces: Uint8Array[] = [];
    let length = 0;
    ids.forEach((id, i) => { const bytes = this.bytesOf(id, i); pieces.push(bytes); length += bytes.length; });
    if (this.parts.stripFirstSpace && pieces.length && pieces[0][0] === 0x20) { length--; pieces[0] = pieces[0].subarray(1); }
    const all = new Uint8Array(length);
    let at = 0;
    for (const p of pieces) { all.set(p, at); at += p.length; }
    return new TextDecoder('utf-8', { ignoreBOM: true }).decode(all);
  }

  /** Decodes id by id; `push` holds back the bytes of a character not yet complete, `flush` ends the stream. */
  streamDecoder(opts: { continuation?: boolean } = {}): StreamDecoder {
    const utf8 = new TextDecoder('utf-8', { ignoreBOM: true });
    const strip = this.parts.stripFirstSpace === true && opts.continuation !== true;
    let count = 0;
    return {
      push: (id: number) => {
        const bytes = this.bytesOf(id, count);
        return utf8.decode(count++ === 0 && strip && bytes[0] === 0x20 ? bytes.subarray(1) : bytes, { stream: true });
      },
      flush: () => { count = 0; return utf8.decode(); },
    };
  }

  tokenToId(token: string): number | undefined {
    return this.addedByContent.get(token)?.id ?? this.parts.model.vocab.get(token);
  }

  idToToken(id: number): string | undefined {
    return this.addedById.get(id)?.content ?? (Number.isInteger(id) && id >= 0 ? this.parts.model.tokens[id] : undefined);
  }

  toJSON(): object {
    return structuredClone(this.parts.json);
  }

  private bytesOf(id: number, position: number): Uint8Array {
    const added = this.addedById.get(id);
    if (added !== undefined) {
      let bytes = this.addedBytes.get(id);
      if (bytes === undefined) { bytes = this.parts.symbols === 'chars' ? new TextEncoder().encode(added.content) : byteLevelToBytes(added.content); this.addedBytes.set(id, bytes); }
      return bytes;
    }
    const bytes = this.parts.model.tokenBytes(id);
    if (bytes === undefined) throw new ArgumentError(`decode: id ${id} at position ${position} is not a token id of this tokenizer (vocabulary size ${this.vocabSize})`);
    return bytes;
  }
}
