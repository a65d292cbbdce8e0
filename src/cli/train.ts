/**
 * `fon train`: tokenizer → token stores → model → training loop with evaluation, checkpoints,
 * a JSONL log and a loss plot, then a final evaluation and a sample (with organs, the log's steps
 * carry the exit head's CE and the KL, and the evaluations the exit head's figures on a line of
 * their own; with Focus layers, the dominance of their largest groups, cli/focus.ts). Readable top
 * to bottom: flags → (resume or fresh) set-up → loop → finish. Ctrl-C
 * stops after the current step and writes a checkpoint; a second Ctrl-C exits at once (checkpoints
 * are written atomically, so the last one stays intact either way).
 */
import type { Backend } from '../backend/backend.ts';
import { evaluate, type EvalResult } from '../eval/perplexity.ts';
import { tokenByteLengths } from '../eval/token_bytes.ts';
import { linePlot } from '../io/plot_svg.ts';
import { loadModel, loadOptimizerState, readTrainerState, saveCheckpoint } from '../io/model_checkpoint.ts';
import { resolveCheckpointDir } from '../io/checkpoint_dir.ts';
import { byteTokenizer, trainBpe, END_OF_TEXT, type Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { generate } from '../infer/generate.ts';
import { layerAttention, parseModelConfig, type ModelConfig } from '../model/config.ts';
import { Decoder } from '../model/decoder.ts';
import { preset, PRESET_NAMES } from '../model/presets.ts';
import { ParamFactory } from '../nn/params.ts';
import { pathKind, readFileIfExists, writeFileAtomic, joinPath, makeDir } from '../platform/files.ts';
import { BatchSampler, evalWindows, type EvalWindow, type TokenStore } from '../train/data/index.ts';
import { presetTraining } from '../train/preset_training.ts';
import { DEFAULT_TRAIN, parseTrainConfig, Trainer, type StepResult, type TrainConfig } from '../train/trainer.ts';
import { PRECISIONS, type Precision } from '../tensor/autocast.ts';
import { numberFlag, parseFlags, requireFlag, UsageError } from './args.ts';
import { FonError } from '../errors.ts';
import { backendFromFlag } from './backend_flag.ts';
import { loadCorpus, type Corpus } from './corpus.ts';
import { Progress } from './progress.ts';
import { parseJson } from '../io/json.ts';
import { focusLayers } from '../attention/focus/index.ts';
import { describeMechanism, parseLayerAttention, type MechanismType } from '../attention/table.ts';
import type { LighthouseSpec } from '../attention/lighthouse/index.ts';
import { applyPhase, parseAttentionSchedule, scheduledLayers, switchStep, type AttentionSchedule } from '../train/attention_schedule.ts';
import { focusDominanceLines, focusLogFields, measureFocusDominance, resetFocusStats, type FocusDominance } from './focus.ts';
import { spotValidationKL } from './spot.ts';
import { addComposedLayers, checkTrainOnly, COMPOSABLE, composedLayers, composedWords, freezeAllBut, isComposedParameter, parseAddFlag, trainOnlyFlag } from './compose.ts';

/** The defaults `--preset tiny` trains with (other presets bring their own: train/preset_training.ts). */
const TINY: TrainConfig = { ...DEFAULT_TRAIN, ...presetTraining('tiny').train };

/** Validation windows the selectors' KL is measured on at each evaluation (a curve, not a figure to quote). */
const SPOT_KL_WINDOWS = 8;

export const TRAIN_USAGE = `usage: fon train --data PATH|builtin:brown --out DIR [options]

Trains a decoder language model, evaluates it on the validation split, writes checkpoints
(DIR/latest.json → DIR/step-N/), a JSONL log (DIR/log.jsonl) and a loss plot (DIR/loss.svg), both
rewritten at each evaluation and checkpoint.
A config with "organs" trains the draft organ's exit head too (CE + λ_D·CE(exit) + λ_KL·KL, layer
dropout; train/organ_loss.ts): the log adds exitLoss and distill, the evaluations the exit head's.
A model with Focus layers adds to each evaluation the largest group's share of the memberships
(focusDominance, ideal 1/K; a layer where one group holds ≥ 90% of the tokens is reported as
collapsed: focusCollapsed) and plots it against the step (DIR/dominance.svg).

data and model:
  --data PATH|builtin:brown  text file, folder of them, .jsonl with a "text" field, or the built-in Brown Corpus
  --out DIR                  output directory
  --preset NAME              ${PRESET_NAMES.join(', ')} (default tiny)
  --config FILE              model config JSON (keys of model/config.ts), over the preset
  --tokenizer byte|bpe:N     bytes, or a byte-level BPE of N tokens trained on the training split (default: the preset's, tiny bpe:1024)
  --init-from DIR            start from the weights, config and tokenizer of a model: a FON checkpoint or a Hugging Face
                             folder (fine-tuning; --preset, --config and --tokenizer do not apply; --lr defaults to 1e-4)
  --add focus[:OPTS]         make every full-attention layer a Focus layer (attention/focus) before training: of the
                             --init-from model (its weights load, the Focus tensors W_g, C start fresh from --seed)
                             or of the preset / --config. OPTS: K=groups, k=top-k at inference, dg=group width d_g,
                             w=window, tau=τ, N=Sinkhorn iterations, gate=mask|literal, lambda=λ, beta=β (defaults:
                             K=8,k=2,dg=16,w=128,tau=0.1,N=10,gate=mask,lambda=10,beta=0.5), e.g. --add focus:K=8,k=2
  --add spot[:OPTS]          put a SpotAttention selector (attention/spot) beside every full-attention layer; the
                             selectors start fresh from --seed and learn by KL distillation from their layer (the
                             log's spotKL). OPTS: heads, dim, keys=f16|int4, rule=top-p|top-k, p, fraction,
                             loss=sparse|dense, ktrain=K_train as a fraction of the context (defaults: heads=4,
                             dim=128,keys=f16,rule=top-p,p=0.9,fraction=0.5,loss=sparse,ktrain=0.5)
  --train-only focus|spot    train only those layers' own tensors (Focus: W_g and C; Spot: the selectors); every
                             other tensor is saved as it was loaded
  --attention-schedule lighthouse:F,TARGET
                             the model's TARGET layers (full, focus, fpa, local, …) run Lighthouse Attention for the
                             first fraction F of the steps, then their own attention (the recovery; e.g.
                             lighthouse:0.8,full); the optimizer state carries over, a resume continues either phase
  --lighthouse OPTS          the Lighthouse layers' options: levels, pool, topk, tile, qk, scorer (norm or dilated),
                             dilation (the dilated scorer's fold, default 4) (defaults levels=3,
                             pool=4,topk=1536,tile=128; e.g. --lighthouse levels=3,pool=4,topk=512)
  --backend NAME             cpu, wasm, webgpu or auto (default: a hardware GPU, else wasm)
  --precision P              f32, bf16 or f16: matmuls and attention in P, master weights, optimizer state and
                             reductions in f32, f16 with dynamic loss scaling; checkpoints stay f32 (default auto:
                             the backend's fastest, f16 on a GPU with f16 tensor cores, else f32)
  --resume                   continue the run in DIR from its last checkpoint, exactly (data, model, tokenizer and
                             hyper-parameters come from the checkpoint; --steps, --backend and the evaluation,
                             checkpoint and sample flags may be given)
  --overwrite                start afresh even if DIR holds a checkpoint

training (defaults of --preset tiny in parentheses; small and base bring their own, train/preset_training.ts):
  --steps N (${TINY.steps})  --batch N (${TINY.batchSize})  --accumulate N (${TINY.accumulate})  --context N (the model's)
  --lr X (${TINY.lr})  --min-lr X (${TINY.minLr})  --warmup N (${TINY.warmup}; by default at most steps/10)  --weight-decay X (${TINY.weightDecay})  --grad-clip X (${TINY.gradClip})
  --eval-every N (${TINY.evalEvery})  --eval-windows N (${TINY.evalWindows})  --checkpoint-every N (${TINY.checkpointEvery})  --seed N (${TINY.seed})
  --final-eval-windows N     validation windows in the final evaluation (default: all)
  --stop-after N             stop after step N as Ctrl-C would (checkpoint written, resumable)
  --sample                   print a generated sample at the end
  --allow-non-finite         with --resume or --init-from: load weights that hold NaN or ±Inf
  --sample-tokens N          its length (default 200)`;

const FLAGS = {
  data: { type: 'string' }, out: { type: 'string' }, preset: { type: 'string' }, config: { type: 'string' },
  tokenizer: { type: 'string' }, backend: { type: 'string' }, resume: { type: 'boolean' }, overwrite: { type: 'boolean' },
  'allow-non-finite': { type: 'boolean' },
  steps: { type: 'string' }, batch: { type: 'string' }, accumulate: { type: 'string' }, context: { type: 'string' },
  lr: { type: 'string' }, 'min-lr': { type: 'string' }, warmup: { type: 'string' }, 'weight-decay': { type: 'string' },
  'grad-clip': { type: 'string' }, 'eval-every': { type: 'string' }, 'eval-windows': { type: 'string' },
  'checkpoint-every': { type: 'string' }, seed: { type: 'string' }, 'final-eval-windows': { type: 'string' },
  sample: { type: 'boolean' }, 'stop-after': { type: 'string' }, 'sample-tokens': { type: 'string' },
  'init-from': { type: 'string' }, precision: { type: 'string' }, add: { type: 'string' }, 'train-only': { type: 'string' },
  'attention-schedule': { type: 'string' }, lighthouse: { type: 'string' },
} as const;

type Flags = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/**
 * The description of a run that a resume needs to rebuild the same data and schedule: the corpus
 * (an absolute path, or builtin:brown), the tokenizer spec, the training config, and a fingerprint
 * of the token stores and the backend, checked on resume (a changed corpus would silently change
 * the batches; another backend rounds differently).
 */
interface RunSpec {
  data: string;
  tokenizer: string;
  train: TrainConfig;
  /** The model the run started from (--init-from), when not from fresh weights. */
  initFrom?: string;
  /** --add as given: the layers the run added to the model it started from (a record; the checkpoint's config holds them). */
  add?: string;
  /** --train-only: the part of the model trained, the rest frozen; a resume freezes the same so the optimizer state lines up. */
  trainOnly?: MechanismType;
  /** --attention-schedule: Lighthouse in the target's layers for the first part of the steps (train/attention_schedule.ts). */
  attentionSchedule?: AttentionSchedule;
  fingerprint?: { trainTokens: number; validationTokens: number; checksum: number; backend: string };
}

/**
 * The schedule of --attention-schedule TEXT with --lighthouse OPTS (k=v pairs, or the stored entry
 * of a resumed run): the Lighthouse entry parsed as a config entry of its own; errors as UsageErrors.
 */
function scheduleFlag(text: string, lighthouse: string | Record<string, unknown> | undefined, what = '--attention-schedule'): AttentionSchedule {
  try {
    let entry: Record<string, unknown> = { type: 'lighthouse' };
    if (typeof lighthouse === 'string') {
      for (const part of lighthouse.split(',')) {
        const eq = part.indexOf('=');
        if (eq <= 0 || eq === part.length - 1) throw new UsageError(`train: --lighthouse ${JSON.stringify(lighthouse)}: ${JSON.stringify(part)}: expected NAME=VALUE pairs such as levels=3,pool=4,topk=512`);
        const raw = part.slice(eq + 1).trim(), n = Number(raw);
        entry[part.slice(0, eq).trim()] = raw !== '' && Number.isFinite(n) ? n : raw;
      }
    } else if (lighthouse) entry = { ...lighthouse, type: 'lighthouse' };
    return parseAttentionSchedule(text, parseLayerAttention(entry, '--lighthouse') as LighthouseSpec, what);
  } catch (e) {
    if (e instanceof FonError && !(e instanceof UsageError)) throw new UsageError(`train: ${e.message}`);
    throw e;
  }
}

/** Flags a resumed run takes from its checkpoint; giving them with --resume is an error. */
const FIXED_BY_CHECKPOINT = ['data', 'preset', 'config', 'tokenizer', 'init-from', 'add', 'train-only', 'attention-schedule', 'lighthouse', 'batch', 'accumulate', 'context', 'lr', 'min-lr', 'warmup', 'weight-decay', 'grad-clip', 'seed', 'precision', 'overwrite'] as const;

/** FNV-1a over 1024 ids spread evenly through the store (and its length). */
function storeChecksum(store: TokenStore): number {
  let h = 0x811c9dc5 ^ store.length;
  const n = Math.min(1024, store.length);
  for (let i = 0; i < n; i++) {
    const at = Math.floor((i * store.length) / n);
    h = Math.imul(h ^ store.read(at, 1)[0], 0x01000193);
  }
  return h >>> 0;
}

interface LogEntry { step: number; [k: string]: number | string | number[] | Record<string, number> }

/** Fine-tuning from --init-from: a learning rate for weights that are already trained. */
const INIT_FROM_TRAIN: Partial<TrainConfig> = { lr: 1e-4, minLr: 1e-5 };

/** --precision: f32, bf16, f16 or auto (the default: the backend's fastest). */
function precisionFlag(s: string | undefined): Precision | 'auto' {
  if (s === undefined) return 'auto';
  if (!(PRECISIONS as readonly string[]).includes(s) && s !== 'auto') throw new UsageError(`train: --precision ${s}: expected ${PRECISIONS.join(', ')} or auto`);
  return s as Precision | 'auto';
}

/** The training defaults the flags override: the preset's (or INIT_FROM_TRAIN's) over DEFAULT_TRAIN. */
function trainDefaults(v: Flags): TrainConfig {
  return { ...DEFAULT_TRAIN, ...presetTraining(v.preset ?? 'tiny').train, ...(v['init-from'] !== undefined ? INIT_FROM_TRAIN : {}) };
}

/** --seed, or the defaults' (what trainConfigFrom will say), for what is made before the training config. */
const seedFlag = (v: Flags): number => numberFlag('train', 'seed', v.seed, trainDefaults(v).seed, { integer: true, min: 0 });

/** Flags over the preset's training defaults (or INIT_FROM_TRAIN's) over DEFAULT_TRAIN. */
function trainConfigFrom(v: Flags, context: number): TrainConfig {
  const n = (name: keyof Flags, fallback: number, o: { integer?: boolean; min?: number; max?: number } = {}) => numberFlag('train', name, v[name], fallback, o);
  const d = trainDefaults(v);
  const steps = n('steps', d.steps, { integer: true, min: 1 });
  return {
    steps, batchSize: n('batch', d.batchSize, { integer: true, min: 1 }),
    accumulate: n('accumulate', d.accumulate, { integer: true, min: 1 }), context: n('context', context, { integer: true, min: 1, max: context }),
    lr: n('lr', d.lr, { min: 0 }), minLr: n('min-lr', d.minLr, { min: 0 }), warmup: n('warmup', Math.min(d.warmup, Math.floor(steps / 10)), { integer: true, min: 0, max: steps }),
    weightDecay: n('weight-decay', d.weightDecay, { min: 0 }), beta1: d.beta1, beta2: d.beta2, gradClip: n('grad-clip', d.gradClip, { min: 0 }),
    evalEvery: n('eval-every', d.evalEvery, { integer: true, min: 0 }), evalWindows: n('eval-windows', d.evalWindows, { integer: true, min: 1 }),
    checkpointEvery: n('checkpoint-every', d.checkpointEvery, { integer: true, min: 0 }), seed: n('seed', d.seed, { integer: true, min: 0 }),
    precision: precisionFlag(v.precision),
  };
}

/** The preset under --config (read and validated before any data is touched); `vocabSet` says whether the file gave vocabSize. */
async function modelConfigFrom(v: Flags): Promise<{ cfg: ModelConfig; vocabSet: boolean }> {
  const cfg = preset(v.preset ?? 'tiny');
  if (!v.config) return { cfg, vocabSet: false };
  const kind = await pathKind(v.config);
  if (kind !== 'file') throw new UsageError(`train: --config ${v.config} ${kind === null ? 'does not exist' : 'is not a file'}; expected a model config JSON file`);
  const bytes = (await readFileIfExists(v.config))!;
  let json: unknown;
  json = parseJson(new TextDecoder().decode(bytes), (why) => new UsageError(`train: --config ${v.config}: ${why}`));
  const parsed = parseModelConfig(json, cfg, v.config);
  return { cfg: parsed, vocabSet: typeof json === 'object' && json !== null && Object.hasOwn(json, 'vocabSize') };
}

/** The config with the tokenizer's vocabulary (a vocabSize from the file may be larger: rounded up, never smaller). */
function withVocab(c: { cfg: ModelConfig; vocabSet: boolean }, vocabSize: number, where: string): ModelConfig {
  if (!c.vocabSet) return parseModelConfig({ vocabSize }, c.cfg);
  if (c.cfg.vocabSize < vocabSize) throw new UsageError(`train: ${where}: vocabSize ${c.cfg.vocabSize} is smaller than the tokenizer's ${vocabSize}`);
  return c.cfg;
}

/** "byte", or "bpe:N" with N ≥ 258; returns N (0 for bytes). */
function checkTokenizerSpec(spec: string): number {
  if (spec === 'byte') return 0;
  const m = /^bpe:(\d+)$/.exec(spec);
  if (!m) throw new UsageError(`train: --tokenizer ${JSON.stringify(spec)}: expected byte or bpe:N (e.g. bpe:4096)`);
  const size = Number(m[1]);
  if (size < 258 || size > 1 << 20) throw new UsageError(`train: --tokenizer ${spec}: a byte-level BPE needs 258 (256 bytes, a merge, ${END_OF_TEXT}) to ${1 << 20} tokens`);
  return size;
}

async function makeTokenizer(spec: string, corpus: Corpus, log: (s: string) => void): Promise<Tokenizer> {
  const size = checkTokenizerSpec(spec);
  if (size === 0) return byteTokenizer();
  const docs = await corpus.sampleForTokenizer();
  const bar = new Progress({ label: 'tokenizer', total: size, unit: 'tok' });
  const tok = trainBpe(docs, size, { onProgress: (done) => bar.update(done) });
  bar.finish();
  log(`tokenizer: byte-level BPE of ${tok.vocabSize} tokens`);
  return tok;
}

/** Validation windows, at most `max` of them. */
function* limited(store: TokenStore, context: number, max: number): Generator<EvalWindow> {
  let i = 0;
  for (const w of evalWindows(store, context)) { if (i++ >= max) return; yield w; }
}

async function plot(outDir: string, log: LogEntry[], focusIdeal: number | null): Promise<void> {
  const train = log.filter((e) => typeof e.loss === 'number').map((e) => [e.step, e.loss as number] as [number, number]);
  const val = log.filter((e) => typeof e.valLoss === 'number').map((e) => [e.step, e.valLoss as number] as [number, number]);
  const series = [{ name: 'train', points: train }, ...(val.length ? [{ name: 'validation', points: val }] : [])];
  if (train.length === 0) return;
  await writeFileAtomic(joinPath(outDir, 'loss.svg'), linePlot({ title: 'loss', xLabel: 'step', yLabel: 'cross-entropy (nats/token)', series }));
  await plotDominance(outDir, log, focusIdeal);
  await plotSpotKl(outDir, log);
}

/** DIR/spot_kl.svg for a model with Spot layers: the selectors' distillation KL on the training steps and the validation windows. Nothing without spotKL in the log. */
async function plotSpotKl(outDir: string, log: LogEntry[]): Promise<void> {
  const pick = (key: string) => log.filter((e) => typeof e[key] === 'number').map((e) => [e.step, e[key] as number] as [number, number]);
  const train = pick('spotKL'), val = pick('valSpotKL');
  if (train.length === 0) return;
  const series = [{ name: 'train', points: train }, ...(val.length ? [{ name: 'validation', points: val }] : [])];
  await writeFileAtomic(joinPath(outDir, 'spot_kl.svg'), linePlot({ title: 'Spot selectors: KL(teacher ‖ selector), mean over layers', xLabel: 'step', yLabel: 'KL (nats)', series }));
}

/**
 * DIR/dominance.svg for a model with Focus layers: at each evaluation, the largest group's share
 * of the memberships averaged over the Focus layers, the lowest and highest layer's, and the
 * balanced 1/K (when every layer has the same K). Nothing without focusDominance in the log.
 */
function plotDominance(outDir: string, log: LogEntry[], ideal: number | null): Promise<void> {
  const entries = log.filter((e) => typeof e.focusDominance === 'number');
  if (entries.length === 0) return Promise.resolve();
  const byLayer = (e: LogEntry) => Object.values(typeof e.focusLayerDominance === 'object' && !Array.isArray(e.focusLayerDominance) ? e.focusLayerDominance : {});
  const points = (f: (e: LogEntry) => number | undefined) => entries.flatMap((e) => { const y = f(e); return y === undefined ? [] : [[e.step, 100 * y] as [number, number]]; });
  const ext = (g: (...x: number[]) => number) => (e: LogEntry) => { const l = byLayer(e); return l.length > 1 ? g(...l) : undefined; };
  const steps = entries.map((e) => e.step);
  const series = [
    { name: 'mean over Focus layers', points: points((e) => e.focusDominance as number) },
    ...(entries.some((e) => byLayer(e).length > 1) ? [{ name: 'lowest layer', points: points(ext(Math.min)) }, { name: 'highest layer', points: points(ext(Math.max)) }] : []),
    ...(ideal !== null ? [{ name: 'balanced (1/K)', points: [[Math.min(...steps), 100 * ideal], [Math.max(...steps), 100 * ideal]] as [number, number][] }] : []),
  ];
  return writeFileAtomic(joinPath(outDir, 'dominance.svg'), linePlot({ title: 'Focus: largest group\'s share', xLabel: 'step', yLabel: 'share of group memberships (%)', series, markers: true }));
}

/** The exit head's validation figures for the log (models with organs). */
function exitEntry(e: EvalResult): Record<string, number> {
  return e.exit ? { valExitLoss: e.exit.loss, valExitBpb: e.exit.bitsPerByte } : {};
}

function writeLog(outDir: string, log: LogEntry[]): Promise<void> {
  return writeFileAtomic(joinPath(outDir, 'log.jsonl'), log.map((e) => JSON.stringify(e)).join('\n') + (log.length ? '\n' : ''));
}

async function readLog(outDir: string, upTo: number): Promise<LogEntry[]> {
  const bytes = await readFileIfExists(joinPath(outDir, 'log.jsonl'));
  if (!bytes) return [];
  const out: LogEntry[] = [];
  for (const line of new TextDecoder().decode(bytes).split('\n')) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line) as LogEntry;
      if (typeof e.step === 'number' && e.step <= upTo) out.push(e);
    } catch { /* a line cut by a crash: dropped, the resumed run rewrites the log */ }
  }
  return out;
}

