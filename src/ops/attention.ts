/**
 * Fused softmax attention with its own backward (flash attention: the forward keeps only the
 * per-row logsumexp, the backward recomputes the probabilities), and the in-place KV-cache write
 * that decoding uses. Shapes: q (B, H, Tq, D), k and v (B, Hkv, Tk, D), H a multiple of Hkv
 * (grouped-query attention: query head h reads kv head ⌊h / (H/Hkv)⌋).
 */
import { ArgumentError, DTypeError, ShapeError } from '../errors.ts';
import type { AttentionArgs, KvWriteArgs } from '../backend/backend.ts';
import { record } from '../tensor/autograd.ts';
import { autocastDType } from '../tensor/autocast.ts';
import { isGradEnabled, keep } from '../tensor/scope.ts';
import { viaLowPrecision } from './low_precision.ts';
import { tensor } from './creation.ts';
import { maskArgs, type BlockMask } from '../attention/block_mask.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireFloat, wrap, sameShape } from './run.ts';

export interface AttentionOptions {
  /** Default true: query i sits at absolute position qOffset + i (qOffset = kvLength − Tq) and sees keys j ≤ that position. */
  causal?: boolean;
  /** Sliding window: key j is visible to the query at position p only if j > p − window (with causal, p − window < j ≤ p). Undefined: unlimited. */
  window?: number;
  /** Multiplies q·k; default 1/√D. */
  scale?: number;
  /** Keys along k/v's T axis that are valid (a KV cache may be longer); default k.shape[2]. */
  kvLength?: number;
  /**
   * A block mask (attention/block_mask.ts) built for this call's geometry: only the key blocks it
   * keeps for each query block are visited (forward and backward).
   */
  mask?: BlockMask;
}

function describe(q: Tensor, k: Tensor, v: Tensor): string {
  return `q ${fmt(q.shape)}, k ${fmt(k.shape)}, v ${fmt(v.shape)}`;
}

/** Checks shapes, dtypes and options and returns the kernel arguments; `qOffset` (≥ kvLength − Tq) places the queries later than the keys' end. */
function attentionArgs(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions & { qOffset?: number } = {}): AttentionArgs {
  requireFloat('attention', q);
  if (k.dtype !== q.dtype || v.dtype !== q.dtype) throw new DTypeError(`attention: q, k and v must share one dtype, got ${q.dtype}, ${k.dtype} and ${v.dtype}`);
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) throw new ShapeError(`attention: q, k and v must have rank 4 (B, H, T, D), got ${describe(q, k, v)}`);
  const [batch, heads, tq, d] = q.shape;
  const [kb, kvHeads, tk, kd] = k.shape;
  if (!sameShape(v.shape, k.shape)) throw new ShapeError(`attention: v must have k's shape, got ${describe(q, k, v)}`);
  if (kb !== batch || kd !== d) throw new ShapeError(`attention: k and v must be (${batch}, Hkv, Tk, ${d}) for q (B, H, Tq, D), got ${describe(q, k, v)}`);
  if (kvHeads === 0 || heads % kvHeads !== 0) throw new ShapeError(`attention: query heads ${heads} must be a multiple of kv heads ${kvHeads}, got ${describe(q, k, v)}`);
  const kvLength = opts.kvLength ?? tk;
  if (!Number.isInteger(kvLength) || kvLength < 0 || kvLength > tk) throw new ArgumentError(`attention: kvLength ${kvLength} must be an integer in [0, ${tk}] (k's T axis)`);
  const w = opts.window;
  if (w !== undefined && (!Number.isInteger(w) || w < 1)) throw new ArgumentError(`attention: window ${w} must be a positive integer (or undefined for no window)`);
  const scale = opts.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new ArgumentError(`attention: scale ${scale} must be a finite number`);
  const qOffset = opts.qOffset ?? kvLength - tq;
  if (!Number.isInteger(qOffset) || qOffset < kvLength - tq) throw new ArgumentError(`attention: qOffset ${qOffset} must be an integer ≥ kvLength − Tq = ${kvLength - tq}`);
  return { batch, heads, kvHeads, tq, tk, d, kvLength, qOffset, causal: opts.causal ?? true, window: w ?? 0, scale };
}

