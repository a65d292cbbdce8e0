/**
 * The decoder language model: token embedding (+ learned positions) → blocks → final norm → LM
 * head (tied to the embedding or its own). Parameter names follow a Llama-like state dict:
 *
 *   embed.weight (V, C), pos_embed.weight (T, C) with learned positions,
 *   layers.i.{attn_norm, mlp_norm}.weight, layers.i.attn.{q,k,v,o}.weight,
 *   layers.i.attn.{q_norm,k_norm}.weight with QK-norm, layers.i.mlp.{gate,up,down}.weight,
 *   layers.i.attn.fgate.{weight,bias} in FoX layers, layers.i.attn.fpa.{walk,field,level}.{weight,bias},
 *   layers.i.attn.fpa.rho (and .kappa) in FPA layers, layers.i.attn.{out_norm,out_gate}.weight with
 *   their output gate, norm.weight, lm_head.weight (V, C) when not tied; `.bias` beside each where configured
 *   (every linear layer but the head with `bias`, q, k and v with `qkvBias`; LayerNorms always).
 *
 * With `depth` (Depth-Attention, attention/depth.ts) each layer also hands its k̂ and mixed ṽ to the
 * later layers that have it as a candidate; no parameter is added.
 */
import { depthCandidates, depthSources, type DepthKv, type LayerDepth } from '../attention/depth.ts';
import type { LayerKv } from '../attention/mechanism.ts';
import { arange } from '../ops/creation.ts';
import { add } from '../ops/elementwise.ts';
import { crossEntropy } from '../ops/fused.ts';
import { narrow, reshape } from '../ops/layout.ts';
import { linear } from '../ops/matmul.ts';
import { ArgumentError, ShapeError } from '../errors.ts';
import { Embedding } from '../nn/embedding.ts';
import { Linear } from '../nn/linear.ts';
import { Module } from '../nn/module.ts';
import { Norm } from '../nn/norm.ts';
import type { ParamFactory } from '../nn/params.ts';
import { ropeTables } from '../nn/rope_tables.ts';
import { keep, tidy } from '../tensor/scope.ts';
import type { Tensor } from '../tensor/tensor.ts';
import type { PositionContext } from './attention_block.ts';
import { Block } from './block.ts';
import { layerAttention, type ModelConfig } from './config.ts';

export interface ForwardOptions {
  /** KV cache slots, one per layer; positions `pos` … are written and attended over. */
  cache?: readonly LayerKv[];
  /** Position of the first token (0 without a cache). */
  pos?: number;
  /** Only the last position's logits (generation): (B, 1, V). */
  lastOnly?: boolean;
}

export class Decoder extends Module {
  readonly embed: Embedding;
  readonly posEmbed?: Embedding;
  readonly layers: Block[];
  readonly norm: Norm;
  readonly head?: Linear;
  /** RoPE tables for every position of the context, made once. */
  private readonly rope?: { cos: Tensor; sin: Tensor };

  constructor(readonly config: ModelConfig, f: ParamFactory) {
    super();
    const c = config;
    this.embed = this.child(new Embedding(f, 'embed', c.vocabSize, c.dModel));
    if (c.positions === 'learned') this.posEmbed = this.child(new Embedding(f, 'pos_embed', c.contextLength, c.dModel));
    this.layers = [];
    for (let i = 0; i < c.nLayers; i++) this.layers.push(this.child(new Block(f, `layers.${i}`, c, layerAttention(c, i))));
    this.norm = this.child(new Norm(f, 'norm', c.norm, c.dModel, c.normEps));
    if (!c.tieEmbeddings) this.head = this.child(new Linear(f, 'lm_head', c.dModel, c.vocabSize));
    if (c.positions === 'rope') {
      const t = ropeTables(c.contextLength, c.headDim, c.ropeTheta, f.backend, c.ropeScaling);
      this.rope = { cos: keep(t.cos), sin: keep(t.sin) };
    }
  }

  /** ids i32 (B, T) → logits (B, T, V), or (B, 1, V) with lastOnly. */
  forward(ids: Tensor, opts: ForwardOptions = {}): Tensor {
    const pos = opts.pos ?? 0;
    if (ids.rank !== 2 || ids.dtype !== 'i32') throw new ShapeError(`Decoder.forward: ids must be i32 (B, T), got ${ids.dtype} [${ids.shape}]`);
    const [b, t] = ids.shape;
    if (pos + t > this.config.contextLength) {
      throw new ArgumentError(`Decoder.forward: positions ${pos} … ${pos + t - 1} pass the context length ${this.config.contextLength}`);
    }
    if (opts.cache && opts.cache.length !== this.layers.length) throw new ArgumentError(`Decoder.forward: cache has ${opts.cache.length} layers, the model ${this.layers.length}`);
    return tidy(() => {
      let x = this.embed.forward(ids); // (B, T, C)
      if (this.posEmbed) x = add(x, this.posEmbed.forward(arange(pos, pos + t, 1, { dtype: 'i32', backend: ids.backend })));
      const ctx: PositionContext = { pos };
      if (this.rope) { ctx.cos = narrow(this.rope.cos, 0, pos, t); ctx.sin = narrow(this.rope.sin, 0, pos, t); }
      const depth = this.config.depth;
      const sources = depth ? depthSources(depth, this.layers.length) : [];
      const kept: DepthKv[] = []; // k̂, ṽ of the layers later layers read (Depth-Attention), this call's positions
      this.layers.forEach((layer, i) => {
        const d: LayerDepth | undefined = depth && { spec: depth, candidates: depthCandidates(depth, i).map((m) => kept[m]), keep: sources[i] };
        x = layer.forward(x, ctx, opts.cache?.[i], d);
        if (d?.own) kept[i] = d.own;
      });
      if (opts.lastOnly) x = narrow(x, 1, t - 1, 1); // (B, 1, C)
      const h = this.norm.forward(x);
      const tt = h.shape[1];
      const logits = this.head ? this.head.forward(h) : linear(h, this.embed.weight, undefined, true);
      return reshape(logits, [b, tt, this.config.vocabSize]);
    });
  }

  /** Mean next-token cross-entropy (nats) of ids (B, T) against targets (B, T). */
  loss(ids: Tensor, targets: Tensor): Tensor {
    return tidy(() => crossEntropy(this.forward(ids), targets));
  }

  override dispose(): void {
    super.dispose();
    this.rope?.cos.dispose();
    this.rope?.sin.dispose();
  }
}
