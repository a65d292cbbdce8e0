/**
 * Hugging Face tokenizer.json ⇄ FON: reading BPE files into tokenizer parts — the byte-level kind
 * (GPT-2, Llama-3, Qwen2) and the SentencePiece-converted kind with byte fallback (Llama 2,
 * TinyLlama, Mistral v0.x) — and writing FON's own tokenizers in the byte-level format.
 *
 * Read: model BPE (vocab; merges as "a b" strings or [a, b] pairs; unk_token, fuse_unk,
 * ignore_merges, byte_fallback), normalizer null / NFC / NFD / NFKC / NFKD / Prepend / Replace /
 * Sequence of them; byte-level: pre_tokenizer ByteLevel, Split or a Sequence of Splits ending in
 * ByteLevel, decoder ByteLevel; SentencePiece-style: pre_tokenizer null or Metaspace, decoder
 * Replace(▁ → space) / ByteFallback / Fuse / Strip / Metaspace; added_tokens.
 * The post_processor (template tokens such as BOS), truncation and padding are ignored: encoding
 * returns the model's ids only. Anything else is an UnsupportedError naming the component and the
 * file; a missing or ill-typed field is an ArgumentError naming the field.
 */
import { ArgumentError, showValue, UnsupportedError } from '../../errors.ts';
import type { AddedToken } from './added_tokens.ts';
import { BYTE_CHARS } from './byte_level.ts';
import { BpeModel } from './bpe.ts';
import { BpeTokenizer, type TokenizerParts } from './bpe_tokenizer.ts';
import {
  byteLevelStep, compileOnigPattern, escapeRegExp, sequenceSteps, splitStep, SPLIT_BEHAVIORS,
  type PreTokenizeStep, type SplitBehavior,
} from './pretokenize.ts';

export interface LoadTokenizerOptions {
  /** The end-of-text token's content; by default the first of END_OF_TEXT_NAMES present. */
  readonly eosToken?: string;
}

/** Spellings of the end-of-text token, tried in order when none is named. */
export const END_OF_TEXT_NAMES: readonly string[] = ['<|endoftext|>', '<|end_of_text|>', '</s>', '<eos>', '<|eot_id|>'];

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  return `${Array.isArray(v) ? 'an array' : v === null ? 'null' : typeof v} ${showValue(v, 60)}`;
}

/** Typed access to a tokenizer.json with errors that name the file and the field. */
class Fields {
  constructor(readonly source: string) {}

  bad(path: string, value: unknown, expected: string): ArgumentError {
    return new ArgumentError(`${this.source}: field "${path}" is ${describe(value)}; expected ${expected}`);
  }

  unsupported(path: string, value: unknown, supported: string): UnsupportedError {
    return new UnsupportedError(`${this.source}: ${path} ${showValue(value)} is not supported; FON reads ${supported}`);
  }

  object(parent: JsonObject, key: string, path: string): JsonObject {
    const v = parent[key];
    if (!isObject(v)) throw this.bad(path, v, 'an object');
    return v;
  }

  string(parent: JsonObject, key: string, path: string): string {
    const v = parent[key];
    if (typeof v !== 'string') throw this.bad(path, v, 'a string');
    return v;
  }

