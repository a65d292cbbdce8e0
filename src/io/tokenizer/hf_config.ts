/**
 * Hugging Face tokenizer_config.json: the part a byte-level BPE loader needs, the end-of-text
 * token. `transformers` writes `eos_token` either as the token's content ("<|im_end|>") or, in
 * older files, as an AddedToken object ({"content": "<|im_end|>", ...}); null or absent means the
 * file names none. Qwen2-style files name <|im_end|> although <|endoftext|> is also present, so
 * the config, when there is one, says which id ends a turn.
 */
import { ArgumentError, showValue } from '../../errors.ts';
import type { LoadTokenizerOptions } from './hf_json.ts';

/** The loader options a parsed tokenizer_config.json implies; `source` names the file in errors. */
export function tokenizerConfigOptions(json: unknown, source = 'tokenizer_config.json'): LoadTokenizerOptions {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new ArgumentError(`${source}: a tokenizer_config.json must hold a JSON object, got ${Array.isArray(json) ? 'an array' : String(json)}`);
  }
  const eos = (json as Record<string, unknown>).eos_token;
  if (eos === undefined || eos === null) return {};
  if (typeof eos === 'string') return eos.length > 0 ? { eosToken: eos } : {};
  if (typeof eos === 'object' && !Array.isArray(eos) && typeof (eos as Record<string, unknown>).content === 'string') {
    const content = (eos as Record<string, unknown>).content as string;
    return content.length > 0 ? { eosToken: content } : {};
  }
  throw new ArgumentError(`${source}: field "eos_token" is ${showValue(eos)}; expected a string, an object with a string "content", or null`);
}
