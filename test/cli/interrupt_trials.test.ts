/**
 * `fon train` killed at random moments (SIGKILL, Ctrl-C, Ctrl-C twice) on one run folder and
 * resumed each time: latest.json, once it exists, always names a checkpoint that loads, never an
 * earlier one, and the run still finishes (dev/fuzz/interrupt_trials.ts; dev/fuzz/interrupts.ts
 * runs many more).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInterruptTrials } from '../../dev/fuzz/interrupt_trials.ts';

test('fon train under random interrupts: the last checkpoint always loads and a resume always finishes', async () => {
  const report = await runInterruptTrials({ trials: 8, seed: 3, dir: mkdtempSync(join(tmpdir(), 'fon-interrupts-')) });
  assert.deepEqual(report.violations, []);
  const trials = Object.values(report.counts).reduce((a, b) => a + b, 0);
  assert.equal(trials, 8);
  assert.ok(report.finalStep >= 2, `the final resume reached step ${report.finalStep}`);
});