  bool(parent: JsonObject, key: string, path: string, fallback: boolean): boolean {
    const v = parent[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') throw this.bad(path, v, 'true or false');
    return v;
  }

  type(parent: JsonObject, path: string): string {
    return this.string(parent, 'type', `${path}.type`);
  }
}

function readNormalizer(f: Fields, value: unknown, path: string): ((s: string) => string) | null {
  if (value === null || value === undefined) return null;
  if (!isObject(value)) throw f.bad(path, value, 'null or an object');
  const type = f.type(value, path);
  if (type === 'NFC' || type === 'NFD' || type === 'NFKC' || type === 'NFKD') return (s) => s.normalize(type);
  if (type === 'Prepend') {
    const prefix = f.string(value, 'prepend', `${path}.prepend`);
    return (s) => (s.length === 0 ? s : prefix + s);
  }
  if (type === 'Replace') {
    const re = replacePattern(f, value, path);
    const content = f.string(value, 'content', `${path}.content`);
    return (s) => s.replace(re, () => content);
  }
  if (type === 'Sequence') {
    const list = value.normalizers;
    if (!Array.isArray(list)) throw f.bad(`${path}.normalizers`, list, 'an array');
    const steps = list.map((n, i) => readNormalizer(f, n, `${path}.normalizers[${i}]`)).filter((n): n is (s: string) => string => n !== null);
    return steps.length === 0 ? null : (s) => steps.reduce((t, step) => step(t), s);
  }
  throw f.unsupported(`${path} type`, type, 'null, NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence');
}

/** A Replace step's pattern ({"String": s} or {"Regex": r}) as a global RegExp. */
function replacePattern(f: Fields, value: JsonObject, path: string): RegExp {
  const pattern = f.object(value, 'pattern', `${path}.pattern`);
  if (typeof pattern.String === 'string') return new RegExp(escapeRegExp(pattern.String), 'gu');
  if (typeof pattern.Regex === 'string') return compileOnigPattern(pattern.Regex, `${f.source}: ${path}.pattern`);
  throw f.bad(`${path}.pattern`, pattern, '{"Regex": string} or {"String": string}');
}

/**
 * A Metaspace pre-tokenizer (SentencePiece conversions): spaces become `replacement` (▁), which is
 * put before the text (prepend_scheme "always", or "first": only before the text's start, not after
 * an added token; older files say add_prefix_space) unless it starts with one; with `split` the
 * text is cut before each ▁.
 */
function metaspaceStep(f: Fields, value: JsonObject, path: string): PreTokenizeStep {
  const rep = f.string(value, 'replacement', `${path}.replacement`);
  const scheme = value.prepend_scheme ?? (f.bool(value, 'add_prefix_space', `${path}.add_prefix_space`, true) ? 'always' : 'never');
  if (scheme !== 'always' && scheme !== 'first' && scheme !== 'never') throw f.bad(`${path}.prepend_scheme`, scheme, '"always", "first" or "never"');
  const split = f.bool(value, 'split', `${path}.split`, true);
  return (piece, emit, atStart) => {
    let t = piece.replaceAll(' ', rep);
    if ((scheme === 'always' || (scheme === 'first' && atStart !== false)) && !t.startsWith(rep)) t = rep + t;
    if (!split) { emit(t); return; }
    let from = 0;
    for (let i = t.indexOf(rep, 1); i > 0; i = t.indexOf(rep, i + rep.length)) { emit(t.slice(from, i)); from = i; }
    emit(t.slice(from));
  };
}

function readPreTokenizer(f: Fields, value: unknown, path: string, symbols: 'bytes' | 'chars'): PreTokenizeStep {
  if (symbols === 'chars') {
    // SentencePiece conversions: no pre-tokenizer (the normalizer did the ▁ work), or Metaspace.
    if (value === null || value === undefined) return (piece, emit) => emit(piece);
    if (!isObject(value)) throw f.bad(path, value, 'null or an object');
    const type = f.type(value, path);
    if (type === 'Metaspace') return metaspaceStep(f, value, path);
    throw f.unsupported(`${path} type`, type, 'null or Metaspace with a SentencePiece-style decoder');
  }
  const supported = 'ByteLevel, or a Sequence of Split pre-tokenizers ending in ByteLevel';
  if (!isObject(value)) {
    if (value === null || value === undefined) throw f.unsupported(path, null, supported);
    throw f.bad(path, value, 'an object');
  }
  const isSequence = f.type(value, path) === 'Sequence';
  const list = isSequence ? value.pretokenizers : [value];
  if (!Array.isArray(list)) throw f.bad(`${path}.pretokenizers`, list, 'an array');
  const steps: PreTokenizeStep[] = [];
  list.forEach((item, i) => {
    const at = isSequence ? `${path}.pretokenizers[${i}]` : path;
    if (!isObject(item)) throw f.bad(at, item, 'an object');
    const type = f.type(item, at);
    const last = i === list.length - 1;
    if (type === 'ByteLevel') {
      if (!last) throw new UnsupportedError(`${f.source}: ${at} is a ByteLevel step before the end of the sequence; FON reads ${supported}`);
      steps.push(byteLevelStep(f.bool(item, 'add_prefix_space', `${at}.add_prefix_space`, true), f.bool(item, 'use_regex', `${at}.use_regex`, true)));
    } else if (type === 'Split') {
      if (last) throw new UnsupportedError(`${f.source}: ${path} ends with a Split step, not ByteLevel; FON reads ${supported}`);
      const pattern = f.object(item, 'pattern', `${at}.pattern`);
      let re: RegExp;
      if (typeof pattern.Regex === 'string') re = compileOnigPattern(pattern.Regex, `${f.source}: ${at}.pattern`);
      else if (typeof pattern.String === 'string') re = new RegExp(escapeRegExp(pattern.String), 'gu');
      else throw f.bad(`${at}.pattern`, pattern, '{"Regex": string} or {"String": string}');
      const behavior = f.string(item, 'behavior', `${at}.behavior`);
      if (!(SPLIT_BEHAVIORS as readonly string[]).includes(behavior)) throw f.unsupported(`${at}.behavior`, behavior, SPLIT_BEHAVIORS.join(', '));
      steps.push(splitStep(re, behavior as SplitBehavior, f.bool(item, 'invert', `${at}.invert`, false)));
    } else throw f.unsupported(`${at} type`, type, supported);
  });
  if (steps.length === 0) throw new UnsupportedError(`${f.source}: ${path} is an empty Sequence; FON reads ${supported}`);
  return sequenceSteps(steps);
}

/** What the decoder says: byte-level tokens, or SentencePiece's (▁ as a space, <0xXX> bytes) and whether the text's first space goes. */
type DecoderKind = { symbols: 'bytes' } | { symbols: 'chars'; stripFirstSpace: boolean };

const SP_DECODERS = 'ByteLevel, or a Sequence of Replace("▁" → " "), ByteFallback, Fuse, Strip(" ", 1, 0) and Metaspace (SentencePiece conversions)';

function readDecoder(f: Fields, value: unknown): DecoderKind {
  if (value === null || value === undefined) throw f.unsupported('decoder', null, SP_DECODERS);
  if (!isObject(value)) throw f.bad('decoder', value, 'an object');
  const type = f.type(value, 'decoder');
  if (type === 'ByteLevel') return { symbols: 'bytes' };
  const list = type === 'Sequence' ? value.decoders : [value];
  if (!Array.isArray(list)) throw f.bad('decoder.decoders', list, 'an array');
  let strip = false, spaces = false;
  list.forEach((d, i) => {
    const at = type === 'Sequence' ? `decoder.decoders[${i}]` : 'decoder';
    if (!isObject(d)) throw f.bad(at, d, 'an object');
    const t = f.type(d, at);
    if (t === 'ByteFallback' || t === 'Fuse') return;
    if (t === 'Replace') {
      const p = f.object(d, 'pattern', `${at}.pattern`);
      if (p.String !== '\u2581' || d.content !== ' ') throw f.unsupported(at, d, SP_DECODERS);
      spaces = true;
      return;
    }
    if (t === 'Strip') {
      if (d.content !== ' ' || d.start !== 1 || d.stop !== 0) throw f.unsupported(at, d, SP_DECODERS);
      strip = true;
      return;
    }
    if (t === 'Metaspace') {
      if (d.replacement !== '\u2581') throw f.unsupported(`${at}.replacement`, d.replacement, '"▁"');
      const scheme = d.prepend_scheme ?? (d.add_prefix_space === false ? 'never' : 'always');
      spaces = true;
      if (scheme !== 'never') strip = true;
      return;
    }
    throw f.unsupported(`${at} type`, t, SP_DECODERS);
  });
  if (!spaces) throw f.unsupported('decoder', value, SP_DECODERS);
  return { symbols: 'chars', stripFirstSpace: strip };
}

const POST_PROCESSORS = ['ByteLevel', 'TemplateProcessing', 'RobertaProcessing', 'BertProcessing', 'Sequence'];

function readModel(f: Fields, root: JsonObject, symbols: 'bytes' | 'chars'): BpeModel {
  const model = f.object(root, 'model', 'model');
  const type = model.type ?? 'BPE';
  if (type !== 'BPE') throw f.unsupported('model type', type, 'BPE');
  const vocabJson = f.object(model, 'vocab', 'model.vocab');
  const vocab = new Map<string, number>();
  for (const [token, id] of Object.entries(vocabJson)) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) throw f.bad(`model.vocab[${showValue(token)}]`, id, 'a non-negative integer id');
    vocab.set(token, id);
  }
  if (vocab.size === 0) throw f.bad('model.vocab', vocabJson, 'at least one token (a byte-level vocabulary holds the byte characters)');
  const mergesJson = model.merges;
  if (!Array.isArray(mergesJson)) throw f.bad('model.merges', mergesJson, 'an array of "a b" strings or [a, b] pairs');
  const merges = mergesJson.map((m, i): [string, string] => {
    if (typeof m === 'string') {
      const parts = m.split(' ');
      if (parts.length === 2) return [parts[0], parts[1]];
    } else if (Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string') return [m[0], m[1]];
    throw f.bad(`model.merges[${i}]`, m, 'a string "a b" with one space, or a pair [a, b] of strings');
  });
  const dropout = model.dropout;
  if (dropout !== undefined && dropout !== null && dropout !== 0) throw f.unsupported('model.dropout', dropout, 'null or 0 (BPE dropout is random)');
  if (model.byte_fallback === true && symbols === 'bytes') throw f.unsupported('model.byte_fallback', true, 'false with a ByteLevel decoder (byte-level BPE has every byte in its vocabulary)');
  for (const key of ['continuing_subword_prefix', 'end_of_word_suffix']) {
    const v = model[key];
    if (v !== undefined && v !== null && v !== '') throw f.unsupported(`model.${key}`, v, 'null or "" (FON\'s BPE has no word markers)');
  }
  const unk = model.unk_token;
  if (unk !== undefined && unk !== null && typeof unk !== 'string') throw f.bad('model.unk_token', unk, 'null or a string');
  return new BpeModel({
    vocab, merges,
    unkToken: typeof unk === 'string' ? unk : null,
    fuseUnk: f.bool(model, 'fuse_unk', 'model.fuse_unk', false),
    ignoreMerges: f.bool(model, 'ignore_merges', 'model.ignore_merges', false),
    symbols,
    byteFallback: f.bool(model, 'byte_fallback', 'model.byte_fallback', false),
  }, f.source);
}

