/**
 * The parity suite itself: the case table covers every exported op, runs on the CPU, and the
 * runner really fails when a backend is wrong (a deliberately broken backend below), counts skips,
 * flags stale skip keys and renders the support table.
 * Run: node --import tsx --test test/parity/parity.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { UnsupportedError } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { CASES, NOT_OPS, buildInputs, type OpCase } from './cases.ts';
import { assertParity, checkGradient, compareValues, formatReport, gradCases, runParity, selectCases, supportTable } from './run.ts';

/** Exported functions that are ops: everything callable except classes (errors, Tensor). */
function exportedOps(): string[] {
  return Object.entries(fon)
    .filter(([, v]) => typeof v === 'function' && !/^class\b/.test(Function.prototype.toString.call(v)))
    .map(([k]) => k);
}

test('case names are unique', () => {
  const seen = new Set<string>();
  for (const c of CASES) {
    assert.ok(!seen.has(c.name), `duplicate case name ${c.name}`);
    seen.add(c.name);
  }
  assert.ok(CASES.length > 500, `only ${CASES.length} cases`);
});

test('every exported op has cases, and NOT_OPS names only real non-op exports', () => {
  const ops = new Set(CASES.map((c) => c.op));
  const exported = exportedOps();
  const missing = exported.filter((k) => !ops.has(k) && !(k in NOT_OPS));
  assert.deepEqual(missing, [], `exports without parity cases: ${missing.join(', ')}`);
  const stale = Object.keys(NOT_OPS).filter((k) => !exported.includes(k));
  assert.deepEqual(stale, [], `NOT_OPS names that are not exported: ${stale.join(', ')}`);
  const unknown = [...ops].filter((op) => !exported.includes(op));
  assert.deepEqual(unknown, [], `cases for ops that are not exported: ${unknown.join(', ')}`);
});

test('every differentiable op has a central-difference-checked f32 case; grad indices name float inputs', () => {
  const nonDiff = new Set(['sign', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'argsort', 'invertRows', 'full', 'zeros', 'ones', 'zerosLike', 'onesLike', 'arange', 'randn', 'rand', 'randint', 'tensor', 'scalar']);
  const { check } = gradCases();
  for (const op of new Set(CASES.map((c) => c.op))) {
    const checked = check.some((c) => c.op === op);
    if (nonDiff.has(op)) assert.ok(!CASES.some((c) => c.op === op && c.grad.length), `${op} is not differentiable but a case lists grad inputs`);
    else assert.ok(checked, `${op} has no case in the gradient check`);
  }
  for (const c of CASES) {
    for (const i of c.grad) {
      assert.ok(i < c.inputs.length, `${c.name}: grad index ${i} out of range`);
      assert.equal(c.inputs[i].dtype, 'f32', `${c.name}: grad input ${i} must be f32`);
    }
  }
});

test('the table covers sizes 0, 1 and sizes that are no multiple of a tile, and every dtype', () => {
  const dims = new Set(CASES.flatMap((c) => c.inputs.flatMap((i) => i.shape)));
  for (const d of [0, 1, 7, 33, 129]) assert.ok(dims.has(d), `no input has a dimension of ${d}`);
  for (const op of new Set(CASES.map((c) => c.op))) {
    const mine = CASES.filter((c) => c.op === op && c.inputs.length > 0);
    if (!mine.length) continue;
    assert.ok(mine.some((c) => c.inputs.some((i) => i.shape.some((d) => d % 4 !== 0))), `${op}: every case is a multiple of 4 in every dimension`);
  }
  const dtypes = new Set(CASES.map((c) => c.dtype));
  for (const d of ['f32', 'f16', 'bf16', 'i32', 'u8'] as const) assert.ok(dtypes.has(d), `no ${d} case`);
});

test('inputs are deterministic: the same case builds the same values on two backends', async () => {
  const a = new CpuBackend(), b = new CpuBackend();
  for (const c of CASES.filter((_, i) => i % 13 === 0)) {
    const xa = buildInputs(c, a), xb = buildInputs(c, b);
    for (let i = 0; i < xa.length; i++) assert.deepEqual(await xa[i].data(), await xb[i].data(), `${c.name} input ${i}`);
    for (const t of [...xa, ...xb]) t.dispose();
  }
});

