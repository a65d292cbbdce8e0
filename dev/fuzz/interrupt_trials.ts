/**
 * Interrupt trials: a real `fon train` child killed at random moments, again and again on one run
 * folder, each time resumed from what it left. After every kill the run folder must still load
 * (latest.json, once it exists, names a complete checkpoint whose model, tokenizer and trainer
 * state load, at a step no earlier than before), and at the end a resumed run must finish.
 *
 * Each trial draws, from a seeded stream, a delay after the spawn (so kills land in start-up,
 * tokenization, steps and checkpoint writes alike: every step writes a checkpoint) and a signal:
 * SIGKILL (a crash), SIGINT (Ctrl-C: finish the step, write a checkpoint, exit 130), or SIGINT
 * twice a few milliseconds apart (the second quits at once, possibly mid-write). Used by
 * test/cli/interrupt_trials.test.ts (a few trials) and dev/fuzz/interrupts.ts (many).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { initBackend } from '../../src/backend/registry.ts';
import { resolveCheckpointDir } from '../../src/io/checkpoint_dir.ts';
import { loadModel, readTrainerState } from '../../src/io/model_checkpoint.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { FON, TINY_MODEL_CONFIG, writeSentenceCorpus } from '../../test/cli/fon_process.ts';


export type TrialOutcome =
  | 'SIGKILL before the first checkpoint'
  | 'SIGKILL, the last checkpoint loads'
  | 'SIGKILL mid-write (a temporary entry left), the last checkpoint loads'
  | 'SIGINT before training (the default handler ended it)'
  | 'SIGINT, stopped with a checkpoint of its step (exit 130)'
  | 'SIGINT twice, quit at once (exit 130), the last checkpoint loads'
  | 'SIGINT twice, quit mid-write (a temporary entry left), the last checkpoint loads'
  | 'finished before the signal'
  | 'VIOLATION';

export interface TrialReport {
  counts: Partial<Record<TrialOutcome, number>>;
  /** What each violation was, one line each. */
  violations: string[];
  /** The step the final, uninterrupted resume reached (it runs two steps past the last checkpoint). */
  finalStep: number;
}

export interface TrialOptions {
  trials: number;
  seed: number;
  /** An empty folder the trials may fill. */
  dir: string;
  /** Longest delay from spawn to signal, ms (default 2500). */
  maxDelayMs?: number;
  onTrial?: (index: number, outcome: TrialOutcome, detail: string) => void;
}

const stepOf = (name: string) => Number(/^step-(\d+)$/.exec(name)?.[1] ?? NaN);

/** The checkpoint latest.json names, checked to load whole; a message when it does not. */
async function checkLatest(out: string): Promise<{ step: number } | { problem: string }> {
  try {
    const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')) as { checkpoint: string };
    const dir = await resolveCheckpointDir(out);
    const loaded = await loadModel(out, await initBackend('cpu'));
    loaded.model.dispose();
    const state = await readTrainerState(dir);
    if (state.step !== stepOf(latest.checkpoint)) return { problem: `${latest.checkpoint}/trainer.json says step ${state.step}` };
    if (!existsSync(join(dir, 'optimizer.safetensors'))) return { problem: `${latest.checkpoint} has no optimizer.safetensors` };
    return { step: state.step };
  } catch (e) {
    return { problem: `the run folder does not load: ${(e as Error).message}` };
  }
}

