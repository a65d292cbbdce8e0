/**
 * The loader fuzzer at scale (dev/fuzz/loader_fuzz.ts): prints each outcome class's count, the
 * slowest case and every defect with the case that shows it.
 *
 *   node --import tsx dev/fuzz/loaders.ts [--cases 2000] [--seed 1] [--only 12,40] [--cli-every 50]
 *
 * --cli-every N also runs every N-th case through `fon info --model` (a child process each).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fuzzLoaders } from './loader_fuzz.ts';

const { values } = parseArgs({ options: { cases: { type: 'string', default: '2000' }, seed: { type: 'string', default: '1' }, only: { type: 'string' }, 'cli-every': { type: 'string', default: '0' } } });
const cases = Number(values.cases), seed = Number(values.seed);
const only = values.only?.split(',').map(Number);
if (!Number.isInteger(cases) || cases < 1 || !Number.isInteger(seed) || only?.some((i) => !Number.isInteger(i) || i < 0)) {
  throw new Error(`--cases must be a positive integer, --seed an integer and --only a list of case indices; got ${values.cases}, ${values.seed}, ${values.only}`);
}
const dir = mkdtempSync(join(tmpdir(), 'fon-fuzz-'));
const started = performance.now();
const report = await fuzzLoaders({
  cases, seed, dir, only, cliEvery: Number(values['cli-every']),
  onCase: (done, total, r) => {
    const rate = done / ((performance.now() - started) / 1000);
    process.stderr.write(`\rfuzz ${done}/${total}  ${rate.toFixed(1)} cases/s  ETA ${((total - done) / rate).toFixed(0)} s   `);
    if (only) process.stderr.write(`\n#${r.index} ${r.description}\n  → ${r.outcomeClass}: ${r.detail}\n`);
  },
});
process.stderr.write('\n');
const total = Object.values(report.counts).reduce((a, b) => a + b, 0);
console.log(`${total} loader fuzz cases, seed ${seed}, ${((performance.now() - started) / 1000).toFixed(0)} s; slowest: #${report.slowest?.index} ${report.slowest?.ms.toFixed(0)} ms (${report.slowest?.description.slice(0, 100)})`);
console.log('| outcome | cases |\n|---|---|');
for (const [k, n] of Object.entries(report.counts).sort((a, b) => b[1] - a[1])) console.log(`| ${k} | ${n} |`);
for (const d of report.defects) console.log(`defect #${d.index} ${d.description.slice(0, 160)}\n  → ${d.outcomeClass}: ${d.detail.slice(0, 400)}`);
rmSync(dir, { recursive: true, force: true });
process.exitCode = report.defects.length ? 1 : 0;
