/**
 * Hugging Face tensor names → FON parameter names (model/decoder.ts), per architecture: which
 * checkpoint tensor each FON parameter comes from, the shape the config implies for that tensor,
 * and how the parameter's values are cut from it.
 *
 *   llama-like  model.embed_tokens → embed, model.layers.i.{input_layernorm, post_attention_layernorm}
 *               → layers.i.{attn_norm, mlp_norm}, self_attn.{q,k,v,o}_proj → attn.{q,k,v,o} (with
 *               .bias on q, k, v for Qwen2), self_attn.{q,k}_norm → attn.{q,k}_norm (Qwen3),
 *               mlp.{gate,up,down}_proj → mlp.{gate,up,down}, model.norm → norm, lm_head → lm_head.
 *   gpt2        transformer.{wte, wpe, ln_f} → {embed, pos_embed, norm}, h.i.{ln_1, ln_2} →
 *               layers.i.{attn_norm, mlp_norm}; GPT-2's Conv1D layers store weights (in, out), so
 *               each is transposed to FON's (out, in); attn.c_attn is q, k and v side by side on
 *               the out axis and is cut in three; attn.c_proj → attn.o, mlp.c_fc → mlp.up,
 *               mlp.c_proj → mlp.down.
 *
 * One table serves both directions: the loader reads each tensor and cuts parameters from it
 * (`takeValues`); the exporter (export.ts) builds each tensor from its parameters (`placeValues`).
 *
 * The `model.` / `transformer.` prefix is optional (base-model checkpoints have none). With tied
 * embeddings a `lm_head.weight` in the file is ignored, as transformers ties it to the embedding;
 * buffers that older transformers versions saved (GPT-2's attn.bias / attn.masked_bias, rotary
 * inv_freq) are ignored too. Any other tensor the plan does not use is an error of the loader.
 */
import type { ModelConfig } from '../../model/config.ts';
import type { HfArchitecture } from './config.ts';

/** How a FON parameter's values come from its checkpoint tensor (both row-major). */
export type HfTake =
  | { kind: 'copy' }
  /** A (rows, cols) matrix transposed: GPT-2's Conv1D (in, out) → FON's (out, in). */
  | { kind: 'transpose' }
  /** Columns from … from + count of a (rows, cols) matrix, transposed → (count, rows): a third of c_attn. */
  | { kind: 'columns'; from: number; count: number }
  /** Elements from … from + count of a vector: a third of c_attn's bias. */
  | { kind: 'slice'; from: number; count: number };

/** One FON parameter and where it comes from. */
export interface HfParamSource {
  /** FON parameter name and shape. */
  param: string;
  shape: number[];
  /** The checkpoint tensor's full name and the shape the config implies for it. */
  tensor: string;
  tensorShape: number[];
  take: HfTake;
}

export interface HfWeightPlan {
  params: HfParamSource[];
  /** Checkpoint tensors that may be present and are not used (tied head, old buffers). */
  isIgnorable: (name: string) => boolean;
}

const COPY: HfTake = { kind: 'copy' };
const TRANSPOSE: HfTake = { kind: 'transpose' };

/** The prefix the file uses: `standard` when the embedding is found under it (or under neither), else none. */
function prefixOf(names: ReadonlySet<string>, standard: string, embedding: string): string {
  return names.has(standard + embedding) || !names.has(embedding) ? standard : '';
}

function llamaPlan(c: ModelConfig, names: ReadonlySet<string>): HfParamSource[] {
  const m = prefixOf(names, 'model.', 'embed_tokens.weight');
  const { dModel: C, nHeads: H, nKvHeads: Hkv, headDim: D, mlpHidden: F, vocabSize: V } = c;
  const out: HfParamSource[] = [];
  const add = (param: string, tensor: string, shape: number[]) => out.push({ param, shape, tensor, tensorShape: shape, take: COPY });
  add('embed.weight', `${m}embed_tokens.weight`, [V, C]);
  for (let i = 0; i < c.nLayers; i++) {
    const hf = `${m}layers.${i}`, fon = `layers.${i}`;
    add(`${fon}.attn_norm.weight`, `${hf}.input_layernorm.weight`, [C]);
    const proj: [string, number][] = [['q', H * D], ['k', Hkv * D], ['v', Hkv * D]];
    for (const [p, rows] of proj) {
      add(`${fon}.attn.${p}.weight`, `${hf}.self_attn.${p}_proj.weight`, [rows, C]);
      if (c.qkvBias) add(`${fon}.attn.${p}.bias`, `${hf}.self_attn.${p}_proj.bias`, [rows]);
    }
    add(`${fon}.attn.o.weight`, `${hf}.self_attn.o_proj.weight`, [C, H * D]);
    if (c.qkNorm) {
      add(`${fon}.attn.q_norm.weight`, `${hf}.self_attn.q_norm.weight`, [D]);
      add(`${fon}.attn.k_norm.weight`, `${hf}.self_attn.k_norm.weight`, [D]);
    }
    add(`${fon}.mlp_norm.weight`, `${hf}.post_attention_layernorm.weight`, [C]);
    add(`${fon}.mlp.gate.weight`, `${hf}.mlp.gate_proj.weight`, [F, C]);
    add(`${fon}.mlp.up.weight`, `${hf}.mlp.up_proj.weight`, [F, C]);
    add(`${fon}.mlp.down.weight`, `${hf}.mlp.down_proj.weight`, [C, F]);
  }
  add('norm.weight', `${m}norm.weight`, [C]);
  if (!c.tieEmbeddings) add('lm_head.weight', 'lm_head.weight', [V, C]);
  return out;
}

