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
import { checkpointConfigJson } from '../model/config.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { readCheckpointFile, readCheckpointText, resolveCheckpointDir, writeCheckpointDir, CheckpointError } from './checkpoint_dir.ts';
import { isHfModelDir, loadHfModel } from './hf/load_dir.ts';
import { isHubName, resolveHubModel } from './hf/hub_cache.ts';
import { pathKind } from '../platform/files.ts';
import { decodeSafetensors, safetensorsToTensors, tensorsToSafetensors } from './safetensors.ts';
import type { Tokenizer } from './tokenizer/tokenizer.ts';
import type { Optimizer } from '../train/optim.ts';
import { parseCheckpointJson } from './json.ts';

export { MODEL_FILE, TOKENIZER_FILE };
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



export type { LoadModelOptions, ModelAdaptation, LoadedModel } from './load_folder.ts';
import { loadFonFolder, MODEL_FILE, TOKENIZER_FILE, type LoadModelOptions, type LoadedModel } from './load_folder.ts';
import { nodeFolder } from '../platform/node_folder.ts';

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
  return { ...(await loadFonFolder(nodeFolder(dir), backend, opts)), dir };
}

/** The trainer state of a checkpoint written during training, checked field by field. */
export async function readTrainerState(dir: string): Promise<TrainerState> {
  const file = `${dir}/${TRAINER_FILE}`;
  const state = parseCheckpointJson(await readCheckpointText(dir, TRAINER_FILE), file) as Partial<TrainerState> | null;
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
