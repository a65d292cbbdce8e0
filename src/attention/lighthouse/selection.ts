/**
 * Lighthouse's selection (specs/lighthouse_fon.md §1.4–§1.5), no gradient, made on the tensors'
 * backend by the lighthouseSelect op (ops/lighthouse.ts): the `norm` scores, FON's variant ranking
 * by the squared norm ‖x_t‖₂² (the same order, no square root), or the `dilated` scorer's
 * (dilated.ts), max-pooled per window; the
 * tile-stratified coarse-to-fine top-k cascade (ties to the lower index); the gathered pyramid rows
 * in causal order by integer sort keys (backend/lighthouse_layout.ts lighthouseSortKey, §1.5's
 * caveat). The CPU reference is backend/cpu/lighthouse.ts, the WebGPU kernels
 * backend/webgpu/kernels/lighthouse.wgsl; nothing is read to the host. With the rows comes their
 * inverse (each pyramid row's place in the gathered sequence, or S), which makes both the gather's
 * gradient and the scatter-back gathers (scatter.ts).
 */
import { ArgumentError } from '../../errors.ts';
import { invertRows } from '../../ops/indexing.ts';
import { reshape } from '../../ops/layout.ts';
import { lighthouseSelect } from '../../ops/lighthouse.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { dilatedTokenScores } from './dilated.ts';
import type { LighthouseGeometry, LighthouseScorer } from './geometry.ts';

/** The selection of one call, on the backend of the q and k it was made from. */
export interface LighthouseSelection {
  readonly geometry: LighthouseGeometry;
  /** i32 (B·H, S): concatenated-pyramid rows (geometry.offset[l−1] + i for entry i of level l), in causal order. */
  readonly rows: Tensor;
  /** i32 (B·H, total): each pyramid row's place in `rows`, or S where it is not gathered. */
  readonly inverse: Tensor;
  /** B·H. */
  readonly lists: number;
  /** Frees rows and inverse (what autograd saved of them stays until its graph is done). */
  dispose(): void;
}

/**
 * The selection for q (B, H, N, D) and k (B, Hkv, N, D) (GQA: query head h ranks by key head
 * ⌊h/(H/Hkv)⌋) under `scorer`. `dilated` (dilated.ts) also reads v and needs k and v at H heads:
 * its token scores s ≥ 0 go to the op as one-column rows, which it ranks by fl(s²), the order of s
 * (up to ties of the rounded square, which the CPU and the GPU round alike).
 */
export function makeSelection(q: Tensor, k: Tensor, g: LighthouseGeometry, scorer: LighthouseScorer = 'norm', v?: Tensor, dilation?: number): LighthouseSelection {
  let rows: Tensor;
  if (scorer === 'dilated') {
    if (!v || k.shape[1] !== q.shape[1] || v.shape[1] !== q.shape[1]) throw new ArgumentError(`lighthouse: the dilated scorer needs v and k and v at the ${q.shape[1]} query heads`);
    const [b, h, n] = q.shape;
    const { qk, kq } = dilatedTokenScores(q, k, v, dilation);
    const [sq, sk] = [reshape(qk, [b, h, n, 1]), reshape(kq, [b, h, n, 1])];
    rows = lighthouseSelect(sq, sk, g); // (B·H, S)
    for (const t of [qk, kq, sq, sk]) t.dispose();
  } else rows = lighthouseSelect(q, k, g); // (B·H, S)
  const inverse = invertRows(rows, g.total); // (B·H, total)
  return { geometry: g, rows, inverse, lists: rows.shape[0], dispose: () => { rows.dispose(); inverse.dispose(); } };
}
