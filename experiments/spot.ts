/**
 * SpotAttention's experiment (issue 21, item 5; specs/focus_spot.md B6): does decoding over the
 * blocks a distilled selector picks keep a frozen model's retrieval, at and beyond its training
 * length?
 *
 * 1. Teacher. A RoPE model with full attention, byte tokens, trained on Brown text mixed with
 *    passkey samples (experiments/passkey.ts: one 5-digit key in filler, asked for at the end) and
 *    multi-key samples (three keys, each of a colour, one asked for), only the answer's
 *    digits scored in those rows. Retrieval is learnt at a short length first (`--short-length`,
 *    `--short-steps`: the lookup is found quickly there), then the model trains at the training
 *    length L (`--length`, `--steps`), where sparse decoding can matter: Spot reserves the first
 *    128 and last 256 tokens and reads at least 512 in all (B4), so below that every rule reads
 *    everything. `--long-length`, `--long-steps`, `--long-batch` add a last stage at a longer
 *    length (the paper's backbones serve 8× the selectors' training length: a RoPE teacher trained
 *    only at L retrieves at L and nowhere beyond it, so without this stage only 1× tests anything;
 *    `--long-lr`, default lr/3; `--long-mix`, its retrieval shares, default `--mix`). `--spot-length S` trains the selectors at S (default L) and
 *    evaluates at the multiples of S: a teacher trained up to `--long-length` 8·S then tests the
 *    selectors' own reach, up to 8× the length they were distilled at, on a teacher that still
 *    retrieves there.
 * 2. Selectors. `--add spot` onto every layer (the teacher's tensors kept as they are) and
 *    `--train-only spot`: the selectors alone train by SparseKL from their own layers (the Trainer
 *    adds the layers' spotKL), on the same mix at length L (`--spot-steps`, `--spot-lr`).
 * 3. Evaluation. Passkey and multi-key prompts at `--multiples` × L, depths `--depths`, `--trials`
 *    a depth (trial i draws the same key and filler at every length, depth and rule: paired), each
 *    prompt prefilled densely, then 5 greedy tokens decoded with each rule of `--rules`: `dense`
 *    (top-K 1: every block, which is dense decoding), `top-k:ρ` (static) and `top-p:p` (dual). A
 *    trial is right when the 5 tokens are the key. Each layer's budget (the tokens its selected
 *    blocks hold over the causal tokens) and recall (its own head-averaged attention mass on its
 *    selected blocks, SpotAttention.measureRecall) are averaged over the decoding steps.
 *    `--keys f16,int4` repeats the sparse rules with INT4 selector keys (the same weights; the
 *    pair differs only in the keys' form).
 *    Standard errors are bootstrap (`--bootstrap` resamples of the trials of a cell group).
 *
 * Targets (B6 [S]): static top-K 0.5 and dual top-p 0.9 within one bootstrap standard error of
 * dense decoding up to 8× the training length; INT4 keys with no accuracy change; budgets that
 * shrink with depth (early layers keep most, late layers little).
 *
 *   node --import tsx experiments/spot.ts [--backend auto] [--seeds 1] [--short-length 128] [--short-steps 60]
 *     [--length 640] [--steps 40] [--long-length 0 --long-steps 0 --long-batch 0 --long-lr lr/3 --long-mix MIX] [--spot-length L] [--batch 8] [--lr 0.003] [--spot-steps 40] [--spot-lr 0.001] [--mix 0.4,0.4]
 *     [--multiples 1,2,4,8] [--depths 0.1,0.5,0.9] [--trials 2] [--rules dense,top-k:0.5,top-p:0.9]
 *     [--keys f16] [--layers 2] [--d-model 64] [--heads 4] [--head-dim 16]
 *     [--mlp-hidden 128] [--bootstrap 1000] [--json FILE]
 *   node --import tsx experiments/spot.ts --merge a.json,b.json[,…] [--json merged.json]
 * `--merge`: the tables over the pooled trials of several runs' JSON (one seed each, same settings).
 * The defaults finish on the CPU in minutes and check the harness, not the claims.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ArgumentError } from '../src/errors.ts';
import type { Backend } from '../src/index.ts';
import { uniformAt } from '../src/ops/random.ts';
import { Decoder } from '../src/model/decoder.ts';
import { parseModelConfig, type ModelConfig } from '../src/model/config.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { generate } from '../src/infer/generate.ts';
import { byteTokenizer, type Tokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { BatchSampler, brownCorpus, buildTokenStore } from '../src/train/data/index.ts';
import { Progress } from '../src/cli/progress.ts';
import { linePlot } from '../src/io/plot_svg.ts';
import type { Batches } from '../src/train/trainer.ts';
import { SPOT_DEFAULTS, spotLayers, type SpotRule } from '../src/attention/spot/index.ts';
import { freezeAllBut, isComposedParameter } from '../src/cli/compose.ts';
import { asciiFiller, cyclicSlice, digitsRight, KEY_DIGITS, mix, passkeyRow, passkeySample, type PasskeySample } from './passkey.ts';
import { backendFlag, commandLine, intFlag, markdownTable, newModel, numberFlag, parseSeeds, trainModel, writeJson, writeText, type TrainRun } from './lib/common.ts';

const COLOURS = ['red', 'blue', 'green', 'white', 'black', 'yellow'] as const;
const TRAIN_STREAM = 0x5b07, EVAL_STREAM = 0xe5b0;

/**
 * Multi-key sample `index` of stream `seed`: three needles " The C key is NNNNN." of three distinct
 * colours C at depths spread over the filler (the asked one at `depth`, the others at uniform
 * depths), then " What is the C key? The C key is " and the asked key; `length` bytes in all (the
 * key included; at least 111, so it fits the short training length).
 */
