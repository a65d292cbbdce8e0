/**
 * The few-rows GEMM (matmul_rows.wgsl, a decode step's projections) in each of its forms, on the
 * shapes a decoding step runs: each form is checked against the scalar form's output (max |Δ|) and
 * timed (median of batches, bench/lib/report.ts timeBatched) and once more on the GPU's clock,
 * with the bytes of B it reads a second:
 *
 *   scalar        4 columns a workgroup of 256, 64 lanes along K, one workgroup a row of A
 *   vec L/W       RowsTune { form: 'vec', lanes: L, wg: W }: every row of A a workgroup, 4-wide
 *                 loads of B, L lanes a column (summed by subgroup shuffles where a subgroup
 *                 holds them; where a column holds whole subgroups, as from 128 lanes, by
 *                 subgroup sums then one partial a subgroup: SGT; else in workgroup memory),
 *                 W / L columns a workgroup
 *
 * `--many` times Backend.matmulMany (matmul_rows.wgsl MANY: one dispatch over several weights of one
 * input, a Spot step's selector projections 512 + 4 + 128 by default) in the same forms, each checked
 * against one matmul a weight.
 *
 *   node --import tsx dev/kernels/gemv.ts [--shapes 1x512x4096,1x4096x4096,4x4096x4096,1x14336x4096] [--dtypes f32,f16]
 *   node --import tsx dev/kernels/gemv.ts --many [--shapes 1x512+4+128x4096] [--dtypes f32]
 */
import { parseArgs } from 'node:util';
import * as fon from '../../src/index.ts';
import '../../src/backend/webgpu/index.ts';
import { WebGpuBackend, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { matmulMany, matmulRows, type RowsTune } from '../../src/backend/webgpu/kernels/matmul.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import type { FloatDType } from '../../src/tensor/dtype.ts';
import { timeBatched } from '../../bench/lib/report.ts';

const { values: flags } = parseArgs({ options: {
  shapes: { type: 'string' },
  dtypes: { type: 'string' },
  many: { type: 'boolean', default: false },
} });

const VEC_FORMS: [string, RowsTune][] = [[32, 64], [32, 128], [64, 64], [64, 128], [64, 256], [128, 128], [128, 256], [256, 256], [256, 512]]
  .map(([lanes, wg]): [string, RowsTune] => [`vec ${lanes}/${wg}`, { form: 'vec', lanes, wg }]);
const FORMS: [string, RowsTune][] = [['scalar', { form: 'scalar' }], ...VEC_FORMS];

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  if (!(b instanceof WebGpuBackend)) throw new Error('webgpu only');
  console.log(`matmul_rows forms on ${b.caps.adapterName} (subgroups ${b.caps.subgroups ? `${b.caps.subgroupMinSize}–${b.caps.subgroupMaxSize}` : 'none'}): C (M, N) = A (M, K) · B (N, K)ᵀ, f32 out`);
  if (flags.many) return many(b);
  const sync = () => b.sync();
  for (const dtype of (flags.dtypes ?? 'f16,f32').split(',') as FloatDType[]) {
    for (const shape of (flags.shapes ?? '1x516x4096,1x4096x4096,4x4096x4096,1x14336x4096').split(',')) {
      const [m, n, k] = shape.split('x').map(Number);
      const a = fon.cast(fon.randn([m, k], { seed: 1, backend: b }), dtype), w = fon.cast(fon.randn([n, k], { seed: 2, backend: b }), dtype);
      const args = { batch: 1, m, n, k, transA: false, transB: true, batchA: 1, batchB: 1, outDType: 'f32' as const };
      const call = (tune: RowsTune) => wrap(b, matmulRows(b, ref(a) as GpuRef, ref(w) as GpuRef, args, tune), [m, n], 'f32');
      const want = call({ form: 'scalar' });
      const wantV = (await want.data()) as Float32Array;
      const bytes = n * k * (dtype === 'f32' ? 4 : 2);
      for (const [name, tune] of FORMS) {
        if (tune.wg !== undefined && tune.wg > b.caps.maxInvocations) continue;
        const out = call(tune);
        const got = (await out.data()) as Float32Array;
        let diff = 0;
        for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - wantV[i]));
        out.dispose();
        const ms = await timeBatched(sync, () => call(tune).dispose());
        b.rt.startProfile();
        for (let i = 0; i < 10; i++) call(tune).dispose();
        const prof = await b.rt.stopProfile();
        const gpuMs = prof.filter((p) => p.kernel === 'matmul_rows').reduce((s, p) => s + p.ms, 0) / 10;
        console.log(`  ${dtype} ${shape} ${name.padEnd(11)}: ${ms.toFixed(4)} ms (${gpuMs.toFixed(4)} on the GPU's clock, ${(bytes / gpuMs / 1e6).toFixed(0)} GB/s of B); max |Δ| ${diff.toExponential(2)}`);
      }
      want.dispose(); a.dispose(); w.dispose();
    }
  }
}

/** matmulMany in each VEC form against one matmul a weight: shapes M x N1+N2[+N3] x K. */
async function many(b: WebGpuBackend): Promise<void> {
  const sync = () => b.sync();
  for (const dtype of (flags.dtypes ?? 'f32').split(',') as FloatDType[]) {
    for (const shape of (flags.shapes ?? '1x512+4+128x4096').split(',')) {
      const [ms, nsText, ks] = shape.split('x');
      const m = Number(ms), k = Number(ks), ns = nsText.split('+').map(Number);
      const a = fon.cast(fon.randn([m, k], { seed: 1, backend: b }), dtype);
      const ws = ns.map((n, i) => fon.cast(fon.randn([n, k], { seed: 2 + i, backend: b }), dtype));
      const outDTypes = ns.map(() => 'f32' as const);
      const call = (tune: RowsTune) => matmulMany(b, ref(a) as GpuRef, ws.map((w) => ref(w) as GpuRef), { m, k, ns, outDTypes }, tune).map((h, i) => wrap(b, h, [m, ns[i]], 'f32'));
      const wants = await Promise.all(ws.map(async (w) => (await fon.matmul(a, w, { transB: true, outDType: 'f32' }).data()) as Float32Array));
      const bytes = ns.reduce((x, y) => x + y, 0) * k * (dtype === 'f32' ? 4 : 2);
      for (const [name, tune] of VEC_FORMS) {
        if (tune.wg! > b.caps.maxInvocations) continue;
        const outs = call(tune);
        let diff = 0;
        for (let j = 0; j < outs.length; j++) {
          const got = (await outs[j].data()) as Float32Array;
          for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - wants[j][i]));
          outs[j].dispose();
        }
        const ms1 = await timeBatched(sync, () => { for (const o of call(tune)) o.dispose(); });
        b.rt.startProfile();
        for (let i = 0; i < 10; i++) for (const o of call(tune)) o.dispose();
        const prof = await b.rt.stopProfile();
        const gpuMs = prof.filter((p) => p.kernel === 'matmul_rows').reduce((s, p) => s + p.ms, 0) / 10;
        console.log(`  many ${dtype} ${shape} ${name.padEnd(11)}: ${ms1.toFixed(4)} ms (${gpuMs.toFixed(4)} on the GPU's clock, ${(bytes / gpuMs / 1e6).toFixed(0)} GB/s of the weights); max |Δ| ${diff.toExponential(2)}`);
      }
      a.dispose();
      for (const w of ws) w.dispose();
    }
  }
}

await main();
process.exit(0);
