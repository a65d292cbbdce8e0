/**
 * Loads a Hugging Face model folder (model_folder.ts: a directory, a URL, Files, bytes; Node's
 * directory through load_dir.ts) into FON's Decoder:
 *
 *   config.json                  architecture and sizes (config.ts)
 *   model.safetensors            the weights, or sharded model-0000i-of-0000n.safetensors listed by
 *   model.safetensors.index.json   its weight_map; f32, f16 and bf16 tensors, read one at a time
 *   tokenizer.json               the tokenizer
 *   tokenizer_config.json        its eos_token and chat_template (optional)
 *   chat_template.jinja          the chat template, preferred to tokenizer_config.json's (optional)
 *   generation_config.json       sampling defaults (optional)
 *
 * Every tensor's presence, shape and dtype is checked from the headers before any data is read;
 * then each is read, converted to the dtype the weights are kept in (../weight_dtype.ts: by default
 * the stored f16 or bf16 on a GPU with 16-bit tensor cores, else f32), cut into FON parameters
 * (weights.ts) and handed to the model without a second copy.
 */
import type { Backend } from '../../backend/backend.ts';
import { CheckpointError, DTypeError, ShapeError } from '../../errors.ts';
import type { ModelConfig } from '../../model/config.ts';
import { Decoder } from '../../model/decoder.ts';
import { ParamFactory } from '../../nn/params.ts';
import { tensor } from '../../ops/creation.ts';
import type { FloatDType } from '../../tensor/dtype.ts';
import { storedDtype, weightDtype } from '../weight_dtype.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { safeTensorToHost } from '../safetensors.ts';
import { SafetensorsShards } from '../safetensors_file.ts';
import { readFolderFile, readRequiredText, type ModelFolder } from '../model_folder.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { hfConfigToModelConfig, type HfArchitecture } from './config.ts';
import { parseGenerationConfig, type HfGenerationDefaults } from './generation.ts';
import { chatTemplateOf, type ChatTemplate } from './chat_template.ts';
import { hfTokenizer } from './tokenizer.ts';
import { hfWeightPlan, takeValues, type HfParamSource } from './weights.ts';
import { parseCheckpointJson } from '../json.ts';
import type { LoadModelOptions } from '../load_folder.ts';

export type { HfGenerationDefaults } from './generation.ts';

export interface LoadedHfModel {
  model: Decoder;
  tokenizer: Tokenizer;
  config: ModelConfig;
  /** The config's model_type: gpt2, llama, mistral, qwen2 or qwen3. */
  architecture: HfArchitecture;
  /** generation_config.json's sampling defaults; null when the folder has none. */
  generation: HfGenerationDefaults | null;
  /** The chat template (chat_template.jinja, or tokenizer_config.json's chat_template); null when the folder has none. */
  chatTemplate: ChatTemplate | null;
}

const FLOAT_DTYPES = new Set(['F32', 'F16', 'BF16', 'F64']);


async function readOptionalJson(folder: ModelFolder, name: string): Promise<unknown> {
  const bytes = await readFolderFile(folder, name);
  return bytes === null ? undefined : parseCheckpointJson(new TextDecoder().decode(bytes), folder.pathOf(name));
}

/**
 * Whether `folder` is a Hugging Face model folder: its config.json is a JSON object with
 * `model_type` or `architectures` (FON's own config.json has neither). Never throws.
 */
export async function isHfFolder(folder: ModelFolder): Promise<boolean> {
  try {
    const json = await readOptionalJson(folder, 'config.json');
    if (typeof json !== 'object' || json === null || Array.isArray(json)) return false;
    return typeof (json as Record<string, unknown>).model_type === 'string' || Array.isArray((json as Record<string, unknown>).architectures);
  } catch {
    return false;
  }
}

const fmt = (s: readonly number[]) => `[${s.join(', ')}]`;

/** Checks every planned tensor against the headers (present, shape, float dtype) and that no other tensor is left over. */
function checkTensors(shards: SafetensorsShards, params: HfParamSource[], isIgnorable: (n: string) => boolean, configFile: string): void {
  const planned = new Set<string>();
  for (const p of params) {
    if (planned.has(p.tensor)) continue;
    planned.add(p.tensor);
    const info = shards.info(p.tensor);
    if (!info) throw new ShapeError(`${shards.source}: tensor '${p.tensor}' is missing (expected shape ${fmt(p.tensorShape)})`);
    if (fmt(info.shape) !== fmt(p.tensorShape)) {
      throw new ShapeError(`${info.file}: tensor '${p.tensor}' has shape ${fmt(info.shape)}, expected ${fmt(p.tensorShape)} from ${configFile}`);
    }
    if (!FLOAT_DTYPES.has(info.dtype)) throw new DTypeError(`${info.file}: tensor '${p.tensor}' has dtype ${info.dtype}, expected F32, F16 or BF16`);
  }
  const extra = shards.names().filter((n) => !planned.has(n) && !isIgnorable(n));
  if (extra.length) {
    throw new CheckpointError(`${shards.source} has tensors the config does not use: ${extra.slice(0, 5).join(', ')}${extra.length > 5 ? `, … (${extra.length} in all)` : ''}`);
  }
}

