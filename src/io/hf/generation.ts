/**
 * Sampling defaults from a Hugging Face generation_config.json: the knobs FON's sampler has
 * (do_sample, temperature, top_k, top_p, repetition_penalty, max_new_tokens, eos_token_id). The
 * file's other keys (beam search, length penalties, bookkeeping) are not sampling settings FON
 * has and are left out; a known key of the wrong type is a ConfigError naming it.
 */
import { showValue } from '../../errors.ts';
import { ConfigError } from '../../model/config.ts';

export interface HfGenerationDefaults {
  doSample?: boolean;
  temperature?: number;
  topK?: number;
  topP?: number;
  repetitionPenalty?: number;
  maxNewTokens?: number;
  /** Ids that end generation, those inside the vocabulary only (configs copied from a larger model name ids beyond it). */
  eosTokenIds?: number[];
}

/** The defaults in a parsed generation_config.json; `vocabSize` bounds the stop ids; `where` names the file. */
export function parseGenerationConfig(json: unknown, vocabSize: number, where = 'generation_config.json'): HfGenerationDefaults {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new ConfigError(`${where}: expected a JSON object, got ${showValue(json, 80)}`);
  const o = json as Record<string, unknown>;
  const out: HfGenerationDefaults = {};
  const field = (key: string, ok: (v: unknown) => boolean, expected: string): unknown => {
    const v = o[key];
    if (v === undefined || v === null) return undefined;
    if (!ok(v)) throw new ConfigError(`${where}: '${key}' = ${showValue(v)}: expected ${expected}`);
    return v;
  };
  const num = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
  const int = (v: unknown): v is number => Number.isInteger(v);
  const doSample = field('do_sample', (v) => typeof v === 'boolean', 'true or false');
  if (doSample !== undefined) out.doSample = doSample as boolean;
  const temperature = field('temperature', (v) => num(v) && v >= 0, 'a number ≥ 0');
  if (temperature !== undefined) out.temperature = temperature as number;
  const topK = field('top_k', (v) => int(v) && v >= 0, 'an integer ≥ 0');
  if (topK !== undefined) out.topK = topK as number;
  const topP = field('top_p', (v) => num(v) && v > 0 && v <= 1, 'a number in (0, 1]');
  if (topP !== undefined) out.topP = topP as number;
  const penalty = field('repetition_penalty', (v) => num(v) && v > 0, 'a number > 0');
  if (penalty !== undefined) out.repetitionPenalty = penalty as number;
  const maxNew = field('max_new_tokens', (v) => int(v) && v >= 1, 'an integer ≥ 1');
  if (maxNew !== undefined) out.maxNewTokens = maxNew as number;
  const eos = field('eos_token_id', (v) => int(v) || (Array.isArray(v) && v.every(int)), 'a token id or a list of them');
  if (eos !== undefined) {
    const ids = (Array.isArray(eos) ? eos : [eos]) as number[];
    const inside = [...new Set(ids.filter((id) => id >= 0 && id < vocabSize))];
    if (inside.length) out.eosTokenIds = inside;
  }
  return out;
}
