/**
 * Host-side acceptance for lossless speculative decoding (draft–revise, specs/lighthouse_fon.md
 * §2.3 "Generation", step 3): standard speculative sampling of Leviathan et al. 2023 ("Fast
 * Inference from Transformers via Speculative Decoding") and Chen et al. 2023 ("Accelerating Large
 * Language Model Decoding with Speculative Sampling"). Pure functions of distributions and a
 * uniform stream, no model: the draft organ supplies q, the verify pass supplies p.
 *
 * Random numbers: `uniform` must return values in [0, 1) with 24 random bits, as `uniformStream`
 * and `Sampler.uniform` do. Each random decision combines two calls into 48 bits, like
 * `Sampler.next`, so that even a 1/150K-probability token is drawn at the right rate. A decision
 * whose outcome is certain (acceptance ratio ≥ 1 or 0, a draw from one positive-mass id) makes no
 * call, so greedy decoding consumes no random numbers at all.
 */
import { ArgumentError } from '../errors.ts';
import type { TokenDistribution } from './sampler.ts';

/** Outcome of one verify pass: the first `accepted` drafted tokens stand, then `next` follows. */
export interface AcceptResult { accepted: number; next: number }

/** 48 random bits from two 24-bit uniforms. */
function uniform48(uniform: () => number): number {
  return uniform() + uniform() / 16777216;
}

function checkDistribution(d: TokenDistribution, what: string): void {
  if (d.ids.length !== d.probs.length) throw new ArgumentError(`${what}: ids length ${d.ids.length} does not match probs length ${d.probs.length}`);
  if (d.ids.length === 0) throw new ArgumentError(`${what}: empty distribution, expected at least one id`);
}

/** The probability `d` gives `id` (0 if `id` is not in its support). Linear in the support size. */
export function probabilityOf(d: TokenDistribution, id: number): number {
  const { ids, probs } = d;
  for (let i = 0; i < ids.length; i++) if (ids[i] === id) return probs[i];
  return 0;
}

/**
 * Draws an id from `d` (probabilities need not sum to exactly 1: they are renormalised). Uses two
 * uniforms, or none when only one id has positive probability (the outcome is then certain).
 */
export function drawFrom(d: TokenDistribution, uniform: () => number, what = 'drawFrom'): number {
  checkDistribution(d, what);
  const { ids, probs } = d;
  let total = 0, positive = 0, last = -1;
  for (let i = 0; i < probs.length; i++) {
    const w = probs[i];
    if (!(w >= 0 && w < Infinity)) throw new ArgumentError(`${what}: probs[${i}] = ${w} for id ${ids[i]}, expected a finite number ≥ 0`);
    if (w > 0) { total += w; positive++; last = i; }
  }
  if (positive === 0) throw new ArgumentError(`${what}: every probability is 0, expected positive total mass`);
  if (positive === 1) return ids[last];
  const u = uniform48(uniform) * total;
  let acc = 0;
  for (let i = 0; i < probs.length; i++) {
    acc += probs[i];
    if (u < acc && probs[i] > 0) return ids[i];
  }
  return ids[last]; // u within rounding of the total
}

/**
 * The residual norm(max(0, p − q)) that a rejected position resamples from; its support is within
 * p's, in p's order. If it has no mass (p ≤ q everywhere, which after a rejection only rounding
 * can cause), p itself is returned.
 */
export function residual(p: TokenDistribution, q: TokenDistribution): TokenDistribution {
  checkDistribution(p, 'residual: p');
  checkDistribution(q, 'residual: q');
  // q's probabilities by id, dense over the ids p can name (q's other ids cannot lower anything).
  let maxId = 0;
  for (let i = 0; i < p.ids.length; i++) if (p.ids[i] > maxId) maxId = p.ids[i];
  const qById = new Float64Array(maxId + 1);
  for (let i = 0; i < q.ids.length; i++) {
    const id = q.ids[i];
    if (id >= 0 && id <= maxId) qById[id] += q.probs[i];
  }
  const n = p.ids.length;
  const ids = new Int32Array(n), probs = new Float64Array(n);
  let m = 0, total = 0;
  for (let i = 0; i < n; i++) {
    const id = p.ids[i];
    const r = p.probs[i] - (id >= 0 ? qById[id] : 0);
    if (r > 0) { ids[m] = id; probs[m++] = r; total += r; }
  }
  if (m === 0 || !(total > 0)) return p;
  for (let i = 0; i < m; i++) probs[i] /= total;
  return { ids: ids.slice(0, m), probs: probs.slice(0, m) };
}

