/** `fon generate`: load a checkpoint, stream a continuation of the prompt to stdout. */
import { loadModel } from '../io/model_checkpoint.ts';
import { generate } from '../infer/generate.ts';
import { checkDraftLayers } from '../model/organs.ts';
import { checkPageRows } from '../infer/page_pool.ts';
import { numberFlag, parseFlags, requireFlag, UsageError } from './args.ts';
import { backendFromFlag, dtypeFromFlag, DTYPE_USAGE } from './backend_flag.ts';
import { applyFocusTopK } from './focus.ts';
import { applySpotDecode, applySpotRule, spotBudgetLine, spotBudgets } from './spot.ts';
import { spotLayers } from '../attention/spot/index.ts';
import { chatPrompt, readMessages, readPrompt } from './prompt_input.ts';
import { SAMPLING_FLAGS, samplingOptions } from './sampling_flags.ts';

export const GENERATE_USAGE = `usage: fon generate --model DIR (--prompt TEXT | --prompt - | --prompt-file FILE | --messages FILE.json) [options]

Streams a continuation of TEXT from the model in DIR (\`--prompt -\` reads TEXT from standard input,
\`--prompt-file\` from a UTF-8 file: a prompt with real newlines; \`--messages\` a JSON list of
{"role", "content"} that the model's chat template turns into the prompt, the assistant's turn
opened): a FON checkpoint (an output directory of fon
train, or one of its step-N directories) or a Hugging Face folder. A FON model's prompt follows the
end-of-text token its training put before every document; a Hugging Face model's follows what its
tokenizer puts first (Llama 3's <|begin_of_text|>, or nothing), special tokens written in TEXT
(chat markup) are tokens, and its generation_config.json, when present, gives the defaults below
as transformers applies them (greedy unless do_sample; then its temperature, top_k (50 if unset),
top_p, repetition_penalty, max_new_tokens) and its eos_token_id list ends generation.

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
${DTYPE_USAGE}
  --focus-top-k k    Focus layers keep k of their K groups per token (1 ≤ k ≤ K; default: the config's k)
  --spot-top-p p     Spot layers decode over the dual top-p nucleus of their selector's block mass (0 < p ≤ 1)
  --spot-top-k r     Spot layers decode over a fraction r of the causal key blocks (0 < r ≤ 1; 1 = dense);
                     default for both: each layer's config rule
  --spot-decode P    how Spot layers read their selected blocks on WebGPU: auto (default: the
                     mask, which was as fast or faster from 64K cached tokens), mask or gather
                     (static top-K only: the blocks' K and V rows gathered, then a plain dense decode)
  --allow-non-finite load weights that hold NaN or ±Inf (by default an error names the tensor)
  --draft-revise     draft–revise decoding (the default for a model with organs): layers 0 … D−1
                     and the exit head draft, the rest verify each draft in one pass; greedy
                     output is identical to plain decoding, sampled output has its distribution
  --no-draft-revise  plain decoding, one token per step through the whole network
  --draft-layers D   draft with layers 0 … D−1 (default: the model's organs); lets any model, a
                     Hugging Face one too, draft through its own final norm and head at layer D
  --gamma N          tokens drafted per verify pass to start with (default 4); adapts to the
                     acceptance unless --fixed-gamma
  --fixed-gamma      keep N constant
  --draft-window W   draft with a sliding window of W keys in full and local layers (layers < D
                     are then recomputed in the verify pass)
  --page-rows N      positions per page of the KV cache's full and local layers (a multiple
                     of 128; default the whole context up to 65536 a page)
  --stats            print to stderr at the end (besides the tokens, tokens/s and why generation
                     stopped, which it always prints there), for models with FPA eviction the
                     fraction of the KV cache kept per layer and head, for models with Spot layers
                     the share of the causal tokens each layer read while decoding, and with draft–revise the
                     acceptance rate, tokens per verify pass and the same model's plain-decoding
                     tokens/s (a second, plain run of the same prompt)`;

