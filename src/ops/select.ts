/**
 * Selection without sorting (Backend.selectOpen): which entries of each row a top-K or top-p rule
 * keeps, reserved ranges kept whatever their scores (SpotAttention's block selection,
 * specs/focus_spot.md B4); the block scores such a selection ranks, straight from the keys
 * (indexBlockScores); the decode mask of the kept blocks (flagsMaskTable, or selectBlockList: the
 * selection and its mask in one pass), or their K and V rows gathered from its lists (gatherListed).
 * No gradients.
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import type { SelectArgs } from '../backend/backend.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { backendOf, fmt, ref, requireDType, wrap, sameShape } from './run.ts';

/** Which entries each row of scores and masses (…, N) f32 keeps under `rule` (SelectArgs without rows and n): i32 flags (…, N). */
export function selectOpen(scores: Tensor, mass: Tensor, rule: Omit<SelectArgs, 'rows' | 'n'>): Tensor {
  const b = backendOf('selectOpen', scores, mass);
  requireDType('selectOpen', 'scores', scores, 'f32');
  requireDType('selectOpen', 'mass', mass, 'f32');
  if (!sameShape(scores.shape, mass.shape) || scores.rank < 1) throw new ShapeError(`selectOpen: scores ${fmt(scores.shape)} and mass ${fmt(mass.shape)} must have one shape (…, N)`);
  const n = scores.shape[scores.rank - 1], rows = scores.shape.slice(0, -1).reduce((a, x) => a * x, 1);
  checkRule('selectOpen', rule, n);
  return wrap(b, b.selectOpen(ref(scores), ref(mass), { rows, n, ...rule }), scores.shape, 'i32');
}

/**
 * selectOpen over rows of fine blocks (scores and masses (B, N) f32, one row a batch entry) and, from
 * the same pass (Backend.selectBlockList), the device table of their one-query-row fine mask: what
 * flagsMaskTable(flags, { fine, per: 1, tk, kBlocks, kvLength, segments: false }) writes, kBlocks the
 * cache's ⌈tk/fine⌉ blocks → flags (B, N) i32 and the table, i32 of B·(1 + kBlocks + valid + 1) + 1.
 * `flags` false: no flags (a decoding step that reads the table alone: the device skips their writes).
 */
export function selectBlockList(scores: Tensor, mass: Tensor, rule: Omit<SelectArgs, 'rows' | 'n'>, o: { fine: number; tk: number; kvLength: number; flags?: boolean }): { flags?: Tensor; table: Tensor } {
  const b = backendOf('selectBlockList', scores, mass);
  requireDType('selectBlockList', 'scores', scores, 'f32');
  requireDType('selectBlockList', 'mass', mass, 'f32');
  if (!sameShape(scores.shape, mass.shape) || scores.rank !== 2) throw new ShapeError(`selectBlockList: scores ${fmt(scores.shape)} and mass ${fmt(mass.shape)} must have one shape (B, N)`);
  const [rows, n] = scores.shape;
  checkRule('selectBlockList', rule, n);
  const kBlocks = Math.ceil(o.tk / o.fine);
  if (!Number.isInteger(o.fine) || o.fine < 1 || rule.valid > kBlocks || !Number.isInteger(o.kvLength) || o.kvLength < 1 || o.kvLength > o.tk || o.kvLength > rule.valid * o.fine) {
    throw new ArgumentError(`selectBlockList: ${rule.valid} blocks of ${o.fine} keys for a query at ${o.kvLength - 1} over a cache of ${o.tk}: need valid ≤ ⌈tk/fine⌉ and 1 ≤ kvLength ≤ min(tk, valid·fine)`);
  }
  const withFlags = o.flags ?? true;
  const [flags, table] = b.selectBlockList(ref(scores), ref(mass), { rows, n, ...rule }, { fine: o.fine, tk: o.tk, kBlocks, kvLength: o.kvLength, flags: withFlags });
  if (!withFlags) b.free(flags);
  return { ...(withFlags ? { flags: wrap(b, flags, scores.shape, 'i32') } : {}), table: wrap(b, table, [rows * (1 + kBlocks + rule.valid + 1) + 1], 'i32') };
}