/**
 * The added tokens with the ids Hugging Face gives them. `tokenizers` does not take the ids written
 * in the file: it adds the tokens again in file order (serialization.rs, AddedVocabulary::add_tokens),
 * so a token whose content is in model.vocab (or was added before) keeps that id, and each new
 * content takes the next id from the model vocabulary's size (its number of entries) up. For
 * files written by `tokenizers` the two agree; where a file disagrees (a vocabulary with gaps, hand
 * edits) this rule gives the ids `tokenizers` encodes with. Empty contents are skipped, and a
 * content listed twice keeps its first id, the flags of its last entry, and is special if any
 * entry was.
 */
function readAddedTokens(f: Fields, value: unknown, model: BpeModel): AddedToken[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw f.bad('added_tokens', value, 'an array');
  const byContent = new Map<string, AddedToken>();
  let nextId = model.vocab.size;
  value.forEach((t, i) => {
    const at = `added_tokens[${i}]`;
    if (!isObject(t)) throw f.bad(at, t, 'an object');
    const content = f.string(t, 'content', `${at}.content`);
    const id = t.id;
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) throw f.bad(`${at}.id`, id, 'a non-negative integer');
    const special = f.bool(t, 'special', `${at}.special`, false);
    const token = {
      content,
      singleWord: f.bool(t, 'single_word', `${at}.single_word`, false),
      lstrip: f.bool(t, 'lstrip', `${at}.lstrip`, false),
      rstrip: f.bool(t, 'rstrip', `${at}.rstrip`, false),
      normalized: f.bool(t, 'normalized', `${at}.normalized`, !special),
    };
    if (content.length === 0) return;
    const previous = byContent.get(content);
    const assigned = previous?.id ?? model.vocab.get(content) ?? nextId++;
    byContent.set(content, { ...token, id: assigned, special: special || previous?.special === true });
  });
  return [...byContent.values()];
}

