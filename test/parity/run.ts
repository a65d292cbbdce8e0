/**
 * The parity suite's runner (STYLE.md §3): runs the case table of test/parity/cases.ts on a backend
 * and on the CPU reference, compares every output (and the gradients of every differentiable case)
 * within tolerance, checks that no backend handle leaks, and counts every skip. It also holds the
 * central-difference gradient checker and renders the op × backend support table.
 *
 * Using it for another backend (one `test()` per call; nothing here registers tests itself):
 *
 *   import { test } from 'node:test';
 *   import { runParity, assertParity, formatReport } from '../parity/run.ts';
 *   import { skipsFor } from '../parity/skips.ts';
 *
 *   test('webgpu: every op matches the CPU reference', async (t) => {
 *     const backend = await createMyBackend();
 *     const report = await runParity(backend, {
 *       skip: skipsFor('webgpu'),  // test/parity/skips.ts: key (case name, op name, or name prefix such as 'sort/f16') → reason
 *       // ops: ['matmul', 'linear'],                       // restrict to some ops (e.g. one test per op family)
 *       // grad: false,                                     // forward only
 *     });
 *     t.diagnostic(formatReport(report));                   // "webgpu vs cpu: 612 cases, 610 passed, 0 failed, 2 skipped, 0 unsupported"
 *     assertParity(report);                                 // throws listing every failure, unsupported case and stale skip key
 *   });
 *
 * What a case's status means: `pass` — outputs (and gradients) match; `fail` — a mismatch, a shape
 * or dtype difference, an exception, or leaked handles; `skip` — named in `opts.skip` (with its
 * reason, always reported); `unsupported` — the backend threw UnsupportedError (assertParity fails
 * on those unless `allowUnsupported`). Gradients on a non-reference backend are compared against the
 * reference backend's analytical gradients; the reference itself is checked by central differences
 * (`checkGradient`, run by test/ops/grad.test.ts on the CPU).
 */
import * as fon from '../../src/index.ts';
import { UnsupportedError, type Backend, type DType, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { hostToF32, type AnyHostArray } from '../../src/tensor/dtype.ts';
import { normalArray, uniformArray } from '../../src/ops/random.ts';
import { CASES, DTYPE_TOL, buildInputs, type OpCase, type Tol } from './cases.ts';

export type { OpCase, Tol } from './cases.ts';
export { CASES } from './cases.ts';

// ---------------------------------------------------------------------------------------------
// Reading and comparing

/** A tensor read back to the host: f16/bf16 widened to f32, ints as they are. */
export interface HostTensor { shape: readonly number[]; dtype: DType; values: Float32Array | Int32Array | Uint8Array }

export async function readHost(t: Tensor): Promise<HostTensor> {
  const raw: AnyHostArray = await t.data();
  const dtype = t.dtype;
  const values = dtype === 'f16' || dtype === 'bf16' ? hostToF32(raw, dtype) : (raw as Float32Array | Int32Array | Uint8Array);
  return { shape: [...t.shape], dtype, values };
}

export interface Mismatch { index: number; got: number; want: number; maxAbsErr: number; count: number }

/** Elementwise |got − want| ≤ atol + rtol·|want|; NaN matches NaN, ±∞ matches itself. Null when all match. */
export function compareValues(got: ArrayLike<number>, want: ArrayLike<number>, tol: Tol): Mismatch | null {
  let first = -1, count = 0, maxAbsErr = 0;
  for (let i = 0; i < want.length; i++) {
    const g = got[i], w = want[i];
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    if (g === w) continue;
    const err = Math.abs(g - w);
    // Unequal non-finite values never match (∞ ≤ atol + rtol·∞ would let them through).
    if (!Number.isFinite(g) || !Number.isFinite(w) || !(err <= tol.atol + tol.rtol * Math.abs(w))) {
      count++;
      if (first < 0) first = i;
      if (!(err <= maxAbsErr)) maxAbsErr = err;
    }
  }
  return count === 0 ? null : { index: first, got: got[first], want: want[first], maxAbsErr, count };
}

function outputTol(c: OpCase, dtype: DType): Tol {
  const d = DTYPE_TOL[dtype];
  if (dtype === 'i32' || dtype === 'u8') return d;
  return { rtol: Math.max(c.tol.rtol, d.rtol), atol: Math.max(c.tol.atol, d.atol) };
}

/** Gradients pass through more rounding than forward values (a chain of ops): 10× the forward tolerance, floored. */
function gradTol(c: OpCase, dtype: DType): Tol {
  const t = outputTol(c, dtype);
  return { rtol: Math.max(10 * t.rtol, 1e-4), atol: Math.max(10 * t.atol, 1e-4) };
}

/** Compares two host tensors; a message naming what differs, or null. */
export function compareHost(what: string, got: HostTensor, want: HostTensor, tol: Tol): string | null {
  if (got.shape.join() !== want.shape.join()) return `${what}: shape [${got.shape}] but the reference gives [${want.shape}]`;
  if (got.dtype !== want.dtype) return `${what}: dtype ${got.dtype} but the reference gives ${want.dtype}`;
  if (got.values.length !== want.values.length) return `${what}: ${got.values.length} values for shape [${got.shape}]`;
  const m = compareValues(got.values, want.values, tol);
  if (!m) return null;
  return `${what}: ${m.count}/${want.values.length} values differ (rtol ${tol.rtol}, atol ${tol.atol}); first at [${unravel(m.index, want.shape)}]: got ${m.got}, want ${m.want}; max |err| ${m.maxAbsErr.toExponential(2)}`;
}

function unravel(i: number, shape: readonly number[]): number[] {
  const idx: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) { idx.unshift(i % shape[d]); i = Math.floor(i / shape[d]); }
  return idx;
}

