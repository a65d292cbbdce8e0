/**
 * Spot's block scores (index_scores.wgsl, Backend.indexBlockScores) in each of its forms, at one or
 * more cache lengths: one decoding query (B 1, n 1) of 4 index heads of 128 against f16 selector
 * keys, the form of a Spot step. Each form is checked against the default's output (max |Δ|) and
 * timed (median of batches, bench/lib/report.ts timeBatched) and once more on the GPU's clock:
 *
 *   lanes 1    the default: one invocation a key, reading its 256-byte row in 16-byte loads
 *   lanes G    G invocations of one subgroup a key, each reading every G-th 16-byte word, the partial
 *              dots summed by subgroupShuffleXor (IndexScoreTune.lanes; COOP in the kernel)
 *   lanes G PRE  the same with every key's words loaded before the first dot (IndexScoreTune.prefetch)
 *
 *   node --import tsx dev/kernels/index_scores.ts [--tokens 131072,524288]
 */
import { parseArgs } from 'node:util';
import * as fon from '../../src/index.ts';
import '../../src/backend/webgpu/index.ts';
import { WebGpuBackend, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { indexBlockScores, type IndexScoreTune } from '../../src/backend/webgpu/kernels/index_scores.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import { timeBatched } from '../../bench/lib/report.ts';
import { deviceRandn } from '../../bench/lib/device_data.ts';

const { values: flags } = parseArgs({ options: { tokens: { type: 'string', default: '131072,524288' } } });
const HEADS = 4, D = 128, BLOCK = 16;

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  if (!(b instanceof WebGpuBackend)) throw new Error('webgpu only');
  const sync = () => b.sync();
  console.log(`index_scores forms on ${b.caps.adapterName} (subgroups ${b.caps.subgroups ? `${b.caps.subgroupMinSize}–${b.caps.subgroupMaxSize}` : 'none'}): 1 query, ${HEADS} heads × ${D}, f16 keys`);
  const q = fon.randn([1, 1, HEADS, D], { seed: 1, backend: b }), w = fon.randn([1, 1, HEADS], { seed: 2, backend: b });
  for (const t of flags.tokens.split(',').map(Number)) {
    const keys = fon.reshape(deviceRandn(b, 1, t, D, 3), [1, t, D]);
    const a = { batch: 1, n: 1, heads: HEADS, d: D, l: t, tmax: t, pos: t - 1, block: BLOCK, scale: 1 / Math.sqrt(D) };
    const nb = Math.ceil(t / BLOCK);
    const call = (tune: IndexScoreTune) => indexBlockScores(b, ref(q) as GpuRef, ref(w) as GpuRef, ref(keys) as GpuRef, a, tune).map((h) => wrap(b, h, [1, 1, nb], 'f32'));
    const [want] = call({ lanes: 1 });
    const wantV = (await want.data()) as Float32Array;
    for (const tune of [1, 2, 4, 8, 16].flatMap((lanes) => (lanes > 1 ? [{ lanes }, { lanes, prefetch: true }] : [{ lanes }]))) {
      const { lanes } = tune;
      if (lanes > 1 && (!b.caps.subgroups || b.caps.subgroupMinSize < lanes)) continue;
      const outs = call(tune);
      const got = (await outs[0].data()) as Float32Array;
      let diff = 0;
      for (let i = 0; i < got.length; i++) diff = Math.max(diff, Math.abs(got[i] - wantV[i]));
      outs.forEach((x) => x.dispose());
      const ms = await timeBatched(sync, () => { call(tune).forEach((x) => x.dispose()); });
      b.rt.startProfile();
      for (let i = 0; i < 10; i++) call(tune).forEach((x) => x.dispose());
      const prof = await b.rt.stopProfile();
      const gpuMs = prof.filter((p) => p.kernel === 'index_scores').reduce((s, p) => s + p.ms, 0) / 10;
      console.log(`  ${t} lanes ${String(lanes).padStart(2)}${tune.prefetch ? ' PRE' : '    '}: ${ms.toFixed(3)} ms (${gpuMs.toFixed(3)} ms on the GPU's clock), ${((2 * t * D) / ms / 1e6).toFixed(0)} GB/s of keys; max |Δ| ${diff.toExponential(2)}`);
    }
    want.dispose();
    keys.dispose();
  }
}

await main();
process.exit(0);
