/**
 * Lighthouse's gather and scatter-back in two forms, each checked against the other and timed
 * forward + backward (what one layer pays for q, k and v, and for the output), at H 16, D 128, f16,
 * the authors' defaults (L 3, p 4, k 1536, tiles of 128):
 *
 *   ops     composed of general ops (the form before pyramid_rows): the tokens padded with zero rows,
 *           the whole pyramid built by mean-pooling and concatenation, the selected rows gathered
 *           (gatherDistinctRows); the scatter-back as a gather through the inverse, then per level a
 *           zero row, a materialized broadcast and a narrow, summed — about a dozen passes each way
 *   fused   src (ops/pyramid_rows.ts): one pass each way, pyramidGather pools each selected row
 *           straight from its tokens and pyramidScatter is its adjoint
 *
 *   node --import tsx dev/kernels/lighthouse_gather.ts [--tokens 32768,131072] [--heads 16]
 */
import { parseArgs } from 'node:util';
import * as fon from '../../src/index.ts';
import '../../src/backend/webgpu/index.ts';
import type { Tensor } from '../../src/index.ts';
import { LIGHTHOUSE_DEFAULTS, lighthouseGeometry, type LighthouseGeometry } from '../../src/attention/lighthouse/geometry.ts';
import { lighthouseGather, lighthouseSelection } from '../../src/attention/lighthouse/lighthouse.ts';
import { lighthouseScatter } from '../../src/attention/lighthouse/scatter.ts';
import type { LighthouseSelection } from '../../src/attention/lighthouse/selection.ts';
import { timeBatched } from '../../bench/lib/report.ts';

const { values: flags } = parseArgs({ options: { tokens: { type: 'string', default: '32768,131072' }, heads: { type: 'string', default: '16' } } });
const H = Number(flags.heads), D = 128;

/** ops: x padded to Np, the pyramid built whole (mean of each finer level), the rows gathered. */
function gatherOps(x: Tensor, sel: LighthouseSelection): Tensor {
  const g = sel.geometry, [b, h, n, d] = x.shape;
  const padded = g.padded === n ? x : fon.concat([x, fon.zeros([b, h, g.padded - n, d], { dtype: x.dtype, backend: x.backend })], 2);
  const levels = [padded];
  for (let l = 2; l <= g.levels; l++) levels.push(fon.mean(fon.reshape(levels[levels.length - 1], [b, h, g.count[l - 1], g.pool, d]), 3));
  return fon.gatherDistinctRows(fon.concat(levels, 2), sel.rows, sel.inverse, 2);
}

/** ops: the outputs back to their pyramid rows, each level unpooled with the c − 1 shift by a materialized broadcast, summed. */
function scatterOps(y: Tensor, sel: LighthouseSelection): Tensor {
  const g: LighthouseGeometry = sel.geometry, [b, h, , d] = y.shape;
  const pyramid = fon.scatterDistinctRows(y, sel.rows, sel.inverse, 2);
  let out: Tensor | null = null;
  for (let l = 1; l <= g.levels; l++) {
    const c = g.span[l - 1], count = g.count[l - 1];
    const level = fon.narrow(pyramid, 2, g.offset[l - 1], count);
    let part: Tensor;
    if (c === 1) part = fon.narrow(level, 2, 0, g.n);
    else {
      const shifted = fon.concat([fon.zeros([b, h, 1, d], { dtype: y.dtype, backend: y.backend }), level], 2);
      const wide = fon.broadcastTo(fon.reshape(shifted, [b, h, count + 1, 1, d]), [b, h, count + 1, c, d]);
      part = fon.narrow(fon.reshape(wide, [b, h, (count + 1) * c, d]), 2, 1, g.n);
    }
    out = out === null ? part : fon.add(out, part);
  }
  return out!;
}

