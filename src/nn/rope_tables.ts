/**
 * RoPE tables for ops/fused.ts `rope`: cos and sin (T, D/2) f32 with angle p·ω_j for position p
 * and pair j (the Llama / GPT-NeoX convention: pairs (j, j + D/2)), ω_j = θ^(−2j/D), optionally
 * rescaled for long contexts (ModelConfig.ropeScaling):
 *
 *   linear  ω_j / factor (position interpolation);
 *   llama3  Llama 3.1's: with wavelength λ_j = 2π/ω_j, L = originalContextLength, lo/hi the
 *           low/high frequency factors: λ_j < L/hi keeps ω_j; λ_j > L/lo takes ω_j / factor; in
 *           between, s = (L/λ_j − lo) / (hi − lo) blends (1 − s)·ω_j/factor + s·ω_j.
 *
 * Frequencies and angles are computed in f64 and rounded once to f32.
 */
import type { Backend } from '../backend/backend.ts';
import { tensor } from '../ops/creation.ts';
import type { Tensor } from '../tensor/tensor.ts';

/** RoPE frequency scaling, as ModelConfig.ropeScaling holds it (see the file header). */
export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalContextLength: number };

/** ω_j for j = 0 … D/2 − 1, scaled as `scaling` says (see the file header). */
export function ropeFrequencies(headDim: number, theta: number, scaling: RopeScaling | null = null): Float64Array {
  const half = headDim / 2;
  const out = new Float64Array(half);
  for (let j = 0; j < half; j++) {
    const w = Math.pow(theta, (-2 * j) / headDim);
    if (scaling === null) { out[j] = w; continue; }
    if (scaling.type === 'linear') { out[j] = w / scaling.factor; continue; }
    const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalContextLength: len } = scaling;
    const wavelength = (2 * Math.PI) / w;
    if (wavelength < len / hi) out[j] = w;
    else if (wavelength > len / lo) out[j] = w / factor;
    else {
      const s = (len / wavelength - lo) / (hi - lo);
      out[j] = ((1 - s) * w) / factor + s * w;
    }
  }
  return out;
}

export function ropeTables(positions: number, headDim: number, theta: number, backend: Backend, scaling: RopeScaling | null = null): { cos: Tensor; sin: Tensor } {
  const half = headDim / 2;
  const freq = ropeFrequencies(headDim, theta, scaling);
  const c = new Float32Array(positions * half), s = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let j = 0; j < half; j++) {
      const a = p * freq[j];
      c[p * half + j] = Math.cos(a);
      s[p * half + j] = Math.sin(a);
    }
  }
  return { cos: tensor(c, [positions, half], { backend }), sin: tensor(s, [positions, half], { backend }) };
}
