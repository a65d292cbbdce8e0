/**
 * A small MLP classification task used by the training tests: 2 → 32 → 4 with GELU, AdamW,
 * warm-up + cosine, clipping. Everything is seeded, so every backend sees the same numbers and
 * should follow the same loss curve up to float rounding.
 */
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { AdamW } from '../../src/train/optim.ts';
import { clipGradNorm } from '../../src/train/clip.ts';
import { warmupCosine } from '../../src/train/schedule.ts';

export interface MlpRun {
  losses: number[];
  /** Backend memory after each step (after the step's temporaries were disposed). */
  liveBytes: number[];
  pooledBytes: number[];
}

/** The task's inputs and initial parameters, seeded (identical on every backend). */
export function mlpInit(backend: Backend) {
  const opts = { backend };
  const x = fon.randn([64, 8], { seed: 11, ...opts });
  // Labels from a fixed random linear teacher: argmax over 4 classes.
  const targets = fon.tidy(() => {
    const teacher = fon.randn([8, 4], { seed: 12, ...opts });
    const labels = fon.argsort(fon.matmul(x, teacher), -1, { descending: true });
    return fon.reshape(fon.narrow(labels, 1, 0, 1), [64]);
  });
  const w1 = fon.randn([8, 32], { seed: 1, std: 0.3, requiresGrad: true, ...opts });
  const b1 = fon.zeros([32], { requiresGrad: true, ...opts });
  const w2 = fon.randn([32, 4], { seed: 2, std: 0.3, requiresGrad: true, ...opts });
  const b2 = fon.zeros([4], { requiresGrad: true, ...opts });
  return { x, targets, params: [w1, b1, w2, b2] };
}

/** One forward + backward: the loss (detached) with gradients left in the parameters. */
export function mlpLossAndGrads(x: fon.Tensor, targets: fon.Tensor, [w1, b1, w2, b2]: fon.Tensor[]): fon.Tensor {
  return fon.tidy(() => {
    const h = fon.gelu(fon.add(fon.matmul(x, w1), b1));
    const logits = fon.add(fon.matmul(h, w2), b2);
    const l = fon.crossEntropy(logits, targets);
    l.backward();
    return l.detach();
  });
}

export async function trainMlp(backend: Backend, steps: number, readEvery = 1): Promise<MlpRun> {
  const { x, targets, params } = mlpInit(backend);
  const opt = new AdamW(params, { lr: 1e-2, weightDecay: 0.01 });
  const schedule = warmupCosine(3e-2, 5, steps);
  const run: MlpRun = { losses: [], liveBytes: [], pooledBytes: [] };
  for (let step = 0; step < steps; step++) {
    opt.lr = schedule(step);
    const loss = mlpLossAndGrads(x, targets, params);
    const norm = clipGradNorm(params, 1.0);
    opt.step();
    opt.zeroGrad();
    norm.dispose();
    if (step % readEvery === 0 || step === steps - 1) run.losses.push((await loss.data())[0]);
    loss.dispose();
    const mem = backend.memory();
    run.liveBytes.push(mem.liveBytes);
    run.pooledBytes.push(mem.pooledBytes);
  }
  for (const t of [x, targets, ...params]) t.dispose();
  opt.dispose();
  return run;
}