/**
 * Reads every planned tensor once, converted to `dtype` where it is stored in another (f16's range
 * checked), and cuts it into the FON parameters that come from it.
 */
async function readWeights(shards: SafetensorsShards, params: HfParamSource[], backend: Backend, finite: boolean, dtype: FloatDType): Promise<Record<string, Tensor>> {
  const byTensor = new Map<string, HfParamSource[]>();
  for (const p of params) byTensor.set(p.tensor, [...(byTensor.get(p.tensor) ?? []), p]);
  const weights: Record<string, Tensor> = {};
  try {
    for (const [name, uses] of byTensor) {
      const { host } = safeTensorToHost(name, await shards.read(name), { source: shards.info(name)!.file, finite, dtype });
      const values = host as Float32Array | Uint16Array;
      for (const p of uses) weights[p.param] = tensor(takeValues(values, p.tensorShape, p.take), p.shape, { backend, dtype });
    }
  } catch (e) {
    for (const t of Object.values(weights)) t.dispose();
    throw e;
  }
  return weights;
}

/**
 * Loads the model, tokenizer and generation defaults of the Hugging Face folder `folder` onto
 * `backend`, weights in the dtype `opts.dtype` chooses (weight_dtype.ts; default auto). Errors name the file: a missing config.json or tokenizer.json
 * (CheckpointError), an unsupported architecture or config value (UnsupportedError), an unknown
 * config key (ConfigError), missing weights or a missing shard (CheckpointError), a tensor
 * missing or of the wrong shape (ShapeError: its name, the expected and the found shape), a
 * truncated or corrupt safetensors file (SafetensorsError). With `adapt` (ModelAdaptation), the
 * weights are read as the folder's config plans them and the model built (and the config
 * returned) is the adapted one.
 */
export async function loadHfFolder(folder: ModelFolder, backend: Backend, opts: LoadModelOptions = {}): Promise<LoadedHfModel> {
  const text = (name: string) => readRequiredText(folder, name);
  const configFile = folder.pathOf('config.json');
  const { architecture, config: stored } = hfConfigToModelConfig(parseCheckpointJson(await text('config.json'), configFile), configFile);
  const config = opts.adapt ? opts.adapt.config(stored) : stored;

  const tokFile = folder.pathOf('tokenizer.json');
  const tokJson = parseCheckpointJson(await text('tokenizer.json'), tokFile);
  const tokConfig = await readOptionalJson(folder, 'tokenizer_config.json');
  const tokenizer = hfTokenizer(tokJson, tokConfig, tokFile);
  const jinjaFile = folder.pathOf('chat_template.jinja');
  const jinja = await readFolderFile(folder, 'chat_template.jinja');
  const chatTemplate = chatTemplateOf(tokConfig, folder.pathOf('tokenizer_config.json'), jinja === null ? undefined : { text: new TextDecoder().decode(jinja), source: jinjaFile });
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new CheckpointError(`${tokFile} has ${tokenizer.vocabSize} tokens but ${configFile} says vocab_size ${config.vocabSize}`);
  }
  const genFile = folder.pathOf('generation_config.json');
  const genJson = await readOptionalJson(folder, 'generation_config.json');
  const generation = genJson === undefined ? null : parseGenerationConfig(genJson, config.vocabSize, genFile);

  const shards = await SafetensorsShards.fromFolder(folder);
  let weights: Record<string, Tensor>;
  let dtype: FloatDType;
  try {
    const plan = hfWeightPlan(architecture, stored, shards.names());
    checkTensors(shards, plan.params, plan.isIgnorable, configFile);
    dtype = weightDtype(opts.dtype ?? 'auto', storedDtype([...new Set(plan.params.map((p) => p.tensor))].map((n) => shards.info(n)!)), backend);
    weights = await readWeights(shards, plan.params, backend, !opts.allowNonFinite, dtype);
  } finally {
    await shards.close();
  }
  const a = opts.adapt;
  const f = new ParamFactory({ backend, dtype, weights, source: shards.source, adoptWeights: true, ...(a ? { freshMissing: a.freshMissing, seed: a.seed } : {}) });
  try {
    return { model: new Decoder(config, f), tokenizer, config, architecture, generation, chatTemplate };
  } catch (e) {
    f.disposeMade();
    for (const t of Object.values(weights)) t.dispose(); // idempotent: frees what no parameter kept
    throw e;
  } finally {
    for (const name of f.unused()) weights[name].dispose();
  }
}
