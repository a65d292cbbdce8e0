/**
 * The tokenizer of a Hugging Face folder: tokenizer.json, with the end-of-text token that
 * tokenizer_config.json names as `eos_token` (a string, or an object with `content` as older files
 * write it) when that token is in the tokenizer; otherwise the loader's default (the first of
 * END_OF_TEXT_NAMES present).
 */
import { tokenizerConfigOptions } from '../tokenizer/hf_config.ts';
import { loadTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The eos token tokenizer_config.json names (tokenizerConfigOptions reads the field), if it is a
 * token of `tokenizerJson`; a config without one, or absent, gives undefined.
 */
export function hfEosToken(tokenizerJson: unknown, tokenizerConfig: unknown, source = 'tokenizer_config.json'): string | undefined {
  if (tokenizerConfig === undefined || !isObject(tokenizerJson)) return undefined;
  const name = tokenizerConfigOptions(tokenizerConfig, source).eosToken;
  if (name === undefined) return undefined;
  const added = Array.isArray(tokenizerJson.added_tokens) && tokenizerJson.added_tokens.some((t) => isObject(t) && t.content === name);
  const model = tokenizerJson.model;
  const inVocab = isObject(model) && isObject(model.vocab) && Object.hasOwn(model.vocab, name);
  return added || inVocab ? name : undefined;
}

/** A tokenizer from parsed tokenizer.json and (optional) tokenizer_config.json; `source` names the first. */
export function hfTokenizer(tokenizerJson: unknown, tokenizerConfig: unknown, source = 'tokenizer.json'): Tokenizer {
  const eosToken = hfEosToken(tokenizerJson, tokenizerConfig, source.replace(/tokenizer\.json$/, 'tokenizer_config.json'));
  return loadTokenizer(tokenizerJson, source, eosToken === undefined ? undefined : { eosToken });
}