export async function trainCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('train', argv, FLAGS);
  if (v.help) { console.log(TRAIN_USAGE); return 0; }
  const outDir = requireFlag('train', 'out', v.out);
  const say = (s: string) => console.error(s);

  // ---- set-up: a fresh run, or the state of the last checkpoint. Every flag is checked before
  // any data is read, a tokenizer fitted or a step trained.
  const outKind = await pathKind(outDir);
  if (outKind !== null && outKind !== 'dir') throw new UsageError(`train: --out ${outDir} exists and is not a directory`);
  const stopAfter = numberFlag('train', 'stop-after', v['stop-after'], Infinity, { integer: true, min: 1 });
  const finalWindows = numberFlag('train', 'final-eval-windows', v['final-eval-windows'], Infinity, { integer: true, min: 1 });
  const sampleTokens = numberFlag('train', 'sample-tokens', v['sample-tokens'], 200, { integer: true, min: 1 });
  let model: Decoder, tokenizer: Tokenizer, spec: RunSpec, corpus: Corpus, backend: Backend;
  let resumeDir: string | null = null;
  const hasCheckpoint = (await pathKind(joinPath(outDir, 'latest.json'))) === 'file';
  if (v.resume) {
    if (!hasCheckpoint) throw new UsageError(`train: --resume: ${outDir} holds no checkpoint (no latest.json)`);
    const fixed = FIXED_BY_CHECKPOINT.filter((k) => v[k] !== undefined);
    if (fixed.length) throw new UsageError(`train: --resume continues the run as its checkpoint describes it; drop ${fixed.map((k) => `--${k}`).join(', ')} (only --steps, --backend and the evaluation, checkpoint and sample flags may change)`);
    const dir = await resolveCheckpointDir(outDir);
    const state = await readTrainerState(dir);
    spec = state.run as unknown as RunSpec;
    if (typeof spec.data !== 'string' || typeof spec.tokenizer !== 'string' || typeof spec.train !== 'object' || spec.train === null) {
      throw new UsageError(`train: --resume: ${dir}/trainer.json has no run description ("run": {"data", "tokenizer", "train"})`);
    }
    const t = spec.train = parseTrainConfig(spec.train, `${dir}/trainer.json: run.train`); // a resumed run is held to the flags' rules
    if (v.steps !== undefined) {
      t.steps = numberFlag('train', 'steps', v.steps, t.steps, { integer: true, min: Math.max(1, state.step) });
      if (t.steps < t.warmup) throw new UsageError(`train: --steps ${t.steps} is shorter than the run's warm-up of ${t.warmup} steps`);
      say(`warning: --steps changes the cosine schedule, so the resumed run no longer follows the uninterrupted one exactly`);
    }
    t.evalEvery = numberFlag('train', 'eval-every', v['eval-every'], t.evalEvery, { integer: true, min: 0 });
    t.evalWindows = numberFlag('train', 'eval-windows', v['eval-windows'], t.evalWindows, { integer: true, min: 1 });
    t.checkpointEvery = numberFlag('train', 'checkpoint-every', v['checkpoint-every'], t.checkpointEvery, { integer: true, min: 0 });
    backend = await backendFromFlag('train', v.backend);
    const loaded = await loadModel(dir, backend, { allowNonFinite: v['allow-non-finite'] });
    ({ model, tokenizer } = loaded);
    resumeDir = loaded.dir;
    if (spec.trainOnly !== undefined && !(COMPOSABLE as readonly string[]).includes(spec.trainOnly)) throw new UsageError(`train: --resume: ${dir}/trainer.json: run.trainOnly = ${JSON.stringify(spec.trainOnly)}: expected one of ${COMPOSABLE.map((t) => JSON.stringify(t)).join(', ')} or no key`);
    checkTrainOnly(spec.trainOnly, model.config);
    // The schedule as its checkpoint stored it, checked as the flags are.
    if (spec.attentionSchedule) spec.attentionSchedule = scheduleFlag(`lighthouse:${spec.attentionSchedule.fraction},${spec.attentionSchedule.target}`, { ...spec.attentionSchedule.lighthouse }, `${dir}/trainer.json: run.attentionSchedule`);
    corpus = await loadCorpus(spec.data);
    say(`resuming ${loaded.dir} at step ${state.step}`);
  } else {
    if (hasCheckpoint && !v.overwrite) throw new UsageError(`train: ${outDir} already holds a checkpoint; pass --resume to continue it or --overwrite to start afresh`);
    const data = requireFlag('train', 'data', v.data);
    const add = v.add !== undefined ? parseAddFlag(v.add) : undefined;
    const trainOnly = trainOnlyFlag(v['train-only']);
    const schedule = v['attention-schedule'] !== undefined ? scheduleFlag(v['attention-schedule'], v.lighthouse) : undefined;
    if (v.lighthouse !== undefined && !schedule) throw new UsageError('train: --lighthouse sets the Lighthouse layers of an --attention-schedule; give one (e.g. --attention-schedule lighthouse:0.8,full)');
    const composeRun = { ...(v.add !== undefined ? { add: v.add } : {}), ...(trainOnly ? { trainOnly } : {}), ...(schedule ? { attentionSchedule: schedule } : {}) };
    if (v['init-from'] !== undefined) {
      // Fine-tuning: the model brings its config, tokenizer and weights.
      const clash = (['preset', 'config', 'tokenizer'] as const).filter((k) => v[k] !== undefined);
      if (clash.length) throw new UsageError(`train: --init-from ${v['init-from']} brings the model's config and tokenizer; drop ${clash.map((k) => `--${k}`).join(', ')}`);
      backend = await backendFromFlag('train', v.backend);
      const seed = seedFlag(v);
      // --add: the stored config with the mechanism's layers for the ones it composes onto; their own tensors start fresh.
      let added: number[] = [];
      const adapt = add ? {
        config: (c: ModelConfig) => {
          added = composedLayers(add.type, c);
          return addComposedLayers(c, add, v.add!);
        },
        freshMissing: isComposedParameter, seed,
      } : undefined;
      const init = await loadModel(v['init-from'], backend, { allowNonFinite: v['allow-non-finite'], adapt });
      ({ model, tokenizer } = init);
      try {
        checkTrainOnly(trainOnly, model.config);
      } catch (e) {
        model.dispose();
        throw e;
      }
      const train = trainConfigFrom(v, model.config.contextLength);
      corpus = await loadCorpus(data);
      spec = { data: corpus.name, tokenizer: `from ${init.dir}`, train, initFrom: init.dir, ...composeRun };
      say(`starting from ${init.dir}`);
      if (add) {
        const label = model.layers[added[0]].attn.mechanism.name;
        const w = composedWords(add.type);
        say(`--add ${v.add}: ${added.length === 1 ? `layer ${added[0]} is a ${w.label} layer` : `layers ${added.join(', ')} are ${w.label} layers`} (${label}); their ${w.trains} start fresh (seed ${seed})`);
      }
    } else {
      const base = await modelConfigFrom(v);
      if (add) base.cfg = addComposedLayers(base.cfg, add, v.add!);
      checkTrainOnly(trainOnly, base.cfg);
      const tokSpec = v.tokenizer ?? presetTraining(v.preset ?? 'tiny').tokenizer;
      checkTokenizerSpec(tokSpec);
      const train = trainConfigFrom(v, base.cfg.contextLength);
      backend = await backendFromFlag('train', v.backend);
      corpus = await loadCorpus(data);
      tokenizer = await makeTokenizer(tokSpec, corpus, say);
      const cfg = withVocab(base, tokenizer.vocabSize, v.config ?? `preset ${v.preset ?? 'tiny'}`);
      spec = { data: corpus.name, tokenizer: tokSpec, train, ...composeRun };
      model = new Decoder(cfg, new ParamFactory({ backend, seed: train.seed }));
    }
  }
  const tc = spec.train;
  const schedule = spec.attentionSchedule;
  let scheduled: number[] = [];
  if (schedule) {
    try {
      scheduled = scheduledLayers(schedule, model);
    } catch (e) {
      model.dispose();
      throw e instanceof FonError ? new UsageError(`train: ${e.message}`) : e;
    }
  }
  const stores = await corpus.tokenStores(tokenizer, tc.context);
  const fingerprint = { trainTokens: stores.train.length, validationTokens: stores.validation.length, checksum: storeChecksum(stores.train), backend: backend.name };
  if (resumeDir && spec.fingerprint) {
    const was = spec.fingerprint;
    if (was.trainTokens !== fingerprint.trainTokens || was.validationTokens !== fingerprint.validationTokens || was.checksum !== fingerprint.checksum) {
      throw new UsageError(`train: --resume: the corpus ${spec.data} changed since the checkpoint (${was.trainTokens} + ${was.validationTokens} tokens then, ${fingerprint.trainTokens} + ${fingerprint.validationTokens} now, or other ids); resuming would train on other batches`);
    }
    if (was.backend !== backend.name) say(`warning: the run was trained on ${was.backend} and resumes on ${backend.name}: the loss curve will differ by rounding (pass --backend ${was.backend} to continue exactly)`);
  }
  spec.fingerprint = fingerprint;
  // --train-only NAME (also on resume, so the optimizer's state indexes the same tensors): only that mechanism's own tensors train.
  const frozen = spec.trainOnly !== undefined ? freezeAllBut(spec.trainOnly, model) : null;
  const resumed = resumeDir ? await readTrainerState(resumeDir) : null;
  const trainer = new Trainer(model, new BatchSampler(stores.train, { batch: tc.batchSize, context: tc.context, seed: tc.seed }), tc, resumed?.lossScale);
  // The run description keeps the precision the steps really take ('auto' resolved), so a resume on
  // another backend continues in it (or says it cannot).
  tc.precision = trainer.precision;
  let log: LogEntry[] = [];
  if (resumeDir) {
    const state = resumed!;
    await loadOptimizerState(resumeDir, state, trainer.optimizer, backend);
    trainer.step = state.step;
    log = await readLog(outDir, state.step);
  }
  const byteLengths = tokenByteLengths(tokenizer, model.config.vocabSize);
  say(`model: ${(model.parameterCount() / 1e6).toFixed(2)}M parameters, ${model.config.nLayers} layers, d=${model.config.dModel}; backend ${backend.name}, precision ${trainer.precision}; `
    + `data ${spec.data}: ${stores.train.length} training and ${stores.validation.length} validation tokens`);
  if (frozen) {
    const n = model.layers.filter((_, i) => layerAttention(model.config, i).type === spec.trainOnly).length;
    const w = composedWords(spec.trainOnly!);
    say(`--train-only ${spec.trainOnly}: training ${frozen.trained.toLocaleString('en-US')} of ${frozen.total.toLocaleString('en-US')} parameters (${w.trains} of ${n} ${w.label} layer${n === 1 ? '' : 's'}), the rest frozen`);
  }
  /** 1/K when every Focus layer has the same K (the balanced share, drawn in dominance.svg). */
  const groups = new Set(focusLayers(model).map(([, f]) => f.spec.groups));
  const focusIdeal = groups.size === 1 ? 1 / [...groups][0] : null;

  let savedStep = -1;
  const save = async () => {
    savedStep = trainer.step;
    const name = `step-${String(trainer.step).padStart(6, '0')}`;
    const opt = trainer.optimizer.stateDict();
    await saveCheckpoint(outDir, name, model, tokenizer, {
      optimizer: trainer.optimizer,
      trainer: { step: trainer.step, optimizerScalars: opt.scalars, run: spec as unknown as Record<string, unknown>, ...(trainer.lossScale ? { lossScale: trainer.lossScale.state() } : {}) },
    });
    await writeLog(outDir, log);
    await plot(outDir, log, focusIdeal);
  };
  /** An evaluation; with Focus layers also their groups' dominance over the validation tokens alone (the training steps' counts are dropped first). */
  const validate = async (windows: number, label: string): Promise<EvalResult & { focus: FocusDominance | null; spotKL: number | null }> => {
    const total = Math.min(windows, Math.max(1, Math.ceil((stores.validation.length - 1) / tc.context)));
    const bar = new Progress({ label, total, unit: 'win' });
    resetFocusStats(model);
    const r = await evaluate(model, limited(stores.validation, tc.context, windows), { byteLengths, batch: tc.batchSize, onProgress: (n) => bar.update(n) });
    bar.finish();
    const focus = await measureFocusDominance(model);
    const spotKL = await spotValidationKL(model, limited(stores.validation, tc.context, Math.min(windows, SPOT_KL_WINDOWS)));
    return { ...r, focus, spotKL };
  };

  // ---- the loop
  let stop = false;
  const onSigint = () => {
    if (stop) process.exit(130);
    stop = true;
    say('\ninterrupt: finishing this step and writing a checkpoint (Ctrl-C again to quit at once; the last checkpoint stays intact)');
  };
  process.on('SIGINT', onSigint);
  const tokensPerStep = tc.accumulate * tc.batchSize * tc.context;
  const bar = new Progress({ label: 'train', total: tc.steps * tokensPerStep, unit: 'tok', start: trainer.step * tokensPerStep });
  if (schedule) {
    const at = switchStep(schedule, tc.steps), lh = schedule.lighthouse;
    const phase = applyPhase(schedule, model, trainer.step, tc.steps);
    const which = `layer${scheduled.length === 1 ? '' : 's'} ${scheduled.join(', ')}`;
    say(phase === 'lighthouse'
      ? `--attention-schedule: ${which} run Lighthouse (L=${lh.levels}, p=${lh.pool}, k=${lh.topk}) until step ${at}, then their own ${schedule.target} attention`
      : `--attention-schedule: ${which} run their own ${schedule.target} attention (Lighthouse ended at step ${at})`);
  }
  try {
    while (trainer.step < tc.steps && !stop) {
      const r: StepResult = await trainer.trainStep();
      // A step on the CPU backends never leaves the microtask queue (its reads resolve at once), so the
      // SIGINT handler would wait for the next checkpoint's file writes: give the event loop a turn.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const organTerms: Record<string, number> = r.exitLoss !== undefined ? { exitLoss: r.exitLoss, distill: r.distill! } : {};
      // f16: the loss scale after the step, and whether its update was skipped for an overflow.
      const scaling: Record<string, number> = trainer.lossScale ? { lossScale: trainer.lossScale.scale, ...(r.skipped ? { skipped: 1 } : {}) } : {};
      log.push({ step: r.step, loss: r.loss, lr: r.lr, gradNorm: r.gradNorm, ...organTerms, ...scaling, ...r.terms });
      if (!Number.isFinite(r.loss)) throw new UsageError(`train: the loss became ${r.loss} at step ${r.step}; lower --lr (now ${tc.lr})`);
      bar.update(r.step * tokensPerStep, { step: `${r.step}/${tc.steps}`, loss: r.loss.toFixed(3), ...(r.exitLoss !== undefined ? { exit: r.exitLoss.toFixed(3), kl: r.distill!.toPrecision(3) } : {}), ...(r.terms?.spotKL !== undefined ? { spotKL: r.terms.spotKL.toPrecision(3) } : {}) });
      const last = r.step === tc.steps;
      if (schedule && r.step === switchStep(schedule, tc.steps)) {
        applyPhase(schedule, model, r.step, tc.steps);
        bar.log(`step ${r.step}: Lighthouse ends; layers ${scheduled.join(', ')} recover with their own ${schedule.target} attention`);
      }
      if (tc.evalEvery > 0 && r.step % tc.evalEvery === 0 && !last) {
        const e = await validate(tc.evalWindows, 'eval');
        log.push({ step: r.step, valLoss: e.loss, valBpb: e.bitsPerByte, ...exitEntry(e), ...focusLogFields(e.focus), ...(e.spotKL !== null ? { valSpotKL: e.spotKL } : {}) });
        bar.log(`step ${r.step}: validation loss ${e.loss.toFixed(4)}, bits per byte ${e.bitsPerByte.toFixed(3)}${e.exit ? `; exit head loss ${e.exit.loss.toFixed(4)}, bits per byte ${e.exit.bitsPerByte.toFixed(3)}` : ''}`);
        if (e.focus) for (const line of focusDominanceLines(e.focus)) bar.log(line);
        if (e.spotKL !== null) bar.log(`spot: selectors' KL on validation ${e.spotKL.toPrecision(4)} nats`);
        // The log and the plots follow each evaluation, not only the checkpoints (a resume reads the
        // log back to its checkpoint's step, so the lines past it are dropped then).
        await makeDir(outDir);
        await writeLog(outDir, log);
        await plot(outDir, log, focusIdeal);
      }
      if ((tc.checkpointEvery > 0 && r.step % tc.checkpointEvery === 0) || last) await save();
      if (r.step >= stopAfter && !last) stop = true;
    }
    bar.finish();
    if (stop) {
      if (savedStep !== trainer.step) await save();
      say(`stopped at step ${trainer.step}; continue with: fon train --out ${outDir} --resume`);
      return 130;
    }
  } finally {
    process.off('SIGINT', onSigint);
  }

  // ---- finish: full evaluation, the log and plot, a sample
  const e = await validate(finalWindows, 'validation');
  log.push({ step: trainer.step, valLoss: e.loss, valBpb: e.bitsPerByte, ...exitEntry(e), ...focusLogFields(e.focus), ...(e.spotKL !== null ? { valSpotKL: e.spotKL } : {}) });
  await writeLog(outDir, log);
  await plot(outDir, log, focusIdeal);
  console.log(`validation: perplexity ${e.perplexity.toFixed(2)}, bits per byte ${e.bitsPerByte.toFixed(3)} (${e.tokens} tokens, ${e.bytes} bytes)`);
  if (e.focus) for (const line of focusDominanceLines(e.focus)) console.log(line);
  if (e.spotKL !== null) console.log(`spot: selectors' KL(teacher ‖ selector) on validation ${e.spotKL.toPrecision(4)} nats (mean over layers; curve ${joinPath(outDir, 'spot_kl.svg')})`);
  if (e.exit) console.log(`validation, exit head after ${e.exit.draftLayers} of ${model.config.nLayers} layers: perplexity ${e.exit.perplexity.toFixed(2)}, bits per byte ${e.exit.bitsPerByte.toFixed(3)}`);
  console.log(`checkpoint: ${outDir} (loss plot ${joinPath(outDir, 'loss.svg')}${e.focus ? `, Focus dominance ${joinPath(outDir, 'dominance.svg')}` : ''})`);
  // A model with training-only layers (Lighthouse) cannot decode: no sample, and why.
  const trainingOnly = model.layers.map((_, i) => i).filter((i) => describeMechanism(layerAttention(model.config, i)).facts.trainingOnly === true);
  if (v.sample && trainingOnly.length) {
    console.log(`sample: none — layer${trainingOnly.length === 1 ? '' : 's'} ${trainingOnly.join(', ')} ${trainingOnly.length === 1 ? 'is' : 'are'} training-only (${model.layers[trainingOnly[0]].attn.mechanism.name}) and cannot decode; train the recovery with --attention-schedule lighthouse:F,full on a model of full layers`);
  } else if (v.sample) {
    const n = sampleTokens;
    console.log('sample:');
    process.stdout.write('  ');
    await generate(model, tokenizer, '', { maxTokens: n, temperature: 0.8, topK: 40, seed: tc.seed, onText: (s) => process.stdout.write(s.replace(/\n/g, '\n  ')) });
    process.stdout.write('\n');
  }
  trainer.dispose();
  model.dispose();
  stores.train.close();
  stores.validation.close();
  return 0;
}
