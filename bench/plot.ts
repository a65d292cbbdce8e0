/**
 * Draws a benchmark's JSON results as SVG plots (time against sequence length, log-log; see
 * bench/lib/plots.ts): tells from the JSON's shape whether bench/attention.ts or bench/fox_fpa.ts
 * wrote it, writes `<name>-<plot>.svg` for each plot and prints the paths.
 *
 *   node --import tsx bench/plot.ts RESULTS.json [MORE.json ...] [--out DIR]
 *
 * Without --out the plots go beside each JSON. A file that is missing, not JSON or not a known
 * results kind is one line on stderr and exit code 1.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { ArgumentError, FonError } from '../src/errors.ts';
import { writeResultsPlots } from './lib/plots.ts';

const USAGE = `usage: node --import tsx bench/plot.ts RESULTS.json [MORE.json ...] [--out DIR]

Writes <name>-<plot>.svg for the JSON of bench/attention.ts or bench/fox_fpa.ts, beside
each JSON or in DIR, and prints the paths.`;

async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { out: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  } catch (e) {
    throw new ArgumentError(`${(e as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) { console.log(USAGE); return; }
  if (positionals.length === 0) throw new ArgumentError(`no results file given\n${USAGE}`);
  for (const file of positionals) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new ArgumentError(`cannot read ${file}: ${(e as Error).message}`);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new ArgumentError(`${file} is not JSON (${(e as Error).message}); expected the --json output of bench/attention.ts or bench/fox_fpa.ts`);
    }
    const paths = await writeResultsPlots(file, value, values.out);
    if (paths.length === 0) throw new ArgumentError(`${file}: no case has a time to plot (every cell missing or failed)`);
    for (const p of paths) console.log(p);
  }
}

try {
  await main(process.argv.slice(2));
} catch (e) {
  if (e instanceof FonError) console.error(`plot: ${e.message}`);
  else console.error(e);
  process.exit(1);
}
