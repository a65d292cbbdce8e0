/**
 * The organs experiment (issue 17, item 7; specs/lighthouse_fon.md §2.3 Design A and §2.6): the
 * same model trained with and without the organ objective on the same data and steps, then
 *   - validation perplexity of the full model (what the exit loss costs) and of the exit head at
 *     each draft depth D (the model trained without organs is scored at the same D, untrained for it);
 *   - greedy draft–revise decoding against plain decoding of the same model on the same backend:
 *     acceptance, tokens per verify pass (τ) and decode tokens/s for each fixed γ and for the
 *     adaptive γ, at each prompt length, against the mean of two plain runs (one before, one after);
 *     outputs are checked token-identical to plain greedy. With --draft-modes device,host each γ
 *     runs with the drafts picked on the device (one read a cycle) and on the host (a read a draft
 *     step); with --repeats R every run is repeated R times, interleaved, and the median taken,
 *     plain decoding timed before each repeat and after the last (the baseline is their median).
 *
 * Arms: "plain" (no organs; left out with --organs-only) and one "D=d" arm per --draft value
 * (organs {draftLayers: d, exitLoss, distill}). Every arm of a seed starts from the same initial weights (organs add no parameter)
 * and sees the same batches. Byte tokenizer, Brown Corpus; prompts are the start of the validation
 * text, cut to the prompt length. Tokens/s counts the decode steps after the prefill (as generate
 * reports it); each model decodes once untimed first, so pipeline compilation is outside.
 *
 * Claims under test: greedy speed-up ≥ 1.8× at a 512-token prompt (LayerSkip reports 1.8–2.2×),
 * and the full perplexity within 2% of the model trained without the exit loss.
 *
 * Run (CPU defaults check the harness, not the claim):
 *   node --import tsx experiments/organs.ts [--backend auto] [--seeds 1] [--draft 1] [--steps 20] [--batch 4]
 *     [--context 64] [--layers 4] [--d-model 64] [--heads 4] [--head-dim 16] [--mlp-hidden 128] [--lr 0.003]
 *     [--exit-loss 0.2] [--distill 0.5] [--gammas 2,4] [--prompts 32] [--gen-tokens 24] [--eval-windows 16] [--json FILE]
 *     [--draft-modes device] [--repeats 1] [--organs-only]
 * H200 (22.8M parameters, L = 12, D = 3 = L/4 and D = 4 = L/3):
 *   node --import tsx experiments/organs.ts --backend webgpu --seeds 1 --draft 3,4 --steps 600 --batch 16 --context 512 \
 *     --layers 12 --d-model 384 --heads 6 --head-dim 64 --mlp-hidden 1024 --gammas 2,4,6 --prompts 512,16384 --gen-tokens 128 \
 *     --eval-windows 0 --json experiments/results/organs_h200_seed1.json
 */
import { parseArgs } from 'node:util';
import { loadCorpus } from '../src/cli/corpus.ts';
import { Progress } from '../src/cli/progress.ts';
import { evaluate } from '../src/eval/perplexity.ts';
import { tokenByteLengths } from '../src/eval/token_bytes.ts';
import { generate } from '../src/infer/generate.ts';
import { byteTokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig } from '../src/model/config.ts';
import { brownCorpus, BatchSampler } from '../src/train/data/index.ts';
import type { Decoder } from '../src/model/decoder.ts';
import { backendFlag, commandLine, intFlag, markdownTable, newModel, numberFlag, parseSeeds, trainModel, writeJson } from './lib/common.ts';
import { firstWindows } from './lm_compare.ts';

const list = (name: string, s: string): number[] => s.split(',').filter(Boolean).map((x) => intFlag(name, x, 1));

type DraftMode = 'device' | 'host';
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b), m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

