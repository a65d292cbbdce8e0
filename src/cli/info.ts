/** `fon info`: what a checkpoint holds: parameters, config, KV-cache bytes per token. */
import { kvBytesPerToken, layerAttention, type ModelConfig } from '../model/config.ts';
import { depthCandidates } from '../attention/depth.ts';
import { describeMechanism } from '../attention/table.ts';
import { loadModel } from '../io/model_checkpoint.ts';
import { parseFlags, requireFlag } from './args.ts';
import { backendFromFlag } from './backend_flag.ts';
import { focusParameters } from './focus.ts';
import { spotParameters } from './spot.ts';

export const INFO_USAGE = `usage: fon info --model DIR [--json] [--allow-non-finite]

Prints the model's parameter count, model config, tokenizer size, KV-cache bytes per token (f32
and f16 caches; before eviction; with Depth-Attention also without it, which is the same), each
layer's mechanism with what it notes (FPA: dead-key eviction or stack decoding) and the organs
(draft layers and exit head, with their training weights), with Spot layers the selectors' parameters
and selector-key bytes per token, and, with Focus layers, the parameters
they add (W_g and C) and their share of the model. DIR is a FON checkpoint or a Hugging
Face folder (then its architecture too, and the config as FON maps it). Loads on the CPU.

options:
  --json             print it as one JSON object
  --allow-non-finite load weights that hold NaN or ±Inf (by default an error names the tensor)`;

export async function infoCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('info', argv, { model: { type: 'string' }, json: { type: 'boolean' }, 'allow-non-finite': { type: 'boolean' } });
  if (v.help) { console.log(INFO_USAGE); return 0; }
  const dir = requireFlag('info', 'model', v.model);
  const { model, tokenizer, config, dir: ckpt, architecture } = await loadModel(dir, await backendFromFlag('info', 'cpu'), { allowNonFinite: v['allow-non-finite'] });
  const focus = focusParameters(config);
  const spot = spotParameters(config);
  const info = {
    checkpoint: ckpt,
    ...(architecture ? { huggingFace: architecture } : {}),
    parameters: model.parameterCount(),
    tokenizerVocab: tokenizer.vocabSize,
    kvCacheBytesPerToken: { f32: kvBytesPerToken(config, 4), f16: kvBytesPerToken(config, 2) },
    /** Depth-Attention: the candidate layers of each layer and the cache of the same model without it (equal: ṽ takes v's slot). */
    ...(config.depth ? { depth: depthInfo(config) } : {}),
    /** Each layer's mechanism as its def describes it: label and facts (FPA: evict, stack). */
    layers: Array.from({ length: config.nLayers }, (_, i) => { const d = describeMechanism(layerAttention(config, i)); return { mechanism: d.label, ...d.facts }; }),
    /** The organs: draft layers 0 … D−1 with the exit head, revise layers D … L−1, the training weights. */
    ...(config.organs ? { organs: { ...config.organs, draft: [0, config.organs.draftLayers], revise: [config.organs.draftLayers, config.nLayers] } } : {}),
    /** Focus: the trained parameters its layers add (W_g and C; the log-normalizers are not counted) and in how many layers. */
    ...(focus.layers ? { focus: { parameters: focus.count, layers: focus.layers } } : {}),
    /** Spot: the selectors' parameters, in how many layers, and the selector keys' bytes per token of context (all Spot layers; beside the KV cache's). */
    ...(spot.layers ? { spot: { parameters: spot.count, layers: spot.layers, selectorKeyBytesPerToken: spot.keyBytesPerToken } } : {}),
    config,
  };
  model.dispose();
  if (v.json) { console.log(JSON.stringify(info)); return 0; }
  console.log(`checkpoint: ${info.checkpoint}${architecture ? ` (Hugging Face ${architecture})` : ''}`);
  console.log(`parameters: ${info.parameters.toLocaleString('en-US')} (${(info.parameters / 1e6).toFixed(2)}M)`);
  console.log(`tokenizer: ${info.tokenizerVocab} tokens`);
  const notes = Array.from({ length: config.nLayers }, (_, i) => describeMechanism(layerAttention(config, i)).notes);
  console.log(`KV cache per token: ${info.kvCacheBytesPerToken.f32} bytes (f32), ${info.kvCacheBytesPerToken.f16} bytes (f16)${notes.some((n) => n.length) ? ', before eviction' : ''}`);
  if (info.depth) {
    const d = info.depth;
    console.log(`Depth-Attention: ${d.mode === 'v0_mix' ? 'v0_mix (½v⁽⁰⁾ + ½v)' : `stride ${d.stride}, window ${d.window}`}; candidates ${d.candidates.map((c, i) => `${i}:{${c.join(',')}}`).join(' ')}`);
    console.log(`KV cache per token without Depth-Attention: ${d.kvCacheBytesPerTokenWithout.f32} bytes (f32), ${d.kvCacheBytesPerTokenWithout.f16} bytes (f16): ${d.kvCacheBytesPerTokenWithout.f32 === info.kvCacheBytesPerToken.f32 ? 'the same' : 'DIFFERENT'}`);
  }
  const labels = info.layers.map((l) => l.mechanism);
  console.log(`layers: ${labels.every((l) => l === labels[0]) ? `${config.nLayers} × ${labels[0]}` : labels.map((l, i) => `${i}: ${l}`).join(', ')}`);
  notes.forEach((n, i) => { for (const line of n) console.log(`  layer ${i}: ${line}`); });
  if (config.organs) {
    const o = config.organs, d = o.draftLayers;
    console.log(`organs: draft = layers 0 … ${d - 1} + exit head (final norm and LM head after layer ${d - 1}), revise = layers ${d} … ${config.nLayers - 1}; exit loss λ_D ${o.exitLoss}, distillation λ_KL ${o.distill}, layer dropout ${o.layerDropout}`);
  }
  if (info.focus) {
    const share = (100 * info.focus.parameters) / info.parameters;
    console.log(`focus: ${info.focus.parameters.toLocaleString('en-US')} parameters in ${info.focus.layers} layer${info.focus.layers === 1 ? '' : 's'} (${share < 0.01 ? share.toPrecision(2) : share.toFixed(2)}% of the model)`);
  }
  if (info.spot) {
    const share = (100 * info.spot.parameters) / info.parameters;
    console.log(`spot: ${info.spot.parameters.toLocaleString('en-US')} selector parameters in ${info.spot.layers} layer${info.spot.layers === 1 ? '' : 's'} (${share < 0.01 ? share.toPrecision(2) : share.toFixed(2)}% of the model); selector keys ${info.spot.selectorKeyBytesPerToken} bytes per token beside the KV cache`);
  }
  console.log(`config: ${JSON.stringify(config)}`);
  return 0;
}

/** What `fon info` reports of Depth-Attention: the spec, C(l) per layer, and the cache without it. */
function depthInfo(config: ModelConfig) {
  const spec = config.depth!;
  const without: ModelConfig = { ...config };
  delete without.depth;
  return {
    mode: spec.mode ?? 'softmax',
    ...(spec.mode === 'v0_mix' ? {} : { stride: spec.stride, window: spec.window ?? 0 }),
    candidates: Array.from({ length: config.nLayers }, (_, i) => depthCandidates(spec, i)),
    kvCacheBytesPerTokenWithout: { f32: kvBytesPerToken(without, 4), f16: kvBytesPerToken(without, 2) },
  };
}