export async function generateCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('generate', argv, {
    model: { type: 'string' }, prompt: { type: 'string' }, 'prompt-file': { type: 'string' }, messages: { type: 'string' }, ...SAMPLING_FLAGS,
    stop: { type: 'string', multiple: true }, truncate: { type: 'boolean' }, backend: { type: 'string' }, dtype: { type: 'string' }, stats: { type: 'boolean' }, 'allow-non-finite': { type: 'boolean' },
    'draft-revise': { type: 'boolean' }, 'no-draft-revise': { type: 'boolean' }, 'draft-layers': { type: 'string' }, gamma: { type: 'string' },
    'fixed-gamma': { type: 'boolean' }, 'draft-window': { type: 'string' }, 'page-rows': { type: 'string' }, 'focus-top-k': { type: 'string' }, 'spot-top-p': { type: 'string' }, 'spot-top-k': { type: 'string' }, 'spot-decode': { type: 'string' },
  });
  if (v.help) { console.log(GENERATE_USAGE); return 0; }
  const dir = requireFlag('generate', 'model', v.model);
  if (v.messages !== undefined && (v.prompt !== undefined || v['prompt-file'] !== undefined)) throw new UsageError('generate: --messages excludes --prompt and --prompt-file; give one');
  const messages = v.messages === undefined ? undefined : readMessages(v.messages);
  const given = messages ? undefined : await readPrompt('generate', v.prompt, v['prompt-file']);
  if (v['draft-revise'] && v['no-draft-revise']) throw new UsageError('generate: --draft-revise and --no-draft-revise exclude each other; give one');
  const gamma = numberFlag('generate', 'gamma', v.gamma, 4, { integer: true, min: 1 });
  const draftWindow = v['draft-window'] === undefined ? undefined : numberFlag('generate', 'draft-window', v['draft-window'], 0, { integer: true, min: 1 });
  const pageRows = v['page-rows'] === undefined ? undefined : checkPageRows(numberFlag('generate', 'page-rows', v['page-rows'], 0, { integer: true }), 'generate: --page-rows', (m) => new UsageError(m));
  const backend = await backendFromFlag('generate', v.backend);
  const loaded = await loadModel(dir, backend, { allowNonFinite: v['allow-non-finite'], dtype: dtypeFromFlag('generate', v.dtype) });
  const { model, tokenizer } = loaded;
  let prompt: string;
  try {
    prompt = messages ? chatPrompt('generate', dir, loaded.chatTemplate, messages) : given!;
  } catch (e) {
    model.dispose();
    throw e;
  }
  try {
    applyFocusTopK('generate', v['focus-top-k'], model);
    applySpotRule('generate', v['spot-top-p'], v['spot-top-k'], model);
    applySpotDecode('generate', v['spot-decode'], model);
    if (v.stats) for (const [, l] of spotLayers(model)) l.measureBudget = true;
  } catch (e) {
    model.dispose();
    throw e;
  }
  const L = model.config.nLayers;
  const draftLayers = v['draft-layers'] === undefined ? undefined : checkDraftLayers(numberFlag('generate', 'draft-layers', v['draft-layers'], 0, { integer: true }), L, 'generate: --draft-layers', (m) => new UsageError(m));
  const wantDraft = !v['no-draft-revise'] && (v['draft-revise'] || draftLayers !== undefined || model.config.organs !== undefined);
  if (wantDraft && draftLayers === undefined && !model.config.organs) {
    model.dispose();
    throw new UsageError(`generate: --draft-revise needs a model with organs or --draft-layers D (an integer in [1, ${L - 1}]: draft through the model's own final norm and head at layer D)`);
  }
  const tuning = (['gamma', 'fixed-gamma', 'draft-window'] as const).filter((k) => v[k] !== undefined);
  if (!wantDraft && tuning.length) {
    model.dispose();
    throw new UsageError(`generate: --${tuning[0]} tunes draft–revise decoding, which is off here (${v['no-draft-revise'] ? '--no-draft-revise' : 'the model has no organs'}); ${v['no-draft-revise'] ? 'drop it' : 'add --draft-layers D or drop it'}`);
  }
  const draftRevise = wantDraft ? { ...(draftLayers !== undefined ? { draftLayers } : {}), gamma, fixedGamma: v['fixed-gamma'] ?? false, ...(draftWindow !== undefined ? { draftWindow } : {}) } : false;
  const opts = {
    ...samplingOptions('generate', v, loaded),
    stop: v.stop,
    truncatePrompt: v.truncate,
    pageRows,
    onWarning: (m: string) => console.error(`fon: warning: ${m}`),
  };
  const r = await generate(model, tokenizer, prompt, { ...opts, draftRevise, onText: (s) => process.stdout.write(s) });
  process.stdout.write('\n');
  // The speed, always (on stderr, so stdout stays the text alone); --stats adds the rest.
  console.error(`${r.ids.length} tokens after a prompt of ${r.promptTokens}, ${r.tokensPerSecond.toFixed(1)} tokens/s, stopped by ${r.stopReason}`);
  if (v.stats) {
    const budgets = await spotBudgets(model);
    if (budgets.length) console.error(spotBudgetLine(budgets));
    const evicting = r.cacheKept.some((heads) => heads.some((f) => f < 1));
    if (evicting) {
      const all = r.cacheKept.flat();
      console.error(`KV cache kept: ${(100 * all.reduce((a, b) => a + b, 0) / all.length).toFixed(1)}% of keys; per layer and head: ${r.cacheKept.map((heads, i) => `${i}: ${heads.map((f) => f.toFixed(3)).join(' ')}`).join(' | ')}`);
    }
    if (r.speculative) {
      const s = r.speculative;
      console.error(`draft–revise (draft layers 0 … ${s.draftLayers - 1} of ${L}): acceptance ${(100 * s.acceptanceRate).toFixed(1)}% (${s.accepted} of ${s.drafted} drafted), ${s.meanAcceptedPerPass.toFixed(2)} tokens per verify pass over ${s.passes} passes`);
      const plain = await generate(model, tokenizer, prompt, { ...opts, draftRevise: false });
      const same = plain.ids.length === r.ids.length && plain.ids.every((id, i) => id === r.ids[i]);
      console.error(`plain decoding of the same model: ${plain.tokensPerSecond.toFixed(1)} tokens/s; draft–revise ${r.tokensPerSecond.toFixed(1)} tokens/s (${(r.tokensPerSecond / plain.tokensPerSecond).toFixed(2)}×)${opts.temperature === 0 ? `; outputs ${same ? 'identical' : 'DIFFER'}` : ''}`);
    }
  }
  model.dispose();
  return 0;
}
