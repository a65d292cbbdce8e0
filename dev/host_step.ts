/**
 * FON's own host time for one decoding step of a Spot layer and for a dense decode, apart from
 * Dawn's: the step as bench/spot.ts times it (B = 1, GQA 32/8, D 128, d_model 4096, f16 K/V and
 * selector keys, top-K 0.1), recorded n times a round with the GPU runtime's dispatch recording
 * replaced by a no-op, so what is timed is the op layers, the kernels' hosts and the layer's own
 * code, with no GPU work queued behind it (on a machine without a GPU, SwiftShader would otherwise
 * run the kernels on the same cores). Buffer copies still reach Dawn. Prints the min and median
 * of 8 rounds: a figure to compare trees on one machine, not a step's whole host time (bench/spot.ts
 * prints that, dispatches included, on a GPU).
 *
 *   node --import tsx dev/host_step.ts [--tokens 2048] [--path mask|gather] [--rounds 8] [--n 300]
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import { WebGpuBackend } from '../src/backend/webgpu/backend.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { SPOT_DEFAULTS, SpotAttention } from '../src/attention/spot/index.ts';
import { SpotKeyCache } from '../src/attention/spot/key_cache.ts';
import type { SpotDecodePath } from '../src/attention/spot/spot.ts';
import type { LayerKv } from '../src/attention/mechanism.ts';
import { attention } from '../src/ops/attention.ts';
import { deviceRandn } from '../bench/lib/device_data.ts';

const { values: flags } = parseArgs({ options: { tokens: { type: 'string', default: '2048' }, path: { type: 'string', default: 'mask' }, rounds: { type: 'string', default: '8' }, n: { type: 'string', default: '300' } } });
const H = 32, HKV = 8, D = 128, C = 4096, t = Number(flags.tokens);
const b = await fon.initBackend('webgpu');
if (!(b instanceof WebGpuBackend)) throw new Error('dev/host_step.ts needs the webgpu backend');
const layer = new SpotAttention({ type: 'spot', ...SPOT_DEFAULTS, rule: 'top-k', fraction: 0.1 }, { f: new ParamFactory({ backend: b, seed: 1 }), name: 'layers.0.attn', dims: { dModel: C, nLayers: 1, nHeads: H, nKvHeads: HKV, headDim: D, normEps: 1e-5 } });
layer.decodePath = flags.path as SpotDecodePath;
const k = deviceRandn(b, HKV, t, D, 2), v = deviceRandn(b, HKV, t, D, 3);
const slot: LayerKv = { k, v };
const keys = SpotKeyCache.forSlot(slot, SPOT_DEFAULTS.dim, 'f16');
slot.side = { spot: keys };
fon.tidy(() => keys.write(0, fon.reshape(deviceRandn(b, 1, t, SPOT_DEFAULTS.dim, 4), [1, t, SPOT_DEFAULTS.dim])));
const q = fon.randn([1, H, 1, D], { seed: 5, backend: b, dtype: 'f16' });
const kNew = fon.randn([1, HKV, 1, D], { seed: 6, backend: b, dtype: 'f16' }), vNew = fon.randn([1, HKV, 1, D], { seed: 7, backend: b, dtype: 'f16' });
const x = fon.randn([1, 1, C], { seed: 8, backend: b });
const cases = {
  'Spot step (top-K 0.1)': () => fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); })),
  'dense decode': () => fon.noGrad(() => fon.tidy(() => { attention(q, k, v, { kvLength: t }); })),
};
for (const f of Object.values(cases)) { f(); await b.sync(); } // compiled, warm
const count = new Map<string, number>();
for (const [name, f] of Object.entries(cases)) count.set(name, b.rt.recordDispatches(f).dispatches.length);
await b.sync();
b.rt.run = () => {}; // from here on, dispatches are not recorded
const times = new Map<string, number[]>(Object.keys(cases).map((n) => [n, []]));
const n = Number(flags.n), rounds = Number(flags.rounds);
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, f] of Object.entries(cases)) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) f();
    const us = (1000 * (performance.now() - t0)) / n;
    await b.sync();
    if (r > 0) times.get(name)!.push(us); // the first round warms up
  }
}
console.log(`host µs a call at ${t} cached tokens (${flags.path} path), dispatch recording a no-op, ${rounds} rounds of ${n}:`);
for (const [name, ts] of times) {
  ts.sort((a, c) => a - c);
  console.log(`  ${name}: ${count.get(name)} dispatches; min ${ts[0].toFixed(1)}, median ${ts[ts.length >> 1].toFixed(1)}`);
}
process.exit(0);
