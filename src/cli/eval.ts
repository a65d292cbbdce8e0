/** `fon eval`: perplexity and bits per byte of a checkpoint over a file or the built-in validation split. */
import { evaluate } from '../eval/perplexity.ts';
import { tokenByteLengths } from '../eval/token_bytes.ts';
import { loadModel } from '../io/model_checkpoint.ts';
import { brownCorpus, buildTokenStore, evalWindows, readDocuments } from '../train/data/index.ts';
import { checkDraftLayers } from '../model/organs.ts';
import { numberFlag, parseFlags, requireFlag, UsageError } from './args.ts';
import { backendFromFlag, dtypeFromFlag, DTYPE_USAGE } from './backend_flag.ts';
import { Progress } from './progress.ts';
import { applyFocusTopK, focusBlocksVisitedFraction, focusDominanceLines, focusPairsRetained, measureFocusDominance, resetFocusStats } from './focus.ts';
import { focusLayers } from '../attention/focus/index.ts';

export const EVAL_USAGE = `usage: fon eval --model DIR [--file PATH] [--context N] [--stride N] [--draft-layers D] [--focus-top-k k] [--json] [--allow-non-finite]

Perplexity and bits per byte of the checkpoint in DIR over PATH (default: the built-in Brown
validation split). A text file is scored as its exact text: nothing trimmed, no split at
separator lines (a leading byte-order mark is dropped). A folder's files and a .jsonl file's
lines are documents, joined with the end-of-text token between them and none after the last.
The text's ids (no prefix added) are cut into windows of N tokens (default: the model's context): window i holds tokens i·stride … i·stride + N − 1 and scores the
tokens it predicts that no earlier window scored, the last window shorter. With stride = context
(the default) the windows do not overlap and every token after the first is scored exactly once,
as transformers' perplexity loop does on the same ids; a smaller stride scores each window's last
\`stride\` tokens with the rest as context.

A model with organs also has its exit head (the draft organ's: the final norm and LM head after
layer D−1) scored in the same pass, printed on a line of its own.

A model with Focus layers (attention/focus) is scored with each token in its top k groups (the
config's k, or --focus-top-k), and a line (--json: "focus") gives k, the dominance (the largest
group's share of the memberships, averaged over Focus layers; 1/K when balanced), pairsRetained:
the query–key pairs the rule keeps over the causal pairs (every backend), and
blocksVisitedFraction: the key blocks the exact sparse prefill visited (the group-sorted segments,
over k copies of each token, plus the cross-group window band) over those full causal attention
visits, summed over Focus layers. It counts blocks, not query–key pairs (a visited block may hold
pairs the rule masks), and is null on webgpu, which runs the dense masked form.

options:
  --draft-layers D   score the exit head after the first D layers (1 ≤ D ≤ layers − 1) of any model
                     (default: the model's organs.draftLayers, none without organs)
  --batch N          windows per forward pass (default 8)
  --focus-top-k k    Focus layers keep k of their K groups per token (1 ≤ k ≤ K; default: the config's k)
  --backend NAME     cpu, wasm, webgpu or auto (default)
${DTYPE_USAGE}
  --json             print the result as one JSON object
  --allow-non-finite load weights that hold NaN or ±Inf (by default an error names the tensor)`;

export async function evalCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('eval', argv, {
    model: { type: 'string' }, file: { type: 'string' }, context: { type: 'string' }, stride: { type: 'string' },
    batch: { type: 'string' }, backend: { type: 'string' }, dtype: { type: 'string' }, json: { type: 'boolean' }, 'draft-layers': { type: 'string' },
    'allow-non-finite': { type: 'boolean' }, 'focus-top-k': { type: 'string' },
  });
  if (v.help) { console.log(EVAL_USAGE); return 0; }
  const dir = requireFlag('eval', 'model', v.model);
  const backend = await backendFromFlag('eval', v.backend);
  const { model, tokenizer, config } = await loadModel(dir, backend, { allowNonFinite: v['allow-non-finite'], dtype: dtypeFromFlag('eval', v.dtype) });
  try {
    applyFocusTopK('eval', v['focus-top-k'], model);
  } catch (e) {
    model.dispose();
    throw e;
  }
  const context = numberFlag('eval', 'context', v.context, config.contextLength, { integer: true, min: 1, max: config.contextLength });
  const stride = numberFlag('eval', 'stride', v.stride, context, { integer: true, min: 1, max: context });
  const batch = numberFlag('eval', 'batch', v.batch, 8, { integer: true, min: 1 });
  const L = config.nLayers;
  const draftLayers = v['draft-layers'] === undefined ? config.organs?.draftLayers
    : checkDraftLayers(numberFlag('eval', 'draft-layers', v['draft-layers'], 0, { integer: true }), L, 'eval: --draft-layers', (m) => new UsageError(m));
  const source = v.file ?? 'builtin:brown (validation)';
  const store = await buildTokenStore(v.file ? readDocuments(v.file, { exact: true }) : brownCorpus().validation, tokenizer, { separator: 'between' });
  const windows = Math.max(1, Math.ceil(Math.max(0, store.length - 1 - context) / stride) + 1);
  const bar = new Progress({ label: 'eval', total: windows, unit: 'win' });
  resetFocusStats(model);
  const r = await evaluate(model, evalWindows(store, context, stride), { byteLengths: tokenByteLengths(tokenizer, config.vocabSize), batch, draftLayers: draftLayers ?? null, onProgress: (n) => bar.update(n) });
  bar.finish();
  store.close();
  const focused = focusLayers(model);
  const ks = [...new Set(focused.map(([, f]) => f.topK))];
  const blocksVisitedFraction = focusBlocksVisitedFraction(model);
  const pairsRetained = await focusPairsRetained(model);
  const dominance = await measureFocusDominance(model);
  /** k in force (one number when every Focus layer has the same), the dominance, the pairs kept, the blocks visited. */
  const focus = focused.length ? { topK: ks.length === 1 ? ks[0] : focused.map(([, f]) => f.topK), dominance: dominance?.mean ?? null, pairsRetained, blocksVisitedFraction } : undefined;
  model.dispose();
  if (v.json) console.log(JSON.stringify({ source, context, stride, ...r, ...(focus ? { focus } : {}) }));
  else {
    console.log(`${source}: perplexity ${r.perplexity.toFixed(3)}, bits per byte ${r.bitsPerByte.toFixed(4)}, loss ${r.loss.toFixed(4)} nats/token over ${r.tokens} tokens (${r.bytes} bytes), context ${context}, stride ${stride}`);
    if (r.exit) console.log(`${source}: exit head after ${r.exit.draftLayers} of ${L} layers: perplexity ${r.exit.perplexity.toFixed(3)}, bits per byte ${r.exit.bitsPerByte.toFixed(4)}, loss ${r.exit.loss.toFixed(4)} nats/token`);
    if (focus) {
      console.log(`focus: k=${Array.isArray(focus.topK) ? focus.topK.join('/') : focus.topK}${pairsRetained !== null ? `, pairs kept ${(100 * pairsRetained).toFixed(1)}% of the causal pairs` : ''}${blocksVisitedFraction !== null ? `, key blocks visited ${(100 * blocksVisitedFraction).toFixed(1)}% of full causal attention's` : ''}`);
      if (dominance) for (const line of focusDominanceLines(dominance)) console.log(line);
    }
  }
  return 0;
}
