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
 *
 * The forward is a composition the organs reuse (model/organs.ts): embedTokens → runLayers over a
 * layer range at given positions (each layer's record returned) → logits (the final norm and LM
 * head, which is also the exit head at layer D).
 */
import { depthCandidates, depthSources, type LayerRecord } from '../attention/depth.ts';
import type { LayerKv, MechanismBudget } from '../attention/mechanism.ts';
import { arange, tensor } from '../ops/creation.ts';
import { add, where } from '../ops/elementwise.ts';
import { crossEntropy } from '../ops/fused.ts';
import { gatherRows } from '../ops/indexing.ts';
import { narrow, reshape } from '../ops/layout.ts';
import { cast } from '../ops/cast.ts';
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
import { checkDraftLayers } from './organs.ts';

export type { LayerRecord };

export interface ForwardOptions {
  /** KV cache slots, one per layer; positions `pos` … are written and attended over. */
  cache?: readonly LayerKv[];
  /** Position of the first token (0 without a cache). */
  pos?: number;
  /** Only the last position's logits (generation): (B, 1, V). */
  lastOnly?: boolean;
}

/** A run of a layer range over the positions pos … pos+T−1 (Decoder.runLayers). */
export interface LayerRun {
  /** Position of the first row of x. */
  pos: number;
  /** KV cache slots, one per layer of the model (not of the range); the range's slots are written. */
  cache?: readonly LayerKv[];
  /**
   * Records of layers before the range at the same positions, by layer index: what Depth-Attention
   * reads when a layer of the range has a candidate below it (a missing one is an ArgumentError).
   */
  records?: readonly (LayerRecord | undefined)[];
  /** A narrower attention budget for the cached steps of this run (the draft organ's knob). */
  budget?: MechanismBudget;
}

/**
 * What a layer range computed: the hidden state after its last layer, and by layer index the
 * records a later layer reads (Depth-Attention sources, recordIsRead) with those given in; the
 * other layers' records are freed with the layer's intermediates.
 */
export interface RangeOutput { x: Tensor; records: (LayerRecord | undefined)[] }

/** One sequence of a ragged decoding step (Decoder.forwardRows): its position and its cache slots, one per layer. */
export interface RaggedRow { pos: number; cache: readonly LayerKv[] }

/** The RoPE tables' first length, in positions: 4,096 rows are 32 KB (cos and sin) per pair of dimensions. */
const ROPE_FIRST_POSITIONS = 4096;

export class Decoder extends Module {
  readonly embed: Embedding;
  readonly posEmbed?: Embedding;
  readonly layers: Block[];
  readonly norm: Norm;
  readonly head?: Linear;
  /**
   * RoPE tables (T, D/2) for positions 0 … T − 1, grown on demand (doubling, at most the
   * context): a config claiming a context of 2²¹ must not build gigabytes of tables before any
   * position is asked for. Each position's row is the same whatever the table's length, and
   * outgrown tables are kept until dispose(), since a graph awaiting backward may still read them.
   */
  private rope?: { cos: Tensor; sin: Tensor };
  private readonly outgrownRope: Tensor[] = [];

  constructor(readonly config: ModelConfig, f: ParamFactory) {
    super();
    const c = config;
    this.embed = this.child(new Embedding(f, 'embed', c.vocabSize, c.dModel));
    if (c.positions === 'learned') this.posEmbed = this.child(new Embedding(f, 'pos_embed', c.contextLength, c.dModel));
    this.layers = [];
    for (let i = 0; i < c.nLayers; i++) this.layers.push(this.child(new Block(f, `layers.${i}`, c, layerAttention(c, i))));
    this.norm = this.child(new Norm(f, 'norm', c.norm, c.dModel, c.normEps));
    if (!c.tieEmbeddings) this.head = this.child(new Linear(f, 'lm_head', c.dModel, c.vocabSize));
  }

  /** How many positions the RoPE tables hold now (0 before the first call, or without RoPE). */
  get ropePositions(): number {
    return this.rope?.cos.shape[0] ?? 0;
  }

