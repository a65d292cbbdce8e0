/** What the trainer tests share (trainer, organ_loss): deterministic batches from a formula of the token's place in the stream. */
import type { Batches } from '../../src/train/trainer.ts';

/**
 * Batches of `rows` sequences of `t` tokens cut from one endless stream: the step-th batch is
 * tokens g = step·rows·t … (step + 1)·rows·t − 1, with input token `input(g)` and target `target(g)`
 * (a pure function of the step, as Batches asks).
 */
export function formulaBatches(rows: number, t: number, input: (g: number) => number, target: (g: number) => number): Batches {
  return {
    batchAt(index: number) {
      const inputs = new Int32Array(rows * t), targets = new Int32Array(rows * t);
      for (let i = 0; i < rows * t; i++) {
        const g = index * rows * t + i;
        inputs[i] = input(g);
        targets[i] = target(g);
      }
      return { inputs, targets };
    },
  };
}