// ---------------------------------------------------------------------------------------------
// Evaluating one case on one backend

function toList(r: Tensor | readonly Tensor[]): Tensor[] {
  return Array.isArray(r) ? [...r] : [r as Tensor];
}

/** Loss weights for output k: a seeded standard normal per element, the same on every backend. */
function lossWeights(shape: readonly number[], k: number): Float32Array {
  return normalArray(0x10ad + 7919 * k, shape.reduce((a, b) => a * b, 1));
}

export interface Evaluation {
  outputs: HostTensor[];
  /** Gradient of Σₖ sum(outₖ ⊙ wₖ) for each index in c.grad (zeros where no gradient reached the input). */
  grads: HostTensor[] | null;
  /** liveHandles after everything the case made was disposed, minus before. */
  leaked: number;
}

/**
 * Runs `c` on `backend`: builds its inputs, runs the op inside tidy (so intermediates go), reads the
 * outputs; with `withGrad`, marks the `c.grad` inputs and back-propagates the weighted-sum loss.
 * Disposes everything it made and reports handles that stayed alive.
 */
export async function evaluate(c: OpCase, backend: Backend, withGrad: boolean): Promise<Evaluation> {
  const inputs = buildInputs(c, backend);
  let outs: Tensor[] = [];
  try {
    const wantGrad = withGrad && c.grad.length > 0;
    for (const i of wantGrad ? c.grad : []) inputs[i].requiresGrad = true;
    outs = fon.tidy(() => toList(c.run(inputs, backend)));
    const outputs = await Promise.all(outs.map(readHost));
    let grads: HostTensor[] | null = null;
    if (wantGrad) {
      fon.tidy(() => {
        let loss: Tensor | null = null;
        outs.forEach((o, k) => {
          if (!o.isFloat || !o.requiresGrad) return;
          const w = fon.tensor(lossWeights(o.shape, k), o.shape, { dtype: o.dtype, backend });
          const term = fon.sum(fon.mul(o, w));
          loss = loss ? fon.add(loss, term) : term;
        });
        if (loss) fon.backward(loss);
      });
      grads = [];
      for (const i of c.grad) {
        const g = inputs[i].grad;
        grads.push(g ? await readHost(g) : { shape: [...inputs[i].shape], dtype: inputs[i].dtype, values: new Float32Array(inputs[i].size) });
      }
    }
    return { outputs, grads, leaked: NaN };
  } finally {
    for (const o of outs) if (!inputs.includes(o)) o.dispose();
    for (const t of inputs) t.dispose();
  }
}

