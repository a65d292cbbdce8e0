/**
 * The sampling flags `fon generate` and `fon chat` share (--max-tokens, --temperature, --top-k,
 * --top-p, --repetition-penalty, --seed) and their defaults: FON's, or those a Hugging Face
 * folder's generation_config.json implies in transformers; a Hugging Face model also takes its
 * tokenizer's prefix ids, its eos ids and special tokens in the prompt.
 */
import type { LoadedModel } from '../io/model_checkpoint.ts';
import type { GenerateOptions } from '../infer/generate.ts';
import { folderDefaults } from '../infer/language_model.ts';
import { numberFlag, UsageError } from './args.ts';

/** parseArgs options of the sampling flags. */
export const SAMPLING_FLAGS = {
  'max-tokens': { type: 'string' }, temperature: { type: 'string' }, 'top-k': { type: 'string' }, 'top-p': { type: 'string' },
  'repetition-penalty': { type: 'string' }, seed: { type: 'string' },
} as const;

function topP(command: string, value: string | undefined, fallback: number): number {
  const p = numberFlag(command, 'top-p', value, fallback, { max: 1 });
  if (!(p > 0)) throw new UsageError(`${command}: --top-p ${JSON.stringify(value)}: expected a number in (0, 1]`);
  return p;
}

/** The generate options for `loaded` (its folder's defaults) as the sampling flags `v` override them. */
export function samplingOptions(command: string, v: Partial<Record<keyof typeof SAMPLING_FLAGS, string>>, loaded: LoadedModel): GenerateOptions {
  const d = folderDefaults(loaded);
  return {
    ...d,
    maxTokens: numberFlag(command, 'max-tokens', v['max-tokens'], d.maxTokens, { integer: true, min: 1 }),
    temperature: numberFlag(command, 'temperature', v.temperature, d.temperature, { min: 0 }),
    topK: numberFlag(command, 'top-k', v['top-k'], d.topK, { integer: true, min: 0 }),
    topP: topP(command, v['top-p'], d.topP),
    repetitionPenalty: numberFlag(command, 'repetition-penalty', v['repetition-penalty'], d.repetitionPenalty, {}),
    seed: numberFlag(command, 'seed', v.seed, 0, { integer: true, min: 0 }),
  };
}