export function multiKeySample(seed: number, index: number, o: { length: number; depth: number; filler: string }): PasskeySample {
  if (!(o.depth >= 0 && o.depth <= 1)) throw new ArgumentError(`multiKeySample: depth ${o.depth} must be in [0, 1]`);
  const s = mix(seed, index);
  const first = Math.floor(uniformAt(s, 0) * COLOURS.length);
  const colours = [0, 1, 2].map((i) => COLOURS[(first + i * (1 + Math.floor(uniformAt(s, 1) * 2))) % COLOURS.length]);
  const keys = [0, 1, 2].map((i) => String(10000 + Math.min(89999, Math.floor(uniformAt(s, 2 + i) * 90000))));
  const needles = colours.map((c, i) => ` The ${c} key is ${keys[i]}.`);
  const question = ` What is the ${colours[0]} key? The ${colours[0]} key is `;
  const fillerBytes = o.length - needles.reduce((a, n) => a + n.length, 0) - question.length - KEY_DIGITS;
  if (fillerBytes < 0) throw new ArgumentError(`multiKeySample: length ${o.length} is too short for three needles, the question and the key`);
  let fill = cyclicSlice(o.filler, Math.floor(uniformAt(s, 5) * o.filler.length), fillerBytes);
  // Insert from the deepest position down, so earlier offsets stay valid.
  const at = [o.depth, uniformAt(s, 6), uniformAt(s, 7)].map((d) => Math.round(d * fillerBytes));
  const order = [0, 1, 2].sort((a, b) => at[b] - at[a] || b - a);
  let needleAt = 0;
  for (const i of order) {
    fill = fill.slice(0, at[i]) + needles[i] + fill.slice(at[i]);
    if (i === 0) needleAt = at[0];
  }
  const prompt = fill + question;
  return { text: prompt + keys[0], prompt, key: keys[0], needleAt, fillerBytes };
}

type Task = 'passkey' | 'multikey';
const sampleOf = (task: Task) => (task === 'passkey' ? passkeySample : multiKeySample);

/**
 * Training batches: `lm`'s Brown windows, each row replaced with chance mix[0] by a passkey sample
 * and mix[1] by a multi-key sample of T + 1 bytes at a uniform depth, only the answer scored (a pure
 * function of the step, as `lm` is).
 */