/** The checks selectOpen and selectBlockList share: the rule's integers and ranges over rows of n entries. */
function checkRule(op: string, rule: Omit<SelectArgs, 'rows' | 'n'>, n: number): void {
  const { valid, low, high, count, p } = rule;
  const ints = { valid, low, high, count };
  for (const [k, v] of Object.entries(ints)) if (!Number.isInteger(v) || v < 0) throw new ArgumentError(`${op}: ${k} ${v} must be an integer ≥ 0`);
  if (!(low <= high && high <= valid && valid <= n)) throw new ArgumentError(`${op}: need low ≤ high ≤ valid ≤ N; got low ${low}, high ${high}, valid ${valid}, N ${n}`);
  if (!(p >= 0 && p <= 1)) throw new ArgumentError(`${op}: p ${p} must lie in [0, 1] (0: keep the leading count)`);
}

/**
 * A lightning indexer's block scores in one pass over the keys (Backend.indexBlockScores): index
 * queries q (B, n, H, d) f32 and head weights w (B, n, H) f32 of the queries at positions pos … pos
 * + n − 1, keys (B, Tmax, d) of any float dtype of which the first l are read → per block of `block`
 * keys the max score and the log of Σ e^score over the keys a query sees, (B, n, ⌈l/block⌉) f32 each
 * (−1e30 for a block it sees none of). Score = Σ_h w_h · ReLU(scale · q_h·k). With `scales`, keys
 * are INT4 codes (B, Tmax, d/8) i32 and scales (B, Tmax, d/32) f16 (ops/int4.ts quantizeInt4's
 * form), scored as the values they stand for without a dequantized copy.
 */
export function indexBlockScores(q: Tensor, w: Tensor, keys: Tensor, o: { l: number; pos: number; block: number; scale: number }, scales?: Tensor): { max: Tensor; logMass: Tensor } {
  const be = backendOf('indexBlockScores', q, w, keys, ...(scales ? [scales] : []));
  requireDType('indexBlockScores', 'q', q, 'f32');
  requireDType('indexBlockScores', 'w', w, 'f32');
  const [b, n, heads, d] = q.shape;
  const tmax = keys.shape[1];
  if (scales) {
    requireDType('indexBlockScores', 'keys (INT4 codes)', keys, 'i32');
    requireDType('indexBlockScores', 'scales', scales, 'f16');
    if (q.rank !== 4 || !sameShape(w.shape, [b, n, heads]) || d % 32 !== 0 || !sameShape(keys.shape, [b, tmax, d / 8]) || !sameShape(scales.shape, [b, tmax, d / 32])) {
      throw new ShapeError(`indexBlockScores: q ${fmt(q.shape)}, w ${fmt(w.shape)}, INT4 codes ${fmt(keys.shape)} and scales ${fmt(scales.shape)}: expected (B, n, H, d) with d a multiple of 32, (B, n, H), (B, Tmax, d/8) and (B, Tmax, d/32)`);
    }
  } else if (q.rank !== 4 || !sameShape(w.shape, [b, n, heads]) || keys.rank !== 3 || keys.shape[0] !== b || keys.shape[2] !== d) {
    throw new ShapeError(`indexBlockScores: q ${fmt(q.shape)}, w ${fmt(w.shape)} and keys ${fmt(keys.shape)}: expected (B, n, H, d), (B, n, H) and (B, Tmax, d)`);
  }
  if (!Number.isInteger(o.l) || o.l < 1 || o.l > tmax || !Number.isInteger(o.pos) || o.pos < 0 || !Number.isInteger(o.block) || o.block < 1) {
    throw new ArgumentError(`indexBlockScores: l ${o.l} must be in [1, ${tmax}], pos ${o.pos} ≥ 0 and block ${o.block} ≥ 1`);
  }
  const nb = Math.ceil(o.l / o.block);
  const [mx, lm] = be.indexBlockScores(ref(q), ref(w), ref(keys), { batch: b, n, heads, d, l: o.l, tmax, pos: o.pos, block: o.block, scale: o.scale }, scales ? ref(scales) : undefined);
  return { max: wrap(be, mx, [b, n, nb], 'f32'), logMass: wrap(be, lm, [b, n, nb], 'f32') };
}

