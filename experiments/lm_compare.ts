/**
 * Experiment b (issue 5, item 5; specs/fpa_depth.md §2.7 first row): language modelling with
 * same-size models that differ only in their attention — softmax with RoPE, FoX, FPA (NoPE) —
 * trained on the same batches for the same steps, scored by validation perplexity and bits per
 * byte (FON's evaluate(), eval/perplexity.ts) per seed.
 *
 * Data: the built-in Brown Corpus (train / validation split by document, train/data/brown.ts) or a
 * user path (`--data`, the last 5% of tokens held out, as `fon train` does), byte tokenizer. For a
 * given seed every arm sees the same batch sequence (BatchSampler seeded by the seed) and starts
 * from its own initialisation with the same seed. Validation reads the first `--eval-windows`
 * non-overlapping windows of the validation split (0 = all of it).
 *
 * Run (CPU defaults finish in about two minutes; they check the harness, not the claim):
 *   node --import tsx experiments/lm_compare.ts [--backend auto|cpu|wasm|webgpu] [--seeds 1]
 *     [--mechanisms full,fox,fpa] [--walk fox] [--data builtin:brown] [--steps 80] [--batch 8]
 *     [--context 128] [--layers 2] [--d-model 64] [--heads 4] [--head-dim 16] [--mlp-hidden 128]
 *     [--lr 0.003] [--eval-windows 32] [--json FILE]
 *
 * H200 run (≈ 27M parameters per arm, ≥ 10M as the issue asks; RESULTS.md will quote it):
 *   node --import tsx experiments/lm_compare.ts --backend webgpu --seeds 1,2,3 --steps 5000 --batch 32 \
 *     --context 512 --layers 8 --d-model 512 --heads 8 --head-dim 64 --mlp-hidden 1536 --lr 0.001 \
 *     --eval-windows 0 --json lm_compare.json
 *
 * Target (spec §2.7 [B]): FPA's validation perplexity within 2% of FoX's at the same size, data
 * and steps (the `fpa / fox` column: ≤ 1.02).
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadCorpus } from '../src/cli/corpus.ts';
import { evaluate } from '../src/eval/perplexity.ts';
import { tokenByteLengths } from '../src/eval/token_bytes.ts';
import { byteTokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { BatchSampler, evalWindows, type EvalWindow, type TokenStore } from '../src/train/data/index.ts';
import { Progress } from '../src/cli/progress.ts';
import {
  backendFlag, commandLine, intFlag, markdownTable, mechanismConfig, meanStd, newModel, numberFlag, parseMechanisms, parseSeeds,
  parseWalk, trainModel, writeJson, type Mechanism,
} from './lib/common.ts';

/** The first `limit` evaluation windows of `store` (all of them when limit is 0). */
export function* firstWindows(store: TokenStore, context: number, limit: number): Generator<EvalWindow> {
  let n = 0;
  for (const w of evalWindows(store, context)) {
    if (limit > 0 && n++ >= limit) return;
    yield w;
  }
}

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' },
      mechanisms: { type: 'string', default: 'full,fox,fpa' }, walk: { type: 'string', default: 'fox' },
      data: { type: 'string', default: 'builtin:brown' }, steps: { type: 'string', default: '80' }, batch: { type: 'string', default: '8' },
      context: { type: 'string', default: '128' }, layers: { type: 'string', default: '2' }, 'd-model': { type: 'string', default: '64' },
      heads: { type: 'string', default: '4' }, 'head-dim': { type: 'string', default: '16' }, 'mlp-hidden': { type: 'string', default: '128' },
      lr: { type: 'string', default: '0.003' }, 'eval-windows': { type: 'string', default: '32' }, json: { type: 'string' },
    },
  });
  const seeds = parseSeeds(f.seeds!), mechanisms = parseMechanisms(f.mechanisms!), walk = parseWalk(f.walk!);
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), context = intFlag('context', f.context, 2);
  const lr = numberFlag('lr', f.lr, 1e-6, 1), evalLimit = intFlag('eval-windows', f['eval-windows'], 0);
  const tok = byteTokenizer();
  const shape = {
    vocabSize: tok.vocabSize, dModel: intFlag('d-model', f['d-model']), nLayers: intFlag('layers', f.layers), nHeads: intFlag('heads', f.heads),
    headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']), contextLength: context,
  };
  const backend = await backendFlag(f.backend!);
  const corpus = await loadCorpus(f.data!);
  const stores = await corpus.tokenStores(tok, context);
  const byteLengths = tokenByteLengths(tok, shape.vocabSize);
  console.error(`lm compare on ${backend.name}: ${mechanisms.join(', ')} × seeds ${seeds.join(', ')} on ${corpus.name} (${stores.train.length} train / ${stores.validation.length} validation tokens), ${steps} steps of ${batch} × ${context}`);

  const results: { mechanism: Mechanism; seed: number; parameters: number; trainLoss: number; loss: number; perplexity: number; bitsPerByte: number; tokens: number; trainSeconds: number; trainTokensPerSecond: number }[] = [];
  try {
    for (const seed of seeds) {
      for (const m of mechanisms) {
        const sampler = new BatchSampler(stores.train, { batch, context, seed });
        const model = newModel(mechanismConfig(m, shape, { walk }), backend, seed);
        try {
          const run = await trainModel(model, sampler, { steps, batchSize: batch, context, seed, lr, minLr: lr / 10, warmup: Math.ceil(steps / 20) }, `${m} seed ${seed}`);
          const total = evalLimit > 0 ? evalLimit : undefined;
          const bar = new Progress({ label: `eval ${m} seed ${seed}`, total, unit: 'win' });
          const r = await evaluate(model, firstWindows(stores.validation, context, evalLimit), { byteLengths, batch, onProgress: (n) => bar.update(n) });
          bar.finish();
          results.push({ mechanism: m, seed, parameters: model.parameterCount(), trainLoss: run.loss, loss: r.loss, perplexity: r.perplexity, bitsPerByte: r.bitsPerByte, tokens: r.tokens, trainSeconds: run.seconds, trainTokensPerSecond: run.tokensPerSecond });
        } finally {
          model.dispose();
        }
      }
    }
  } finally {
    stores.train.close();
    stores.validation.close();
  }

  const ratio = (seed: number) => {
    const fox = results.find((r) => r.seed === seed && r.mechanism === 'fox'), fpa = results.find((r) => r.seed === seed && r.mechanism === 'fpa');
    return fox && fpa ? fpa.perplexity / fox.perplexity : NaN;
  };
  const rows = results.map((r) => [r.mechanism, String(r.seed), String(r.parameters), r.trainLoss.toFixed(3), r.perplexity.toFixed(3), r.bitsPerByte.toFixed(4)]);
  const summary = mechanisms.map((m) => {
    const rs = results.filter((r) => r.mechanism === m);
    return { mechanism: m, perplexity: meanStd(rs.map((r) => r.perplexity)), bitsPerByte: meanStd(rs.map((r) => r.bitsPerByte)) };
  });
  for (const s of summary) rows.push([`${s.mechanism} (mean ± sd)`, seeds.join(','), '', '', `${s.perplexity.mean.toFixed(3)} ± ${s.perplexity.std.toFixed(3)}`, `${s.bitsPerByte.mean.toFixed(4)} ± ${s.bitsPerByte.std.toFixed(4)}`]);
  const ratios = seeds.map((seed) => ({ seed, fpaOverFox: ratio(seed) }));
  console.log(`\nLanguage modelling on ${corpus.name}: validation perplexity (bytes) after ${steps} steps of ${batch} × ${context}, ${results[0]?.tokens ?? 0} scored tokens\n`);
  console.log(markdownTable(['mechanism', 'seed', 'params', 'train loss', 'val ppl', 'val bits/byte'], rows));
  if (ratios.some((r) => Number.isFinite(r.fpaOverFox))) {
    console.log(`\nfpa / fox perplexity (target ≤ 1.02): ${ratios.map((r) => `seed ${r.seed}: ${r.fpaOverFox.toFixed(4)}`).join(', ')}`);
  }
  if (f.json) {
    writeJson(f.json, {
      experiment: 'lm_compare', command: commandLine(), backend: backend.name, seeds, mechanisms, walk, data: corpus.name,
      settings: { steps, batch, context, lr, evalWindows: evalLimit, tokenizer: 'bytes', model: shape },
      results, summary, fpaOverFox: ratios.map((r) => ({ seed: r.seed, ratio: Number.isFinite(r.fpaOverFox) ? r.fpaOverFox : null })),
    });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
  process.exit(0);
}