function taskMixBatches(lm: Batches, o: { seed: number; batch: number; length: number; mix: [number, number]; filler: string; tok: Tokenizer }): Batches {
  const T = o.length;
  return {
    batchAt(step: number) {
      const { inputs, targets } = lm.batchAt(step);
      for (let b = 0; b < o.batch; b++) {
        const g = step * o.batch + b;
        const u = uniformAt(mix(o.seed, TRAIN_STREAM), g);
        const task: Task | null = u < o.mix[0] ? 'passkey' : u < o.mix[0] + o.mix[1] ? 'multikey' : null;
        if (!task) continue;
        const sample = sampleOf(task)(mix(o.seed, TRAIN_STREAM + 1), g, { length: T + 1, depth: uniformAt(mix(o.seed, TRAIN_STREAM + 2), g), filler: o.filler });
        const row = passkeyRow(sample, o.tok, false);
        inputs.set(row.inputs, b * T);
        targets.set(row.targets, b * T);
      }
      return { inputs, targets };
    },
  };
}

/** A rule by its flag: dense (top-K 1, every block), top-k:ρ, top-p:p. */
function parseRule(s: string): { name: string; rule: SpotRule } {
  if (s === 'dense') return { name: 'dense', rule: { kind: 'top-k', fraction: 1 } };
  const [kind, x] = s.split(':');
  const v = Number(x);
  if (!(v > 0 && v <= 1) || (kind !== 'top-k' && kind !== 'top-p')) throw new ArgumentError(`--rules: '${s}': expected dense, top-k:ρ or top-p:p with ρ, p in (0, 1]`);
  return { name: s, rule: kind === 'top-k' ? { kind: 'top-k', fraction: v } : { kind: 'top-p', p: v } };
}

/** The standard error of the mean of 0/1 outcomes by bootstrap (n resamples, a fixed stream). */
function bootstrapSE(xs: readonly number[], n: number, seed: number): number {
  if (xs.length < 2) return 0;
  const means: number[] = [];
  for (let r = 0; r < n; r++) {
    let s = 0;
    for (let i = 0; i < xs.length; i++) s += xs[Math.floor(uniformAt(mix(seed, r), i) * xs.length)];
    means.push(s / xs.length);
  }
  const m = means.reduce((a, b) => a + b, 0) / n;
  return Math.sqrt(means.reduce((a, b) => a + (b - m) ** 2, 0) / (n - 1));
}

/** The teacher's config with every layer a Spot layer of `keys` (the teacher's tensors load by name; the selectors come fresh or from `spotWeights`). */
function spotConfig(teacher: ModelConfig, keys: 'f16' | 'int4'): ModelConfig {
  return parseModelConfig({ attention: [{ type: 'spot', ...SPOT_DEFAULTS, keys }], positions: teacher.positions }, teacher, 'experiments/spot.ts');
}