function gpt2Plan(c: ModelConfig, names: ReadonlySet<string>): HfParamSource[] {
  const t = prefixOf(names, 'transformer.', 'wte.weight');
  const { dModel: C, mlpHidden: F, vocabSize: V } = c;
  const out: HfParamSource[] = [];
  const add = (param: string, shape: number[], tensor: string, tensorShape: number[], take: HfTake = COPY) => out.push({ param, shape, tensor, tensorShape, take });
  add('embed.weight', [V, C], `${t}wte.weight`, [V, C]);
  add('pos_embed.weight', [c.contextLength, C], `${t}wpe.weight`, [c.contextLength, C]);
  for (let i = 0; i < c.nLayers; i++) {
    const hf = `${t}h.${i}`, fon = `layers.${i}`;
    add(`${fon}.attn_norm.weight`, [C], `${hf}.ln_1.weight`, [C]);
    add(`${fon}.attn_norm.bias`, [C], `${hf}.ln_1.bias`, [C]);
    ['q', 'k', 'v'].forEach((p, j) => {
      add(`${fon}.attn.${p}.weight`, [C, C], `${hf}.attn.c_attn.weight`, [C, 3 * C], { kind: 'columns', from: j * C, count: C });
      add(`${fon}.attn.${p}.bias`, [C], `${hf}.attn.c_attn.bias`, [3 * C], { kind: 'slice', from: j * C, count: C });
    });
    add(`${fon}.attn.o.weight`, [C, C], `${hf}.attn.c_proj.weight`, [C, C], TRANSPOSE);
    add(`${fon}.attn.o.bias`, [C], `${hf}.attn.c_proj.bias`, [C]);
    add(`${fon}.mlp_norm.weight`, [C], `${hf}.ln_2.weight`, [C]);
    add(`${fon}.mlp_norm.bias`, [C], `${hf}.ln_2.bias`, [C]);
    add(`${fon}.mlp.up.weight`, [F, C], `${hf}.mlp.c_fc.weight`, [C, F], TRANSPOSE);
    add(`${fon}.mlp.up.bias`, [F], `${hf}.mlp.c_fc.bias`, [F]);
    add(`${fon}.mlp.down.weight`, [C, F], `${hf}.mlp.c_proj.weight`, [F, C], TRANSPOSE);
    add(`${fon}.mlp.down.bias`, [C], `${hf}.mlp.c_proj.bias`, [C]);
  }
  add('norm.weight', [C], `${t}ln_f.weight`, [C]);
  add('norm.bias', [C], `${t}ln_f.bias`, [C]);
  if (!c.tieEmbeddings) add('lm_head.weight', [V, C], 'lm_head.weight', [V, C]);
  return out;
}

const GPT2_BUFFER = /^(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)$/;
const ROTARY_BUFFER = /(^|\.)rotary_emb\.inv_freq$/;

/**
 * The plan for `arch` with FON config `c`, given the tensor names the checkpoint holds (for its
 * prefix); without names, the names transformers writes (with the prefix).
 */
export function hfWeightPlan(arch: HfArchitecture, c: ModelConfig, names: Iterable<string> = []): HfWeightPlan {
  const set = new Set(names);
  const params = arch === 'gpt2' ? gpt2Plan(c, set) : llamaPlan(c, set);
  const buffer = arch === 'gpt2' ? GPT2_BUFFER : ROTARY_BUFFER;
  return { params, isIgnorable: (name) => buffer.test(name) || (c.tieEmbeddings && name === 'lm_head.weight') };
}

/** A parameter's values from its tensor's (row-major: f32 values, or the bits of f16 or bf16 ones), as `take` says. */
export function takeValues<A extends Float32Array | Uint16Array>(values: A, tensorShape: readonly number[], take: HfTake): A {
  switch (take.kind) {
    case 'copy': return values;
    case 'slice': return values.slice(take.from, take.from + take.count) as A;
    case 'transpose': return transposeColumns(values, tensorShape[0], tensorShape[1], 0, tensorShape[1]);
    case 'columns': return transposeColumns(values, tensorShape[0], tensorShape[1], take.from, take.count);
  }
}

/**
 * The inverse of `takeValues`: writes a parameter's values (row-major f32) into its place in the
 * tensor `target` (row-major, of `tensorShape`), as `take` says the loader cuts them out.
 */
export function placeValues(target: Float32Array, values: Float32Array, tensorShape: readonly number[], take: HfTake): void {
  switch (take.kind) {
    case 'copy': target.set(values); return;
    case 'slice': target.set(values, take.from); return;
    case 'transpose': placeColumns(target, values, tensorShape[0], tensorShape[1], 0, tensorShape[1]); return;
    case 'columns': placeColumns(target, values, tensorShape[0], tensorShape[1], take.from, take.count); return;
  }
}

/** A (count, rows) matrix written transposed into columns from … from + count of a (rows, cols) matrix. */
function placeColumns(target: Float32Array, v: Float32Array, rows: number, cols: number, from: number, count: number): void {
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < count; j++) target[r * cols + from + j] = v[j * rows + r];
  }
}

/** Columns from … from + count of a (rows, cols) matrix, as a (count, rows) matrix (of the same element type). */
function transposeColumns<A extends Float32Array | Uint16Array>(v: A, rows: number, cols: number, from: number, count: number): A {
  const out = (v instanceof Float32Array ? new Float32Array(count * rows) : new Uint16Array(count * rows)) as A;
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < count; j++) out[j * rows + r] = v[r * cols + from + j];
  }
  return out;
}
