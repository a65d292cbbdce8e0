/**
 * A FON checkpoint: one directory (io/checkpoint_dir.ts makes its writes atomic) holding
 *
 *   config.json           the model config (model/config.ts)
 *   model.safetensors     the parameters by name (model/decoder.ts lists them)
 *   tokenizer.json        the tokenizer, Hugging Face format
 *   optimizer.safetensors AdamW moments (m.i, v.i), when saved during training
 *   trainer.json          step, optimizer scalars, the training config and data description
 *
 * `loadModel` needs the first three; `fon train --resume` needs all five. `loadModel` also reads
 * a Hugging Face model folder (io/hf/load.ts), told apart by its config.json.
 */
import { parseLossScale, type LossScaleState } from '../train/loss_scale.ts';
import type { Backend } from '../backend/backend.ts';
import { clip, FonError, showValue } from '../errors.ts';
import { Decoder } from '../model/decoder.ts';
import { checkpointConfigJson, parseModelConfig, requireEveryKey, type ModelConfig } from '../model/config.ts';
import { ParamFactory } from '../nn/params.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { readCheckpointFile, readCheckpointText, resolveCheckpointDir, writeCheckpointDir, CheckpointError } from './checkpoint_dir.ts';
import type { HfGenerationDefaults } from './hf/load.ts';
import { isHfModelDir, loadHfModel } from './hf/load_dir.ts';
import type { ChatTemplate } from './hf/chat_template.ts';
import { isHubName, resolveHubModel } from './hf/hub_cache.ts';
import { pathKind } from '../platform/files.ts';
import { decodeSafetensors, safetensorsToTensors, tensorsToSafetensors } from './safetensors.ts';
import { loadTokenizer } from './tokenizer/tokenizer.ts';
import type { Tokenizer } from './tokenizer/tokenizer.ts';
import type { Optimizer } from '../train/optim.ts';
import { parseJson } from './json.ts';
import { storedDtype, weightDtype, type WeightDtypeChoice } from './weight_dtype.ts';

export const MODEL_FILE = 'model.safetensors';
export const TOKENIZER_FILE = 'tokenizer.json';
export const OPTIMIZER_FILE = 'optimizer.safetensors';
export const TRAINER_FILE = 'trainer.json';

const TRAINER_KEYS = ['step', 'optimizerScalars', 'run', 'lossScale'];

/** What training needs beyond the weights to continue exactly where it stopped. */
export interface TrainerState {
  step: number;
  optimizerScalars: Record<string, number>;
  /** The training config and data description of the run (JSON). */
  run: Record<string, unknown>;
  /** f16 training's dynamic loss scale (train/loss_scale.ts); absent in f32 and bf16. */
  lossScale?: LossScaleState;
}

export interface SaveOptions {
  optimizer?: Optimizer;
  trainer?: TrainerState;
  /** Checkpoints kept in the output directory (default 1). */
  keep?: number;
}

/** Writes checkpoint `name` (e.g. "step-000200") under `outDir` and points latest.json at it. */
export async function saveCheckpoint(outDir: string, name: string, model: Decoder, tokenizer: Tokenizer, opts: SaveOptions = {}): Promise<string> {
  const files: Record<string, Uint8Array | string> = {
    'config.json': JSON.stringify(checkpointConfigJson(model.config), null, 2) + '\n',
    [MODEL_FILE]: await tensorsToSafetensors(Object.fromEntries(model.namedParameters()), { format: 'pt', producer: 'fon' }),
    [TOKENIZER_FILE]: JSON.stringify(tokenizer.toJSON()),
  };
  if (opts.optimizer) files[OPTIMIZER_FILE] = await tensorsToSafetensors(opts.optimizer.stateDict().tensors);
  if (opts.trainer) files[TRAINER_FILE] = JSON.stringify(opts.trainer, null, 2) + '\n';
  return writeCheckpointDir(outDir, name, files, { keep: opts.keep });
}

export interface LoadedModel {
  model: Decoder;
  tokenizer: Tokenizer;
  config: ModelConfig;
  /** The checkpoint directory that was read. */
  dir: string;
  /** For a Hugging Face folder: its model_type (gpt2, llama, mistral, qwen2, qwen3). */
  architecture?: string;
  /** For a Hugging Face folder: generation_config.json's sampling defaults, null without one. */
  generation?: HfGenerationDefaults | null;
  /** For a Hugging Face folder: its chat template, null without one. */
  chatTemplate?: ChatTemplate | null;
}

function parseJsonFile(text: string, file: string): unknown {
  return parseJson(text, (why) => new CheckpointError(`${file}: ${why}`));
}

/**
 * A model built from another config than the one stored (`fon train --init-from DIR --add focus`):
 * `config` maps the stored config to the one built; the stored tensors load as usual and the
 * parameters the checkpoint lacks whose names `freshMissing` accepts are initialised fresh from
 * `seed` (ParamFactory freshMissing). Any other missing or misshapen tensor is the usual error.
 */
export interface ModelAdaptation {
  config: (stored: ModelConfig) => ModelConfig;
  freshMissing: (name: string) => boolean;
  seed: number;
}

/** How a model is loaded. */
export interface LoadModelOptions {
  /** Load weights that hold NaN or ±Inf (by default a SafetensorsError names the tensor and the count). */
  allowNonFinite?: boolean;
  /** Build another model than the stored config describes, over its weights (ModelAdaptation). */
  adapt?: ModelAdaptation;
  /** The dtype the weights are kept in (weight_dtype.ts): 'auto' (the default), f32, f16 or bf16. */
  dtype?: WeightDtypeChoice;
}