/**
 * The device table of a one-query-row block mask from selected fine blocks (Backend.flagsMaskTable):
 * flags i32 (B, valid), `fine` keys a fine block, `per` fine blocks a mask block; tk keys in the cache
 * in kBlocks mask blocks → the table, i32, laid out as attention/device_mask.ts deviceMaskShape says
 * for lists of stride ⌈valid/per⌉ + 1, with segment ids unless `segments` is false.
 */
export function flagsMaskTable(flags: Tensor, o: { fine: number; per: number; tk: number; kBlocks: number; kvLength: number; segments?: boolean }): Tensor {
  const be = backendOf('flagsMaskTable', flags);
  requireDType('flagsMaskTable', 'flags', flags, 'i32');
  if (flags.rank !== 2) throw new ShapeError(`flagsMaskTable: flags ${fmt(flags.shape)} must be (B, valid)`);
  const [batch, valid] = flags.shape;
  if (valid * o.fine > Math.ceil(o.tk / o.fine) * o.fine || valid < 1 || o.kBlocks * o.per * o.fine < o.tk) throw new ArgumentError(`flagsMaskTable: ${valid} fine blocks of ${o.fine} for a cache of ${o.tk} keys in ${o.kBlocks} mask blocks of ${o.per * o.fine}`);
  const stride = Math.ceil(valid / o.per) + 1;
  return wrap(be, be.flagsMaskTable(ref(flags), { batch, valid, ...o }), [batch * (1 + o.kBlocks + stride + (o.segments ?? true ? o.tk : 0)) + 1], 'i32');
}

/**
 * The K and V rows of the blocks a selectBlockList table lists, compacted in list order
 * (Backend.gatherListed): each batch entry's first `count` listed blocks' rows, `fine` rows a block
 * (rows past Tmax from its last row), over k and v (B, Hkv, Tmax, D) of one dtype → k', v' (B, Hkv,
 * count·fine, D), zero rows where fewer are listed (on webgpu rows of whole 32-bit words, copied a
 * block at a time).
 */
export function gatherListed(table: Tensor, k: Tensor, v: Tensor, o: { fine: number; count: number }): { k: Tensor; v: Tensor } {
  const be = backendOf('gatherListed', table, k, v);
  requireDType('gatherListed', 'table', table, 'i32');
  if (table.rank !== 1 || k.rank !== 4 || !sameShape(k.shape, v.shape) || k.dtype !== v.dtype) {
    throw new ShapeError(`gatherListed: table ${fmt(table.shape)}, k ${fmt(k.shape)} ${k.dtype} and v ${fmt(v.shape)} ${v.dtype}: expected a flat table and two (B, Hkv, Tmax, D) of one dtype`);
  }
  const [batch, hkv, tmax, d] = k.shape;
  if (!Number.isInteger(o.fine) || o.fine < 1 || !Number.isInteger(o.count) || o.count < 1 || o.count > Math.ceil(tmax / o.fine)) {
    throw new ArgumentError(`gatherListed: count ${o.count} of blocks of ${o.fine} keys over a cache of ${tmax}: need fine ≥ 1 and 1 ≤ count ≤ ⌈Tmax/fine⌉`);
  }
  const [kh, vh] = be.gatherListed(ref(table), ref(k), ref(v), { batch, fine: o.fine, count: o.count, hkv, tmax, d });
  const shape = [batch, hkv, o.count * o.fine, d];
  return { k: wrap(be, kh, shape, k.dtype), v: wrap(be, vh, shape, v.dtype) };
}