/**
 * Standard speculative sampling over one verify pass. `drafted` = x_1..x_γ, each x_i drawn from
 * q[i−1]; `p` = γ + 1 target distributions (p_i at x_i's position, p_{γ+1} for the bonus token).
 * For i = 1..γ, x_i is accepted with probability min(1, p_i(x_i) / q_i(x_i)); at the first
 * rejection `next` is drawn from norm(max(0, p_i − q_i)) (see `residual`); if all are accepted,
 * `next` is drawn from p_{γ+1}. The emitted tokens drafted[0..accepted) followed by `next` are then
 * distributed exactly as sampling from p would give (lossless). With point masses (greedy) this is
 * "accept while x_i is the target argmax, then the target argmax", and `uniform` is never called.
 */
export function acceptDrafts(
  drafted: readonly number[],
  q: readonly TokenDistribution[],
  p: readonly TokenDistribution[],
  uniform: () => number,
): AcceptResult {
  const gamma = drafted.length;
  if (q.length !== gamma) throw new ArgumentError(`acceptDrafts: q has ${q.length} distributions for ${gamma} drafted tokens, expected one per drafted token (${gamma})`);
  if (p.length !== gamma + 1) throw new ArgumentError(`acceptDrafts: p has ${p.length} distributions for ${gamma} drafted tokens, expected γ + 1 = ${gamma + 1}`);
  for (let i = 0; i < gamma; i++) {
    const x = drafted[i];
    if (!Number.isInteger(x) || x < 0) throw new ArgumentError(`acceptDrafts: drafted[${i}] = ${x}, expected a token id (an integer ≥ 0)`);
    checkDistribution(q[i], `acceptDrafts: q[${i}]`);
    checkDistribution(p[i], `acceptDrafts: p[${i}]`);
    const qx = probabilityOf(q[i], x), px = probabilityOf(p[i], x);
    if (!(qx > 0)) throw new ArgumentError(`acceptDrafts: drafted[${i}] = ${x} has probability ${qx} under q[${i}], expected > 0 (it must have been drawn from q[${i}])`);
    if (!(px >= 0)) throw new ArgumentError(`acceptDrafts: p[${i}] gives drafted[${i}] = ${x} probability ${px}, expected a number ≥ 0`);
    // Certain outcomes take no draw: ratio ≥ 1 always accepts, ratio 0 always rejects.
    const accept = px >= qx || (px > 0 && uniform48(uniform) < px / qx);
    if (!accept) return { accepted: i, next: drawFrom(residual(p[i], q[i]), uniform, `acceptDrafts: residual at ${i}`) };
  }
  return { accepted: gamma, next: drawFrom(p[gamma], uniform, `acceptDrafts: p[${gamma}]`) };
}

export interface GammaOptions {
  /** Draft length to start with; default 4 (raised to no more than `max`, see below). */
  gamma?: number;
  /** Smallest γ the rule goes down to; default 1. */
  min?: number;
  /** Largest γ the rule goes up to; default max(8, gamma). */
  max?: number;
  /** Keep γ constant (update only validates); default false. */
  fixed?: boolean;
}

function checkInteger(name: string, value: number, low: number): void {
  if (!Number.isInteger(value) || value < low) throw new ArgumentError(`GammaController: ${name} ${value}: expected an integer ≥ ${low}`);
}

/**
 * Adapts the draft length γ to the running acceptance, with the heuristic Hugging Face
 * transformers' assisted generation uses ("heuristic" schedule of num_assistant_tokens): +2 after
 * a pass whose every drafted token was accepted, −1 after a pass with a rejection, clamped to
 * [min, max]. Long drafts pay off only while the draft organ agrees with the revise organ, and
 * the cost of a wasted draft grows with γ (specs/lighthouse_fon.md §2.3, expected speedup).
 */
export class GammaController {
  readonly min: number;
  readonly max: number;
  readonly fixed: boolean;
  private current: number;

  constructor(opts: GammaOptions = {}) {
    const { gamma = 4, min = 1, fixed = false } = opts;
    checkInteger('gamma', gamma, 1);
    checkInteger('min', min, 1);
    const max = opts.max ?? Math.max(8, gamma);
    checkInteger('max', max, 1);
    if (min > max) throw new ArgumentError(`GammaController: min ${min} > max ${max}: expected min ≤ max`);
    if (gamma < min || gamma > max) throw new ArgumentError(`GammaController: gamma ${gamma}: expected an integer in [min, max] = [${min}, ${max}]`);
    this.min = min;
    this.max = max;
    this.fixed = fixed;
    this.current = gamma;
  }