async function evaluateCounted(c: OpCase, backend: Backend, withGrad: boolean): Promise<Evaluation> {
  const before = backend.memory().liveHandles;
  const r = await evaluate(c, backend, withGrad);
  r.leaked = backend.memory().liveHandles - before;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Parity

export type CaseStatus = 'pass' | 'fail' | 'skip' | 'unsupported';

export interface CaseResult {
  readonly case: string;
  readonly op: string;
  readonly dtype: DType;
  readonly status: CaseStatus;
  /** Why it failed, was skipped or is unsupported; empty on pass. */
  readonly detail: string;
  /** Whether gradients were compared too. */
  readonly gradChecked: boolean;
}

export interface ParityReport {
  readonly backend: string;
  readonly reference: string;
  readonly results: readonly CaseResult[];
  readonly total: number;
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly unsupported: number;
  /** Skip keys that matched no case (a stale skip is an error: assertParity reports it). */
  readonly unusedSkips: readonly string[];
}

export interface ParityOptions {
  /** The backend compared against (default: a fresh CpuBackend). */
  reference?: Backend;
  /** The cases to run (default: the whole table). */
  cases?: readonly OpCase[];
  /** Only cases of these ops. */
  ops?: readonly string[];
  /** Any further selection. */
  filter?: (c: OpCase) => boolean;
  /** Key → reason. A key matches a case name, an op name, or a case-name prefix ending before a '/'. */
  skip?: Readonly<Record<string, string>>;
  /** Compare gradients of differentiable cases too (default true). */
  grad?: boolean;
  /** Fail a case whose handles are not all freed afterwards (default true). */
  checkLeaks?: boolean;
  /** Called after each case (progress output, early diagnostics). */
  onResult?: (r: CaseResult) => void;
}

/** The skip key that applies to case `c`, or undefined. */
export function skipKeyFor(c: OpCase, skip: Readonly<Record<string, string>>): string | undefined {
  return Object.keys(skip).find((k) => k === c.name || k === c.op || c.name.startsWith(`${k}/`));
}

export function selectCases(opts: Pick<ParityOptions, 'cases' | 'ops' | 'filter'> = {}): OpCase[] {
  return (opts.cases ?? CASES).filter((c) => (!opts.ops || opts.ops.includes(c.op)) && (!opts.filter || opts.filter(c)));
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Runs every selected case on `backend` and on the reference, and compares them. */
export async function runParity(backend: Backend, opts: ParityOptions = {}): Promise<ParityReport> {
  const reference = opts.reference ?? new CpuBackend();
  const skip = opts.skip ?? {};
  const withGrad = opts.grad ?? true;
  const checkLeaks = opts.checkLeaks ?? true;
  const used = new Set<string>();
  const results: CaseResult[] = [];
  for (const c of selectCases(opts)) {
    const key = skipKeyFor(c, skip);
    let r: CaseResult;
    if (key !== undefined) {
      used.add(key);
      r = { case: c.name, op: c.op, dtype: c.dtype, status: 'skip', detail: skip[key], gradChecked: false };
    } else {
      r = await runCase(c, backend, reference, withGrad, checkLeaks);
    }
    results.push(r);
    opts.onResult?.(r);
  }
  const count = (s: CaseStatus) => results.filter((r) => r.status === s).length;
  return {
    backend: backend.name, reference: reference.name, results, total: results.length,
    passed: count('pass'), failed: count('fail'), skipped: count('skip'), unsupported: count('unsupported'),
    unusedSkips: Object.keys(skip).filter((k) => !used.has(k)),
  };
}

async function runCase(c: OpCase, backend: Backend, reference: Backend, withGrad: boolean, checkLeaks: boolean): Promise<CaseResult> {
  const gradChecked = withGrad && c.grad.length > 0;
  const base = { case: c.name, op: c.op, dtype: c.dtype, gradChecked };
  let want: Evaluation;
  try {
    want = await evaluateCounted(c, reference, withGrad);
  } catch (e) {
    return { ...base, status: 'fail', detail: `the reference backend '${reference.name}' threw: ${errorText(e)}` };
  }
  let got: Evaluation;
  try {
    got = await evaluateCounted(c, backend, withGrad);
  } catch (e) {
    if (e instanceof UnsupportedError) return { ...base, status: 'unsupported', detail: e.message };
    return { ...base, status: 'fail', detail: `threw ${errorText(e)}` };
  }
  const problems: string[] = [];
  if (got.outputs.length !== want.outputs.length) problems.push(`${got.outputs.length} outputs, the reference gives ${want.outputs.length}`);
  else got.outputs.forEach((o, k) => {
    const p = compareHost(`output ${k}`, o, want.outputs[k], outputTol(c, want.outputs[k].dtype));
    if (p) problems.push(p);
  });
  if (got.grads && want.grads) {
    got.grads.forEach((g, k) => {
      const p = compareHost(`gradient of input ${c.grad[k]}`, g, want.grads![k], gradTol(c, want.grads![k].dtype));
      if (p) problems.push(p);
    });
  }
  if (checkLeaks && got.leaked !== 0) problems.push(`${got.leaked} backend handle(s) still alive after every tensor was disposed`);
  return { ...base, status: problems.length ? 'fail' : 'pass', detail: problems.join('; ') };
}

export function formatReport(r: ParityReport): string {
  return `${r.backend} vs ${r.reference}: ${r.total} cases, ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped, ${r.unsupported} unsupported`;
}

/** Throws an Error listing every failure (and unsupported case unless allowed, and stale skip keys). */
export function assertParity(r: ParityReport, opts: { allowUnsupported?: boolean } = {}): void {
  const bad = r.results.filter((x) => x.status === 'fail' || (x.status === 'unsupported' && !opts.allowUnsupported));
  // At most 40 cases, each detail on one line of at most 300 characters: a broken kernel can fail
  // hundreds of cases, and a huge message makes the test runner's own output parsing crawl.
  const lines = bad.slice(0, 40).map((x) => `  ${x.status.toUpperCase()} ${x.case}: ${String(x.detail).replace(/\s+/g, ' ').slice(0, 300)}`);
  if (bad.length > 40) lines.push(`  … and ${bad.length - 40} more`);
  for (const k of r.unusedSkips) lines.push(`  STALE SKIP '${k}' matches no case`);
  if (lines.length) throw new Error(`${formatReport(r)}\n${lines.join('\n')}`);
}

// ---------------------------------------------------------------------------------------------
// Gradient check by central differences

export interface GradCheckOptions {
  /** Where to run (default: a shared CpuBackend). */
  backend?: Backend;
  /** Step along each unit direction (default: the case's fdEps, else 1e-2). */
  eps?: number;
  rtol?: number;
  atol?: number;
  /** Inputs up to this size are checked along every coordinate; larger ones at a sample (default 32). */
  coordinateLimit?: number;
  /** Random unit directions per input, on top of the coordinates (default 3). */
  randomDirections?: number;
}

export interface GradCheckResult {
  readonly case: string;
  readonly ok: boolean;
  /** Directional derivatives compared. */
  readonly checks: number;
  /** The worst |numeric − analytic| relative to its allowance (≤ 1 passes). */
  readonly worstRatio: number;
  readonly detail: string;
}

let sharedCpu: CpuBackend | null = null;

/**
 * Checks the analytical gradient of L = Σₖ sum(outₖ ⊙ wₖ) (random weights: every output element
 * matters) against central differences along unit directions d:
 *   (L(x + εd) − L(x − εd)) / 2ε  vs  ⟨∇L, (x⁺ − x⁻)⟩ / 2ε,
 * where x± are the perturbed inputs as actually stored in f32, so rounding the perturbation costs
 * nothing. L is summed in f64 on the host from the f32 outputs. Directions: every coordinate of a
 * small input; for larger ones the first, the last, four random coordinates and a few random unit
 * vectors (which see every element at once).
 */
export async function checkGradient(c: OpCase, opts: GradCheckOptions = {}): Promise<GradCheckResult> {
  const backend = opts.backend ?? (sharedCpu ??= new CpuBackend());
  const eps = opts.eps ?? c.fdEps ?? 1e-2;
  const rtol = opts.rtol ?? 2e-2, atol = opts.atol ?? 2e-3;
  const coordinateLimit = opts.coordinateLimit ?? 32;
  const randomDirections = opts.randomDirections ?? 3;
  for (const i of c.grad) if (c.inputs[i].dtype !== 'f32') throw new Error(`checkGradient: ${c.name}: input ${i} is ${c.inputs[i].dtype}; central differences need f32`);

  const analytic = await evaluate(c, backend, true);
  const base = buildInputs(c, backend);
  const problems: string[] = [];
  let checks = 0, worstRatio = 0;
  try {
    const weights = analytic.outputs.map((o, k) => (o.dtype === 'f32' ? lossWeights(o.shape, k) : null));
    const lossAt = async (which: number, values: Float32Array): Promise<number> => {
      const xs = base.slice();
      xs[which] = fon.tensor(values, base[which].shape, { backend });
      let outs: Tensor[] = [];
      try {
        outs = fon.noGrad(() => fon.tidy(() => toList(c.run(xs, backend))));
        let L = 0;
        for (let k = 0; k < outs.length; k++) {
          const w = weights[k];
          if (!w || !outs[k].isFloat) continue;
          const v = (await readHost(outs[k])).values;
          for (let j = 0; j < v.length; j++) L += v[j] * w[j];
        }
        return L;
      } finally {
        for (const o of outs) if (!base.includes(o)) o.dispose();
        xs[which].dispose();
      }
    };

    for (let gi = 0; gi < c.grad.length; gi++) {
      const which = c.grad[gi];
      const x = (await readHost(base[which])).values as Float32Array;
      const g = analytic.grads![gi].values;
      const n = x.length;
      if (g.length !== n) { problems.push(`input ${which}: gradient has ${g.length} values for ${n} inputs`); continue; }
      for (const [label, d] of directions(n, coordinateLimit, randomDirections, 0x9d + 131 * which)) {
        const xp = new Float32Array(n), xm = new Float32Array(n);
        for (let j = 0; j < n; j++) { xp[j] = x[j] + eps * d[j]; xm[j] = x[j] - eps * d[j]; }
        const numeric = ((await lossAt(which, xp)) - (await lossAt(which, xm))) / (2 * eps);
        let analyticD = 0;
        for (let j = 0; j < n; j++) if (xp[j] !== xm[j]) analyticD += g[j] * (xp[j] - xm[j]);
        analyticD /= 2 * eps;
        const allowance = atol + rtol * Math.max(Math.abs(numeric), Math.abs(analyticD));
        const ratio = Math.abs(numeric - analyticD) / allowance;
        checks++;
        if (!(ratio <= worstRatio)) worstRatio = ratio;
        if (!(ratio <= 1)) problems.push(`input ${which} along ${label}: numeric ${numeric.toPrecision(6)} vs analytic ${analyticD.toPrecision(6)}`);
      }
    }
  } finally {
    for (const t of base) t.dispose();
  }
  const shown = problems.slice(0, 6).join('; ') + (problems.length > 6 ? `; … ${problems.length - 6} more` : '');
  return { case: c.name, ok: problems.length === 0, checks, worstRatio, detail: shown };
}

/** Unit directions for an input of n elements: coordinates and random unit vectors. */
function directions(n: number, coordinateLimit: number, randomCount: number, seed: number): [string, Float32Array][] {
  const out: [string, Float32Array][] = [];
  const coord = (j: number): [string, Float32Array] => { const d = new Float32Array(n); d[j] = 1; return [`e${j}`, d]; };
  if (n <= coordinateLimit) {
    for (let j = 0; j < n; j++) out.push(coord(j));
    return out;
  }
  const picks = new Set<number>([0, n - 1]);
  const u = uniformArray(seed, 8);
  for (let i = 0; picks.size < 6 && i < u.length; i++) picks.add(Math.floor(u[i] * n));
  for (const j of [...picks].sort((a, b) => a - b)) out.push(coord(j));
  for (let r = 0; r < randomCount; r++) {
    const v = normalArray(seed + 1 + r, n);
    let norm = 0;
    for (let j = 0; j < n; j++) norm += v[j] * v[j];
    norm = Math.sqrt(norm);
    const d = new Float32Array(n);
    for (let j = 0; j < n; j++) d[j] = v[j] / norm;
    out.push([`random direction ${r}`, d]);
  }
  return out;
}

export interface GradReport {
  readonly backend: string;
  readonly results: readonly GradCheckResult[];
  readonly checked: number;
  readonly failed: number;
  /** Differentiable cases the check does not apply to, with the reason (cases' fdSkip). */
  readonly skipped: readonly { case: string; reason: string }[];
}

/** The cases the central-difference check covers and those it skips (counted, with reasons). */
export function gradCases(cases: readonly OpCase[] = CASES): { check: OpCase[]; skip: OpCase[] } {
  const diff = cases.filter((c) => c.grad.length > 0);
  return { check: diff.filter((c) => !c.fdSkip), skip: diff.filter((c) => !!c.fdSkip) };
}

/** Runs checkGradient over every differentiable case. */
export async function runGradChecks(opts: GradCheckOptions & { cases?: readonly OpCase[] } = {}): Promise<GradReport> {
  const { check, skip } = gradCases(opts.cases);
  const results: GradCheckResult[] = [];
  for (const c of check) {
    try {
      results.push(await checkGradient(c, opts));
    } catch (e) {
      results.push({ case: c.name, ok: false, checks: 0, worstRatio: Infinity, detail: errorText(e) });
    }
  }
  return {
    backend: (opts.backend ?? (sharedCpu ??= new CpuBackend())).name,
    results, checked: results.length, failed: results.filter((r) => !r.ok).length,
    skipped: skip.map((c) => ({ case: c.name, reason: c.fdSkip! })),
  };
}

// ---------------------------------------------------------------------------------------------
// The op × backend support table

/** A column of the table that could not run at all (backend not built, no device). */
export interface MissingColumn { readonly backend: string; readonly reason: string }

/**
 * Markdown: one row per op, one column per backend report (or missing backend), plus the dtypes
 * the cases cover and the gradient-check outcome. Footnotes list every failure, skip and
 * unsupported case with its reason.
 */
export function supportTable(reports: readonly (ParityReport | MissingColumn)[], grad?: GradReport, cases: readonly OpCase[] = CASES): string {
  const ops = [...new Set(cases.map((c) => c.op))];
  const notes: string[] = [];
  const header = ['op', 'dtypes', 'cases', 'gradient (central differences)', ...reports.map((r) => r.backend)];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const op of ops) {
    const mine = cases.filter((c) => c.op === op);
    const dtypes = [...new Set(mine.map((c) => c.dtype))].join(', ');
    let gradCell = 'not differentiable';
    if (mine.some((c) => c.grad.length)) {
      if (!grad) gradCell = 'differentiable (not run)';
      else {
        const rs = grad.results.filter((r) => mine.some((c) => c.name === r.case));
        const sk = grad.skipped.filter((s) => mine.some((c) => c.name === s.case));
        const bad = rs.filter((r) => !r.ok);
        gradCell = `${bad.length ? '❌' : '✅'} ${rs.length - bad.length}/${rs.length}${sk.length ? `, ${sk.length} skipped` : ''}`;
        for (const b of bad) notes.push(`gradient ${b.case}: ${b.detail}`);
        for (const s of sk) notes.push(`gradient ${s.case} skipped: ${s.reason}`);
      }
    }
    const cells = reports.map((r) => {
      if (!('results' in r)) return 'n/a';
      const rs = r.results.filter((x) => x.op === op);
      if (!rs.length) return 'not run';
      const n = (s: CaseStatus) => rs.filter((x) => x.status === s).length;
      const run = rs.length - n('skip');
      const parts = [`${n('fail') ? '❌' : n('unsupported') ? '⚠️' : '✅'} ${n('pass')}/${run}`];
      if (n('unsupported')) parts.push(`${n('unsupported')} unsupported`);
      if (n('skip')) parts.push(`${n('skip')} skipped`);
      for (const x of rs) if (x.status !== 'pass') notes.push(`${r.backend} ${x.status} ${x.case}: ${x.detail}`);
      return parts.join(', ');
    });
    lines.push(`| ${op} | ${dtypes} | ${mine.length} | ${gradCell} | ${cells.join(' | ')} |`);
  }
  const missing = reports.filter((r): r is MissingColumn => !('results' in r));
  const summary = reports.filter((r): r is ParityReport => 'results' in r).map(formatReport);
  return [
    lines.join('\n'),
    '',
    ...(summary.length ? ['Totals:', '', ...summary.map((s) => `- ${s}`), ...(grad ? [`- gradient check on ${grad.backend}: ${grad.checked} cases, ${grad.failed} failed, ${grad.skipped.length} skipped`] : []), ''] : []),
    ...(missing.length ? ['Backends not available when the table was made:', '', ...missing.map((m) => `- ${m.backend}: ${m.reason}`), ''] : []),
    ...(notes.length ? ['Notes (every case that did not pass):', '', ...notes.map((n) => `- ${n.replaceAll('|', '\\|')}`), ''] : []),
  ].join('\n');
}
