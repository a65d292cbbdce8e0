/**
 * The organs of a FON model (DESIGN.md "The FON model (organs)", specs/lighthouse_fon.md §2.3
 * Design A): layers 0 … D−1 plus the exit head form the draft organ, layers D … L−1 the revise
 * organ. The exit head is the model's own final norm and LM head applied to the hidden state after
 * layer D−1 (shared weights, no parameters of its own). Training adds
 *
 *   λ_D·CE(exit) + λ_KL·KL(sg(p_L) ‖ p_D)
 *
 * to the usual CE(p_L), and optionally LayerSkip-style layer dropout whose rate rises with depth.
 * The config key: "organs": {"draftLayers": D, "exitLoss"?: λ_D, "distill"?: λ_KL, "layerDropout"?: p}.
 */
import { ConfigError } from '../errors.ts';

export interface OrgansSpec {
  /** D: layers 0 … D−1 draft, with the exit head after layer D−1; 1 ≤ D ≤ L − 1. */
  draftLayers: number;
  /** λ_D, the weight of the exit head's cross-entropy (≥ 0; default 0.2, inside the spec's 0.1–0.3). */
  exitLoss: number;
  /** λ_KL, the weight of KL(sg(p_L) ‖ p_D), the full model distilled into the exit head (≥ 0; default 0.5). */
  distill: number;
  /** The largest layer-dropout rate p_max (the last layer's; 0 = off, the default); see train/organ_loss.ts. */
  layerDropout: number;
}

export const ORGANS_DEFAULTS: Omit<OrgansSpec, 'draftLayers'> = { exitLoss: 0.2, distill: 0.5, layerDropout: 0 };

const KEYS = ['draftLayers', 'exitLoss', 'distill', 'layerDropout'];
const show = (v: unknown) => JSON.stringify(v) ?? String(v);

/** 'organs': null (none) or {"draftLayers": D, …}; D is checked against nLayers by checkDraftLayers. */
export function parseOrgans(v: unknown, where: string): OrgansSpec | null {
  if (v === null) return null;
  const at = `${where}: 'organs'`;
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(`${at} = ${show(v)}: expected null or {"draftLayers": D, "exitLoss"?: number ≥ 0, "distill"?: number ≥ 0, "layerDropout"?: number in [0, 1)}`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!KEYS.includes(k)) throw new ConfigError(`${at}: unknown key '${k}'; expected ${KEYS.join(', ')}`);
  if (!Number.isInteger(o.draftLayers)) throw new ConfigError(`${at}: 'draftLayers' = ${show(o.draftLayers)}: expected an integer D with 1 ≤ D ≤ nLayers − 1`);
  const s = { ...ORGANS_DEFAULTS, ...o } as Record<string, unknown>;
  for (const k of ['exitLoss', 'distill'] as const) {
    if (typeof s[k] !== 'number' || !Number.isFinite(s[k]) || (s[k] as number) < 0) throw new ConfigError(`${at}: '${k}' = ${show(s[k])}: expected a finite number ≥ 0`);
  }
  const p = s.layerDropout;
  if (typeof p !== 'number' || !(p >= 0 && p < 1)) throw new ConfigError(`${at}: 'layerDropout' = ${show(p)}: expected a number in [0, 1)`);
  return { draftLayers: o.draftLayers as number, exitLoss: s.exitLoss as number, distill: s.distill as number, layerDropout: p };
}

/** A draft layer count D for a model of `nLayers` layers: an integer in [1, nLayers − 1], else `error` naming it. */
export function checkDraftLayers(d: number, nLayers: number, what: string, error: (m: string) => Error = (m) => new ConfigError(m)): number {
  if (!Number.isInteger(d) || d < 1 || d > nLayers - 1) {
    throw error(`${what} = ${show(d)}: expected an integer in [1, ${nLayers - 1}] (the draft organ is layers 0 … D−1 of the model's ${nLayers}, and the revise organ needs at least one)`);
  }
  return d;
}