test('domain-constrained generators keep their promises (log/sqrt positive, away from kinks, distinct)', async () => {
  const cpu = new CpuBackend();
  for (const c of CASES) {
    const xs = buildInputs(c, cpu);
    for (let i = 0; i < xs.length; i++) {
      const gen = c.inputs[i].gen;
      if (xs[i].dtype !== 'f32') continue; // rounding to 16 bits may reach a bound
      const v = Array.from(xs[i].dataSync() as Float32Array);
      if (gen.kind === 'rand') assert.ok(v.every((x) => x >= gen.low && x < gen.high), `${c.name} input ${i} outside [${gen.low}, ${gen.high})`);
      if (gen.kind === 'away') assert.ok(v.every((x) => Math.abs(x) >= gen.min - 1e-6), `${c.name} input ${i} too close to 0`);
      if (gen.kind === 'distinct') assert.equal(new Set(v).size, v.length, `${c.name} input ${i} has ties`);
    }
    for (const t of xs) t.dispose();
  }
});

test('cpu parity: every case runs, returns the reference values and frees every handle', async (t) => {
  const report = await runParity(new CpuBackend());
  t.diagnostic(formatReport(report));
  assertParity(report);
  assert.equal(report.total, CASES.length);
  assert.equal(report.passed, CASES.length);
  assert.equal(report.skipped, 0);
});

/** A CPU backend with planted bugs, to prove the runner catches each kind. */
function brokenBackend(): CpuBackend {
  const b = new CpuBackend();
  (b as { name: string }).name = 'broken';
  const { unary, binary, softmaxBackward, sort } = b;
  b.unary = (x, op) => {
    const h = unary(x, op);
    if (op === 'exp' && h instanceof Float32Array) for (let i = 0; i < h.length; i++) h[i] *= 1.001; // 1e-3 relative error
    return h;
  };
  b.binary = (x, y, op, shape) => {
    if (op === 'pow' && x.dtype === 'f16') throw new UnsupportedError("pow: backend 'broken' has no f16 kernel");
    return binary(x, y, op, shape);
  };
  b.softmaxBackward = (y, dy, rows, cols) => {
    const h = softmaxBackward(y, dy, rows, cols);
    h.fill(0);
    return h;
  };
  b.sort = (x, rows, cols, descending) => {
    b.upload(new Float32Array(1), 'f32'); // a handle nobody frees
    return sort(x, rows, cols, descending);
  };
  return b;
}

test('the runner fails a wrong kernel, a wrong backward and a leak, and reports unsupported kernels', async () => {
  const broken = brokenBackend();
  const report = await runParity(broken, { ops: ['exp', 'softmax', 'sort', 'pow', 'neg'] });
  const status = (name: string) => report.results.find((r) => r.case === name)?.status;
  assert.equal(status('exp/f32/[7,33]'), 'fail');
  assert.match(report.results.find((r) => r.case === 'exp/f32/[7,33]')!.detail, /output 0: \d+\/231 values differ/);
  assert.equal(status('exp/f32/[0]'), 'pass', 'nothing to differ on an empty tensor');
  assert.equal(status('softmax/f32/[7,33]/axis=-1'), 'fail', 'softmax backward returns zeros');
  assert.match(report.results.find((r) => r.case === 'softmax/f32/[7,33]/axis=-1')!.detail, /gradient of input 0/);
  assert.equal(status('softmax/f16/[7,33]'), 'pass', 'forward-only case: backward not involved');
  assert.equal(status('sort/f32/[7,33]/axis=-1'), 'fail');
  assert.match(report.results.find((r) => r.case === 'sort/f32/[7,33]/axis=-1')!.detail, /handle\(s\) still alive/);
  assert.equal(status('pow/f16/[7,33]x[33]'), 'unsupported');
  assert.ok(report.results.filter((r) => r.op === 'neg').every((r) => r.status === 'pass'));
  assert.equal(report.failed + report.passed + report.unsupported + report.skipped, report.total);
  assert.throws(() => assertParity(report), /FAIL exp\/f32\/\[7,33\]/);
  assert.throws(() => assertParity({ ...report, results: report.results.filter((r) => r.status !== 'fail'), failed: 0 }), /UNSUPPORTED pow\/f16/);
  assert.doesNotThrow(() => assertParity({ ...report, results: report.results.filter((r) => r.status !== 'fail'), failed: 0 }, { allowUnsupported: true }));
});

test('the runner only reads asynchronously (as on WebGPU): a backend without readSync passes', async () => {
  const b = new CpuBackend();
  (b as { name: string }).name = 'async-only';
  (b as { readSync?: unknown }).readSync = undefined;
  const report = await runParity(b, { filter: (c) => c.grad.length > 0 && CASES.indexOf(c) % 5 === 0 });
  assertParity(report);
  assert.ok(report.passed > 50);
  assert.ok(report.results.every((r) => r.gradChecked));
});

