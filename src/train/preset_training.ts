/**
 * Training defaults per model preset (model/presets.ts), applied under the flags: `fon train
 * --preset small` trains long enough to be worth it without more flags. The `tiny` budget is the
 * main job's: about 4 minutes on a 2-core CPU (BENCHMARKS.md has the measured time).
 */
import type { TrainConfig } from './trainer.ts';

const PRESET_TRAINING: Record<string, Partial<TrainConfig>> = {
  tiny: { steps: 360, batchSize: 8, lr: 3e-3, minLr: 3e-4, warmup: 40, evalEvery: 100, checkpointEvery: 100 },
  small: { steps: 2000, batchSize: 32, lr: 1e-3, minLr: 1e-4, warmup: 100, evalEvery: 250, checkpointEvery: 500 },
  base: { steps: 5000, batchSize: 32, lr: 6e-4, minLr: 6e-5, warmup: 200, evalEvery: 500, checkpointEvery: 1000 },
};

export function presetTraining(name: string): Partial<TrainConfig> {
  return PRESET_TRAINING[name] ?? {};
}
