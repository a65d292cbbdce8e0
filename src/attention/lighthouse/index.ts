/**
 * The `lighthouse` mechanism: Lighthouse Attention (lighthouse/lighthouse.ts, specs/lighthouse_fon.md
 * Part 1), training only. Config entry:
 * {"type": "lighthouse", "levels": L, "pool": p, "topk": k, "scorer": "norm", "tile": 128, "qk": 64}
 * ("scorer": "dilated" takes "dilation": δ, default 4)
 * with the authors' values as defaults (geometry.ts LIGHTHOUSE_DEFAULTS; qk defaults to tile / 2). Checked here, as §1.10
 * states the constraints: p a power of 2 ≥ 2; k a positive multiple of `tile`; k/2 ≥ p;
 * 0 ≤ qk ≤ tile; the scorer one FON implements. Whether the levels fit the sequence is checked per
 * call (ArgumentError naming N and p^(L−1)). The cache layout is full attention's (k and v in
 * pages), so a model with Lighthouse layers allocates a cache like any other, and its cached step
 * says to switch the layer to full (the recovery target) before decoding.
 */
import { ConfigError } from '../../errors.ts';
import { PAGED_KV, type MechanismDef } from '../mechanism.ts';
import { choiceOption, intOption, show } from '../options.ts';
import { isPowerOfTwo, LIGHTHOUSE_DEFAULTS, LIGHTHOUSE_SCORERS, type LighthouseOptions } from './geometry.ts';
import { LighthouseAttention } from './lighthouse.ts';
import { DILATION } from './dilated.ts';

/** The config entry of a Lighthouse layer. */
export interface LighthouseSpec extends LighthouseOptions { type: 'lighthouse' }

function parseLighthouse(o: Record<string, unknown>, at: string): LighthouseSpec {
  const d = LIGHTHOUSE_DEFAULTS;
  const levels = intOption(o, 'levels', at, 1, d.levels);
  const pool = o.pool ?? d.pool;
  if (typeof pool !== 'number' || pool < 2 || !isPowerOfTwo(pool)) throw new ConfigError(`${at}: 'pool' = ${show(pool)}: expected a power of 2 ≥ 2`);
  const tile = intOption(o, 'tile', at, 1, d.tile);
  const qk = intOption(o, 'qk', at, 0, Math.floor(tile / 2));
  if (qk > tile) throw new ConfigError(`${at}: 'qk' = ${show(qk)}: expected at most 'tile' = ${tile} (the query-norm share of each tile's budget)`);
  const topk = intOption(o, 'topk', at, 1, d.topk);
  if (topk % tile !== 0) throw new ConfigError(`${at}: 'topk' = ${show(topk)}: expected a multiple of 'tile' = ${tile} (T = topk / tile tiles)`);
  if (topk / 2 < pool) throw new ConfigError(`${at}: 'topk' = ${show(topk)}: expected topk / 2 ≥ 'pool' = ${pool}`);
  const scorer = choiceOption(o, 'scorer', at, LIGHTHOUSE_SCORERS, d.scorer);
  if (o.dilation !== undefined && scorer !== 'dilated') throw new ConfigError(`${at}: 'dilation' = ${show(o.dilation)} is the dilated scorer's; this layer's scorer is "${scorer}"`);
  const dilation = o.dilation === undefined ? {} : { dilation: intOption(o, 'dilation', at, 1, DILATION) };
  return { type: 'lighthouse', levels, pool, topk, scorer, tile, qk, ...dilation };
}

export const lighthouseMechanism: MechanismDef<LighthouseSpec> = {
  type: 'lighthouse',
  summary: 'Lighthouse Attention (training only): pooled Q/K/V pyramid, parameter-free coarse-to-fine selection, causal attention over the gathered sequence, scattered back; switch to full for inference',
  keys: ['levels', 'pool', 'topk', 'scorer', 'tile', 'qk', 'dilation'],
  parse: parseLighthouse,
  cache: () => PAGED_KV,
  build: (spec) => new LighthouseAttention(spec),
  describe: (spec) => ({
    label: `lighthouse(L=${spec.levels}, p=${spec.pool}, k=${spec.topk})`,
    notes: [
      `scorer ${spec.scorer}${spec.scorer === 'dilated' ? ` (δ ${spec.dilation ?? DILATION})` : ''}; ${spec.tile} entries refined per tile and level (${spec.qk} by query norm, ${spec.tile - spec.qk} by key norm)`,
      'training only: switch the layer to "full" (its recovery target) for decoding and export',
    ],
    facts: { levels: spec.levels, pool: spec.pool, topk: spec.topk, scorer: spec.scorer, tile: spec.tile, qk: spec.qk, trainingOnly: true },
  }),
  hfExport: () => ({ unsupported: '"lighthouse" layers (Lighthouse Attention) are training-only; switch them to "full" (their recovery target) before exporting' }),
};
