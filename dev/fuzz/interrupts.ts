/**
 * Interrupt trials at scale (dev/fuzz/interrupt_trials.ts): `fon train` killed at random moments
 * on one run folder, resumed each time; prints each outcome's count and every violation.
 *
 *   node --import tsx dev/fuzz/interrupts.ts [--trials 100] [--seed 1]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runInterruptTrials } from './interrupt_trials.ts';

const { values } = parseArgs({ options: { trials: { type: 'string', default: '100' }, seed: { type: 'string', default: '1' } } });
const trials = Number(values.trials), seed = Number(values.seed);
if (!Number.isInteger(trials) || trials < 1 || !Number.isInteger(seed)) throw new Error(`--trials must be a positive integer and --seed an integer, got ${values.trials} and ${values.seed}`);
const dir = mkdtempSync(join(tmpdir(), 'fon-interrupts-'));
const started = performance.now();
const report = await runInterruptTrials({
  trials, seed, dir,
  onTrial: (i, outcome, detail) => {
    const rate = (i + 1) / ((performance.now() - started) / 1000);
    process.stderr.write(`\rtrial ${i + 1}/${trials}  ${rate.toFixed(2)} trials/s  ETA ${((trials - i - 1) / rate).toFixed(0)} s   `);
    if (outcome === 'VIOLATION') process.stderr.write(`\n${detail}\n`);
  },
});
process.stderr.write('\n');
console.log(`${trials} interrupt trials, seed ${seed}, ${((performance.now() - started) / 1000).toFixed(0)} s; the final resume reached step ${report.finalStep}`);
console.log('| outcome | trials |\n|---|---|');
for (const [outcome, n] of Object.entries(report.counts)) console.log(`| ${outcome} | ${n} |`);
for (const v of report.violations) console.log(`violation: ${v}`);
rmSync(dir, { recursive: true, force: true });
process.exitCode = report.violations.length ? 1 : 0;
