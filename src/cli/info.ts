/** `fon info`: what a checkpoint holds: parameters, config, KV-cache bytes per token. */
import { kvBytesPerToken, layerAttention, type ModelConfig } from '../model/config.ts';
import { depthCandidates } from '../attention/depth.ts';
import { loadModel } from '../io/model_checkpoint.ts';
import { parseFlags, requireFlag } from './args.ts';
import { backendFromFlag } from './backend_flag.ts';

export const INFO_USAGE = `usage: fon info --model DIR [--json]

Prints the model's parameter count, model config, tokenizer size and KV-cache bytes per token (f32
and f16 caches; before eviction; with Depth-Attention also without it, which is the same) and, for
FPA layers, whether dead-key eviction or stack decoding is configured. DIR is a FON checkpoint or a Hugging Face folder (then its architecture too, and
the config as FON maps it). Loads on the CPU.`;

export async function infoCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('info', argv, { model: { type: 'string' }, json: { type: 'boolean' } });
  if (v.help) { console.log(INFO_USAGE); return 0; }
  const dir = requireFlag('info', 'model', v.model);
  const { model, tokenizer, config, dir: ckpt, architecture } = await loadModel(dir, await backendFromFlag('info', 'cpu'));
  const info = {
    checkpoint: ckpt,
    ...(architecture ? { huggingFace: architecture } : {}),
    parameters: model.parameterCount(),
    tokenizerVocab: tokenizer.vocabSize,
    kvCacheBytesPerToken: { f32: kvBytesPerToken(config, 4), f16: kvBytesPerToken(config, 2) },
    /** Depth-Attention: the candidate layers of each layer and the cache of the same model without it (equal: ṽ takes v's slot). */
    ...(config.depth ? { depth: depthInfo(config) } : {}),
    /** FPA layers that evict dead keys while decoding: layer index → τ, every, deadFraction. */
    fpaEviction: Object.fromEntries(Array.from({ length: config.nLayers }, (_, i) => [i, layerAttention(config, i)] as const)
      .flatMap(([i, a]) => (a.type === 'fpa' && a.evict ? [[i, a.evict]] : []))),
    /** FPA layers that decode with the shared walk's explicit stack (only alive keys kept): layer index → every, deadFraction. */
    fpaStack: Object.fromEntries(Array.from({ length: config.nLayers }, (_, i) => [i, layerAttention(config, i)] as const)
      .flatMap(([i, a]) => (a.type === 'fpa' && a.stack ? [[i, a.stack]] : []))),
    config,
  };
  model.dispose();
  if (v.json) { console.log(JSON.stringify(info)); return 0; }
  console.log(`checkpoint: ${info.checkpoint}${architecture ? ` (Hugging Face ${architecture})` : ''}`);
  console.log(`parameters: ${info.parameters.toLocaleString('en-US')} (${(info.parameters / 1e6).toFixed(2)}M)`);
  console.log(`tokenizer: ${info.tokenizerVocab} tokens`);
  console.log(`KV cache per token: ${info.kvCacheBytesPerToken.f32} bytes (f32), ${info.kvCacheBytesPerToken.f16} bytes (f16)${config.attention.some((a) => a.type === 'fpa') ? ', before eviction' : ''}`);
  if (info.depth) {
    const d = info.depth;
    console.log(`Depth-Attention: ${d.mode === 'v0_mix' ? 'v0_mix (½v⁽⁰⁾ + ½v)' : `stride ${d.stride}, window ${d.window}`}; candidates ${d.candidates.map((c, i) => `${i}:{${c.join(',')}}`).join(' ')}`);
    console.log(`KV cache per token without Depth-Attention: ${d.kvCacheBytesPerTokenWithout.f32} bytes (f32), ${d.kvCacheBytesPerTokenWithout.f16} bytes (f16): ${d.kvCacheBytesPerTokenWithout.f32 === info.kvCacheBytesPerToken.f32 ? 'the same' : 'DIFFERENT'}`);
  }
  if (config.attention.some((a) => a.type === 'fpa')) {
    const ev = Object.entries(info.fpaEviction);
    console.log(`FPA eviction: ${ev.length ? ev.map(([i, e]) => `layer ${i} τ=${e.tau} (compact every ${e.every} steps or at ${e.deadFraction} dead)`).join(', ') : 'off'}`);
    const st = Object.entries(info.fpaStack);
    if (st.length) console.log(`FPA stack decoding (shared walk, hard limit): ${st.map(([i, e]) => `layer ${i} (compact every ${e.every} steps or at ${e.deadFraction} dead)`).join(', ')}`);
  }
  console.log(`layers: ${config.attention.length === 1 ? `${config.nLayers} × ${JSON.stringify(config.attention[0])}` : config.attention.map((a) => JSON.stringify(a)).join(', ')}`);
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
