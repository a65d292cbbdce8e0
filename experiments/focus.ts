/**
 * The Focus experiments (issue 20, item 5; specs/focus_spot.md A5, A6), driven through the `fon`
 * command as a user would run them, on the built-in Brown Corpus:
 *
 * 1. a frozen teacher: `fon train --preset <preset>` (dense, RoPE), kept in <runs>/teacher and
 *    reused when present;
 * 2. centroid-only Focus composed onto it (`--init-from teacher --add focus:… --train-only focus`)
 *    for each arm (K, gate, Sinkhorn N) and seed; each evaluated with `fon eval --focus-top-k k`
 *    for k = 1 … K (hard, exact, causal assignments) on the whole validation split: perplexity,
 *    pairs kept and dominance (the largest group's share of memberships, ideal 1/K);
 * 3. full fine-tuning (phase 2 of A5: every weight, from each centroid-only K = 8 arm) against
 *    dense fine-tuning of the teacher for the same steps, and Focus trained from scratch against
 *    the teacher's own recipe (same preset, steps and seed).
 * Claims beside our numbers: composed k = 2 within 2% of the frozen model's perplexity and k = 3
 * recovering it; fine-tuned and from-scratch Focus at or below dense; dominance ≤ 25% at K = 8;
 * N = 3's trap (good perplexity, collapsed groups). Tables (mean ± standard error over seeds) and
 * JSON go to --out.
 *
 *   node --import tsx experiments/focus.ts [--runs runs/focus] [--out experiments/results] [--preset small]
 *     [--seeds 1,2] [--steps 300] [--ft-steps 200] [--arms K4,K8,K8-literal,K8-N3] [--scratch] [--finetune]
 *     [--lr 1e-3] [--batch 16] [--backend auto] [--eval-k 1,2,3,4,8] [--teacher-steps N] [--tag NAME]
 *
 * An arm is K<groups>[-literal][-N<iters>] (gate "mask" and N = 10 unless named).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: flags } = parseArgs({
  options: {
    runs: { type: 'string', default: 'runs/focus' },
    out: { type: 'string', default: 'experiments/results' },
    preset: { type: 'string', default: 'small' },
    seeds: { type: 'string', default: '1,2' },
    steps: { type: 'string', default: '300' },
    'ft-steps': { type: 'string', default: '200' },
    arms: { type: 'string', default: 'K4,K8,K8-literal,K8-N3' },
    scratch: { type: 'boolean', default: false },
    finetune: { type: 'boolean', default: false },
    lr: { type: 'string', default: '1e-3' },
    batch: { type: 'string', default: '16' },
    backend: { type: 'string', default: 'auto' },
    'eval-k': { type: 'string', default: '' },
    tag: { type: 'string', default: '' },
    'teacher-steps': { type: 'string', default: '' },
  },
});

const FON = join(import.meta.dirname, '..', 'bin', 'fon.js');
const seeds = flags.seeds.split(',').filter(Boolean).map(Number);
const log = (s: string) => console.error(`[focus] ${s}`);

/** Runs `fon args…`; its stdout, or throws with its stderr's tail. */
function fon(args: string[], timeoutMs = 3_600_000): string {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [FON, ...args], { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`fon ${args.join(' ')} → ${r.status ?? r.signal}: ${(r.stderr ?? '').slice(-2000)}`);
  log(`fon ${args.slice(0, 6).join(' ')}… ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return r.stdout;
}

interface EvalOut { perplexity: number; bitsPerByte: number; focus?: { topK: number; dominance: number; pairsRetained?: number; blocksVisitedFraction?: number } }

function evalModel(dir: string, k?: number): EvalOut {
  const out = fon(['eval', '--model', dir, '--backend', flags.backend, '--json', ...(k ? ['--focus-top-k', String(k)] : [])]);
  return JSON.parse(out.trim().split('\n').pop()!) as EvalOut;
}

/** The last log entry of a run that carries `key`. */
function lastLogged(dir: string, key: string): Record<string, unknown> | undefined {
  const p = join(dir, 'log.jsonl');
  if (!existsSync(p)) return undefined;
  const lines = readFileSync(p, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  return lines.filter((l) => key in l).pop();
}

function train(out: string, args: string[]): void {
  if (existsSync(join(out, 'latest.json'))) { log(`${out}: reused`); return; }
  fon(['train', '--data', 'builtin:brown', '--out', out, '--overwrite', '--backend', flags.backend, ...args]);
}

interface Arm { name: string; groups: number; gate: 'mask' | 'literal'; iters: number }
function parseArm(s: string): Arm {
  const m = /^K(\d+)(-literal)?(?:-N(\d+))?$/.exec(s);
  if (!m) throw new Error(`--arms: ${s}: expected K<groups>[-literal][-N<iters>]`);
  return { name: s, groups: Number(m[1]), gate: m[2] ? 'literal' : 'mask', iters: m[3] ? Number(m[3]) : 10 };
}

const meanSe = (xs: number[]) => {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const se = xs.length > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1) / xs.length) : NaN;
  return { m, se };
};
const fmt = (xs: number[], p = 2) => { const { m, se } = meanSe(xs); return Number.isNaN(se) ? m.toFixed(p) : `${m.toFixed(p)} ± ${se.toFixed(p)}`; };

function main(): void {
  mkdirSync(flags.runs, { recursive: true });
  mkdirSync(flags.out, { recursive: true });
  const teacher = join(flags.runs, `teacher-${flags.preset}`);
  const teacherSteps = flags['teacher-steps'] ? ['--steps', flags['teacher-steps']] : [];
  train(teacher, ['--preset', flags.preset, '--seed', '1', ...teacherSteps]);
  const dense = evalModel(teacher);
  log(`teacher: perplexity ${dense.perplexity.toFixed(3)}`);
  const results: Record<string, unknown> = { date: new Date().toISOString(), command: process.argv.slice(1).join(' '), preset: flags.preset, steps: Number(flags.steps), seeds, dense };
  const lines: string[] = [`Frozen dense teacher (${flags.preset}, 500 steps): validation perplexity ${dense.perplexity.toFixed(2)}, ${dense.bitsPerByte.toFixed(3)} bits per byte.`, ''];
  const arms = flags.arms.split(',').filter(Boolean).map(parseArm);
  const armResults: Record<string, unknown>[] = [];
  for (const arm of arms) {
    const ks = flags['eval-k'] ? flags['eval-k'].split(',').map(Number).filter((k) => k <= arm.groups) : Array.from({ length: arm.groups }, (_, i) => i + 1);
    const perSeed: { seed: number; dominance: number; evals: Record<number, EvalOut> }[] = [];
    for (const seed of seeds) {
      const dir = join(flags.runs, `${arm.name}-s${seed}`);
      train(dir, ['--init-from', teacher, '--add', `focus:K=${arm.groups},k=2,gate=${arm.gate},N=${arm.iters}`, '--train-only', 'focus',
        '--steps', flags.steps, '--lr', flags.lr, '--min-lr', String(Number(flags.lr) / 10), '--batch', flags.batch, '--seed', String(seed), '--eval-every', String(Math.max(1, Math.floor(Number(flags.steps) / 4)))]);
      const logged = lastLogged(dir, 'focusDominance');
      const evals: Record<number, EvalOut> = {};
      for (const k of ks) evals[k] = evalModel(dir, k);
      perSeed.push({ seed, dominance: Number(logged?.focusDominance ?? NaN), evals });
    }
    armResults.push({ arm, perSeed });
    results.arms = armResults;
    lines.push(`### ${arm.name}: K = ${arm.groups}, gate "${arm.gate}", Sinkhorn N = ${arm.iters}, ${flags.steps} centroid-only steps, seeds ${seeds.join(', ')}`, '');
    lines.push('| k | perplexity | vs frozen dense | pairs kept | dominance (eval, hard) |', '|---|---|---|---|---|');
    for (const k of ks) {
      const ppl = perSeed.map((r) => r.evals[k].perplexity);
      const rel = ppl.map((p) => (p / dense.perplexity - 1) * 100);
      const pairs = perSeed.map((r) => (r.evals[k].focus?.pairsRetained ?? NaN) * 100);
      const dom = perSeed.map((r) => (r.evals[k].focus?.dominance ?? NaN) * 100);
      lines.push(`| ${k} | ${fmt(ppl)} | ${fmt(rel, 1)}% | ${fmt(pairs, 1)}% | ${fmt(dom, 1)}% |`);
    }
    lines.push('', `Dominance at the last in-training evaluation (hard, k = 2, validation tokens): ${fmt(perSeed.map((r) => r.dominance * 100), 1)}% (ideal ${(100 / arm.groups).toFixed(1)}% at k = 1).`, '');
    save(results, lines);
  }
  if (flags.finetune) {
    const ft: Record<string, unknown>[] = [];
    lines.push(`### Full fine-tuning, ${flags['ft-steps']} steps of every weight (lr 1e-4), from the centroid-only K = 8 arm against dense fine-tuning of the teacher`, '');
    lines.push('| model | perplexity (seeds) |', '|---|---|');
    const densePpl: number[] = [], focusPpl: Record<number, number[]> = {};
    for (const seed of seeds) {
      const dd = join(flags.runs, `dense-ft-s${seed}`);
      train(dd, ['--init-from', teacher, '--steps', flags['ft-steps'], '--lr', '1e-4', '--batch', flags.batch, '--seed', String(seed)]);
      densePpl.push(evalModel(dd).perplexity);
      const fd = join(flags.runs, `K8-ft-s${seed}`);
      train(fd, ['--init-from', join(flags.runs, `K8-s${seed}`), '--steps', flags['ft-steps'], '--lr', '1e-4', '--batch', flags.batch, '--seed', String(seed)]);
      for (const k of [1, 2, 8]) (focusPpl[k] ??= []).push(evalModel(fd, k).perplexity);
      results.finetune = [{ densePpl, focusPpl }];
      save(results, lines);
    }
    lines.push(`| dense fine-tuned | ${fmt(densePpl)} |`);
    for (const k of [1, 2, 8]) lines.push(`| Focus K = 8 fine-tuned, k = ${k} | ${fmt(focusPpl[k])} |`);
    lines.push('');
    ft.push({ densePpl, focusPpl });
    results.finetune = ft;
    save(results, lines);
  }
  if (flags.scratch) {
    lines.push(`### From scratch: Focus K = 8 (every layer) against the dense teacher, same preset, 500 steps`, '');
    const cfg = join(flags.runs, 'focus-scratch.json');
    writeFileSync(cfg, JSON.stringify({ attention: { type: 'focus', groups: 8, topK: 2 } }));
    const ppl: Record<number, number[]> = {};
    const densePpl: number[] = [];
    for (const seed of seeds) {
      const dir = join(flags.runs, `scratch-K8-s${seed}`);
      train(dir, ['--preset', flags.preset, '--config', cfg, '--seed', String(seed), ...teacherSteps]);
      for (const k of [1, 2, 8]) (ppl[k] ??= []).push(evalModel(dir, k).perplexity);
      const dd = seed === 1 ? teacher : join(flags.runs, `teacher-${flags.preset}-s${seed}`);
      if (seed !== 1) train(dd, ['--preset', flags.preset, '--seed', String(seed), ...teacherSteps]);
      densePpl.push(seed === 1 ? dense.perplexity : evalModel(dd).perplexity);
      results.scratch = { ppl, densePpl };
      save(results, lines);
    }
    lines.push('| model | perplexity (seeds) |', '|---|---|', `| dense | ${fmt(densePpl)} |`, ...[1, 2, 8].map((k) => `| Focus K = 8 from scratch, k = ${k} | ${fmt(ppl[k])} |`), '');
    results.scratch = { ppl, densePpl };
  }
  save(results, lines);
  console.log(lines.join('\n'));
}

/** Writes what is measured so far (each arm as it ends: a run cut short keeps the arms before). */
function save(results: Record<string, unknown>, lines: string[]): void {
  const tag = flags.tag ? `_${flags.tag}` : '';
  writeFileSync(join(flags.out, `focus${tag}.json`), JSON.stringify(results, null, 1));
  writeFileSync(join(flags.out, `focus${tag}.md`), lines.join('\n') + '\n');
}

main();