/** The mask's geometry against the call's (a ShapeError naming both where they differ) and its table as an i32 tensor. */
function maskInput(m: BlockMask, a: AttentionArgs, q: Tensor, k: Tensor): { args: AttentionArgs; table: Tensor; owned: boolean } {
  const want = { batch: a.batch, tq: a.tq, tk: a.tk, kvLength: a.kvLength, qOffset: a.qOffset, causal: a.causal, window: a.window };
  const got = { batch: m.batch, tq: m.tq, tk: m.tk, kvLength: m.kvLength, qOffset: m.qOffset, causal: m.causal, window: m.window };
  const off = (Object.keys(want) as (keyof typeof want)[]).filter((key) => want[key] !== got[key]);
  const heads = m.heads !== 1 && m.heads !== a.heads;
  if (off.length || heads) {
    const what = [...off.map((key) => `${key} ${got[key]} (attention: ${want[key]})`), ...(heads ? [`heads ${m.heads} (attention: 1 or ${a.heads})`] : [])].join(', ');
    throw new ShapeError(`attention: the block mask was built for another call: ${what}; q ${fmt(q.shape)}, k ${fmt(k.shape)}`);
  }
  const up = (m as Partial<UploadedMask>).device;
  const table = up && up.backend === q.backend ? up : tensor(m.table, [m.table.length], { dtype: 'i32', backend: q.backend });
  return { args: Object.assign({}, a, { mask: maskArgs(m) }), table, owned: table !== up };
}

/** A block mask with its table already on a backend (uploadMask): calls that take it read that copy instead of uploading the table again. */
export interface UploadedMask extends BlockMask { readonly device: Tensor }

/** `m` with its table uploaded once to `backend` (the caller disposes `device`): for a mask used by many calls (benchmarks, repeated layers). */
export function uploadMask(m: BlockMask, backend: Tensor['backend']): UploadedMask {
  return Object.assign({}, m, { device: keep(tensor(m.table, [m.table.length], { dtype: 'i32', backend })) });
}

/**
 * The forward of `attention` with its per-row logsumexp (B, H, Tq) f32, no autograd: the pieces
 * paged attention and Focus merge (ops/attention_merge.ts). `qOffset` puts query i at position
 * qOffset + i of the keys' axis (default kvLength − Tq); a row that sees no key has lse −∞ or
 * below −1e30. A block mask is taken as `attention` takes it.
 */
export function attentionWithLse(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions & { qOffset?: number } = {}): [Tensor, Tensor] {
  const b = backendOf('attention', q, k, v);
  const plain = attentionArgs(q, k, v, opts);
  const masked = opts.mask ? maskInput(opts.mask, plain, q, k) : null;
  const args = masked?.args ?? plain;
  const [oh, lh] = b.attention(ref(q), ref(k), ref(v), args, masked ? { mask: ref(masked.table) } : undefined);
  if (masked?.owned) masked.table.dispose();
  return [wrap(b, oh, q.shape, q.dtype), wrap(b, lh, [args.batch, args.heads, args.tq], 'f32')];
}

/** One key set of attentionMulti: k, v and its options (as attentionWithLse takes them). */
export interface AttentionPart { k: Tensor; v: Tensor; opts: AttentionOptions & { qOffset?: number } }

/**
 * q against several key sets as one softmax over all their visible keys, in one pass where the
 * backend has one (Backend.attentionMulti: webgpu's decode); undefined otherwise. No autograd.
 */
export function attentionMulti(q: Tensor, parts: readonly AttentionPart[]): Tensor | undefined {
  if (parts.some((p) => p.opts.mask)) throw new ArgumentError('attentionMulti: block masks are taken by attention() only');
  const b = backendOf('attention', q, ...parts.flatMap((p) => [p.k, p.v]));
  if (!b.attentionMulti) return undefined;
  const refs = parts.map((p) => ({ k: ref(p.k), v: ref(p.v), args: attentionArgs(q, p.k, p.v, p.opts) }));
  const r = b.attentionMulti(ref(q), refs);
  if (!r) return undefined;
  wrap(b, r[1], [q.shape[0], q.shape[1], q.shape[2]], 'f32').dispose();
  return wrap(b, r[0], q.shape, q.dtype);
}