  /** The RoPE tables, grown first when they hold fewer than `positions` rows. */
  private ropeTablesFor(positions: number): { cos: Tensor; sin: Tensor } {
    const c = this.config;
    const have = this.ropePositions;
    if (positions > have) {
      const grown = Math.min(c.contextLength, Math.max(positions, 2 * have, ROPE_FIRST_POSITIONS));
      const made = ropeTables(grown, c.headDim, c.ropeTheta, this.embed.weight.backend, c.ropeScaling);
      if (this.rope) this.outgrownRope.push(this.rope.cos, this.rope.sin);
      this.rope = { cos: keep(made.cos), sin: keep(made.sin) };
    }
    return this.rope!;
  }

  /** The RoPE tables' rows for positions pos … pos + t − 1, growing the tables when they are too short. */
  private ropeRows(pos: number, t: number): { cos: Tensor; sin: Tensor } {
    const { cos, sin } = this.ropeTablesFor(pos + t);
    return { cos: narrow(cos, 0, pos, t), sin: narrow(sin, 0, pos, t) };
  }

  /** Checks ids (B, T) i32 at positions pos … against the context; the shared prologue of forward and the organs. */
  private checkIds(op: string, ids: Tensor, pos: number, cache?: readonly LayerKv[]): void {
    if (ids.rank !== 2 || ids.dtype !== 'i32') throw new ShapeError(`${op}: ids must be i32 (B, T), got ${ids.dtype} [${ids.shape}]`);
    const t = ids.shape[1];
    if (pos + t > this.config.contextLength) {
      throw new ArgumentError(`${op}: positions ${pos} … ${pos + t - 1} pass the context length ${this.config.contextLength}`);
    }
    if (cache && cache.length !== this.layers.length) throw new ArgumentError(`${op}: cache has ${cache.length} layers, the model ${this.layers.length}`);
  }

  /** ids i32 (B, T) at positions pos … → the residual stream (B, T, C) entering layer 0. */
  embedTokens(ids: Tensor, pos = 0): Tensor {
    this.checkIds('Decoder.embedTokens', ids, pos);
    return tidy(() => {
      const x = this.embed.forward(ids); // (B, T, C)
      return this.posEmbed ? add(x, this.posEmbed.forward(arange(pos, pos + ids.shape[1], 1, { dtype: 'i32', backend: ids.backend }))) : x;
    });
  }

