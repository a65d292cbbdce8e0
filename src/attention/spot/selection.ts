/**
 * SpotAttention's block selection at decode (specs/focus_spot.md B4), the host reference the
 * device form is checked against. For one query at position q of a layer, over the causal key
 * blocks b = 0 … ⌊q/16⌋ (16 tokens each; the last one partial):
 *
 * - reserved: the sink blocks (the first 128 tokens: b < 8) and the recency blocks (the last 256
 *   tokens, the current partial block included: b > ⌊q/16⌋ − 16);
 * - the rest U are ranked by the selector's block score S(b) (the max-pooled token score), highest
 *   first, ties by the lower block (one total order, so every form of the rule picks the same set);
 * - dual top-p: the nucleus of U's mass r(b) = m(b) / Σ_U m, m(b) = Σ_{t∈b} p^s(t) the selector's
 *   token probabilities (the spec's proposal: rank by max score, measure mass by the sum the KL
 *   calibrates): n_p = the fewest leading blocks of the order whose r sums to ≥ p; then n =
 *   min(|U|, max(n_p, 32 − |reserved|)) (a floor of 512 tokens in all);
 * - static top-K: a budget of ⌈ρ · blocks⌉ blocks, the reserved ones counted in (the spec's proposal:
 *   the same reservation as top-p, for a fair comparison), the rest the leading blocks of U.
 *
 * Neither rule sorts: the boundary of the order is found by building the score's order-preserving
 * u32 key bit by bit from the top (32 rounds of a masked count or sum over U), then ties at the
 * boundary key are taken by block index: Backend.selectOpen, whose CPU reference
 * (backend/cpu/select.ts) this host form calls and whose WGSL form runs the rounds in parallel.
 * `selectBySort` is the sort-based reference the tests compare against.
 */
import { ArgumentError } from '../../errors.ts';
import type { SelectArgs } from '../../backend/backend.ts';
import { selectOpenRow } from '../../backend/cpu/select.ts';

/** Tokens a selector block holds (B2: max-pool over 16 tokens). */
export const SPOT_BLOCK = 16;
/** The reserved sink (first tokens) and recency (last tokens) spans of B4, and the floor, in tokens. */
export const SPOT_SINK_TOKENS = 128, SPOT_RECENT_TOKENS = 256, SPOT_FLOOR_TOKENS = 512;

/** How blocks are chosen: the dual top-p nucleus or a static fraction of the blocks. */
export type SpotRule = { kind: 'top-p'; p: number } | { kind: 'top-k'; fraction: number };

/** Checks a rule's number: p and the fraction lie in (0, 1]. */
export function checkSpotRule(rule: SpotRule): void {
  const [name, v] = rule.kind === 'top-p' ? ['top-p', rule.p] : ['top-K fraction', rule.fraction];
  if (!(v > 0 && v <= 1)) throw new ArgumentError(`spot: ${name} ${v} must lie in (0, 1]`);
}

/** The sorted block ids one query reads, and how many of them are reserved (sink and recency). */
export interface SpotSelection { blocks: Int32Array; reserved: number }

/** Block b's place among the reserved ones for a query in block bq (sink, recency). */
function isReserved(b: number, bq: number): boolean {
  return b < SPOT_SINK_TOKENS / SPOT_BLOCK || b > bq - SPOT_RECENT_TOKENS / SPOT_BLOCK;
}

/**
 * The rule for a query at position q as Backend.selectOpen's arguments over its ⌊q/16⌋ + 1 causal
 * blocks (one row): the open range [low, high) between the sink and the recency blocks, and the
 * count (top-K's budget less the reserved blocks, or top-p's floor) with p (0 for top-K).
 */
export function selectArgs(q: number, rule: SpotRule): Omit<SelectArgs, 'rows' | 'n'> {
  checkSpotRule(rule);
  if (!Number.isInteger(q) || q < 0) throw new ArgumentError(`spot: query position ${q} must be an integer ≥ 0`);
  const valid = Math.floor(q / SPOT_BLOCK) + 1;
  const low = Math.min(valid, SPOT_SINK_TOKENS / SPOT_BLOCK), high = Math.max(low, valid - SPOT_RECENT_TOKENS / SPOT_BLOCK);
  const reserved = valid - (high - low);
  return rule.kind === 'top-k'
    ? { valid, low, high, count: Math.max(0, Math.ceil(rule.fraction * valid) - reserved), p: 0 }
    : { valid, low, high, count: Math.max(0, SPOT_FLOOR_TOKENS / SPOT_BLOCK - reserved), p: rule.p };
}

/**
 * The blocks of one query at position q (0-based, the query's own block ⌊q/16⌋ included) under
 * `rule`, from the selector's per-block scores (blocks ≥ ⌊q/16⌋ + 1, max-pooled) and per-block masses
 * (summed token probabilities; any non-negative scale), both of length ≥ ⌊q/16⌋ + 1: the threshold
 * search of Backend.selectOpen's CPU reference (backend/cpu/select.ts) over one row.
 */
export function selectBlocks(q: number, scores: ArrayLike<number>, mass: ArrayLike<number>, rule: SpotRule): SpotSelection {
  const a = selectArgs(q, rule);
  const n = a.valid;
  if (scores.length < n || mass.length < n) throw new ArgumentError(`spot: ${scores.length} scores and ${mass.length} masses for a query in block ${n - 1}; expected at least ${n} each`);
  for (let b = 0; b < n; b++) {
    if (Number.isNaN(scores[b]) || !(mass[b] >= 0)) throw new ArgumentError(`spot: block ${b} has score ${scores[b]} and mass ${mass[b]}; expected a number and a mass ≥ 0`);
  }
  const flags = selectOpenRow(scores, mass, { ...a, n });
  const blocks: number[] = [];
  for (let b = 0; b < n; b++) if (flags[b]) blocks.push(b);
  return { blocks: Int32Array.from(blocks), reserved: n - (a.high - a.low) };
}

/** The same selection by sorting U (the reference): the order, then the rule's count. */
export function selectBySort(q: number, scores: ArrayLike<number>, mass: ArrayLike<number>, rule: SpotRule): SpotSelection {
  const n = Math.floor(q / SPOT_BLOCK) + 1, bq = n - 1;
  const open = Array.from({ length: n }, (_, b) => b).filter((b) => !isReserved(b, bq));
  const reserved = n - open.length;
  const order = [...open].sort((a, b) => (scores[b] - scores[a]) || (a - b));
  let take: number;
  if (rule.kind === 'top-k') take = Math.min(open.length, Math.max(0, Math.ceil(rule.fraction * n) - reserved));
  else {
    const total = open.reduce((s, b) => s + mass[b], 0);
    let m = 0, np = 0;
    while (np < order.length && (np === 0 || m < rule.p * total)) m += mass[order[np++]];
    take = Math.min(open.length, Math.max(np, SPOT_FLOOR_TOKENS / SPOT_BLOCK - reserved));
  }
  const set = new Set([...order.slice(0, take), ...Array.from({ length: n }, (_, b) => b).filter((b) => isReserved(b, bq))]);
  return { blocks: Int32Array.from([...set].sort((a, b) => a - b)), reserved };
}