/** A smooth random (1, heads, n, D) tensor (a 4096-row block tiled, scaled per token and head). */
function input(b: fon.Backend, n: number, seed: number, requiresGrad = false): Tensor {
  const x = fon.tidy(() => {
    const rows = Math.min(n, 4096), copies = Math.ceil(n / rows);
    const block = fon.randn([1, 1, rows, D], { seed, backend: b, dtype: 'f16' });
    const tiled = fon.narrow(fon.reshape(fon.broadcastTo(block, [1, copies, rows, D]), [1, 1, copies * rows, D]), 2, 0, n);
    const perToken = fon.tensor(Float32Array.from({ length: n }, (_, t) => 1 + 0.5 * Math.sin(0.37 * t + seed)), [1, 1, n, 1], { backend: b, dtype: 'f16' });
    const perHead = fon.tensor(Float32Array.from({ length: H }, (_, i) => 1 + i / (2 * H)), [1, H, 1, 1], { backend: b, dtype: 'f16' });
    return fon.keep(fon.mul(fon.mul(tiled, perToken), perHead));
  });
  x.requiresGrad = requiresGrad;
  return x;
}

async function maxDiff(a: Tensor, b: Tensor): Promise<number> {
  const [x, y] = [(await fon.cast(a, 'f32').data()) as Float32Array, (await fon.cast(b, 'f32').data()) as Float32Array];
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i] - y[i]));
  return m;
}

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  const caps = (b as unknown as { caps: { adapterName: string } }).caps;
  console.log(`Lighthouse gather and scatter forms on ${caps.adapterName}: H ${H}, D ${D}, f16, L ${LIGHTHOUSE_DEFAULTS.levels}, p ${LIGHTHOUSE_DEFAULTS.pool}, k ${LIGHTHOUSE_DEFAULTS.topk}`);
  for (const t of flags.tokens.split(',').map(Number)) {
    const g = lighthouseGeometry(t, LIGHTHOUSE_DEFAULTS);
    const x = input(b, t, 1, true), q = input(b, t, 2), gy = input(b, t, 3);
    const sel = lighthouseSelection(q, x, LIGHTHOUSE_DEFAULTS);
    const gs = input(b, g.gathered, 4), y = input(b, g.gathered, 5, true);
    const forms = { ops: { gather: gatherOps, scatter: scatterOps }, fused: { gather: lighthouseGather, scatter: lighthouseScatter } };
    // Checked: forward and the gradient, each form against ops.
    const check = async (f: typeof forms.ops) => {
      const gx = fon.tidy(() => { const o = f.gather(x, sel); fon.backward(o, gs); return fon.keep(o); });
      const gradX = x.grad!; x.grad = null;
      const sy = fon.tidy(() => { const o = f.scatter(y, sel); fon.backward(o, gy); return fon.keep(o); });
      const gradY = y.grad!; y.grad = null;
      return { gx, gradX, sy, gradY };
    };
    const want = await check(forms.ops);
    for (const [name, f] of Object.entries(forms)) {
      const got = await check(f);
      const diffs = await Promise.all([maxDiff(got.gx, want.gx), maxDiff(got.gradX, want.gradX), maxDiff(got.sy, want.sy), maxDiff(got.gradY, want.gradY)]);
      for (const z of Object.values(got)) z.dispose();
      const sync = () => b.sync();
      const gatherMs = await timeBatched(sync, () => { fon.tidy(() => fon.backward(f.gather(x, sel), gs)); x.grad?.dispose(); x.grad = null; });
      const scatterMs = await timeBatched(sync, () => { fon.tidy(() => fon.backward(f.scatter(y, sel), gy)); y.grad?.dispose(); y.grad = null; });
      console.log(`  ${t} tokens (S ${g.gathered}), ${name.padEnd(5)}: gather fwd+bwd ${gatherMs.toFixed(3)} ms, scatter fwd+bwd ${scatterMs.toFixed(3)} ms (one tensor each); max |Δ| against ops: gather ${diffs[0].toExponential(2)}, its gradient ${diffs[1].toExponential(2)}, scatter ${diffs[2].toExponential(2)}, its gradient ${diffs[3].toExponential(2)}`);
    }
    for (const z of [...Object.values(want), x, q, gy, gs, y]) z.dispose();
    sel.dispose();
  }
}

await main();
process.exit(0);
