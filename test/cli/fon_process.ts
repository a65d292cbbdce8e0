/**
 * The fon CLI as a user runs it, for the CLI tests: bin/fon.js in a child process of this Node, its
 * exit code, stdout and stderr; and the small repeated-sentence corpus several of them train on.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** bin/fon.js, for tests that spawn it themselves (signals, streaming). */
export const FON = join(import.meta.dirname, '../../bin/fon.js');

/** The tiny model config the CLI tests and the dev/fuzz harnesses train (one layer, d = 16, context 32). */
export const TINY_MODEL_CONFIG = { dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 32, contextLength: 32 };

export interface FonRun { code: number | null; out: string; err: string }

/** `fon ...args`, waited for (two minutes at most). */
export function fon(...args: string[]): FonRun {
  const r = spawnSync(process.execPath, [FON, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Writes `count` sentences picked from `sentences` (index i·step mod n) to `path`, space-separated. */
export function writeSentenceCorpus(path: string, sentences: readonly string[], count: number, step: number): void {
  writeFileSync(path, Array.from({ length: count }, (_, i) => sentences[(i * step) % sentences.length]).join(' '));
}
