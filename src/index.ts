/// <reference types="@webgpu/types" preserve="true" />
/** FON's public API: tensors, ops, autograd and backends. */
export { FonError, ShapeError, DTypeError, UnsupportedError, DisposedError, ArgumentError, DeviceError, GradError, FileError, CheckpointError } from './errors.ts';
export type { DType, FloatDType } from './tensor/dtype.ts';
export { Tensor } from './tensor/tensor.ts';
export { tidy, keep, noGrad, isGradEnabled } from './tensor/scope.ts';
export { autocast, autocastDType, PRECISIONS, type Precision } from './tensor/autocast.ts';
export type { Backend } from './backend/backend.ts';
export { initBackend, setBackend, getBackend, destroyBackends, shutdownBackends, registerBackendFactory, type BackendName } from './backend/registry.ts';
export * from './ops/creation.ts';
export { manualSeed } from './ops/random.ts';
export * from './ops/elementwise.ts';
export * from './ops/reduce.ts';
export * from './ops/layout.ts';
export * from './ops/matmul.ts';
export * from './ops/indexing.ts';
export * from './ops/pyramid_rows.ts';
export * from './ops/fused.ts';
export { attention, kvWrite, kvWriteMany, type AttentionOptions } from './ops/attention.ts';
export { foxAttention, type FoxAttentionOptions } from './ops/fox_attention.ts';
export { fpaAttention, type FpaAttentionOptions } from './ops/fpa_attention.ts';
export { depthMix, type DepthMixOptions } from './ops/depth_mix.ts';
export * from './ops/scan_sort.ts';
export * from './ops/cast.ts';
export * from './ops/grad.ts';
export { toBackend } from './ops/transfer.ts';
export { WasmBackend, type WasmBackendOptions } from './backend/wasm/index.ts';
export { WebGpuBackend } from './backend/webgpu/index.ts';

// Language models: config, modules, attention mechanisms, the decoder, training, sampling, generation.
export { parseModelConfig, DEFAULT_CONFIG, kvBytesPerToken, modelDims, ConfigError, type ModelConfig, type LayerAttention, type OrgansSpec, type RopeScaling } from './model/config.ts';
export { preset, PRESET_NAMES } from './model/presets.ts';
export { Decoder, type ForwardOptions } from './model/decoder.ts';
export { ParamFactory, type ParamFactoryOptions, type Init } from './nn/params.ts';
export { Module } from './nn/module.ts';
export type { AttentionMechanism, LayerKv, MechanismContext, MechanismDef, MechanismInput, MechanismBudget, CacheLayout, CacheSideState, ModelDims } from './attention/mechanism.ts';
export { MECHANISMS, buildMechanism, parseLayerAttention, type MechanismType } from './attention/table.ts';
export { FoxAttention } from './attention/fox/fox.ts';
export type { FoxSpec } from './attention/fox/index.ts';
export { FpaAttention } from './attention/fpa/fpa.ts';
export { FPA_WALKS, type FpaSpec, type FpaWalk } from './attention/fpa/index.ts';
export { denseAttention } from './attention/dense.ts';
export { blockMask, blockMaskFromLists, MASK_Q_BLOCK, MASK_K_BLOCK, type BlockMask, type MaskGeometry } from './attention/block_mask.ts';
export { Trainer, DEFAULT_TRAIN, type TrainConfig, type Batches, type StepResult } from './train/trainer.ts';
export { organLoss, distillKl, trainingLoss, layerKeepMasks, type OrganLoss } from './train/organ_loss.ts';
export { parseOrgans, checkDraftLayers, ORGANS_DEFAULTS } from './model/organs.ts';
export { AdamW, SGD, type Optimizer } from './train/optim.ts';
export { clipGradNorm } from './train/clip.ts';
export { warmupCosine, constant, type Schedule } from './train/schedule.ts';
export { KvCache, type KvCacheOptions } from './infer/kv_cache.ts';
export { PagePool, PagedKv, defaultPageRows, checkPageRows, type PageGeometry, type KvPage } from './infer/page_pool.ts';
export { Sampler, type SamplingOptions } from './infer/sampler.ts';
export { StopMatcher } from './infer/stop_strings.ts';
export { generate, cachedStep, generationCache, generationDtype, type GenerateOptions, type GenerateResult } from './infer/generate.ts';
export { streamText } from './infer/stream.ts';
export { LanguageModel, samplingDefaults, type LanguageModelParts } from './infer/language_model.ts';
export { loadFolder, loadFolderModel, loadFonFolder, type LoadModelOptions, type LoadedModel, type ModelAdaptation } from './io/load_folder.ts';
export { memoryFolder, blobFolder, urlFolder, readFolderFile, type ModelFolder, type ModelFile, type BlobLike, type FetchLike } from './io/model_folder.ts';
export { loadHfFolder, isHfFolder, type LoadedHfModel } from './io/hf/load.ts';
export { SafetensorsFile, SafetensorsShards } from './io/safetensors_file.ts';
export { WEIGHT_DTYPES, type WeightDtypeChoice } from './io/weight_dtype.ts';
export { DraftRevise, draftLayersOf, type DraftReviseOptions } from './infer/draft_revise.ts';
export { acceptDrafts, residual, drawFrom, GammaController, SpeculativeStats, type AcceptResult, type GammaOptions, type SpeculativeStatsJSON } from './infer/speculative.ts';
export { evaluate, type EvalResult, type EvalWindow, type EvalOptions } from './eval/perplexity.ts';
export { tokenByteLengths } from './eval/token_bytes.ts';
export { byteTokenizer, trainBpe, loadTokenizer, parseTokenizer, END_OF_TEXT, type Tokenizer } from './io/tokenizer/tokenizer.ts';
export {
  encodeSafetensors, decodeSafetensors, tensorsToSafetensors, safetensorsToTensors, SafetensorsError,
  type SafeTensorInfo, type SafetensorsHeader,
} from './io/safetensors.ts';
// Hugging Face model folders, the browser-safe half: config mapping, weight names, tokenizer, sampling defaults.
export { hfConfigToModelConfig, HF_ARCHITECTURES, type HfArchitecture, type HfModelConfig } from './io/hf/config.ts';
export { parseGenerationConfig, type HfGenerationDefaults } from './io/hf/generation.ts';
export { hfTokenizer } from './io/hf/tokenizer.ts';
export { ChatTemplate, chatTemplateOf, parseMessages, type ChatMessage } from './io/hf/chat_template.ts';