  /**
   * Layers [from, to) over x (B, T, C) at positions run.pos …: the hidden state after layer to−1
   * and the records of the range's layers (their k̂ and ṽ, what they cached) beside those given.
   * Records are returned for every layer of the range; the caller keeps those later ranges read.
   */
  runLayers(x: Tensor, from: number, to: number, run: LayerRun): RangeOutput {
    const L = this.layers.length;
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to > L || from > to) {
      throw new ArgumentError(`Decoder.runLayers: layers [${from}, ${to}) must be a range inside [0, ${L}]`);
    }
    const t = x.shape[1];
    if (run.pos + t > this.config.contextLength) throw new ArgumentError(`Decoder.runLayers: positions ${run.pos} … ${run.pos + t - 1} pass the context length ${this.config.contextLength}`);
    if (run.cache && run.cache.length !== L) throw new ArgumentError(`Decoder.runLayers: cache has ${run.cache.length} layers, the model ${L}`);
    return tidy(() => {
      const ctx: PositionContext = { pos: run.pos };
      if (this.config.positions === 'rope') Object.assign(ctx, this.ropeRows(run.pos, t));
      const depth = this.config.depth;
      const records: (LayerRecord | undefined)[] = Array.from({ length: L }, (_, i) => run.records?.[i]);
      for (let i = from; i < to; i++) {
        const candidates = depth ? depthCandidates(depth, i).map((m) => {
          const r = records[m];
          if (!r) throw new ArgumentError(`Decoder.runLayers: layer ${i}'s Depth-Attention reads layer ${m}, whose record at positions ${run.pos} … ${run.pos + t - 1} was not given (run layers [${from}, ${to}) with the records of the layers below)`);
          return r;
        }) : [];
        // Each layer in its own scope: its intermediates, and its record unless a later layer reads it, go when it ends.
        const read = this.recordIsRead(i);
        const out = tidy(() => {
          const o = this.layers[i].forward(x, ctx, run.cache?.[i], depth && candidates.length ? { spec: depth, candidates } : undefined, run.budget);
          return read ? o : { y: o.y, record: undefined };
        });
        x = out.y;
        records[i] = out.record;
      }
      return { x, records };
    });
  }

  /** The head: final norm and LM head, hidden (B, T, C) → logits (B, T, V), or (B, 1, V) of the last position with lastOnly (f32 for a 16-bit model). The exit head is this at layer D. */
  logits(x: Tensor, lastOnly = false): Tensor {
    return tidy(() => {
      const [b, t] = x.shape;
      if (lastOnly) x = narrow(x, 1, t - 1, 1); // (B, 1, C)
      const h = this.norm.forward(x);
      let logits = this.head ? this.head.forward(h) : linear(h, this.embed.weight, undefined, true);
      // A model stored in 16 bits (weights kept in a checkpoint's f16 or bf16) gives f32 logits: what
      // sampling, perplexity and draft–revise read back. (Autocast keeps f32 weights: untouched.)
      if (this.embed.weight.dtype !== 'f32' && logits.dtype !== 'f32') logits = cast(logits, 'f32');
      return reshape(logits, [b, lastOnly ? 1 : t, this.config.vocabSize]);
    });
  }

  /** ids i32 (B, T) → logits (B, T, V), or (B, 1, V) with lastOnly: embedTokens → every layer → logits. */
  forward(ids: Tensor, opts: ForwardOptions = {}): Tensor {
    const pos = opts.pos ?? 0;
    this.checkIds('Decoder.forward', ids, pos, opts.cache);
    return tidy(() => {
      const { x } = this.runLayers(this.embedTokens(ids, pos), 0, this.layers.length, { pos, cache: opts.cache });
      return this.logits(x, opts.lastOnly);
    });
  }

  /**
   * One ragged decoding step of N independent sequences: ids i32 (N, 1), row i the next token of
   * sequence i at position rows[i].pos, written to and attended over through its own cache
   * rows[i].cache → logits (N, 1, V). The embedding, every linear layer, the norms and the head run
   * once over the N rows (the weights are read once a step), and so do QK-norm, RoPE (each row
   * rotated by its own position's table rows) and Depth-Attention; the mechanism's k/v hook and
   * the cached attention run per row, each through its own cache at its own position
   * (AttentionBlock.forwardRows).
   * Row i's logits are those forward(ids[i], {cache: rows[i].cache, pos: rows[i].pos}) gives for
   * that sequence alone, wherever the backend's matmul treats rows independently (the CPU
   * reference's does: bit for bit).
   */
  forwardRows(ids: Tensor, rows: readonly RaggedRow[]): Tensor {
    const L = this.layers.length;
    if (ids.rank !== 2 || ids.dtype !== 'i32' || ids.shape[1] !== 1) throw new ShapeError(`Decoder.forwardRows: ids must be i32 (N, 1), got ${ids.dtype} [${ids.shape}]`);
    if (rows.length !== ids.shape[0] || rows.length === 0) throw new ArgumentError(`Decoder.forwardRows: ${rows.length} rows for ids of ${ids.shape[0]} sequences: expected one row each, at least one`);
    rows.forEach((r, i) => {
      if (!Number.isInteger(r.pos) || r.pos < 0 || r.pos + 1 > this.config.contextLength) throw new ArgumentError(`Decoder.forwardRows: row ${i}'s position ${r.pos} must be an integer in [0, ${this.config.contextLength - 1}] (the context)`);
      if (r.cache.length !== L) throw new ArgumentError(`Decoder.forwardRows: row ${i}'s cache has ${r.cache.length} layers, the model ${L}`);
    });
    return tidy(() => {
      const at = tensor(Int32Array.from(rows, (r) => r.pos), [1, rows.length], { backend: ids.backend, dtype: 'i32' }); // (1, N): row i's position
      let x = this.embed.forward(ids); // (N, 1, C)
      if (this.posEmbed) x = add(x, this.posEmbed.forward(reshape(at, [rows.length, 1])));
      // Row i's RoPE tables (N, D/2): its own position's rows.
      let rot: { cos: Tensor; sin: Tensor } | undefined;
      if (this.config.positions === 'rope') {
        const t = this.ropeTablesFor(Math.max(...rows.map((r) => r.pos)) + 1);
        rot = { cos: gatherRows(t.cos, at, 0), sin: gatherRows(t.sin, at, 0) };
      }
      const depth = this.config.depth;
      const records: (LayerRecord | undefined)[] = new Array(L);
      for (let i = 0; i < L; i++) {
        const candidates = depth ? depthCandidates(depth, i).map((m) => records[m]!) : [];
        const read = this.recordIsRead(i);
        const out = tidy(() => {
          const o = this.layers[i].forwardRows(x, rows.map((r) => ({ pos: r.pos, cache: r.cache[i] })), rot, depth && candidates.length ? { spec: depth, candidates } : undefined);
          return read ? o : { y: o.y, record: undefined };
        });
        x = out.y;
        records[i] = out.record;
      }
      return this.logits(x);
    });
  }

  /** Whether any later layer reads layer i's record (Depth-Attention): the organs keep those across calls. */
  recordIsRead(i: number): boolean {
    const depth = this.config.depth;
    return depth ? depthSources(depth, this.layers.length)[i] : false;
  }

  /** Mean next-token cross-entropy (nats) of ids (B, T) against targets (B, T); the organ objective is train/organ_loss.ts trainingLoss. */
  loss(ids: Tensor, targets: Tensor): Tensor {
    return tidy(() => crossEntropy(this.forward(ids), targets));
  }

  override dispose(): void {
    super.dispose();
    this.rope?.cos.dispose();
    this.rope?.sin.dispose();
    for (const t of this.outgrownRope) t.dispose();
    this.rope = undefined;
    this.outgrownRope.length = 0;
  }

  /**
   * The full model's logits and the exit head's at layer D in one pass (DESIGN.md "The FON model
   * (organs)"): embedTokens → layers [0, D) → logits (the exit head) → layers [D, L) → logits, both
   * (B, T, V), at positions 0 … (no cache). The full logits equal forward's. `draftLayers` defaults
   * to the config's organs.draftLayers and is any D in [1, L−1] for any model.
   *
   * `layerKeep` (training only: train/organ_loss.ts layerKeepMasks) drops layers per sequence: entry
   * l null/absent runs layer l for every sequence, else (B) values 1 (run) / 0 (skip), and sequence b
   * leaves layer l as the identity: y = x + m_b·(block(x) − x), computed as the select
   * m_b ? block(x) : x. A layer every sequence skips is not run unless a later layer's
   * Depth-Attention reads its record, which is then computed from its input as usual.
   */
  forwardWithExit(ids: Tensor, draftLayers?: number, opts: { layerKeep?: readonly (ArrayLike<number> | null | undefined)[] } = {}): { logits: Tensor; exitLogits: Tensor } {
    const L = this.layers.length;
    const d = draftLayers ?? this.config.organs?.draftLayers;
    if (d === undefined) throw new ArgumentError('Decoder.forwardWithExit: the model has no organs; give draftLayers');
    checkDraftLayers(d, L, 'Decoder.forwardWithExit: draftLayers', (m) => new ArgumentError(m));
    this.checkIds('Decoder.forwardWithExit', ids, 0);
    const masks = opts.layerKeep;
    const b = ids.shape[0];
    if (masks) {
      if (masks.length > L) throw new ArgumentError(`Decoder.forwardWithExit: layerKeep has ${masks.length} entries for ${L} layers`);
      masks.forEach((m, i) => {
        if (m && m.length !== b) throw new ArgumentError(`Decoder.forwardWithExit: layerKeep[${i}] has ${m.length} entries for a batch of ${b} sequences`);
      });
    }
    return tidy(() => {
      let x = this.embedTokens(ids, 0);
      let records: (LayerRecord | undefined)[] = [];
      const range = (from: number, to: number) => {
        if (!masks) { ({ x, records } = this.runLayers(x, from, to, { pos: 0, records })); return; }
        for (let i = from; i < to; i++) {
          const m = masks[i];
          let run = 0;
          if (m) for (let j = 0; j < b; j++) if (m[j] !== 0) run++;
          if (m && run === 0 && !this.recordIsRead(i)) continue; // skipped by all, read by none
          const out = this.runLayers(x, i, i + 1, { pos: 0, records });
          records = out.records;
          if (!m || run === b) { x = out.x; continue; }
          if (run === 0) continue;
          const mask = tensor(Float32Array.from(m, (v) => (v !== 0 ? 1 : 0)), [b, 1, 1], { backend: ids.backend });
          x = where(mask, out.x, x);
        }
      };
      range(0, d);
      const exitLogits = this.logits(x);
      range(d, L);
      return { logits: this.logits(x), exitLogits };
    });
  }
}