/**
 * Loads the model and tokenizer of a checkpoint (an output directory or a checkpoint directory),
 * or of a Hugging Face model folder (weights in f32), or of a model named org/name in the local
 * Hugging Face cache (hf/hub_cache.ts; never downloaded). With `adapt`, the model (and the returned
 * config) is the adapted one.
 */
export async function loadModel(path: string, backend: Backend, opts: LoadModelOptions = {}): Promise<LoadedModel> {
  // A name like org/name that is not a path here: the local Hugging Face cache's snapshot of it.
  if (isHubName(path) && (await pathKind(path)) === null) path = await resolveHubModel(path);
  if (await isHfModelDir(path)) return { ...(await loadHfModel(path, backend, opts)), dir: path };
  const dir = await resolveCheckpointDir(path);
  const cfgFile = `${dir}/config.json`;
  const cfgJson = parseJsonFile(await readCheckpointText(dir, 'config.json'), cfgFile);
  const config = parseModelConfig(cfgJson, undefined, cfgFile); // unknown keys and bad values first
  requireEveryKey(cfgJson, cfgFile);
  const built = opts.adapt ? opts.adapt.config(config) : config; // before any tensor is read
  const tokFile = `${dir}/${TOKENIZER_FILE}`;
  const tokenizer = loadTokenizer(parseJsonFile(await readCheckpointText(dir, TOKENIZER_FILE), tokFile), tokFile);
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new CheckpointError(`${tokFile} has ${tokenizer.vocabSize} tokens but ${cfgFile} says vocabSize ${config.vocabSize}`);
  }
  const modelFile = `${dir}/${MODEL_FILE}`;
  const decoded = decodeSafetensors(await readCheckpointFile(dir, MODEL_FILE), modelFile);
  const dtype = weightDtype(opts.dtype ?? 'auto', storedDtype(Object.values(decoded.tensors)), backend);
  const weights = safetensorsToTensors(decoded, { backend, source: modelFile, finite: !opts.allowNonFinite, dtype });
  const a = opts.adapt;
  const f = new ParamFactory({ backend, dtype, weights, source: modelFile, ...(a ? { freshMissing: a.freshMissing, seed: a.seed } : {}) });
  try {
    let model: Decoder;
    try {
      model = new Decoder(built, f);
    } catch (e) {
      f.disposeMade(); // a tensor missing or misshapen part-way: free what was built
      throw e;
    }
    const extra = f.unused();
    if (extra.length) {
      model.dispose();
      throw new CheckpointError(`${modelFile} has tensors the config does not use: ${extra.slice(0, 5).join(', ')}${extra.length > 5 ? ', …' : ''}`);
    }
    return { model, tokenizer, config: built, dir };
  } finally {
    for (const t of Object.values(weights)) t.dispose();
  }
}

/** The trainer state of a checkpoint written during training, checked field by field. */
export async function readTrainerState(dir: string): Promise<TrainerState> {
  const file = `${dir}/${TRAINER_FILE}`;
  const state = parseJsonFile(await readCheckpointText(dir, TRAINER_FILE), file) as Partial<TrainerState> | null;
  const ok = state !== null && typeof state === 'object' && Number.isInteger(state.step) && (state.step as number) >= 0
    && typeof state.optimizerScalars === 'object' && state.optimizerScalars !== null
    && typeof state.run === 'object' && state.run !== null;
  if (!ok) throw new CheckpointError(`${file}: expected {"step": integer, "optimizerScalars": {...}, "run": {...}}, got ${showValue(state, 200)}`);
  for (const k of Object.keys(state)) if (!TRAINER_KEYS.includes(k)) throw new CheckpointError(`${file}: unknown key '${clip(k, 80)}'; expected ${TRAINER_KEYS.join(', ')}`);
  for (const [k, x] of Object.entries(state.optimizerScalars as Record<string, unknown>)) {
    const bad = typeof x !== 'number' || !Number.isFinite(x) || x < 0 || (k === 't' && !Number.isInteger(x));
    if (bad) throw new CheckpointError(`${file}: optimizerScalars '${clip(k, 80)}' = ${showValue(x)}: expected ${k === 't' ? 'an integer' : 'a finite number'} ≥ 0`);
  }
  if (state.lossScale !== undefined) {
    try {
      state.lossScale = parseLossScale(state.lossScale, `${file}: lossScale`);
    } catch (e) {
      if (e instanceof FonError) throw new CheckpointError(e.message);
      throw e;
    }
  }
  return state as TrainerState;
}

/** Restores the optimizer moments and step count saved beside `state`. */
export async function loadOptimizerState(dir: string, state: TrainerState, optimizer: Optimizer, backend: Backend): Promise<void> {
  const optFile = `${dir}/${OPTIMIZER_FILE}`;
  const tensors: Record<string, Tensor> = safetensorsToTensors(decodeSafetensors(await readCheckpointFile(dir, OPTIMIZER_FILE), optFile), { backend, source: optFile, finite: true });
  try {
    optimizer.loadStateDict({ tensors, scalars: state.optimizerScalars });
  } catch (e) {
    if (e instanceof FonError) throw new CheckpointError(`${optFile}: ${e.message}`);
    throw e;
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}

/** readTrainerState, then loadOptimizerState: what `fon train --resume` needs beyond the model. */
export async function loadTrainerState(dir: string, optimizer: Optimizer, backend: Backend): Promise<TrainerState> {
  const state = await readTrainerState(dir);
  await loadOptimizerState(dir, state, optimizer, backend);
  return state;
}
