/**
 * Lighthouse then recovery against dense training (issue 23, item 4; specs/lighthouse_fon.md §1.12–
 * §1.13): the same model, the same initial weights, batches and learning-rate schedule, trained
 *   dense        full attention for every step;
 *   lighthouse   Lighthouse Attention in every layer for the first `--fraction` of the steps, then
 *                full attention (train/attention_schedule.ts: one optimizer and one schedule
 *                throughout, the switch changes only the layers' mechanism);
 * equal tokens, timed after an untimed warm-up step of each phase (kernels compiled). `--target` trains another target than full attention (item 4c, recovery into a
 * sparse target): `local:W` (a sliding window of W), `fox` or `fpa`; the first arm then runs the
 * target throughout and the second Lighthouse then the target. Per arm and seed: the training time (first phase and in all), the training loss
 * of every step, and the validation loss and bits per byte after the last step (FON's evaluate()).
 * The table gives means ± standard errors over the seeds and the paper's claims beside them
 * (1.4–1.7× less total training time; a final loss after recovery at or below dense's); the plot
 * draws both arms' mean loss curves. Byte tokens on a corpus (`--data`, default the Brown Corpus).
 *
 *   node --import tsx experiments/lighthouse.ts [--backend auto] [--seeds 1,2,3] [--context 8192]
 *     [--steps 200] [--batch 2] [--fraction 0.8] [--levels 3] [--pool 4] [--topk 512] [--tile 128]
 *     [--layers 4] [--d-model 256] [--heads 4] [--head-dim 64] [--mlp-hidden 768] [--lr 0.002]
 *     [--eval-windows 8] [--target full|local:W|fox|fpa] [--schedule constant|cosine] [--json experiments/results/lighthouse.json]
 * `--schedule`: the learning rate after a warm-up of steps/20: constant through both phases (the
 * paper's, §1.11/§1.13: torchtitan's decay_ratio 0, recovery at the same rate) or a cosine to lr/10.
 */
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { parseLayerAttention } from '../src/attention/table.ts';
import type { LighthouseSpec } from '../src/attention/lighthouse/index.ts';
import { loadCorpus } from '../src/cli/corpus.ts';
import { Progress } from '../src/cli/progress.ts';
import { evaluate } from '../src/eval/perplexity.ts';
import { tokenByteLengths } from '../src/eval/token_bytes.ts';
import { ArgumentError } from '../src/errors.ts';
import { linePlot } from '../src/io/plot_svg.ts';
import { byteTokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig } from '../src/model/config.ts';
import { applyPhase, switchStep, type AttentionSchedule } from '../src/train/attention_schedule.ts';
import { BatchSampler } from '../src/train/data/index.ts';
import { DEFAULT_TRAIN, Trainer, type TrainConfig } from '../src/train/trainer.ts';
import { backendFlag, commandLine, intFlag, markdownTable, meanStd, newModel, numberFlag, parseSeeds, writeJson } from './lib/common.ts';
import { firstWindows } from './lm_compare.ts';

