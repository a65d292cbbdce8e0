/**
 * Inputs the WebGPU FoX / FPA kernel tests share (webgpu_fox_fpa, webgpu_fox_fpa_decode,
 * webgpu_fox_blocked, webgpu_fpa_blocked): a case's kernel arguments, seeded random values, FoX's
 * cumulative log forget gate c, and the tolerances against the CPU reference.
 */
import type { FoxAttentionArgs } from '../../src/backend/backend.ts';
import { uniformStream } from '../../src/ops/random.ts';
import type { FloatDType } from '../../src/tensor/dtype.ts';

/** Worst error allowed in out by storage dtype; in the gradients (gradTol) and in lse and the f32 statistics (statTol). */
export const TOL: Record<FloatDType, number> = { f32: 2e-5, f16: 4e-3, bf16: 2e-2 };
export const gradTol = (dtype: FloatDType) => (dtype === 'f32' ? 1e-4 : TOL[dtype]);
export const statTol = (dtype: FloatDType) => (dtype === 'f32' ? 1e-4 : 1e-3);

/** The shape of a test case: batch, query heads, kv heads, query rows, cache rows, head dim, valid cache rows. */
export interface FoxShape { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number }

/** Causal arguments with the queries at the end of the valid cache rows and scale 1/√d. */
export function foxArgs(c: FoxShape): FoxAttentionArgs {
  const kvLength = c.kvLength ?? c.tk;
  return { batch: c.b, heads: c.h, kvHeads: c.hkv, tq: c.tq, tk: c.tk, d: c.d, kvLength, qOffset: kvLength - c.tq, scale: 1 / Math.sqrt(c.d) };
}

/** n values in (−3, 3)·scale, bell-shaped (a sum of three uniforms), from `seed`. */
export function randomF32(n: number, seed: number, scale = 1): Float32Array {
  const r = uniformStream(seed);
  return Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * 2 * scale);
}

/**
 * Rows of length tk of non-increasing c: the cumulative sum of log σ(x) for random x, or (wide)
 * random steps averaging 50 / tk, so that c spans about −50 … 0.
 */
export function forgetCumsum(rows: number, tk: number, seed: number, wide = false): Float32Array {
  const x = randomF32(rows * tk, seed, 2);
  const r = uniformStream(seed + 1);
  const c = new Float32Array(rows * tk);
  for (let row = 0; row < rows; row++) {
    let s = 0;
    for (let t = 0; t < tk; t++) {
      s += wide ? -(100 / tk) * r() : -Math.log1p(Math.exp(-x[row * tk + t]));
      c[row * tk + t] = s;
    }
  }
  return c;
}

/**
 * How φ, ℓ and λ are drawn: `ties` an integer walk (φ values recur), `smooth` a continuous one,
 * `rise` a continuous walk that only goes up (every key is the new minimum of the rows' backward
 * sweeps), `kill` the integer walk with λ = 1e4 (a penalised key's weight is exactly 0), `zero` λ = 0.
 */
export type Walk = 'ties' | 'smooth' | 'rise' | 'kill' | 'zero';

/** φ, ℓ (rows × tk each) and λ (hkv) of one walk kind. */
export function walks(rows: number, tk: number, hkv: number, kind: Walk, seed: number): [Float32Array, Float32Array, Float32Array] {
  const r = uniformStream(seed);
  const phi = new Float32Array(rows * tk), level = new Float32Array(rows * tk);
  for (let row = 0; row < rows; row++) {
    let w = 0;
    for (let t = 0; t < tk; t++) {
      const at = row * tk + t;
      if (kind === 'smooth') {
        w += (r() - 0.5) * 1.5;
        phi[at] = w + (r() - 0.5);
        level[at] = w + (r() - 0.7) * 2;
      } else if (kind === 'rise') {
        w += 0.05 + 0.1 * r();
        phi[at] = w;
        level[at] = w + (r() - 0.3) * 2;
      } else {
        w += Math.floor(r() * 3) - 1;
        phi[at] = w + Math.floor(r() * 3) - 1;
        level[at] = w + Math.floor(r() * 4) - 3.5;
      }
    }
  }
  const lam = Float32Array.from({ length: hkv }, (_, g) => (kind === 'kill' ? 1e4 : kind === 'zero' ? 0 : 0.5 + 0.75 * g));
  return [phi, level, lam];
}