/**
 * The ids a post-processor puts before a single text when special tokens are added (Hugging Face
 * `encode(text)`, add_special_tokens on): the SpecialToken entries of a TemplateProcessing's
 * `single` template before its sequence (Llama 3's <|begin_of_text|>), the `cls` token of
 * RobertaProcessing / BertProcessing, none for ByteLevel; a Sequence joins its processors'. FON's
 * own encode never adds them; generation puts them before a Hugging Face model's prompt.
 */
function readPostProcessor(f: Fields, post: unknown, path: string, idOf: (content: string) => number | undefined): number[] {
  if (post === undefined || post === null) return [];
  if (!isObject(post)) throw f.bad(path, post, 'null or an object');
  const type = f.type(post, path);
  if (!POST_PROCESSORS.includes(type)) throw f.unsupported(`${path} type`, type, POST_PROCESSORS.join(', '));
  if (type === 'Sequence') {
    if (!Array.isArray(post.processors)) throw f.bad(`${path}.processors`, post.processors, 'an array');
    return post.processors.flatMap((p, i) => readPostProcessor(f, p, `${path}.processors[${i}]`, idOf));
  }
  if (type === 'RobertaProcessing' || type === 'BertProcessing') {
    const cls = post.cls;
    if (!Array.isArray(cls) || !Number.isInteger(cls[1])) throw f.bad(`${path}.cls`, cls, 'a [token, id] pair');
    return [cls[1] as number];
  }
  if (type !== 'TemplateProcessing') return [];
  const single = post.single;
  if (!Array.isArray(single)) throw f.bad(`${path}.single`, single, 'an array of template pieces');
  const specials = isObject(post.special_tokens) ? post.special_tokens : {};
  const ids: number[] = [];
  for (const [i, piece] of single.entries()) {
    if (!isObject(piece)) throw f.bad(`${path}.single[${i}]`, piece, 'an object');
    if (isObject(piece.Sequence)) break;
    const sp = piece.SpecialToken;
    if (!isObject(sp) || typeof sp.id !== 'string') throw f.bad(`${path}.single[${i}]`, piece, '{"Sequence": …} or {"SpecialToken": {"id": …}}');
    const entry = specials[sp.id];
    const listed = isObject(entry) && Array.isArray(entry.ids) && entry.ids.every((x) => Number.isInteger(x)) ? (entry.ids as number[]) : null;
    const own = idOf(sp.id);
    if (listed === null && own === undefined) throw f.bad(`${path}.single[${i}].SpecialToken.id`, sp.id, 'a token of the vocabulary or of special_tokens');
    ids.push(...(listed ?? [own!]));
  }
  return ids;
}

