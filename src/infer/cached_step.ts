/**
 * Decoding steps through a KV cache: the batch-1 cache a generation uses (generationCache), one
 * sequence's step (cachedStep) and one ragged step of many sequences, each through its own cache
 * at its own position (raggedStep: what `fon serve`'s batcher runs). Each step reads the logits
 * back to the host and settles the caches beside the read.
 */
import { tensor } from '../ops/creation.ts';
import type { Decoder } from '../model/decoder.ts';
import { noGrad } from '../tensor/scope.ts';
import type { FloatDType } from '../tensor/dtype.ts';
import { ArgumentError } from '../errors.ts';
import { KvCache, type KvCacheOptions } from './kv_cache.ts';

/** A batch-1 KV cache of `maxLength` positions for `model`, in its weights' dtype; `opts` sets its pages. */
export function generationCache(model: Decoder, maxLength: number, opts: KvCacheOptions = {}): KvCache {
  return new KvCache(model.config, 1, maxLength, model.embed.weight.backend, generationDtype(model), opts);
}

/**
 * The dtype of generation's KV cache for `model`: its weights' (f32, f16 or bf16: the projections
 * write k and v in it), which a page pool shared by its generations is made with.
 */
export const generationDtype = (model: Decoder): FloatDType => model.embed.weight.dtype as FloatDType;

/**
 * One step of batch-1 generation: `input` (token ids at positions pos …) through the model and the
 * cache, the last position's logits read back (f32, vocabSize values), the cache settled beside the
 * read (FPA eviction on webgpu reads its kept counts and compacts: KvCache.settle) and its length set.
 * `onRecorded` is called once the step's work is recorded, before the read-back is awaited.
 */
export async function cachedStep(model: Decoder, cache: KvCache, input: readonly number[], pos: number, onRecorded?: () => void): Promise<Float32Array> {
  const backend = model.embed.weight.backend;
  const logits = noGrad(() => {
    const x = tensor(Int32Array.from(input), [1, input.length], { backend, dtype: 'i32' });
    const y = model.forward(x, { cache: cache.layers, pos, lastOnly: true });
    x.dispose();
    return y;
  });
  const pending = Promise.all([logits.data(), cache.settle()]);
  onRecorded?.();
  const [data] = await pending;
  logits.dispose();
  cache.length = pos + input.length;
  return data as Float32Array;
}

/** One sequence of a ragged step: its cache (batch 1), the token to run and its position (the cache's length). */
export interface RaggedSequence { cache: KvCache; token: number; pos: number }

/**
 * One decoding step of N sequences at once (Decoder.forwardRows): sequence i's token at its
 * position through its own cache → its logits row (f32, vocabSize values), each what cachedStep
 * gives for that sequence alone (bit for bit on the CPU reference). Every cache is settled beside
 * the one read-back and its length set.
 */
export async function raggedStep(model: Decoder, seqs: readonly RaggedSequence[]): Promise<Float32Array[]> {
  seqs.forEach((s, i) => {
    if (s.cache.batch !== 1) throw new ArgumentError(`raggedStep: sequence ${i}'s cache has batch ${s.cache.batch}; each sequence needs its own batch-1 cache`);
  });
  const backend = model.embed.weight.backend;
  const logits = noGrad(() => {
    const x = tensor(Int32Array.from(seqs, (s) => s.token), [seqs.length, 1], { backend, dtype: 'i32' });
    const y = model.forwardRows(x, seqs.map((s) => ({ pos: s.pos, cache: s.cache.layers })));
    x.dispose();
    return y;
  });
  const [data] = await Promise.all([logits.data(), ...seqs.map((s) => s.cache.settle())]);
  logits.dispose();
  const v = model.config.vocabSize;
  return seqs.map((s, i) => {
    s.cache.length = s.pos + 1;
    return (data as Float32Array).subarray(i * v, (i + 1) * v);
  });
}
