/**
 * Training defaults per model preset (model/presets.ts), applied under the flags: `fon train
 * --preset small` trains long enough to be worth it without more flags. The `tiny` budget is the
 * main job's: about 3 minutes on a 2-core CPU (BENCHMARKS.md has the measured time); its byte-level
 * BPE of 1024 tokens reaches a lower bits per byte than raw bytes in that time (2.39 against 2.73 at
 * 360 steps in BENCHMARKS.md). The `small` budget is about 5 passes over the Brown Corpus's 1.6M
 * BPE-4096 training tokens: in a PyTorch sweep of the same model (H200, 2026-11-30) validation
 * bits per byte were lowest near 500 steps of 32 × 512 tokens and rose after (1.83 at 500, 2.08 at
 * 1200 with lr 1e-3 and no dropout), so more steps on Brown overfit.
 */
import type { TrainConfig } from './trainer.ts';

export interface PresetTraining {
  /** The --tokenizer default: "byte" or "bpe:N". */
  tokenizer: string;
  train: Partial<TrainConfig>;
}

const PRESET_TRAINING: Record<string, PresetTraining> = {
  tiny: { tokenizer: 'bpe:1024', train: { steps: 400, batchSize: 8, lr: 3e-3, minLr: 3e-4, warmup: 40, evalEvery: 100, checkpointEvery: 100 } },
  small: { tokenizer: 'bpe:4096', train: { steps: 500, batchSize: 32, lr: 1e-3, minLr: 1e-4, warmup: 50, evalEvery: 100, checkpointEvery: 250 } },
  base: { tokenizer: 'bpe:8192', train: { steps: 5000, batchSize: 32, lr: 6e-4, minLr: 6e-5, warmup: 200, evalEvery: 500, checkpointEvery: 1000 } },
};

export function presetTraining(name: string): PresetTraining {
  return PRESET_TRAINING[name] ?? { tokenizer: 'byte', train: {} };
}