test('skips are explicit and counted; a skip key that matches nothing is an error', async () => {
  const skip = { exp: 'planted: exp is off by 1e-3', 'softmax/f32': 'planted: no backward', sort: 'planted leak', pow: 'no f16', 'no-such-op': 'stale' };
  const report = await runParity(brokenBackend(), { ops: ['exp', 'softmax', 'sort', 'pow'], skip });
  const expCases = selectCases({ ops: ['exp'] }).length;
  assert.equal(report.results.filter((r) => r.op === 'exp' && r.status === 'skip').length, expCases);
  assert.ok(report.results.filter((r) => r.status === 'skip').every((r) => r.detail.length > 0), 'each skip carries its reason');
  assert.equal(report.failed, 0, report.results.filter((r) => r.status === 'fail').map((r) => r.case).join());
  assert.equal(report.skipped, report.results.filter((r) => r.status === 'skip').length);
  assert.ok(report.skipped >= expCases + 1);
  assert.deepEqual(report.unusedSkips, ['no-such-op']);
  assert.throws(() => assertParity(report), /STALE SKIP 'no-such-op'/);
  assert.match(formatReport(report), /broken vs cpu: \d+ cases, \d+ passed, 0 failed, \d+ skipped, 0 unsupported/);
});

test('compareValues: NaN matches NaN, infinities match themselves, tolerance is atol + rtol·|want|', () => {
  assert.equal(compareValues([NaN, Infinity, -Infinity, 1], [NaN, Infinity, -Infinity, 1], { rtol: 0, atol: 0 }), null);
  assert.notEqual(compareValues([Infinity], [-Infinity], { rtol: 1, atol: 1 }), null);
  assert.notEqual(compareValues([NaN], [0], { rtol: 1, atol: 1 }), null);
  assert.equal(compareValues([1.09], [1], { rtol: 0.05, atol: 0.05 }), null);
  assert.notEqual(compareValues([1.11], [1], { rtol: 0.05, atol: 0.05 }), null);
  const m = compareValues([1, 2.2, 3, 5], [1, 2, 3, 4], { rtol: 0.05, atol: 0 });
  assert.deepEqual(m && { index: m.index, count: m.count }, { index: 1, count: 2 });
});

test('checkGradient fails a wrong backward rule and passes a right one', async () => {
  const base: Omit<OpCase, 'run' | 'name'> = {
    op: 'test', dtype: 'f32', inputs: [{ shape: [3, 5], dtype: 'f32', gen: { kind: 'randn' }, seed: 5 }], grad: [0], tol: { rtol: 0, atol: 0 },
  };
  // d/dx [2x + detach(x²)] is 2 analytically but 2 + 2x numerically.
  const wrong: OpCase = { ...base, name: 'wrong', run: ([x]) => fon.add(fon.mul(x, 2), fon.detach(fon.square(x))) };
  const right: OpCase = { ...base, name: 'right', run: ([x]) => fon.add(fon.mul(x, 2), fon.square(x)) };
  const bad = await checkGradient(wrong);
  assert.equal(bad.ok, false);
  assert.equal(bad.checks, 15);
  assert.match(bad.detail, /input 0 along e\d+: numeric .* vs analytic/);
  const good = await checkGradient(right);
  assert.equal(good.ok, true, good.detail);
  assert.ok(good.worstRatio < 0.2);
  // A larger input is checked along sampled coordinates plus random directions.
  const big: OpCase = { ...right, name: 'big', inputs: [{ shape: [7, 33], dtype: 'f32', gen: { kind: 'randn' }, seed: 6 }] };
  assert.equal((await checkGradient(big)).checks, 6 + 3);
  assert.equal((await checkGradient({ ...wrong, inputs: big.inputs })).ok, false);
});

test('supportTable has a row per op, a column per backend, and notes for every non-pass', async () => {
  const report = await runParity(brokenBackend(), { ops: ['exp', 'neg', 'pow'], skip: { 'pow/f32/[1]x[1]': 'planted skip' }, grad: false });
  const md = supportTable([report, { backend: 'webgpu', reason: 'no GPU here' }]);
  const rows = md.split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| op '));
  assert.equal(rows.length, new Set(CASES.map((c) => c.op)).size);
  assert.match(md, /^\| op \| dtypes \| cases \| gradient \(central differences\) \| broken \| webgpu \|$/m);
  assert.match(md, /^\| neg \| f32, f16, bf16 \| \d+ \| differentiable \(not run\) \| ✅ (\d+)\/\1 \| n\/a \|$/m);
  assert.match(md, /^\| exp \| .* \| ❌ \d+\/\d+ \| n\/a \|$/m);
  assert.match(md, /^\| pow \| .* \| ⚠️ \d+\/\d+, 1 unsupported, 1 skipped \| n\/a \|$/m);
  assert.match(md, /^\| matmul \| .* \| not run \| n\/a \|$/m);
  assert.match(md, /- broken skip pow\/f32\/\[1\]x\[1\]: planted skip/);
  assert.match(md, /- webgpu: no GPU here/);
});
