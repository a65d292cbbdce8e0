/**
 * RoPE tables for ops/fused.ts `rope`: cos and sin (T, D/2) f32 with angle p·θ^(−2j/D) for
 * position p and pair j (the Llama / GPT-NeoX convention: pairs (j, j + D/2)).
 */
import type { Backend } from '../backend/backend.ts';
import { tensor } from '../ops/creation.ts';
import type { Tensor } from '../tensor/tensor.ts';

export function ropeTables(positions: number, headDim: number, theta: number, backend: Backend): { cos: Tensor; sin: Tensor } {
  const half = headDim / 2;
  const c = new Float32Array(positions * half), s = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let j = 0; j < half; j++) {
      const a = p * Math.pow(theta, (-2 * j) / headDim);
      c[p * half + j] = Math.cos(a);
      s[p * half + j] = Math.sin(a);
    }
  }
  return { cos: tensor(c, [positions, half], { backend }), sin: tensor(s, [positions, half], { backend }) };
}