/** Reads a parsed tokenizer.json into a tokenizer; `source` (a path or a name) goes into error messages. */
export function tokenizerFromJson(json: unknown, source = 'tokenizer.json', opts: LoadTokenizerOptions = {}): BpeTokenizer {
  const f = new Fields(source);
  if (!isObject(json)) throw new ArgumentError(`${source}: a tokenizer.json must hold a JSON object, got ${describe(json)}`);
  const modelType = f.object(json, 'model', 'model').type ?? 'BPE';
  if (modelType !== 'BPE') throw f.unsupported('model type', modelType, 'BPE'); // before the decoder: the model is what FON reads first
  const decoder = readDecoder(f, json.decoder);
  const model = readModel(f, json, decoder.symbols);
  const normalize = readNormalizer(f, json.normalizer, 'normalizer');
  const preTokenize = readPreTokenizer(f, json.pre_tokenizer, 'pre_tokenizer', decoder.symbols);
  const addedTokens = readAddedTokens(f, json.added_tokens, model);
  const idOf = (content: string) => addedTokens.find((t) => t.content === content)?.id ?? model.vocab.get(content);
  const prefixIds = readPostProcessor(f, json.post_processor, 'post_processor', idOf);
  let eosId: number | undefined;
  if (opts.eosToken !== undefined) {
    eosId = idOf(opts.eosToken);
    if (eosId === undefined) throw new ArgumentError(`${source}: eosToken ${showValue(opts.eosToken)} is neither an added token nor in model.vocab`);
  } else {
    for (const name of END_OF_TEXT_NAMES) if ((eosId = idOf(name)) !== undefined) break;
    if (eosId === undefined) throw new ArgumentError(`${source}: no end-of-text token found (looked for ${END_OF_TEXT_NAMES.join(', ')}); pass { eosToken } to name it`);
  }
  const parts: TokenizerParts = { json: structuredClone(json), normalize, addedTokens, preTokenize, model, eosId, prefixIds, symbols: decoder.symbols, stripFirstSpace: decoder.symbols === 'chars' && decoder.stripFirstSpace };
  const tokenizer = new BpeTokenizer(parts);
  for (const id of prefixIds) {
    if (tokenizer.idToToken(id) === undefined) throw new ArgumentError(`${source}: post_processor puts the id ${id} before every text, but no token of model.vocab or added_tokens has that id (the vocabulary holds ${tokenizer.vocabSize} ids)`);
  }
  return tokenizer;
}

/**
 * A tokenizer.json for one of FON's own byte-level BPE tokenizers: `tokens` by id (the byte-level
 * spelling; ids 0..255 are the byte values), `merges` in rank order, then `specialTokens` as added
 * tokens with the ids that follow. The special tokens are not in `model.vocab`, as in Llama-3 and
 * Qwen2 files; Hugging Face gives them the same ids, the ones right after the model's.
 */
export function byteLevelBpeJson(tokens: readonly string[], merges: ReadonlyArray<readonly [string, string]>, specialTokens: readonly string[]): object {
  for (let b = 0; b < 256; b++) if (tokens[b] !== BYTE_CHARS[b]) throw new ArgumentError(`byteLevelBpeJson: token ${b} must be the byte character ${JSON.stringify(BYTE_CHARS[b])}, got ${JSON.stringify(tokens[b])}`);
  const vocab: Record<string, number> = {};
  tokens.forEach((t, id) => { vocab[t] = id; });
  for (const s of specialTokens) if (Object.hasOwn(vocab, s)) throw new ArgumentError(`special token ${JSON.stringify(s)} is also a token of the BPE vocabulary; choose another spelling`);
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specialTokens.map((content, i) => ({
      id: tokens.length + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}
