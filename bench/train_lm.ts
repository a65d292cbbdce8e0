/**
 * Training throughput of a model preset in tokens/s (forward, backward, clipping, AdamW; random
 * token batches), on the best backend here (or --backend), beside the same model in PyTorch
 * (eager, scaled_dot_product_attention, fp32 with TF32 off as FON computes, and bf16 autocast) on
 * the same GPU in the same run, when python3 with torch and CUDA exists.
 *
 *   node --import tsx bench/train_lm.ts [--preset small] [--batch 16] [--context N] [--steps 10] [--backend auto] [--json FILE]
 *     [--precision f32,f16,bf16] [--profile N]
 *
 * `--precision` lists the training precisions to time, one fresh model each (default: the
 * backend's fastest, as `fon train` picks it); the loss scale's one read-back before the update
 * is inside f16's figure.
 * `--profile N` (webgpu): after the timed steps, N more steps with every dispatch timed on the GPU
 * (webgpu/profile.ts), printed as a table of kernels by GPU time and kept in the JSON.
 */
import { parseArgs } from 'node:util';
import { initBackend, type BackendName } from '../src/backend/registry.ts';
import '../src/backend/webgpu/index.ts';
import '../src/backend/wasm/index.ts';
import { preset } from '../src/model/presets.ts';
import { Decoder } from '../src/model/decoder.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { DEFAULT_TRAIN, Trainer } from '../src/train/trainer.ts';
import { PRECISIONS, type Precision } from '../src/tensor/autocast.ts';
import { uniformArray } from '../src/ops/random.ts';
import { findPython, runPython, writeJson } from './lib/report.ts';
import { WebGpuBackend } from '../src/backend/webgpu/backend.ts';
import { profileTable } from '../src/backend/webgpu/profile.ts';

const { values: flags } = parseArgs({
  options: {
    preset: { type: 'string', default: 'small' }, batch: { type: 'string', default: '16' }, context: { type: 'string' },
    steps: { type: 'string', default: '10' }, backend: { type: 'string', default: 'auto' }, json: { type: 'string' },
    profile: { type: 'string', default: '0' }, precision: { type: 'string', default: 'auto' },
  },
});

const cfg = preset(flags.preset!);
if (!/^\d+$/.test(flags.profile!)) throw new Error(`--profile takes a number of steps ≥ 0, got '${flags.profile}'`);
const batch = Number(flags.batch), steps = Number(flags.steps);
const context = Number(flags.context ?? cfg.contextLength);
const backend = await initBackend(flags.backend as BackendName | 'auto');

function randomBatch(i: number) {
  const n = batch * context;
  const u = uniformArray(1000 + i, 2 * n);
  const inputs = new Int32Array(n), targets = new Int32Array(n);
  for (let j = 0; j < n; j++) { inputs[j] = Math.floor(u[j] * cfg.vocabSize); targets[j] = Math.floor(u[n + j] * cfg.vocabSize); }
  return { inputs, targets };
}

const precisions = flags.precision!.split(',').filter(Boolean);
for (const p of precisions) if (![...PRECISIONS, 'auto'].includes(p)) throw new Error(`--precision takes ${PRECISIONS.join(', ')} or auto, got '${p}'`);
const result: Record<string, unknown> = { preset: flags.preset, batch, context, backend: backend.name, fon: {} as Record<string, unknown> };
const fonTps: Record<string, number> = {};
for (const p of precisions) {
  const model = new Decoder(cfg, new ParamFactory({ backend, seed: 1 }));
  const trainer = new Trainer(model, { batchAt: randomBatch }, { ...DEFAULT_TRAIN, steps: steps + 2 + Number(flags.profile), batchSize: batch, context, warmup: 1, precision: p as Precision | 'auto' });
  await trainer.trainStep(); // warm-up: pipelines compile, the pool fills
  await trainer.trainStep();
  const t0 = performance.now();
  let loss = 0, skipped = 0;
  for (let s = 0; s < steps; s++) { const r = await trainer.trainStep(); loss = r.loss; if (r.skipped) skipped++; }
  const secs = (performance.now() - t0) / 1000;
  const tps = (steps * batch * context) / secs;
  fonTps[trainer.precision] = tps;
  result.parameters = model.parameterCount();
  console.log(`FON ${backend.name} ${trainer.precision}: preset ${flags.preset} (${(model.parameterCount() / 1e6).toFixed(2)}M parameters), batch ${batch} × ${context}: ${(secs / steps * 1000).toFixed(1)} ms/step, ${tps.toFixed(0)} tokens/s (loss ${loss.toFixed(3)}${trainer.lossScale ? `, loss scale ${trainer.lossScale.scale}, ${skipped} steps skipped` : ''})`);
  (result.fon as Record<string, unknown>)[trainer.precision] = { msPerStep: secs / steps * 1000, tokensPerSecond: tps };
  const profileSteps = Number(flags.profile);
  if (profileSteps > 0) {
    if (!(backend instanceof WebGpuBackend)) throw new Error(`--profile needs the webgpu backend, not ${backend.name}`);
    backend.rt.startProfile();
    for (let s = 0; s < profileSteps; s++) await trainer.trainStep();
    const kernels = await backend.rt.stopProfile();
    const gpuMs = kernels.reduce((s, k) => s + k.ms, 0);
    console.log(`GPU time over ${profileSteps} profiled steps: ${(gpuMs / profileSteps).toFixed(1)} ms/step (each dispatch in its own pass)\n${profileTable(kernels, { top: 25 })}`);
    console.log(profileTable(kernels, { top: 25, byVariant: true }));
    (result.profile as Record<string, unknown> | undefined) ?? (result.profile = {});
    (result.profile as Record<string, unknown>)[trainer.precision] = { steps: profileSteps, kernels };
  }
  trainer.dispose();
  model.dispose();
}
const py = backend.name === 'webgpu' ? findPython('torch', ['python3']) : null;
if (py) {
  const ref = runPython(py, 'bench/torch_lm.py', { config: cfg, batch, context, steps }) as Record<string, { msPerStep: number; tokensPerSecond: number }> | null;
  if (ref) {
    result.pytorch = ref;
    for (const [name, r] of Object.entries(ref)) {
      const ratios = Object.entries(fonTps).map(([p, tps]) => `FON ${p} / PyTorch = ${(tps / r.tokensPerSecond).toFixed(3)}×`).join(', ');
      console.log(`PyTorch ${name}: ${r.msPerStep.toFixed(1)} ms/step, ${r.tokensPerSecond.toFixed(0)} tokens/s; ${ratios}`);
    }
  }
}
if (flags.json) writeJson(flags.json, result);
process.exit(0);
