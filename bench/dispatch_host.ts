/**
 * Host time of recording WebGPU work (no GPU time: nothing waits for the GPU inside a timed loop):
 * one dispatch whose bind group is cached (the same buffers again), one whose bind group is new
 * (fresh buffers each time), and one decode attention call (split + combine, H=32, GQA 32/8,
 * D=128, 4096 cached keys; bf16, or f16 where the device has it). At short contexts decode and
 * small-model training are bound by this time, not by the GPU.
 *
 *   node --import tsx bench/dispatch_host.ts [--calls 4000] [--decode-calls 1000]
 *
 * On SwiftShader pass --decode-calls 50: its emulated GPU runs every recorded decode (~0.15 s
 * each) before the next timed run starts.
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import type { WebGpuBackend } from '../src/backend/webgpu/backend.ts';
import { attentionDecode } from '../src/backend/webgpu/kernels/attention_decode.ts';
import { f32bits, type Kernel } from '../src/backend/webgpu/runtime.ts';
import { intFlag } from '../experiments/lib/common.ts';

const { values: flags } = parseArgs({ options: { calls: { type: 'string', default: '4000' }, 'decode-calls': { type: 'string', default: '1000' } } });
const calls = intFlag('calls', flags.calls, 10), decodeCalls = intFlag('decode-calls', flags['decode-calls'], 10);

const SCALE: Kernel = {
  name: 'bench_scale',
  source: () => `struct Params { a: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) i: vec3<u32>) { if (i.x < arrayLength(&y)) { y[i.x] = P.a * x[i.x]; } }`,
};

/** µs of host time per call of f over `n` calls (the pending work submitted every 256 calls), median of 3 runs. */
async function hostMicros(be: WebGpuBackend, n: number, f: (i: number) => void): Promise<number> {
  const runs: number[] = [];
  for (let r = 0; r < 3; r++) {
    await be.sync();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) { f(i); if (i % 256 === 255) be.rt.flush(); }
    runs.push((1000 * (performance.now() - t0)) / n);
  }
  await be.sync();
  return runs.sort((a, b) => a - b)[1];
}

async function main(): Promise<void> {
  const be = (await fon.initBackend('webgpu')) as unknown as WebGpuBackend;
  const x = be.upload(new Float32Array(256), 'f32'), y = be.alloc('f32', 256, 'y');
  const scale = (i: number, out: GPUBuffer) => be.rt.run({ kernel: SCALE, variant: {}, uniforms: [f32bits(i)], buffers: [x.buffer, out], workgroups: [4] });
  scale(0, y.buffer);
  const cached = await hostMicros(be, calls, (i) => scale(i, y.buffer));
  // A new buffer each call: the bind group cannot come from the cache.
  const fresh: GPUBuffer[] = [];
  const uncached = await hostMicros(be, Math.min(calls, 2000), (i) => {
    const b = be.rt.device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE });
    fresh.push(b);
    scale(i, b);
  });
  for (const b of fresh) b.destroy();
  const dtype = be.caps.f16 ? 'f16' : 'bf16';
  const H = 32, HKV = 8, D = 128, T = 4096;
  const ref = (n: number) => ({ h: be.upload(new Uint16Array(n), dtype), shape: [], dtype } as const);
  const q = ref(H * D), k = ref(HKV * T * D), v = ref(HKV * T * D);
  const a = { batch: 1, heads: H, kvHeads: HKV, tq: 1, tk: T, d: D, kvLength: T, qOffset: T - 1, causal: true, window: 0, scale: 1 / Math.sqrt(D) };
  const decode = () => { const [o, l] = attentionDecode(be, q, k, v, a); be.free(o); be.free(l); };
  decode();
  const d0 = be.rt.totalDispatches;
  decode();
  const perDecode = be.rt.totalDispatches - d0;
  const dec = await hostMicros(be, decodeCalls, decode);
  console.log(`WebGPU host time on ${be.caps.adapterName} (${calls} dispatches, ${decodeCalls} decode calls; median of 3 runs)`);
  console.log('| what | µs a call |');
  console.log('|---|---|');
  console.log(`| dispatch, cached bind group | ${cached.toFixed(1)} |`);
  console.log(`| dispatch, new bind group | ${uncached.toFixed(1)} |`);
  console.log(`| decode attention (${perDecode} dispatches, ${dtype}) | ${dec.toFixed(1)} |`);
  for (const h of [x, y, q.h, k.h, v.h]) be.free(h);
  fon.destroyBackends();
}

await main();