type Arm = 'dense' | 'lighthouse';
interface ArmRun { arm: Arm; seed: number; losses: number[]; seconds: number; firstPhaseSeconds: number; valLoss: number; valBpb: number; trainLoss: number }

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Mean ± standard error of the mean (0 for one value). */
const meanSe = (xs: readonly number[]) => { const { mean: m, std } = meanStd(xs); return { mean: m, se: xs.length > 1 ? std / Math.sqrt(xs.length) : 0 }; };
const fmt = (xs: readonly number[], digits: number) => { const { mean: m, se } = meanSe(xs); return `${m.toFixed(digits)} ± ${se.toFixed(digits)}`; };

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' }, data: { type: 'string', default: 'builtin:brown' },
      context: { type: 'string', default: '8192' }, steps: { type: 'string', default: '200' }, batch: { type: 'string', default: '2' },
      fraction: { type: 'string', default: '0.8' }, levels: { type: 'string', default: '3' }, pool: { type: 'string', default: '4' },
      topk: { type: 'string', default: '512' }, tile: { type: 'string', default: '128' },
      layers: { type: 'string', default: '4' }, 'd-model': { type: 'string', default: '256' }, heads: { type: 'string', default: '4' },
      'head-dim': { type: 'string', default: '64' }, 'mlp-hidden': { type: 'string', default: '768' }, lr: { type: 'string', default: '0.002' },
      'eval-windows': { type: 'string', default: '8' }, target: { type: 'string', default: 'full' }, json: { type: 'string' },
      schedule: { type: 'string', default: 'constant' },
    },
  });
  const seeds = parseSeeds(f.seeds!);
  const context = intFlag('context', f.context, 2), steps = intFlag('steps', f.steps, 2), batch = intFlag('batch', f.batch);
  const fraction = numberFlag('fraction', f.fraction, 1e-9, 1 - 1e-9), lr = numberFlag('lr', f.lr, 1e-7, 1), evalLimit = intFlag('eval-windows', f['eval-windows'], 0);
  const lighthouse = parseLayerAttention({ type: 'lighthouse', levels: intFlag('levels', f.levels), pool: intFlag('pool', f.pool, 2), topk: intFlag('topk', f.topk), tile: intFlag('tile', f.tile) }, '--levels/--pool/--topk/--tile') as LighthouseSpec;
  const target = targetLayer(f.target!);
  if (f.schedule !== 'constant' && f.schedule !== 'cosine') throw new ArgumentError(`--schedule "${f.schedule}": expected constant (the paper's) or cosine`);
  // §1.11/§1.13: warm-up, then a constant rate through both phases (torchtitan's decay_ratio 0); cosine decays to lr/10.
  const minLr = f.schedule === 'constant' ? lr : lr / 10;
  const schedule: AttentionSchedule = { fraction, target: target.type, lighthouse };
  const targetName = f.target === 'full' ? 'dense' : f.target!;
  const tok = byteTokenizer();
  const cfg = parseModelConfig({
    vocabSize: tok.vocabSize, contextLength: context, positions: 'rope', dModel: intFlag('d-model', f['d-model']), nLayers: intFlag('layers', f.layers),
    nHeads: intFlag('heads', f.heads), nKvHeads: intFlag('heads', f.heads), headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']),
    ...(target.type === 'full' ? {} : { attention: [target] }),
  });
  const backend = await backendFlag(f.backend!);
  const corpus = await loadCorpus(f.data!);
  const stores = await corpus.tokenStores(tok, context);
  const byteLengths = tokenByteLengths(tok, cfg.vocabSize);
  const at = switchStep(schedule, steps);
  console.error(`lighthouse experiment on ${backend.name}: seeds ${seeds.join(', ')}; ${steps} steps of ${batch} × ${context} on ${corpus.name}; Lighthouse (L=${lighthouse.levels}, p=${lighthouse.pool}, k=${lighthouse.topk}, tile ${lighthouse.tile}) for steps 1 … ${at}, then ${f.target}`);

  const runs: ArmRun[] = [];
  try {
    // Untimed warm-up: one step of each arm's every phase on a throwaway model, so that no arm's
    // time holds the compiling of the kernels it shares with the other (on WebGPU, seconds).
    for (const arm of ['dense', 'lighthouse'] as Arm[]) {
      const model = newModel(cfg, backend, 0);
      const trainer = new Trainer(model, new BatchSampler(stores.train, { batch, context, seed: 0 }), { ...DEFAULT_TRAIN, steps: 2, batchSize: batch, context, seed: 0, lr, minLr, warmup: 1, evalEvery: 0, checkpointEvery: 0 });
      try {
        if (arm === 'lighthouse') applyPhase(schedule, model, 0, 2);
        await trainer.trainStep();
        if (arm === 'lighthouse') { applyPhase(schedule, model, 1, 2); await trainer.trainStep(); }
        await backend.sync();
      } finally {
        trainer.dispose();
        model.dispose();
      }
    }
    for (const seed of seeds) {
      for (const arm of ['dense', 'lighthouse'] as Arm[]) {
        const model = newModel(cfg, backend, seed);
        const train: TrainConfig = { ...DEFAULT_TRAIN, steps, batchSize: batch, context, seed, lr, minLr, warmup: Math.max(1, Math.ceil(steps / 20)), evalEvery: 0, checkpointEvery: 0 };
        const trainer = new Trainer(model, new BatchSampler(stores.train, { batch, context, seed }), train);
        const losses: number[] = [];
        let firstPhaseSeconds = 0;
        const bar = new Progress({ label: `${arm} seed ${seed}`, total: steps, unit: 'step' });
        try {
          if (arm === 'lighthouse') applyPhase(schedule, model, 0, steps);
          await backend.sync();
          const t0 = performance.now();
          for (let s = 0; s < steps; s++) {
            const r = await trainer.trainStep();
            if (!Number.isFinite(r.loss)) throw new ArgumentError(`${arm} seed ${seed}: loss ${r.loss} at step ${r.step}; lower --lr`);
            losses.push(r.loss);
            if (arm === 'lighthouse' && r.step === at) { firstPhaseSeconds = (performance.now() - t0) / 1000; applyPhase(schedule, model, r.step, steps); }
            bar.update(r.step, { loss: r.loss.toFixed(3) });
          }
          await backend.sync();
          const seconds = (performance.now() - t0) / 1000;
          bar.finish();
          const e = await evaluate(model, firstWindows(stores.validation, context, evalLimit), { byteLengths, batch });
          const tail = losses.slice(-Math.max(1, Math.floor(steps / 10)));
          runs.push({ arm, seed, losses, seconds, firstPhaseSeconds, valLoss: e.loss, valBpb: e.bitsPerByte, trainLoss: mean(tail) });
          console.error(`${arm} seed ${seed}: ${seconds.toFixed(1)} s${arm === 'lighthouse' ? ` (Lighthouse phase ${firstPhaseSeconds.toFixed(1)} s)` : ''}, validation loss ${e.loss.toFixed(4)}, ${e.bitsPerByte.toFixed(3)} bits per byte`);
        } finally {
          trainer.dispose();
          model.dispose();
        }
      }
    }
  } finally {
    stores.train.close();
    stores.validation.close();
  }

  const of = (arm: Arm) => runs.filter((r) => r.arm === arm);
  const [dense, lh] = [of('dense'), of('lighthouse')];
  // Per seed, dense's time over Lighthouse's: the speed-up in total training time.
  const ratios = seeds.map((s) => dense.find((r) => r.seed === s)!.seconds / lh.find((r) => r.seed === s)!.seconds);
  const lossGap = seeds.map((s) => lh.find((r) => r.seed === s)!.valLoss - dense.find((r) => r.seed === s)!.valLoss);
  const table = markdownTable(['arm', 'seeds', 'training s', 'first phase s', 'final train loss', 'validation loss', 'bits per byte'],
    (['dense', 'lighthouse'] as Arm[]).map((arm) => { const r = of(arm); return [arm === 'dense' ? targetName : `lighthouse ${fraction} → ${f.target}`, String(r.length), fmt(r.map((x) => x.seconds), 1), arm === 'dense' ? '—' : fmt(r.map((x) => x.firstPhaseSeconds), 1), fmt(r.map((x) => x.trainLoss), 4), fmt(r.map((x) => x.valLoss), 4), fmt(r.map((x) => x.valBpb), 3)]; }));
  const speed = meanSe(ratios), gap = meanSe(lossGap);
  const claims = markdownTable(['claim (paper)', 'ours', 'verdict'], [
    ['1.4–1.7× less total training time', `${speed.mean.toFixed(2)} ± ${speed.se.toFixed(2)}×`, speed.mean >= 1.4 ? 'holds' : 'does not hold'],
    [`final loss after recovery at or below ${targetName}'s`, `Δ validation loss ${gap.mean >= 0 ? '+' : ''}${gap.mean.toFixed(4)} ± ${gap.se.toFixed(4)} nats`, gap.mean <= gap.se ? 'holds (within one standard error or below)' : 'does not hold'],
  ]);
  console.log(`${table}\n\n${claims}`);
  if (f.json) {
    writeJson(f.json, { experiment: 'lighthouse', command: commandLine(), backend: backend.name, seeds, settings: { target: f.target, context, steps, batch, fraction, switchStep: at, lr, schedule: f.schedule, evalWindows: evalLimit, lighthouse, model: cfg }, runs, speedup: speed, lossGap: gap });
    const curve = (arm: Arm) => ({ name: arm === 'dense' ? targetName : `lighthouse → ${f.target} at step ${at}`, points: Array.from({ length: steps }, (_, i) => [i + 1, mean(of(arm).map((r) => r.losses[i]))] as [number, number]) });
    writeFileSync(f.json.replace(/\.json$/, '') + '-loss.svg', linePlot({ title: `Training loss, ${context} tokens (mean of ${seeds.length} seed${seeds.length === 1 ? '' : 's'})`, xLabel: 'step', yLabel: 'loss (nats/token)', series: [curve('dense'), curve('lighthouse')] }));
  }
}

/** --target: the layers' own attention that Lighthouse recovers into (full, local:W, fox or fpa). */
function targetLayer(s: string): { type: 'full' | 'local' | 'fox' | 'fpa'; window?: number } {
  const [type, w] = s.split(':');
  if (type === 'local' && w !== undefined) return { type, window: intFlag('target window', w, 1) };
  if ((type === 'full' || type === 'fox' || type === 'fpa') && w === undefined) return { type };
  throw new ArgumentError(`--target "${s}": expected full, local:W (a window of W tokens), fox or fpa`);
}

await main();