/** q (B, H, Tq, D), k and v (B, Hkv, Tk, D) with H % Hkv == 0 → (B, H, Tq, D). Softmax statistics in f32. */
export function attention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const low = autocastDType();
  if (low && q.dtype === 'f32') return viaLowPrecision(low, [q, k, v], ([ql, kl, vl]) => attention(ql, kl, vl, opts));
  const b = backendOf('attention', q, k, v);
  const plain = attentionArgs(q, k, v, opts);
  if (opts.mask?.forwardOnly && isGradEnabled() && (q.requiresGrad || k.requiresGrad || v.requiresGrad)) {
    throw new ArgumentError('attention: this block mask was built for the forward only (its by-key lists are empty); run it under noGrad or build the mask on the host');
  }
  const masked = opts.mask ? maskInput(opts.mask, plain, q, k) : null;
  const args = masked?.args ?? plain, table = masked?.table;
  const [oh, lh] = b.attention(ref(q), ref(k), ref(v), args, table && { mask: ref(table) });
  const out = wrap(b, oh, q.shape, q.dtype);
  const lse = wrap(b, lh, [args.batch, args.heads, args.tq], 'f32');
  record('attention', out, [q, k, v], (g, [qs, ks, vs, os, ls, ts]) => {
    const [dq, dk, dv] = b.attentionBackward(ref(qs), ref(ks), ref(vs), ref(os), ref(ls), ref(g), args, ts && { mask: ref(ts) });
    return [wrap(b, dq, qs.shape, qs.dtype), wrap(b, dk, ks.shape, ks.dtype), wrap(b, dv, vs.shape, vs.dtype)];
  }, [q, k, v, out, lse, ...(table ? [table] : [])]);
  if (masked?.owned) table?.dispose();
  lse.dispose();
  return out;
}

/**
 * In-place write of x (B, Hkv, n, D) into cache (B, Hkv, Tmax, D) at rows [pos, pos + n): the
 * cache is allocated once and never re-allocated per token. Every tensor sharing the cache's
 * storage sees the write. No autograd.
 */
export function kvWrite(cache: Tensor, x: Tensor, pos: number): void {
  const b = backendOf('kvWrite', cache, x);
  const args = kvWriteArgs('kvWrite', cache, x, pos);
  if (args) b.kvWrite(ref(cache), ref(x), args);
}

/**
 * kvWrite of several (cache, x) pairs at one position, each checked as kvWrite checks it (a step's
 * K, V and side state: one dispatch on webgpu where the rows are whole words).
 */
export function kvWriteMany(writes: readonly (readonly [Tensor, Tensor])[], pos: number): void {
  if (!writes.length) return;
  const b = backendOf('kvWriteMany', ...writes.flat());
  const all = writes.flatMap(([cache, x]) => {
    const args = kvWriteArgs('kvWriteMany', cache, x, pos);
    return args ? [{ cache: ref(cache), x: ref(x), args }] : [];
  });
  if (all.length) b.kvWriteMany(all);
}

/** kvWrite's checks; its arguments, or null where there is nothing to write. */
function kvWriteArgs(op: string, cache: Tensor, x: Tensor, pos: number): KvWriteArgs | null {
  if (x.dtype !== cache.dtype) throw new DTypeError(`${op}: x dtype ${x.dtype} must equal cache dtype ${cache.dtype}`);
  if (cache.rank !== 4 || x.rank !== 4) throw new ShapeError(`${op}: cache and x must have rank 4 (B, Hkv, T, D), got cache ${fmt(cache.shape)}, x ${fmt(x.shape)}`);
  const [batch, kvHeads, tmax, d] = cache.shape;
  const n = x.shape[2];
  if (x.shape[0] !== batch || x.shape[1] !== kvHeads || x.shape[3] !== d) throw new ShapeError(`${op}: x ${fmt(x.shape)} must be (${batch}, ${kvHeads}, n, ${d}) for cache ${fmt(cache.shape)}`);
  if (!Number.isInteger(pos) || pos < 0 || pos + n > tmax) throw new ArgumentError(`${op}: rows [${pos}, ${pos + n}) must be integers inside the cache's ${tmax} rows (cache ${fmt(cache.shape)}, x ${fmt(x.shape)})`);
  if (n === 0 || cache.size === 0) return null;
  return { batch, kvHeads, tmax, n, d, pos };
}