interface DecodeRow { arm: string; seed: number; draftLayers: number; prompt: number; gamma: number | 'adaptive'; drafts: DraftMode; repeats: number; acceptance: number; tokensPerPass: number; tokensPerSecond: number; plainTokensPerSecond: number; speedup: number; identical: boolean }

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' }, draft: { type: 'string', default: '1' },
      steps: { type: 'string', default: '20' }, batch: { type: 'string', default: '4' }, context: { type: 'string', default: '64' },
      layers: { type: 'string', default: '4' }, 'd-model': { type: 'string', default: '64' }, heads: { type: 'string', default: '4' },
      'head-dim': { type: 'string', default: '16' }, 'mlp-hidden': { type: 'string', default: '128' }, lr: { type: 'string', default: '0.003' },
      'exit-loss': { type: 'string', default: '0.2' }, distill: { type: 'string', default: '0.5' }, gammas: { type: 'string', default: '2,4' },
      prompts: { type: 'string', default: '32' }, 'gen-tokens': { type: 'string', default: '24' }, 'eval-windows': { type: 'string', default: '16' },
      data: { type: 'string', default: 'builtin:brown' }, json: { type: 'string' },
      'draft-modes': { type: 'string', default: 'device' }, repeats: { type: 'string', default: '1' }, 'organs-only': { type: 'boolean', default: false },
    },
  });
  const seeds = parseSeeds(f.seeds!), drafts = list('draft', f.draft!), gammas = list('gammas', f.gammas!), prompts = list('prompts', f.prompts!);
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), context = intFlag('context', f.context, 2);
  const genTokens = intFlag('gen-tokens', f['gen-tokens']), evalLimit = intFlag('eval-windows', f['eval-windows'], 0);
  const lr = numberFlag('lr', f.lr, 1e-6, 1), exitLoss = numberFlag('exit-loss', f['exit-loss'], 0, 100), distill = numberFlag('distill', f.distill, 0, 100);
  const nLayers = intFlag('layers', f.layers);
  const repeats = intFlag('repeats', f.repeats);
  const modes = f['draft-modes']!.split(',').filter(Boolean) as DraftMode[];
  for (const m of modes) if (m !== 'device' && m !== 'host') throw new Error(`--draft-modes: "${m}": expected device and/or host, comma-separated`);
  if (modes.length === 0) throw new Error('--draft-modes: expected device and/or host');
  const tok = byteTokenizer();
  const backend = await backendFlag(f.backend!);
  const corpus = await loadCorpus(f.data!);
  const stores = await corpus.tokenStores(tok, context);
  const byteLengths = tokenByteLengths(tok, tok.vocabSize);
  const text = brownCorpus().validation.join(' ');
  const contextLength = Math.max(context, Math.max(...prompts) + genTokens + 16);
  const shape = {
    vocabSize: tok.vocabSize, dModel: intFlag('d-model', f['d-model']), nLayers, nHeads: intFlag('heads', f.heads), nKvHeads: intFlag('heads', f.heads),
    headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']), contextLength,
  };
  const arms: { name: string; draft: number | null }[] = [...(f['organs-only'] ? [] : [{ name: 'plain', draft: null }]), ...drafts.map((d) => ({ name: `D=${d}`, draft: d }))];
  console.error(`organs on ${backend.name}: arms ${arms.map((a) => a.name).join(', ')} × seeds ${seeds.join(', ')}, ${steps} steps of ${batch} × ${context}, L = ${nLayers}`);
  const evals: { arm: string; seed: number; parameters: number; perplexity: number; bitsPerByte: number; exit: Record<number, { perplexity: number; bitsPerByte: number }>; trainSeconds: number }[] = [];
  const decodes: DecodeRow[] = [];
  for (const seed of seeds) {
    for (const arm of arms) {
      const cfg = parseModelConfig({ ...shape, ...(arm.draft ? { organs: { draftLayers: arm.draft, exitLoss, distill } } : {}) });
      const model = newModel(cfg, backend, seed);
      try {
        const run = await trainModel(model, new BatchSampler(stores.train, { batch, context, seed }), { steps, batchSize: batch, context, seed, lr, minLr: lr / 10 }, `${arm.name} seed ${seed}`);
        const exit: Record<number, { perplexity: number; bitsPerByte: number }> = {};
        let full = { perplexity: NaN, bitsPerByte: NaN };
        for (const d of arm.draft ? [arm.draft] : drafts) {
          const bar = new Progress({ label: `eval ${arm.name} exit ${d}`, total: evalLimit || 1, unit: 'win' });
          const r = await evaluate(model, firstWindows(stores.validation, context, evalLimit), { byteLengths, batch: 8, draftLayers: d, onProgress: (n) => bar.update(n) });
          bar.finish();
          full = { perplexity: r.perplexity, bitsPerByte: r.bitsPerByte };
          exit[d] = { perplexity: r.exit!.perplexity, bitsPerByte: r.exit!.bitsPerByte };
        }
        evals.push({ arm: arm.name, seed, parameters: model.parameterCount(), ...full, exit, trainSeconds: run.seconds });
        console.error(`${arm.name} seed ${seed}: perplexity ${full.perplexity.toFixed(3)}, exit ${JSON.stringify(exit)}`);
        for (const d of arm.draft ? [arm.draft] : drafts) decodes.push(...await decodeRows(model, arm.name, seed, d, prompts, gammas, genTokens, text, modes, repeats));
      } finally {
        model.dispose();
      }
    }
  }
  console.log(markdownTable(['arm', 'seed', 'params', 'full ppl', 'exit ppl (D)'], evals.map((e) => [e.arm, String(e.seed), (e.parameters / 1e6).toFixed(2) + 'M', e.perplexity.toFixed(3), Object.entries(e.exit).map(([d, x]) => `${x.perplexity.toFixed(3)} (${d})`).join(', ')])));
  console.log();
  console.log(markdownTable(['arm', 'seed', 'D', 'prompt', 'γ', 'drafts', 'acceptance', 'τ', 'tok/s', 'plain tok/s', 'speed-up', 'identical'], decodes.map((r) => [
    r.arm, String(r.seed), String(r.draftLayers), String(r.prompt), String(r.gamma), r.drafts, `${(100 * r.acceptance).toFixed(1)}%`, r.tokensPerPass.toFixed(2),
    r.tokensPerSecond.toFixed(1), r.plainTokensPerSecond.toFixed(1), `${r.speedup.toFixed(2)}×`, r.identical ? 'yes' : 'NO'])));
  if (f.json) writeJson(f.json, { command: commandLine(), backend: backend.name, date: new Date().toISOString(), shape, steps, batch, context, lr, exitLoss, distill, repeats, evals, decodes });
}

