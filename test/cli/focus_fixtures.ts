/**
 * What the Focus CLI tests (focus_cli, focus_eval_cli) share: a temporary folder with a small
 * corpus, a two-layer model config (a full layer that --add turns into Focus, a local one that
 * stays) and the model trained from it for 3 steps; the --add and --train-only run over it; and
 * helpers that read checkpoints and check errors.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeSafetensors, type SafeTensorView } from '../../src/io/safetensors.ts';
import { fon as run, TINY_MODEL_CONFIG, writeSentenceCorpus } from './fon_process.ts';

/** Flags every training run of these tests takes. */
export const COMMON = ['--batch', '2', '--backend', 'cpu', '--checkpoint-every', '0'];
/** The Focus layer the tests add: K = 4, k = 1, d_g = 8, w = 4. */
export const ADD = 'focus:K=4,k=1,dg=8,w=4';

export interface FocusFixture {
  dir: string;
  corpus: string;
  /** What eval and generate read: 20 windows of the model's 32 tokens. */
  evalText: string;
  /** The model config JSON file: full + local(8). */
  config: string;
  /** The trained full + local model. */
  base: string;
  /** Removes the folder. */
  remove(): void;
}

/** Makes the folder, the corpus, the config and the base model (one `fon train` of 3 steps). */
export function focusFixture(name: string): FocusFixture {
  const dir = mkdtempSync(join(tmpdir(), `fon-${name}-`));
  const corpus = join(dir, 'corpus.txt');
  writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.', 'Rain fell on the old town.'], 400, 7);
  const evalText = join(dir, 'eval.txt');
  writeFileSync(evalText, readFileSync(corpus, 'utf8').slice(0, 640));
  const config = join(dir, 'model.json');
  writeFileSync(config, JSON.stringify({ ...TINY_MODEL_CONFIG, nLayers: 2, attention: [{ type: 'full' }, { type: 'local', window: 8 }] }));
  const base = join(dir, 'base');
  const made = run('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '3', ...COMMON, '--eval-every', '0', '--final-eval-windows', '2', '--out', base);
  assert.equal(made.code, 0, made.err);
  return { dir, corpus, evalText, config, base, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `fon train --init-from base --add ADD --train-only focus` into `out`, with `extra` flags. */
export function trainFocus(f: FocusFixture, out: string, ...extra: string[]): { code: number | null; out: string; err: string } {
  return run('train', '--data', f.corpus, '--init-from', f.base, '--add', ADD, '--train-only', 'focus', ...COMMON, ...extra, '--out', out);
}

/** Exit code 2 and one line matching `re`, without a stack trace. */
export function assertCleanError(r: { code: number | null; err: string }, re: RegExp): void {
  assert.equal(r.code, 2, `exit code (stderr: ${r.err})`);
  assert.match(r.err, re);
  assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
  assert.equal(r.err.trim().split('\n').length, 1, `one line: ${r.err}`);
}

/** The checkpoint directory latest.json names. */
export const latest = (out: string): string => join(out, JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint);

/** The latest checkpoint's tensors, undecoded. */
export const tensors = (out: string): Record<string, SafeTensorView> => decodeSafetensors(readFileSync(join(latest(out), 'model.safetensors')), out).tensors;

/** Same dtype, shape and bytes. */
export const same = (a: SafeTensorView, b: SafeTensorView): boolean => a.dtype === b.dtype && a.shape.join() === b.shape.join() && Buffer.from(a.data).equals(Buffer.from(b.data));

export const readLog = (out: string): Record<string, unknown>[] => readFileSync(join(out, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