/** Runs the trials (see the file header) and counts their outcomes. */
export async function runInterruptTrials(opts: TrialOptions): Promise<TrialReport> {
  const rand = uniformStream(opts.seed);
  const maxDelay = opts.maxDelayMs ?? 2500;
  const corpus = join(opts.dir, 'corpus.txt');
  writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.', 'Rain fell on the old town.'], 400, 7);
  const config = join(opts.dir, 'model.json');
  writeFileSync(config, JSON.stringify(TINY_MODEL_CONFIG));
  const out = join(opts.dir, 'run');
  const freshFor = (steps: number) => ['train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', String(steps), '--batch', '2',
    '--backend', 'cpu', '--eval-every', '0', '--checkpoint-every', '1', '--warmup', '0', '--out', out];
  const fresh = freshFor(100_000);
  const resume = ['train', '--out', out, '--resume', '--backend', 'cpu'];
  const report: TrialReport = { counts: {}, violations: [], finalStep: -1 };
  let lastStep = -1; // the step latest.json named after the previous trial; −1 while there is none
  for (let i = 0; i < opts.trials; i++) {
    const delay = rand() * maxDelay;
    const pick = rand();
    const signal = pick < 0.5 ? 'SIGKILL' : pick < 0.8 ? 'SIGINT' : 'SIGINT twice';
    const args = lastStep >= 0 ? resume : fresh;
    const child = spawn(process.execPath, [FON, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    let signalled = false;
    const ended = new Promise<{ code: number | null; sig: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, sig) => resolve({ code, sig })));
    const timer = setTimeout(() => {
      signalled = true;
      child.kill(signal === 'SIGKILL' ? 'SIGKILL' : 'SIGINT');
      if (signal === 'SIGINT twice') setTimeout(() => child.kill('SIGINT'), 1 + rand() * 20);
    }, delay);
    const watchdog = setTimeout(() => child.kill('SIGKILL'), delay + 60_000); // never a hang: a stuck child is a violation below
    const { code, sig } = await ended;
    clearTimeout(timer);
    clearTimeout(watchdog);
    const now = existsSync(join(out, 'latest.json')) ? await checkLatest(out) : null;
    const midWrite = () => readdirSync(out).some((f) => f.includes('.tmp-'));
    let outcome: TrialOutcome;
    let detail = `${signal} after ${delay.toFixed(0)} ms: exit ${code ?? sig}`;
    const violation = (why: string) => { outcome = 'VIOLATION'; detail += `: ${why}`; };
    if (now === null) {
      if (lastStep >= 0) violation('latest.json is gone');
      else outcome = signal === 'SIGKILL' ? 'SIGKILL before the first checkpoint' : 'SIGINT before training (the default handler ended it)';
    } else if ('problem' in now) violation(now.problem);
    else if (now.step < lastStep) violation(`latest.json went back from step ${lastStep} to ${now.step}`);
    else if (!signalled) outcome = 'finished before the signal';
    else if (signal === 'SIGKILL') outcome = midWrite() ? 'SIGKILL mid-write (a temporary entry left), the last checkpoint loads' : 'SIGKILL, the last checkpoint loads';
    else if (code === 130 && signal === 'SIGINT') {
      const stopped = Number(/stopped at step (\d+)/.exec(err)?.[1]);
      if (stopped !== now.step) violation(`stopped at step ${stopped} but latest.json names step ${now.step}`);
      else outcome = 'SIGINT, stopped with a checkpoint of its step (exit 130)';
    } else if (code === 130) outcome = midWrite() ? 'SIGINT twice, quit mid-write (a temporary entry left), the last checkpoint loads' : 'SIGINT twice, quit at once (exit 130), the last checkpoint loads';
    else if (sig === 'SIGINT') outcome = 'SIGINT before training (the default handler ended it)';
    else violation(`an unexpected exit (stderr: ${err.trim().split('\n').at(-1)})`);
    if (outcome! !== 'VIOLATION' && now !== null && !('problem' in now)) lastStep = now.step;
    if (outcome! === 'VIOLATION') report.violations.push(`trial ${i}: ${detail}`);
    report.counts[outcome!] = (report.counts[outcome!] ?? 0) + 1;
    opts.onTrial?.(i, outcome!, detail);
  }
  // The run still finishes: resume (or start) uninterrupted for two more steps.
  const target = Math.max(lastStep, 0) + 2;
  const finalArgs = lastStep >= 0 ? [...resume, '--steps', String(target)] : freshFor(target);
  const last = spawnSync(process.execPath, [FON, ...finalArgs, '--final-eval-windows', '1'], { encoding: 'utf8', timeout: 120_000 });
  if (last.status !== 0) report.violations.push(`the final resume failed (exit ${last.status}): ${last.stderr.trim().split('\n').at(-1)}`);
  else {
    const now = await checkLatest(out);
    if ('problem' in now) report.violations.push(`after the final resume: ${now.problem}`);
    else report.finalStep = now.step;
    const temps = readdirSync(out).filter((f) => f.includes('.tmp-'));
    if (temps.length) report.violations.push(`temporary entries left after a clean run: ${temps.join(', ')}`);
  }
  return report;
}