interface Cell { seed: number; task: Task; rule: string; keys: string; backend: string; multiple: number; length: number; depth: number; trial: number; right: number; digits: number }
interface LayerCell { seed: number; rule: string; keys: string; multiple: number; layer: number; budget: number; recall: number }

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' },
      'short-length': { type: 'string', default: '128' }, 'short-steps': { type: 'string', default: '60' },
      'long-length': { type: 'string', default: '0' }, 'long-steps': { type: 'string', default: '0' }, 'long-batch': { type: 'string', default: '0' }, 'long-lr': { type: 'string' }, 'long-mix': { type: 'string' },
      'spot-length': { type: 'string', default: '0' },
      length: { type: 'string', default: '640' }, steps: { type: 'string', default: '40' }, batch: { type: 'string', default: '8' }, lr: { type: 'string', default: '0.003' },
      'spot-steps': { type: 'string', default: '40' }, 'spot-lr': { type: 'string', default: '0.001' }, mix: { type: 'string', default: '0.4,0.4' },
      multiples: { type: 'string', default: '1,2,4,8' }, depths: { type: 'string', default: '0.1,0.5,0.9' }, trials: { type: 'string', default: '2' },
      rules: { type: 'string', default: 'dense,top-k:0.5,top-p:0.9' }, keys: { type: 'string', default: 'f16' },
      layers: { type: 'string', default: '2' }, 'd-model': { type: 'string', default: '64' }, heads: { type: 'string', default: '4' }, 'head-dim': { type: 'string', default: '16' },
      'mlp-hidden': { type: 'string', default: '128' }, bootstrap: { type: 'string', default: '1000' }, json: { type: 'string' },
      merge: { type: 'string' },
    },
  });
  if (f.merge) {
    // The tables of several runs' JSON (one seed each, the same settings) over their pooled trials.
    const runs = f.merge.split(',').filter(Boolean).map((path) => JSON.parse(readFileSync(path, 'utf8')) as SavedRun);
    const s0 = runs[0].settings;
    for (const r of runs) {
      if (r.settings.length !== s0.length || (r.settings.spotLength ?? r.settings.length) !== (s0.spotLength ?? s0.length) || r.settings.multiples.join() !== s0.multiples.join() || r.settings.depths.join() !== s0.depths.join() || r.settings.trials !== s0.trials) throw new ArgumentError(`--merge: the runs' settings differ (length, multiples, depths or trials): ${JSON.stringify(r.settings)} against ${JSON.stringify(s0)}`);
    }
    const seeds = runs.flatMap((r) => r.seeds);
    report({ cells: runs.flatMap((r) => r.cells), layerCells: runs.flatMap((r) => r.layers), trained: runs.flatMap((r) => r.trained), T: s0.spotLength ?? s0.length, multiples: s0.multiples, depths: s0.depths, trials: s0.trials, seeds, boot: intFlag('bootstrap', f.bootstrap) },
      f.json ? { json: f.json, backend: runs[0].backend, extra: { experiment: 'spot', command: commandLine(), merged: f.merge.split(','), backend: runs[0].backend, seeds, settings: s0, commands: runs.map((r) => r.command) } } : undefined);
    return;
  }
  const seeds = parseSeeds(f.seeds!);
  const shortT = intFlag('short-length', f['short-length'], 96), shortSteps = intFlag('short-steps', f['short-steps'], 0);
  const longT = intFlag('long-length', f['long-length'], 0), longSteps = intFlag('long-steps', f['long-steps'], 0), longBatch = intFlag('long-batch', f['long-batch'], 0);
  const T = intFlag('length', f.length, 96), steps = intFlag('steps', f.steps, 0), batch = intFlag('batch', f.batch), lr = numberFlag('lr', f.lr, 1e-6, 1);
  const spotSteps = intFlag('spot-steps', f['spot-steps']), spotLr = numberFlag('spot-lr', f['spot-lr'], 1e-6, 1);
  const longLr = f['long-lr'] !== undefined ? numberFlag('long-lr', f['long-lr'], 1e-7, 1) : lr / 3;
  // S: the selectors' training length, the unit of the evaluated lengths (the training length L unless given).
  const spotT = intFlag('spot-length', f['spot-length'], 0) || T;
  const mixOf = (flag: string, text: string): number[] => {
    const parts = text.split(',').map(Number);
    if (parts.length !== 2 || !parts.every((x) => x >= 0) || parts[0] + parts[1] > 1) throw new ArgumentError(`--${flag} '${text}': expected two shares (passkey, multi-key) ≥ 0 summing to at most 1`);
    return parts;
  };
  const mixParts = mixOf('mix', f.mix!);
  // The long stage's share of retrieval rows (its batches are few rows: at 4 a step and 0.1 each,
  // 600 steps hold about 240 rows of each task).
  const longMix = f['long-mix'] !== undefined ? mixOf('long-mix', f['long-mix']) : mixParts;
  const multiples = f.multiples!.split(',').map((x) => intFlag('multiples', x));
  const depths = f.depths!.split(',').map((x) => numberFlag('depths', x, 0, 1));
  const trials = intFlag('trials', f.trials), boot = intFlag('bootstrap', f.bootstrap);
  const rules = f.rules!.split(',').filter(Boolean).map(parseRule);
  const keyForms = f.keys!.split(',').filter(Boolean);
  for (const k of keyForms) if (k !== 'f16' && k !== 'int4') throw new ArgumentError(`--keys: '${k}': expected f16 or int4`);
  const tok = byteTokenizer();
  const shape = {
    vocabSize: tok.vocabSize, dModel: intFlag('d-model', f['d-model']), nLayers: intFlag('layers', f.layers), nHeads: intFlag('heads', f.heads),
    nKvHeads: intFlag('heads', f.heads), headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']),
    contextLength: Math.max(Math.max(...multiples) * spotT, longT, T) + 1, positions: 'rope' as const, attention: [{ type: 'full' as const }],
  };
  const backend = await backendFlag(f.backend!);
  if (longSteps > 0 && (longT <= T || longBatch < 1)) throw new ArgumentError(`--long-length ${longT} must pass --length ${T} and --long-batch ${longBatch} be ≥ 1 where --long-steps is given`);
  console.error(`spot experiment on ${backend.name}: seeds ${seeds.join(', ')}; teacher ${shortSteps} steps at ${shortT} then ${steps} at ${T}${longSteps > 0 ? ` then ${longSteps} at ${longT} (batch ${longBatch})` : ''}; selectors ${spotSteps} steps at ${spotT}; eval at ${multiples.map((m) => `${m}×`).join(' ')} (${multiples.map((m) => m * spotT).join(', ')} tokens)`);

  const corpus = brownCorpus();
  const trainFiller = asciiFiller(corpus.train), evalFiller = asciiFiller(corpus.validation);
  const store = await buildTokenStore([trainFiller], tok);
  const cells: Cell[] = [];
  const layerCells: LayerCell[] = [];
  const trained: { seed: number; stage: string; run: TrainRun }[] = [];
  const teacherCfg = parseModelConfig(shape);
  const batchesAt = (seed: number, length: number, rows = batch, mix = mixParts) => taskMixBatches(new BatchSampler(store, { batch: rows, context: length, seed }), { seed, batch: rows, length, mix: [mix[0], mix[1]], filler: trainFiller, tok });

  for (const seed of seeds) {
    // 1. The teacher: retrieval at the short length, then the training length.
    const teacher = newModel(teacherCfg, backend, seed);
    if (shortSteps > 0) trained.push({ seed, stage: `teacher at ${shortT}`, run: await trainModel(teacher, batchesAt(seed, shortT), { steps: shortSteps, batchSize: batch, context: shortT, seed, lr, minLr: lr / 10, warmup: Math.ceil(shortSteps / 20) }, `teacher ${shortT} seed ${seed}`) });
    if (steps > 0) trained.push({ seed, stage: `teacher at ${T}`, run: await trainModel(teacher, batchesAt(seed + 1000, T), { steps, batchSize: batch, context: T, seed, lr: lr / 3, minLr: lr / 30, warmup: Math.ceil(steps / 20) }, `teacher ${T} seed ${seed}`) });
    if (longSteps > 0) trained.push({ seed, stage: `teacher at ${longT}`, run: await trainModel(teacher, batchesAt(seed + 3000, longT, longBatch, longMix), { steps: longSteps, batchSize: longBatch, context: longT, seed, lr: longLr, minLr: longLr / 10, warmup: Math.ceil(longSteps / 20) }, `teacher ${longT} seed ${seed}`) });
    // 2. The selectors, alone, from the frozen teacher.
    const weights = Object.fromEntries(teacher.namedParameters());
    const spot = new Decoder(spotConfig(teacherCfg, 'f16'), new ParamFactory({ backend, weights, seed, freshMissing: isComposedParameter, source: 'the teacher' }));
    teacher.dispose();
    const frozen = freezeAllBut('spot', spot);
    console.error(`selectors: ${frozen.trained} of ${frozen.total} parameters trained`);
    trained.push({ seed, stage: 'selectors', run: await trainModel(spot, batchesAt(seed + 2000, spotT), { steps: spotSteps, batchSize: batch, context: spotT, seed, lr: spotLr, minLr: spotLr / 10, warmup: Math.ceil(spotSteps / 20) }, `selectors seed ${seed}`) });
    // 3. Evaluation: each key form (the same weights), each rule, each length, depth and trial.
    const models: { keys: string; model: Decoder; backend: Backend }[] = [];
    for (const keys of keyForms) {
      if (keys === 'f16') { models.push({ keys, model: spot, backend }); continue; }
      const ws = Object.fromEntries(spot.namedParameters());
      models.push({ keys, model: new Decoder(spotConfig(teacherCfg, 'int4'), new ParamFactory({ backend, weights: ws, source: 'the trained selectors' })), backend });
    }
    for (const { keys, model, backend: be } of models) {
      const layers = spotLayers(model);
      for (const [, l] of layers) { l.measureRecall = true; l.measureBudget = true; }
      const sparse = rules.filter((r) => keys === 'f16' || r.name !== 'dense');
      const bar = new Progress({ label: `eval ${keys} keys on ${be.name}, seed ${seed}`, total: sparse.length * multiples.length * depths.length * trials * 2, unit: 'trial' });
      for (const { name, rule } of sparse) {
        for (const [, l] of layers) l.setRule(rule);
        for (const m of multiples) {
          for (const [, l] of layers) l.resetStats();
          for (const task of ['passkey', 'multikey'] as Task[]) {
            for (const depth of depths) {
              for (let i = 0; i < trials; i++) {
                const sample = sampleOf(task)(mix(seed, EVAL_STREAM + (task === 'passkey' ? 0 : 1)), i, { length: m * spotT, depth, filler: evalFiller });
                const r = await generate(model, tok, sample.prompt, { maxTokens: KEY_DIGITS, temperature: 0, startIds: [] });
                cells.push({ seed, task, rule: name, keys, backend: be.name, multiple: m, length: m * spotT, depth, trial: i, right: r.text === sample.key ? 1 : 0, digits: digitsRight(r.text, sample.key) });
                bar.tick();
              }
            }
          }
          for (const [li, l] of layers) {
            const [chosen, causal] = l.stats.tokens ? await l.stats.tokens.data() : [0, 0];
            const [captured, rows] = l.stats.recall ? await l.stats.recall.data() : [0, 0];
            if (causal > 0) layerCells.push({ seed, rule: name, keys: `${keys} (${be.name})`, multiple: m, layer: li, budget: chosen / causal, recall: rows > 0 ? captured / rows : NaN });
          }
        }
      }
      bar.finish();
    }
    for (const { model } of models) if (model !== spot) model.dispose();
    spot.dispose();
  }
  store.close();

  report({ cells, layerCells, trained, T: spotT, multiples, depths, trials, seeds, boot },
    f.json ? { json: f.json, backend: backend.name, extra: {
      experiment: 'spot', command: commandLine(), backend: backend.name, seeds,
      settings: { shortLength: shortT, shortSteps, length: T, steps, batch, longLength: longT, longSteps, longBatch, longLr, longMix, spotLength: spotT, lr, spotSteps, spotLr, mix: mixParts, multiples, depths, trials, rules: rules.map((r) => r.name), keys: keyForms, bootstrap: boot, model: shape, spot: SPOT_DEFAULTS },
    } } : undefined);
}

