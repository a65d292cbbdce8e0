/**
 * Depth-Attention experiment (issue 6, item 5; specs/fpa_depth.md §3.4): language modelling with
 * models that differ only in how a layer's value is formed, at equal parameters (Depth-Attention has
 * none), data and steps:
 *   vanilla  every layer uses its own v;
 *   depth    the paper's softmax mix over candidate layers C(l) (--stride, --window);
 *   v0_mix   the fixed baseline of the paper's code, ṽ = ½v⁽⁰⁾ + ½v (§3.2, ResFormer-like).
 * Scored by validation perplexity and bits per byte (eval/perplexity.ts) per seed, with training
 * tokens per second and the analytic arithmetic overhead of the mix (experiments/lib/depth_flops.ts:
 * per layer with candidates and KV head (|C| + 1)·d·2 + r·d multiply-adds, against the forward's).
 *
 * Tokens per second cover the training steps only; before the timed runs each arm's model trains
 * `--warmup` steps once on a throwaway copy, so kernel compilation and JIT warm-up fall outside them.
 *
 * Data: as experiments/lm_compare.ts (Brown Corpus by default, byte tokenizer, the same batch
 * sequence for every arm of a seed, each arm initialised from the same seed: the same weights,
 * since no arm adds a parameter). The sequence mechanism of every layer is --attention (full with
 * RoPE, fox or fpa with NoPE); --kv-heads below --heads gives GQA (one mix per KV head).
 *
 * Run (CPU defaults check the harness, not the claim):
 *   node --import tsx experiments/depth_compare.ts [--backend auto|cpu|wasm|webgpu] [--seeds 1]
 *     [--arms vanilla,depth,v0_mix] [--attention full] [--stride 2] [--window 0] [--data builtin:brown]
 *     [--steps 60] [--batch 8] [--context 128] [--layers 4] [--d-model 64] [--heads 4] [--kv-heads 2]
 *     [--head-dim 16] [--mlp-hidden 128] [--qk-norm] [--lr 0.003] [--eval-windows 32] [--warmup 2] [--json FILE]
 *
 * H200 run (a sketch in the shape of the paper's 410M companion scaled down: 8 layers, stride 4 ⇒
 * C = {0, 4}, GQA 8/2, QK-norm as in the paper's models):
 *   node --import tsx experiments/depth_compare.ts --backend webgpu --seeds 1,2,3 --steps 5000 --batch 32 \
 *     --context 512 --layers 8 --stride 4 --d-model 512 --heads 8 --kv-heads 2 --head-dim 64 --mlp-hidden 1536 --qk-norm \
 *     --lr 0.001 --eval-windows 0 --json depth_compare.json
 *
 * Claim under test (§3.4 [A]): depth < vanilla in validation perplexity at equal size, data and steps,
 * and depth < v0_mix (the softmax routing beats a fixed value residual); overhead < 0.01 % FLOPs at
 * the paper's scale (it is larger for the tiny models here: the mix scales with d, the model with d²).
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadCorpus } from '../src/cli/corpus.ts';
import { Progress } from '../src/cli/progress.ts';
import { ArgumentError } from '../src/errors.ts';
import { evaluate } from '../src/eval/perplexity.ts';
import { tokenByteLengths } from '../src/eval/token_bytes.ts';
import { byteTokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig, type ModelConfig } from '../src/model/config.ts';
import { BatchSampler } from '../src/train/data/index.ts';
import {
  backendFlag, commandLine, intFlag, markdownTable, mechanismConfig, meanStd, newModel, numberFlag, parseMechanisms, parseSeeds,
  trainModel, writeJson,
} from './lib/common.ts';
import { depthOverhead } from './lib/depth_flops.ts';
import { firstWindows } from './lm_compare.ts';

export const ARMS = ['vanilla', 'depth', 'v0_mix'] as const;
export type Arm = (typeof ARMS)[number];

export function parseArms(s: string): Arm[] {
  const list = s.split(',').map((x) => x.trim()).filter(Boolean);
  for (const a of list) if (!ARMS.includes(a as Arm)) throw new ArgumentError(`--arms: '${a}' is not one of ${ARMS.join(', ')}`);
  if (list.length === 0) throw new ArgumentError('--arms: empty list; expected e.g. vanilla,depth,v0_mix');
  return list as Arm[];
}

/** The config of one arm: the shared base (mechanism, shape, KV heads) plus the arm's `depth`. */
export function armConfig(arm: Arm, base: ModelConfig, stride: number, window: number): ModelConfig {
  if (arm === 'vanilla') return base;
  const depth = arm === 'depth' ? { stride, window } : { mode: 'v0_mix' };
  return parseModelConfig({ depth }, base, `experiment arm '${arm}'`);
}

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' }, arms: { type: 'string', default: ARMS.join(',') },
      attention: { type: 'string', default: 'full' }, stride: { type: 'string', default: '2' }, window: { type: 'string', default: '0' },
      data: { type: 'string', default: 'builtin:brown' }, steps: { type: 'string', default: '60' }, batch: { type: 'string', default: '8' },
      context: { type: 'string', default: '128' }, layers: { type: 'string', default: '4' }, 'd-model': { type: 'string', default: '64' },
      heads: { type: 'string', default: '4' }, 'kv-heads': { type: 'string', default: '2' }, 'head-dim': { type: 'string', default: '16' },
      'mlp-hidden': { type: 'string', default: '128' }, lr: { type: 'string', default: '0.003' }, 'eval-windows': { type: 'string', default: '32' },
      'qk-norm': { type: 'boolean', default: false }, warmup: { type: 'string', default: '2' }, json: { type: 'string' },
    },
  });
  const seeds = parseSeeds(f.seeds!), arms = parseArms(f.arms!);
  const [mechanism] = parseMechanisms(f.attention!);
  const stride = intFlag('stride', f.stride), window = intFlag('window', f.window, 0);
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), context = intFlag('context', f.context, 2);
  const lr = numberFlag('lr', f.lr, 1e-6, 1), evalLimit = intFlag('eval-windows', f['eval-windows'], 0);
  const heads = intFlag('heads', f.heads), kvHeads = intFlag('kv-heads', f['kv-heads']);
  if (heads % kvHeads !== 0) throw new ArgumentError(`--kv-heads ${kvHeads} must divide --heads ${heads}`);
  const tok = byteTokenizer();
  const shape = {
    vocabSize: tok.vocabSize, dModel: intFlag('d-model', f['d-model']), nLayers: intFlag('layers', f.layers), nHeads: heads,
    headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']), contextLength: context,
  };
  const base = parseModelConfig({ nKvHeads: kvHeads, qkNorm: f['qk-norm']! }, mechanismConfig(mechanism, shape), `experiment base '${mechanism}'`);
  const configs = new Map(arms.map((a) => [a, armConfig(a, base, stride, window)] as const));
  const backend = await backendFlag(f.backend!);
  const corpus = await loadCorpus(f.data!);
  const stores = await corpus.tokenStores(tok, context);
  const byteLengths = tokenByteLengths(tok, shape.vocabSize);
  console.error(`depth compare on ${backend.name}: ${arms.join(', ')} (${mechanism} layers, stride ${stride}, window ${window}) × seeds ${seeds.join(', ')} on ${corpus.name}, ${steps} steps of ${batch} × ${context}`);

  const warmup = intFlag('warmup', f.warmup, 0);
  if (warmup > 0) {
    for (const arm of arms) {
      const model = newModel(configs.get(arm)!, backend, 0);
      try {
        await trainModel(model, new BatchSampler(stores.train, { batch, context, seed: 0 }), { steps: warmup, batchSize: batch, context, seed: 0, lr, warmup: 1 }, `warm-up ${arm}`);
      } finally {
        model.dispose();
      }
    }
  }

  const results: { arm: Arm; seed: number; parameters: number; trainLoss: number; loss: number; perplexity: number; bitsPerByte: number; tokens: number; trainSeconds: number; trainTokensPerSecond: number }[] = [];
  try {
    for (const seed of seeds) {
      for (const arm of arms) {
        const sampler = new BatchSampler(stores.train, { batch, context, seed });
        const model = newModel(configs.get(arm)!, backend, seed);
        try {
          const run = await trainModel(model, sampler, { steps, batchSize: batch, context, seed, lr, minLr: lr / 10, warmup: Math.ceil(steps / 20) }, `${arm} seed ${seed}`);
          const bar = new Progress({ label: `eval ${arm} seed ${seed}`, total: evalLimit > 0 ? evalLimit : undefined, unit: 'win' });
          const r = await evaluate(model, firstWindows(stores.validation, context, evalLimit), { byteLengths, batch, onProgress: (n) => bar.update(n) });
          bar.finish();
          results.push({
            arm, seed, parameters: model.parameterCount(), trainLoss: run.loss, loss: r.loss, perplexity: r.perplexity, bitsPerByte: r.bitsPerByte, tokens: r.tokens,
            trainSeconds: run.seconds, trainTokensPerSecond: run.tokensPerSecond,
          });
        } finally {
          model.dispose();
        }
      }
    }
  } finally {
    stores.train.close();
    stores.validation.close();
  }

  const overhead = arms.map((arm) => ({ arm, ...depthOverhead(configs.get(arm)!, context) }));
  const rows = results.map((r) => [r.arm, String(r.seed), String(r.parameters), r.trainLoss.toFixed(3), r.perplexity.toFixed(3), r.bitsPerByte.toFixed(4), r.trainTokensPerSecond.toFixed(0)]);
  const summary = arms.map((arm) => {
    const rs = results.filter((r) => r.arm === arm);
    return { arm, perplexity: meanStd(rs.map((r) => r.perplexity)), bitsPerByte: meanStd(rs.map((r) => r.bitsPerByte)), trainTokensPerSecond: meanStd(rs.map((r) => r.trainTokensPerSecond)) };
  });
  for (const s of summary) rows.push([`${s.arm} (mean ± sd)`, seeds.join(','), '', '', `${s.perplexity.mean.toFixed(3)} ± ${s.perplexity.std.toFixed(3)}`, `${s.bitsPerByte.mean.toFixed(4)} ± ${s.bitsPerByte.std.toFixed(4)}`, s.trainTokensPerSecond.mean.toFixed(0)]);
  const over = (arm: Arm) => seeds.map((seed) => {
    const a = results.find((r) => r.seed === seed && r.arm === arm), v = results.find((r) => r.seed === seed && r.arm === 'vanilla');
    return { seed, ratio: a && v ? a.perplexity / v.perplexity : null };
  });
  console.log(`\nDepth-Attention on ${corpus.name} (${mechanism} layers): validation perplexity (bytes) after ${steps} steps of ${batch} × ${context}, ${results[0]?.tokens ?? 0} scored tokens\n`);
  console.log(markdownTable(['arm', 'seed', 'params', 'train loss', 'val ppl', 'val bits/byte', 'train tok/s'], rows));
  console.log(`\nArithmetic per token (multiply-adds, analytic; FLOPs = 2×):\n`);
  console.log(markdownTable(['arm', 'mix MACs', 'model MACs', 'overhead'], overhead.map((o) => [o.arm, String(o.mixMacs), String(Math.round(o.modelMacs)), `${(100 * o.fraction).toFixed(4)} %`])));
  for (const arm of arms.filter((a) => a !== 'vanilla')) {
    const rs = over(arm).filter((r) => r.ratio !== null);
    if (rs.length) console.log(`${arm} / vanilla perplexity: ${rs.map((r) => `seed ${r.seed}: ${r.ratio!.toFixed(4)}`).join(', ')}`);
  }
  if (f.json) {
    writeJson(f.json, {
      experiment: 'depth_compare', command: commandLine(), backend: backend.name, seeds, arms, attention: mechanism, stride, window, data: corpus.name,
      settings: { steps, batch, context, lr, evalWindows: evalLimit, warmup, tokenizer: 'bytes', model: { ...shape, nKvHeads: kvHeads, qkNorm: f['qk-norm']! } },
      results, summary, overhead, depthOverVanilla: over('depth'), v0MixOverVanilla: over('v0_mix'),
    });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
  process.exit(0);
}
