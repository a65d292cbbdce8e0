/**
 * A model folder (model_folder.ts: a directory, a URL, Files, bytes in memory) loaded in one call,
 * in Node and in a browser alike: a Hugging Face folder (hf/load.ts) or a FON checkpoint folder
 * (config.json, tokenizer.json, model.safetensors as saveCheckpoint writes them). `loadFolder` makes
 * the LanguageModel; Node's `load(dir)` (load.ts) and `loadModel(path)` (model_checkpoint.ts) add
 * what only a disk has (an output directory's latest checkpoint, the Hugging Face cache).
 */
import type { Backend } from '../backend/backend.ts';
import { getBackend } from '../backend/registry.ts';
import { CheckpointError } from '../errors.ts';
import { LanguageModel } from '../infer/language_model.ts';
import { parseModelConfig, requireEveryKey, type ModelConfig } from '../model/config.ts';
import { Decoder } from '../model/decoder.ts';
import { ParamFactory } from '../nn/params.ts';
import type { ChatTemplate } from './hf/chat_template.ts';
import { isHfFolder, loadHfFolder, type HfGenerationDefaults } from './hf/load.ts';
import { parseCheckpointJson } from './json.ts';
import { readRequiredFile, readRequiredText, type ModelFolder } from './model_folder.ts';
import { decodeSafetensors, safetensorsToTensors } from './safetensors.ts';
import { loadTokenizer, type Tokenizer } from './tokenizer/tokenizer.ts';
import { storedDtype, weightDtype, type WeightDtypeChoice } from './weight_dtype.ts';

/** A FON checkpoint's weights, tokenizer and config files. */
export const MODEL_FILE = 'model.safetensors';
export const TOKENIZER_FILE = 'tokenizer.json';

export interface LoadedModel {
  model: Decoder;
  tokenizer: Tokenizer;
  config: ModelConfig;
  /** The folder that was read (its path or URL). */
  dir: string;
  /** For a Hugging Face folder: its model_type (gpt2, llama, mistral, qwen2, qwen3). */
  architecture?: string;
  /** For a Hugging Face folder: generation_config.json's sampling defaults, null without one. */
  generation?: HfGenerationDefaults | null;
  /** For a Hugging Face folder: its chat template, null without one. */
  chatTemplate?: ChatTemplate | null;
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
 * The model and tokenizer of a FON checkpoint folder: config.json (unknown keys and bad values
 * refused before any tensor is read), tokenizer.json, model.safetensors (every tensor the config
 * plans, of its shape, none left over). Errors name the file. With `adapt`, the model (and the
 * returned config) is the adapted one.
 */
export async function loadFonFolder(folder: ModelFolder, backend: Backend, opts: LoadModelOptions = {}): Promise<LoadedModel> {
  const text = (name: string) => readRequiredText(folder, name);
  const cfgFile = folder.pathOf('config.json');
  const cfgJson = parseCheckpointJson(await text('config.json'), cfgFile);
  const config = parseModelConfig(cfgJson, undefined, cfgFile); // unknown keys and bad values first
  requireEveryKey(cfgJson, cfgFile);
  const built = opts.adapt ? opts.adapt.config(config) : config; // before any tensor is read
  const tokFile = folder.pathOf(TOKENIZER_FILE);
  const tokenizer = loadTokenizer(parseCheckpointJson(await text(TOKENIZER_FILE), tokFile), tokFile);
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new CheckpointError(`${tokFile} has ${tokenizer.vocabSize} tokens but ${cfgFile} says vocabSize ${config.vocabSize}`);
  }
  const modelFile = folder.pathOf(MODEL_FILE);
  const decoded = decodeSafetensors(await readRequiredFile(folder, MODEL_FILE), modelFile);
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
    return { model, tokenizer, config: built, dir: folder.path };
  } finally {
    for (const t of Object.values(weights)) t.dispose();
  }
}

/** The model of `folder`, a Hugging Face folder or a FON checkpoint folder (whichever its config.json says). */
export async function loadFolderModel(folder: ModelFolder, backend: Backend, opts: LoadModelOptions = {}): Promise<LoadedModel> {
  if (await isHfFolder(folder)) return { ...(await loadHfFolder(folder, backend, opts)), dir: folder.path };
  return loadFonFolder(folder, backend, opts);
}

/**
 * A model folder as a LanguageModel (generate, stream, chat, eval), on `opts.backend` (default: the
 * current backend, ops/registry's): the browser's one-call loader, e.g.
 *   await loadFolder(urlFolder('https://…/resolve/main'), { backend: await initBackend('webgpu') }).
 */
export async function loadFolder(folder: ModelFolder, opts: { backend?: Backend } & LoadModelOptions = {}): Promise<LanguageModel> {
  const { backend, ...rest } = opts;
  return new LanguageModel(await loadFolderModel(folder, backend ?? getBackend(), rest));
}