/** What one run saves (--json), and what --merge reads back. */
interface SavedRun { command: string; backend: string; seeds: number[]; settings: { length: number; spotLength?: number; multiples: number[]; depths: number[]; trials: number }; trained: { seed: number; stage: string; run: TrainRun }[]; layers: LayerCell[]; cells: Cell[] }

/**
 * The tables (accuracy per task, length, rule and keys with bootstrap SEs and the verdict against
 * dense; per-layer budget and recall; training) over the trials of every seed given, and with `out`
 * the JSON and the plot.
 */
function report(r: { cells: Cell[]; layerCells: LayerCell[]; trained: { seed: number; stage: string; run: TrainRun }[]; T: number; multiples: number[]; depths: number[]; trials: number; seeds: number[]; boot: number },
  out?: { json: string; backend: string; extra: Record<string, unknown> }): void {
  const { cells, layerCells, trained, T, multiples, depths, trials, seeds, boot } = r;
  // Accuracy per (keys, rule, task, multiple) over depths, trials and seeds, with bootstrap SEs; against dense, paired.
  const groups = [...new Set(cells.map((c) => `${c.keys}|${c.backend}|${c.rule}`))];
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const summary: { keys: string; backend: string; rule: string; task: Task; multiple: number; accuracy: number; se: number; n: number }[] = [];
  for (const g of groups) {
    const [keys, be, rule] = g.split('|');
    for (const task of ['passkey', 'multikey'] as Task[]) {
      for (const m of multiples) {
        const xs = cells.filter((c) => c.keys === keys && c.backend === be && c.rule === rule && c.task === task && c.multiple === m).map((c) => c.right);
        if (xs.length) summary.push({ keys, backend: be, rule, task, multiple: m, accuracy: xs.reduce((a, b) => a + b, 0) / xs.length, se: bootstrapSE(xs, boot, m * 31 + (task === 'passkey' ? 0 : 7)), n: xs.length });
      }
    }
  }
  const denseOf = (task: Task, m: number, be: string) => summary.find((s) => s.rule === 'dense' && s.keys === 'f16' && s.backend === be && s.task === task && s.multiple === m);
  const f16Of = (s: (typeof summary)[number]) => summary.find((x) => x.rule === s.rule && x.keys === 'f16' && x.backend === s.backend && x.task === s.task && x.multiple === s.multiple);
  console.log(`\nRetrieval accuracy (greedy 5 digits), ${depths.length} depths × ${trials} trials × ${seeds.length} seed(s) a cell; ± bootstrap SE; trained at ${T} tokens\n`);
  const rows = summary.map((s) => {
    const d = denseOf(s.task, s.multiple, s.backend);
    // Within one SE of dense means something only where dense retrieves at all.
    const verdict = !d || s.rule === 'dense' ? '' : d.accuracy === 0 ? 'no test (dense 0%)'
      : Math.abs(s.accuracy - d.accuracy) <= d.se + 1e-12 ? 'within 1 SE of dense' : s.accuracy < d.accuracy ? 'below dense' : 'above dense';
    const twin = s.keys === 'int4' ? f16Of(s) : undefined;
    return [s.task, `${s.multiple}× (${s.multiple * T})`, s.rule, `${s.keys} (${s.backend})`, `${pct(s.accuracy)} ± ${pct(s.se)}`, verdict, twin ? `${s.accuracy >= twin.accuracy ? '+' : ''}${(100 * (s.accuracy - twin.accuracy)).toFixed(1)} points` : ''];
  });
  console.log(markdownTable(['task', 'length', 'rule', 'keys', 'accuracy', 'against dense', 'INT4 against f16'], rows));
  // Per-layer budget and recall, mean over seeds.
  const lrows: string[][] = [];
  for (const key of [...new Set(layerCells.map((c) => `${c.keys}|${c.rule}|${c.multiple}`))]) {
    const [keys, rule, m] = key.split('|');
    const cs = layerCells.filter((c) => c.keys === keys && c.rule === rule && c.multiple === Number(m));
    const byLayer = [...new Set(cs.map((c) => c.layer))].sort((a, b) => a - b).map((li) => {
      const ls = cs.filter((c) => c.layer === li);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      return `${li}: ${pct(mean(ls.map((c) => c.budget)))} / ${pct(mean(ls.map((c) => c.recall)))}`;
    });
    lrows.push([rule, keys, `${m}× (${Number(m) * T})`, byLayer.join(', ')]);
  }
  console.log('\nPer layer: budget (tokens read over causal tokens) / recall (the layer\'s own attention mass on its selected blocks), mean over the decoding steps\n');
  console.log(markdownTable(['rule', 'keys', 'length', 'layer: budget / recall'], lrows));
  console.log('\nTraining\n');
  console.log(markdownTable(['seed', 'stage', 'steps', 'final loss', 'spotKL first → last', 'seconds'], trained.map((t) => [String(t.seed), t.stage, String(t.run.steps), t.run.loss.toFixed(3),
    t.run.terms ? `${t.run.terms.first.spotKL.toPrecision(3)} → ${t.run.terms.last.spotKL.toPrecision(3)}` : '', t.run.seconds.toFixed(1)])));
  if (out) {
    writeJson(out.json, { ...out.extra, trained, summary, layers: layerCells, cells });
    const series = [...new Set(summary.map((s) => `${s.task}|${s.rule}|${s.keys}|${s.backend}`))].map((k) => {
      const [task, rule, keys, be] = k.split('|');
      return { name: `${task}, ${rule}${keys !== 'f16' ? `, ${keys}` : ''}${be !== out.backend ? ` (${be})` : ''}`, points: summary.filter((s) => `${s.task}|${s.rule}|${s.keys}|${s.backend}` === k).map((s) => [s.multiple * T, 100 * s.accuracy] as [number, number]) };
    });
    const svg = out.json.replace(/\.json$/, '') + '.svg';
    writeText(svg, linePlot({ title: `Spot: retrieval against context (trained at ${T})`, xLabel: 'context (tokens)', yLabel: 'accuracy (%)', series, logX: true, markers: true }));
    console.error(`plot: ${svg}`);
  }
}

await main();
process.exit(0);
