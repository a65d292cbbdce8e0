/** `fon generate`: load a checkpoint, stream a continuation of the prompt to stdout. */
import { loadModel } from '../io/model_checkpoint.ts';
import { generate } from '../infer/generate.ts';
import { numberFlag, parseFlags, requireFlag, UsageError } from './args.ts';
import { backendFromFlag } from './backend_flag.ts';

export const GENERATE_USAGE = `usage: fon generate --model DIR --prompt TEXT [options]

Streams a continuation of TEXT from the checkpoint in DIR (an output directory of fon train, or
one of its step-N directories).

options:
  --max-tokens N     tokens to generate at most (default 200)
  --temperature T    0 = greedy (default 0.8)
  --top-k K          keep the K most likely tokens (default 0 = off)
  --top-p P          keep the smallest set with probability ≥ P (default 1 = off)
  --repetition-penalty R   R > 0: a seen token's logit is divided by R when positive, multiplied when negative (default 1 = off)
  --seed S           sampling seed (default 0)
  --stop TEXT        stop before TEXT (repeatable)
  --truncate         keep the end of a prompt longer than the context (with a warning) instead of failing
  --backend NAME     cpu, wasm, webgpu or auto (default)
  --stats            print tokens/s to stderr at the end`;

function topP(value: string | undefined): number {
  const p = numberFlag('generate', 'top-p', value, 1, { max: 1 });
  if (!(p > 0)) throw new UsageError(`generate: --top-p ${JSON.stringify(value)}: expected a number in (0, 1]`);
  return p;
}

export async function generateCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('generate', argv, {
    model: { type: 'string' }, prompt: { type: 'string' }, 'max-tokens': { type: 'string' }, temperature: { type: 'string' },
    'top-k': { type: 'string' }, 'top-p': { type: 'string' }, 'repetition-penalty': { type: 'string' }, seed: { type: 'string' },
    stop: { type: 'string', multiple: true }, truncate: { type: 'boolean' }, backend: { type: 'string' }, stats: { type: 'boolean' },
  });
  if (v.help) { console.log(GENERATE_USAGE); return 0; }
  const dir = requireFlag('generate', 'model', v.model);
  if (v.prompt === undefined) requireFlag('generate', 'prompt', v.prompt);
  const backend = await backendFromFlag('generate', v.backend);
  const { model, tokenizer } = await loadModel(dir, backend);
  const r = await generate(model, tokenizer, v.prompt!, {
    maxTokens: numberFlag('generate', 'max-tokens', v['max-tokens'], 200, { integer: true, min: 1 }),
    temperature: numberFlag('generate', 'temperature', v.temperature, 0.8, { min: 0 }),
    topK: numberFlag('generate', 'top-k', v['top-k'], 0, { integer: true, min: 0 }),
    topP: topP(v['top-p']),
    repetitionPenalty: numberFlag('generate', 'repetition-penalty', v['repetition-penalty'], 1, {}),
    seed: numberFlag('generate', 'seed', v.seed, 0, { integer: true, min: 0 }),
    stop: v.stop,
    truncatePrompt: v.truncate,
    onWarning: (m) => console.error(`fon: warning: ${m}`),
    onText: (s) => process.stdout.write(s),
  });
  process.stdout.write('\n');
  if (v.stats) console.error(`${r.ids.length} tokens after a prompt of ${r.promptTokens}, ${r.tokensPerSecond.toFixed(1)} tokens/s, stopped by ${r.stopReason}`);
  model.dispose();
  return 0;
}