  /** The draft length to use for the next pass. */
  get gamma(): number { return this.current; }

  /** Records a pass that drafted `drafted` tokens of which the first `accepted` were accepted. */
  update(drafted: number, accepted: number): void {
    if (!Number.isInteger(drafted) || drafted < 0) throw new ArgumentError(`GammaController.update: drafted ${drafted}: expected an integer ≥ 0`);
    if (!Number.isInteger(accepted) || accepted < 0 || accepted > drafted) throw new ArgumentError(`GammaController.update: accepted ${accepted}: expected an integer in [0, drafted] = [0, ${drafted}]`);
    if (this.fixed || drafted === 0) return; // nothing drafted: no evidence either way
    this.current = accepted === drafted ? Math.min(this.max, this.current + 2) : Math.max(this.min, this.current - 1);
  }
}

export interface SpeculativeStatsJSON {
  passes: number;
  drafted: number;
  accepted: number;
  emitted: number;
  acceptanceRate: number;
  meanAcceptedPerPass: number;
}

/**
 * Counters for a speculative generation (DESIGN.md, "The FON model": report acceptance rate and
 * mean accepted tokens per step). Rates of empty counters are 0.
 */
export class SpeculativeStats {
  private counts = { passes: 0, drafted: 0, accepted: 0, emitted: 0 };
  private lastEmitted = 0;

  /** Verify passes run. */
  get passes(): number { return this.counts.passes; }
  /** Draft tokens proposed, over all passes. */
  get drafted(): number { return this.counts.drafted; }
  /** Draft tokens accepted, over all passes. */
  get accepted(): number { return this.counts.accepted; }
  /** Tokens appended to the output, including each pass's correction or bonus token. */
  get emitted(): number { return this.counts.emitted; }

  /**
   * Records one verify pass. `emitted` defaults to accepted + 1 (the accepted drafts and the
   * correction/bonus token); give less when generation stopped inside the pass (stop token, limit).
   */
  record(drafted: number, accepted: number, emitted = accepted + 1): void {
    if (!Number.isInteger(drafted) || drafted < 0) throw new ArgumentError(`SpeculativeStats.record: drafted ${drafted}: expected an integer ≥ 0`);
    if (!Number.isInteger(accepted) || accepted < 0 || accepted > drafted) throw new ArgumentError(`SpeculativeStats.record: accepted ${accepted}: expected an integer in [0, drafted] = [0, ${drafted}]`);
    if (!Number.isInteger(emitted) || emitted < 0 || emitted > accepted + 1) throw new ArgumentError(`SpeculativeStats.record: emitted ${emitted}: expected an integer in [0, accepted + 1] = [0, ${accepted + 1}]`);
    const c = this.counts;
    c.passes++;
    c.drafted += drafted;
    c.accepted += accepted;
    c.emitted += emitted;
    this.lastEmitted = emitted;
  }

  /**
   * The last pass's tokens that generation did not use (it stopped inside the pass: a stop token,
   * a stop string, the token limit): taken off `emitted`, so τ counts only tokens that were output.
   */
  unused(n: number): void {
    const last = this.lastEmitted;
    if (!Number.isInteger(n) || n < 0 || n > last) throw new ArgumentError(`SpeculativeStats.unused: ${n}: expected an integer in [0, ${last}] (the last pass emitted ${last})`);
    this.counts.emitted -= n;
    this.lastEmitted -= n;
  }

  /** accepted / drafted: the fraction of draft tokens the revise organ kept (α, roughly). */
  get acceptanceRate(): number { return this.drafted > 0 ? this.accepted / this.drafted : 0; }

  /** emitted / passes: tokens per verify pass counting the bonus token (τ in the literature). */
  get meanAcceptedPerPass(): number { return this.passes > 0 ? this.emitted / this.passes : 0; }

  reset(): void { this.counts = { passes: 0, drafted: 0, accepted: 0, emitted: 0 }; this.lastEmitted = 0; }

  toJSON(): SpeculativeStatsJSON {
    return { ...this.counts, acceptanceRate: this.acceptanceRate, meanAcceptedPerPass: this.meanAcceptedPerPass };
  }
}