/**
 * Greedy draft–revise at each prompt length, γ (and adaptive) and draft mode against plain
 * decoding of the same model: every configuration `repeats` times, interleaved, medians taken.
 */
async function decodeRows(model: Decoder, arm: string, seed: number, d: number, prompts: number[], gammas: number[], genTokens: number, text: string, modes: DraftMode[], repeats: number): Promise<DecodeRow[]> {
  const tok = byteTokenizer();
  const rows: DecodeRow[] = [];
  const configs = [...gammas, 'adaptive' as const].flatMap((gamma) => modes.map((mode) => ({ gamma, mode })));
  const options = (gamma: number | 'adaptive', mode: DraftMode) => ({
    temperature: 0, maxTokens: genTokens,
    draftRevise: { draftLayers: d, deviceDraft: mode === 'device', ...(gamma === 'adaptive' ? { gamma: 4 } : { gamma, fixedGamma: true }) },
  });
  // Compile, untimed: every verify shape a run can reach (adaptive γ moves through 1 … 8) in each draft mode.
  const widest = Math.max(8, ...gammas);
  for (let gamma = 1; gamma <= widest; gamma++) for (const mode of modes) await generate(model, tok, text.slice(0, 16), { ...options(gamma, mode), maxTokens: 2 * gamma + 2 });
  await generate(model, tok, text.slice(0, 16), { temperature: 0, maxTokens: 8, draftRevise: false });
  for (const p of prompts) {
    const prompt = text.slice(0, p - 1); // + the start token = p tokens
    // Host-bound loops vary from run to run: plain decoding is timed before every repeat and after the last.
    const plain = [await generate(model, tok, prompt, { temperature: 0, maxTokens: genTokens, draftRevise: false })];
    const runs = configs.map(() => [] as Awaited<ReturnType<typeof generate>>[]);
    for (let rep = 0; rep < repeats; rep++) {
      for (const [i, { gamma, mode }] of configs.entries()) runs[i].push(await generate(model, tok, prompt, options(gamma, mode)));
      plain.push(await generate(model, tok, prompt, { temperature: 0, maxTokens: genTokens, draftRevise: false }));
    }
    const plainTokensPerSecond = median(plain.map((r) => r.tokensPerSecond));
    for (const [i, { gamma, mode }] of configs.entries()) {
      const rs = runs[i], s = rs[0].speculative!;
      const tokensPerSecond = median(rs.map((r) => r.tokensPerSecond));
      const row: DecodeRow = {
        arm, seed, draftLayers: d, prompt: p, gamma, drafts: mode, repeats, acceptance: s.acceptanceRate, tokensPerPass: s.meanAcceptedPerPass, tokensPerSecond,
        plainTokensPerSecond, speedup: tokensPerSecond / plainTokensPerSecond,
        identical: rs.every((r) => r.ids.length === plain[0].ids.length && r.ids.every((id, k) => id === plain[0].ids[k])),
      };
      console.error(JSON.stringify(row));
      rows.push(row);
    }
  }
  return rows;
}

await main();
process.exit(0);
