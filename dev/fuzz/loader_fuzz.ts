/**
 * The loader fuzzer: makes the base folders, then runs cases (dev/fuzz/loader_cases.ts) one at a
 * time in a worker thread with a time limit and a heap limit, and sorts each into an outcome
 * class. Defects are the classes other than "loaded" and "a FonError": a plain error, a hang, an
 * out-of-memory, or a FonError whose message is longer than 2,000 characters. Used by
 * test/io/loader_fuzz.test.ts (a few hundred cases) and dev/fuzz/loaders.ts (many).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { FON, TINY_MODEL_CONFIG } from '../../test/cli/fon_process.ts';
import type { Bases, CaseOutcome } from './loader_cases.ts';

const ROOT = join(import.meta.dirname, '../..');
/** Longest message a FonError may carry: messages quote values cut to a bounded length. */
export const MAX_MESSAGE = 2000;

export interface FuzzOptions {
  cases: number;
  seed: number;
  /** An empty folder to work in. */
  dir: string;
  /** Run only these case indices (replaying a failure). */
  only?: number[];
  /** A case taking longer than this is a hang (ms, default 20,000). */
  timeoutMs?: number;
  /** Also run every n-th case through `fon info --model` (0: none, the default): exit 0 or 2, one line, no stack trace. */
  cliEvery?: number;
  onCase?: (done: number, total: number, r: CaseResult) => void;
}

export interface CaseResult { index: number; description: string; outcomeClass: string; defect: boolean; detail: string; ms: number }

export interface FuzzReport {
  /** Outcome class → number of cases. */
  counts: Record<string, number>;
  defects: CaseResult[];
  /** The slowest case, for the budget. */
  slowest: CaseResult | null;
}

/** The valid folders cases start from: a FON run folder (via `fon train`, two steps) and two Hugging Face fixtures. */
export function makeBases(dir: string): Bases {
  const run = join(dir, 'bases', 'checkpoint');
  const corpus = join(dir, 'corpus.txt');
  writeFileSync(corpus, 'The cat sat on the mat. A dog ran in the park. '.repeat(40));
  const config = join(dir, 'model.json');
  writeFileSync(config, JSON.stringify(TINY_MODEL_CONFIG));
  const r = spawnSync(process.execPath, [FON, 'train', '--data', corpus, '--config', config, '--tokenizer', 'bpe:300', '--steps', '2',
    '--batch', '2', '--backend', 'cpu', '--eval-every', '0', '--checkpoint-every', '1', '--final-eval-windows', '1', '--out', run], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`making the checkpoint base failed: ${r.stderr}`);
  const hf = (name: string) => {
    const to = join(dir, 'bases', name);
    mkdirSync(to, { recursive: true });
    const from = join(ROOT, 'test/fixtures/hf', name);
    for (const f of readdirSync(from)) if (!/reference/.test(f)) cpSync(join(from, f), join(to, f));
    return to;
  };
  return { checkpoint: run, hfSingle: hf('gpt2'), hfSharded: hf('qwen3') };
}

function classify(outcome: CaseOutcome): { outcomeClass: string; defect: boolean; detail: string } {
  if (outcome.kind === 'loaded') return { outcomeClass: 'loaded', defect: false, detail: '' };
  if (outcome.kind === 'FonError') {
    if (outcome.message.length > MAX_MESSAGE) return { outcomeClass: `a FonError with a message of over ${MAX_MESSAGE} characters`, defect: true, detail: outcome.message.slice(0, 300) };
    return { outcomeClass: `${outcome.name}`, defect: false, detail: outcome.message.slice(0, 300) };
  }
  return { outcomeClass: `a plain ${outcome.name} instead of a FonError`, defect: true, detail: outcome.message.slice(0, 600) };
}

/** `fon info --model DIR` on a case: the class gains " (CLI: exit N)", or becomes a defect when the CLI crashes, hangs or prints a stack trace. */
function throughCli(folder: string, r: CaseResult): Partial<CaseResult> {
  const p = spawnSync(process.execPath, [FON, 'info', '--model', folder], { encoding: 'utf8', timeout: 60_000 });
  const stack = /\n\s+at /.test(p.stderr);
  if ((p.status === 0 || p.status === 2) && !stack) return { outcomeClass: `${r.outcomeClass} (CLI: exit ${p.status})` };
  return { outcomeClass: `through the CLI: ${p.status === null ? `killed (${p.signal})` : `exit ${p.status}`}${stack ? ' with a stack trace' : ''}`, defect: true, detail: p.stderr.slice(0, 600) };
}

/** Runs the cases (see the file header). */
export async function fuzzLoaders(opts: FuzzOptions): Promise<FuzzReport> {
  const bases = makeBases(opts.dir);
  const scratch = join(opts.dir, 'scratch');
  const indices = opts.only ?? Array.from({ length: opts.cases }, (_, i) => i);
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const report: FuzzReport = { counts: {}, defects: [], slowest: null };
  let worker: Worker | null = null;
  const start = () => new Worker(new URL('./loader_worker_boot.mjs', import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: 1024 } });
  for (const [done, index] of indices.entries()) {
    worker ??= start();
    const w = worker;
    const r = await new Promise<CaseResult>((resolve) => {
      const t0 = performance.now();
      const finish = (res: CaseResult, restart: boolean) => {
        clearTimeout(timer);
        w.removeAllListeners('message');
        w.removeAllListeners('error');
        w.removeAllListeners('exit');
        if (restart) { void w.terminate(); worker = null; }
        resolve(res);
      };
      const timer = setTimeout(() => finish({ index, description: `case ${index}`, outcomeClass: 'a hang', defect: true, detail: `no answer after ${timeoutMs} ms`, ms: timeoutMs }, true), timeoutMs);
      w.on('message', (m: { index: number; description: string; outcome: CaseOutcome; ms: number }) => finish({ index, description: m.description, ms: m.ms, ...classify(m.outcome) }, false));
      w.on('error', (e: Error & { code?: string }) => {
        const oom = e.code === 'ERR_WORKER_OUT_OF_MEMORY';
        finish({ index, description: `case ${index}`, outcomeClass: oom ? 'out of memory' : 'the worker crashed', defect: true, detail: e.message, ms: performance.now() - t0 }, true);
      });
      w.on('exit', (code) => finish({ index, description: `case ${index}`, outcomeClass: 'the worker crashed', defect: true, detail: `exit ${code}`, ms: performance.now() - t0 }, true));
      w.postMessage({ seed: opts.seed, index, bases, scratch });
    });
    if (opts.cliEvery && done % opts.cliEvery === 0 && !r.defect) Object.assign(r, throughCli(join(scratch, 'case'), r));
    report.counts[r.outcomeClass] = (report.counts[r.outcomeClass] ?? 0) + 1;
    if (r.defect) report.defects.push(r);
    if (report.slowest === null || r.ms > report.slowest.ms) report.slowest = r;
    opts.onCase?.(done + 1, indices.length, r);
  }
  await (worker as Worker | null)?.terminate();
  return report;
}
