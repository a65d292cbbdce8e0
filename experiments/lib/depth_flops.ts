/**
 * Analytic multiply-add counts per token for experiments/depth_compare.ts: the model's forward
 * (what the Depth-Attention mix is an overhead of) and the mix itself (attention/depth.ts
 * depthMixMacsPerToken, specs/fpa_depth.md §3.1). Counts are MACs (one multiply and one add;
 * FLOPs = 2 × MACs); elementwise work (norms, RoPE, activations, softmax exponentials) is left out
 * of both sides, as the paper's "< 0.01 % FLOPs" count does.
 */
import { depthMixMacsPerToken } from '../../src/attention/depth.ts';
import { layerAttention, type ModelConfig } from '../../src/model/config.ts';

/**
 * Forward MACs per token of the decoder at `context` tokens per sequence: per layer the q, k, v, o
 * projections, the mechanism's gate projections (FoX: H rows, FPA: 3·Hkv rows, the output gate's
 * H·D rows), the attention scores and weighted sum at the mean causal length (context + 1) / 2
 * (local layers: at most their window), and the MLP (SwiGLU three matrices, GELU two); then the LM head.
 */
export function modelMacsPerToken(c: ModelConfig, context: number): number {
  const qd = c.nHeads * c.headDim, kvd = c.nKvHeads * c.headDim;
  let macs = c.dModel * c.vocabSize;
  for (let l = 0; l < c.nLayers; l++) {
    const a = layerAttention(c, l);
    macs += c.dModel * (qd + 2 * kvd) + qd * c.dModel;
    if (a.type === 'fox') macs += c.dModel * c.nHeads + (a.outputGate ? c.dModel * qd : 0);
    if (a.type === 'fpa') macs += 3 * c.dModel * c.nKvHeads + (a.outputGate ? c.dModel * qd : 0);
    const seen = a.type === 'local' ? Math.min(a.window, (context + 1) / 2) : (context + 1) / 2;
    macs += 2 * qd * seen;
    macs += (c.mlp === 'swiglu' ? 3 : 2) * c.dModel * c.mlpHidden;
  }
  return macs;
}

/** The mix's MACs per token (0 without depth) and its share of the model's. */
export function depthOverhead(c: ModelConfig, context: number): { mixMacs: number; modelMacs: number; fraction: number } {
  const mixMacs = c.depth ? depthMixMacsPerToken(c.depth, c.nLayers, c.nHeads, c.nKvHeads, c.headDim) : 0;
  const modelMacs = modelMacsPerToken(c, context);
  return { mixMacs, modelMacs, fraction: mixMacs / modelMacs };
}
