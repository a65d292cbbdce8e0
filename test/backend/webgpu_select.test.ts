/**
 * Selection without sorting, the block scores it ranks and the mask it makes (ops/select.ts):
 * selectOpen's CPU reference against a sort of the open entries (top-K and top-p with a floor,
 * reserved ranges, scores with ties, dyadic masses so that every sum is exact in f32 and f64, and
 * log-masses), indexBlockScores against plain loops, flagsMaskTable against the host's mask, and
 * the WebGPU kernels against the CPU on the same inputs (indexBlockScores also with several lanes a key): rows longer than a workgroup, ties at the
 * boundary, p = 1, empty open ranges, a count past the open entries; bad arguments refused by name.
 * Run: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_select.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';
import { flagsMaskTable, gatherListed, indexBlockScores, selectBlockList, selectOpen } from '../../src/ops/select.ts';
import { spotDecodeMask } from '../../src/attention/spot/decode_mask.ts';
import { maskEntries } from '../../src/attention/block_mask.ts';
import { deviceMaskShape } from '../../src/attention/device_mask.ts';
import { ArgumentError, DTypeError, ShapeError, UnsupportedError } from '../../src/errors.ts';
import { dequantizeInt4, quantizeInt4 } from '../../src/ops/int4.ts';
import { narrow } from '../../src/ops/layout.ts';
import type { SelectArgs } from '../../src/backend/backend.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import type { GpuRef, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { indexBlockScores as webgpuIndexBlockScores } from '../../src/backend/webgpu/kernels/index_scores.ts';
import { selectOpen as webgpuSelectOpen, selectWg } from '../../src/backend/webgpu/kernels/rows.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

type Rule = Omit<SelectArgs, 'rows' | 'n'>;

/** The kept entries by sorting the open ones: (score desc, index asc), then the rule's count. */
function bySort(scores: ArrayLike<number>, mass: ArrayLike<number>, r: Rule): number[] {
  const open = Array.from({ length: r.high - r.low }, (_, i) => r.low + i);
  const order = [...open].sort((a, b) => (scores[b] - scores[a]) || (a - b));
  let take = r.count;
  if (r.p > 0) {
    const total = open.reduce((s, e) => s + mass[e], 0);
    let m = 0, np = 0;
    while (np < order.length && (np === 0 || m < r.p * total)) m += mass[order[np++]];
    take = Math.max(np, r.count);
  }
  const kept = new Set(order.slice(0, Math.min(take, open.length)));
  for (let e = 0; e < r.valid; e++) if (e < r.low || e >= r.high) kept.add(e);
  return [...kept].sort((a, b) => a - b);
}

/** Random cases: rows × n scores on a coarse grid (ties), dyadic masses, a random rule. */
function cases(seed: number, count: number) {
  const rnd = lcg(seed);
  return Array.from({ length: count }, (_, c) => {
    const rows = 1 + Math.floor(rnd() * 3), n = 1 + Math.floor(rnd() * (c % 3 === 0 ? 1500 : 120));
    const valid = Math.max(0, n - Math.floor(rnd() * 5));
    const low = Math.min(valid, Math.floor(rnd() * 10)), high = Math.max(low, valid - Math.floor(rnd() * 20));
    const p = [0, 0.5, 0.9, 1][Math.floor(rnd() * 4)];
    const rule: Rule = { valid, low, high, count: Math.floor(rnd() * (high - low + 3)), p };
    const scores = Float32Array.from({ length: rows * n }, () => Math.round((rnd() - 0.3) * 12) / 4);
    const mass = Float32Array.from({ length: rows * n }, () => Math.floor(rnd() * 16) / 1024);
    return { rows, n, rule, scores, mass };
  });
}

const run = (be: Backend, c: ReturnType<typeof cases>[number], logMass = false) => {
  const s = fon.tensor(c.scores, [c.rows, c.n], { backend: be });
  // As logarithms (offset by 3: only shares count): log 0 = −∞ is no mass at all.
  const m = fon.tensor(logMass ? c.mass.map((x) => Math.log(x) + 3) : c.mass, [c.rows, c.n], { backend: be });
  return selectOpen(s, m, { ...c.rule, logMass });
};

test('selectOpen on the CPU keeps what sorting keeps: top-K and top-p with a floor, reserved ranges, ties, 120 cases', () => {
  let partial = 0;
  for (const c of cases(3, 120)) {
    const flags = run(cpu, c).dataSync() as Int32Array;
    for (let r = 0; r < c.rows; r++) {
      const at = r * c.n;
      const got = Array.from(flags.subarray(at, at + c.n)).flatMap((f, e) => (f ? [e] : []));
      assert.deepEqual(got, bySort(c.scores.subarray(at, at + c.n), c.mass.subarray(at, at + c.n), c.rule), JSON.stringify(c.rule));
      if (got.length > c.rule.valid - (c.rule.high - c.rule.low) && got.length < c.rule.valid) partial++;
    }
  }
  assert.ok(partial > 60, `only ${partial} rows kept some but not all open entries`);
});

test('bad arguments are refused by name', () => {
  const s = fon.zeros([2, 5]), m = fon.zeros([2, 5]);
  assert.throws(() => selectOpen(s, m, { valid: 6, low: 0, high: 0, count: 1, p: 0 }), (e) => e instanceof ArgumentError && e.message === 'selectOpen: need low ≤ high ≤ valid ≤ N; got low 0, high 0, valid 6, N 5');
  assert.throws(() => selectOpen(s, m, { valid: 5, low: 0, high: 5, count: 1, p: 1.5 }), /selectOpen: p 1\.5 must lie in \[0, 1\]/);
  assert.throws(() => selectOpen(s, m, { valid: 5, low: 0, high: 5, count: -1, p: 0 }), /selectOpen: count -1 must be an integer ≥ 0/);
  assert.throws(() => selectOpen(s, fon.zeros([5]), { valid: 5, low: 0, high: 5, count: 1, p: 0 }), ShapeError);
});

test('selectOpen with log-masses keeps what sorting keeps with the masses (continuous masses: no sums tied at the boundary)', () => {
  const rnd = lcg(19);
  for (const c of cases(11, 60)) {
    const cont = { ...c, mass: Float32Array.from(c.mass, () => 0.01 + rnd()) };
    const flags = run(cpu, cont, true).dataSync() as Int32Array;
    for (let r = 0; r < c.rows; r++) {
      const at = r * c.n;
      const got = Array.from(flags.subarray(at, at + c.n)).flatMap((f, e) => (f ? [e] : []));
      assert.deepEqual(got, bySort(c.scores.subarray(at, at + c.n), cont.mass.subarray(at, at + c.n), c.rule), JSON.stringify(c.rule));
    }
  }
});

/**
 * Whether flags (rows, n) keep, in each row, the leading open entries of the sort order with the
 * reserved ones, as many as top-p with log-masses keeps (c.mass as log(m) + 3, as `run` gives) up to
 * one nucleus boundary within f32 rounding: the taken count is the reference's, or one off where
 * the open mass before the larger of the two lies within 1e-4 of p·total.
 */
function withinRounding(c: ReturnType<typeof cases>[number], flags: number[]): boolean {
  for (let r = 0; r < c.rows; r++) {
    const at = r * c.n, sc = c.scores.subarray(at, at + c.n), ms = c.mass.subarray(at, at + c.n);
    const open = Array.from({ length: c.rule.high - c.rule.low }, (_, i) => c.rule.low + i);
    const order = [...open].sort((a, b) => (sc[b] - sc[a]) || (a - b));
    const kept = open.filter((e) => flags[at + e] === 1).length;
    const want = bySort(sc, ms, c.rule).filter((e) => e >= c.rule.low && e < c.rule.high).length;
    if (kept !== want) {
      if (Math.abs(kept - want) !== 1) return false;
      const total = open.reduce((t, e) => t + ms[e], 0);
      let cum = 0;
      for (let i = 0; i < Math.min(kept, want); i++) cum += ms[order[i]];
      if (Math.abs(cum - c.rule.p * total) > 1e-4 * total) return false;
    }
    const lead = new Set(order.slice(0, kept));
    for (let e = 0; e < c.n; e++) {
      const should = e < c.rule.valid && (e < c.rule.low || e >= c.rule.high || lead.has(e));
      if ((flags[at + e] === 1) !== should) return false;
    }
  }
  return true;
}
let roundingChecked = 0;

test('WebGPU selectOpen equals the CPU reference (rows longer than a workgroup, ties, p = 1, empty open ranges), with subgroup sums and without', { skip: webgpuSkipReason() }, async () => {
  const caps = (gpu as unknown as { caps: { subgroups: boolean } }).caps;
  const has = caps.subgroups;
  try {
    // The kernel's workgroup sums with subgroups (where the device has them) and by trees in workgroup memory.
    for (const sg of has ? [false, true] : [false]) {
      caps.subgroups = sg;
      for (const c of cases(7, 60)) {
        if (c.rule.p !== 1) {
          // Log-masses are exponentiated and summed in f32 on the device, in f64 on the CPU: where
          // the nucleus boundary lies within rounding of p·total the two may keep one block apart.
          const got = Array.from((await run(gpu!, c, true).data()) as Int32Array), want = Array.from(run(cpu, c, true).dataSync() as Int32Array);
          const what = `log-masses: ${c.rows} × ${c.n}, ${JSON.stringify(c.rule)}, subgroups ${sg}`;
          if (got.join() !== want.join()) assert.ok(withinRounding(c, got), `${what}: the device's flags differ from the CPU's beyond rounding at the boundary`);
          else roundingChecked++;
        }
        const want = Array.from(run(cpu, c).dataSync() as Int32Array);
        const flags = run(gpu!, c);
        assert.deepEqual(Array.from((await flags.data()) as Int32Array), want, `${c.rows} × ${c.n}, ${JSON.stringify(c.rule)}, subgroups ${sg}`);
      }
    }
    // The tolerance above is for the odd boundary, not the rule: most cases agree exactly.
    assert.ok(roundingChecked >= 30 * (has ? 2 : 1), `only ${roundingChecked} log-mass cases agreed with the CPU exactly`);
  } finally {
    caps.subgroups = has;
  }
});

test('WebGPU selectOpen at other workgroup sizes (SelectTune.wg) equals the CPU reference (log-masses: the default size); a size that is no power of two or past the device is refused [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const be = gpu as WebGpuBackend;
  // Sizes whose workgroup memory (24 bytes an invocation and 64) fits the device.
  const sizes = [32, 128, be.caps.maxInvocations].filter((w, i, all) => all.indexOf(w) === i && w * 24 + 64 <= be.caps.maxWorkgroupStorage);
  const byDefault = selectWg(be);
  for (const wg of sizes) {
    for (const c of cases(11, 24)) {
      for (const logMass of [false, true]) {
        // Log-masses are compared with the default size, so not at the default size itself.
        if (logMass && (c.rule.p === 1 || wg === byDefault)) continue;
        const s = fon.tensor(c.scores, [c.rows, c.n], { backend: be });
        const m = fon.tensor(logMass ? c.mass.map((x) => Math.log(x) + 3) : c.mass, [c.rows, c.n], { backend: be });
        const y = wrap(be, webgpuSelectOpen(be, ref(s) as GpuRef, ref(m) as GpuRef, { rows: c.rows, n: c.n, ...c.rule, logMass }, { wg }), [c.rows, c.n], 'i32');
        // Log-masses against the default size's flags (a boundary within f32 rounding of p·total may
        // differ from the CPU's f64 sums with these dyadic masses), plain masses against the CPU.
        const want = logMass ? run(be, c, true) : run(cpu, c);
        const got = Array.from((await y.data()) as Int32Array), wanted = Array.from((await want.data()) as Int32Array);
        // Another size sums the f32 masses in another order: a boundary within rounding may move by one.
        if (logMass && got.join() !== wanted.join()) assert.ok(withinRounding(c, got), `wg ${wg}, ${c.rows} × ${c.n}, ${JSON.stringify(c.rule)}: beyond rounding at the boundary`);
        else assert.deepEqual(got, wanted, `wg ${wg}, ${c.rows} × ${c.n}, ${JSON.stringify(c.rule)}, log-masses ${logMass}`);
      }
    }
  }
  const s = fon.zeros([1, 8], { backend: be });
  for (const wg of [96, 2 * be.caps.maxInvocations]) {
    assert.throws(() => webgpuSelectOpen(be, ref(s) as GpuRef, ref(s) as GpuRef, { rows: 1, n: 8, valid: 8, low: 0, high: 8, count: 2, p: 0 }, { wg }),
      (e) => e instanceof UnsupportedError && e.message.startsWith(`webgpu: selectOpen with ${wg} invocations a workgroup needs a power of two from 32 to ${be.caps.maxInvocations}`));
  }
});

/** Random index queries, weights and keys for indexBlockScores. */
function indexInputs(be: Backend, b: number, n: number, heads: number, d: number, tmax: number, keyDtype: 'f32' | 'f16') {
  const up = (shape: number[], seed: number, dtype: 'f32' | 'f16' = 'f32') => fon.cast(fon.tensor(fon.randn(shape, { seed }).dataSync(), shape, { backend: be }), dtype);
  return { q: up([b, n, heads, d], 1), w: up([b, n, heads], 2), keys: up([b, tmax, d], 3, keyDtype) };
}

test('indexBlockScores on the CPU: per block the max of Σ_h w_h·ReLU(scale·q_h·k) over the keys a query sees and the log of Σ e^score, against plain loops', () => {
  const [b, n, heads, d, tmax, l, pos] = [2, 3, 2, 8, 50, 45, 40];
  const { q, w, keys } = indexInputs(cpu, b, n, heads, d, tmax, 'f32');
  const { max, logMass } = indexBlockScores(q, w, keys, { l, pos, block: 16, scale: 0.3 });
  assert.deepEqual(max.shape, [b, n, 3]);
  const Q = q.dataSync() as Float32Array, W = w.dataSync() as Float32Array, K = keys.dataSync() as Float32Array;
  const M = max.dataSync() as Float32Array, LM = logMass.dataSync() as Float32Array;
  for (let bb = 0; bb < b; bb++) for (let i = 0; i < n; i++) {
    const s = Array.from({ length: Math.min(l, pos + i + 1) }, (_, t) => {
      let sc = 0;
      for (let h = 0; h < heads; h++) {
        let dot = 0;
        for (let e = 0; e < d; e++) dot += Q[((bb * n + i) * heads + h) * d + e] * K[(bb * tmax + t) * d + e];
        sc += W[(bb * n + i) * heads + h] * Math.max(0, 0.3 * dot);
      }
      return sc;
    });
    for (let j = 0; j < 3; j++) {
      const part = s.slice(16 * j, 16 * j + 16), at = (bb * n + i) * 3 + j;
      if (part.length === 0) { assert.equal(M[at], Math.fround(-1e30)); assert.equal(LM[at], Math.fround(-1e30)); continue; }
      const m = Math.max(...part);
      assert.ok(Math.abs(M[at] - m) < 1e-5, `max (${bb}, ${i}, ${j})`);
      assert.ok(Math.abs(LM[at] - (m + Math.log(part.reduce((a, x) => a + Math.exp(x - m), 0)))) < 1e-5, `log mass (${bb}, ${i}, ${j})`);
    }
  }
  assert.throws(() => indexBlockScores(q, w, keys, { l: 51, pos, block: 16, scale: 1 }), /l 51 must be in \[1, 50\]/);
});

test('WebGPU indexBlockScores equals the CPU: f32 and f16 keys (16-byte loads where d is a multiple of 8, scalar ones else), a cache longer than the keys read, several query rows, more than one workgroup of keys [webgpu]', { skip: webgpuSkipReason() }, async () => {
  for (const [keyDtype, d] of [['f32', 32], ['f16', 32], ['f16', 36]] as const) {
    const [b, n, heads, tmax, l, pos] = [2, 3, 4, 700, 613, 600];
    const c = indexInputs(cpu, b, n, heads, d, tmax, keyDtype), g = indexInputs(gpu!, b, n, heads, d, tmax, keyDtype);
    const rc = indexBlockScores(c.q, c.w, c.keys, { l, pos, block: 16, scale: 0.2 }), rg = indexBlockScores(g.q, g.w, g.keys, { l, pos, block: 16, scale: 0.2 });
    for (const key of ['max', 'logMass'] as const) {
      const x = (await rg[key].data()) as Float32Array, y = rc[key].dataSync() as Float32Array;
      let worst = 0;
      for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]) / Math.max(1, Math.abs(y[i])));
      assert.ok(worst < 1e-5, `${keyDtype} keys, ${key}: worst relative error ${worst}`);
    }
  }
});

test('indexBlockScores over INT4 keys (codes and scales, scored as stored) equals it over the values they stand for, on the CPU and on WebGPU (the INT4 form reading codes where subgroups allow), a cache longer than the keys read, several query rows; bad codes refused by name [webgpu where present]', async () => {
  const [b, n, heads, d, tmax, l, pos] = [2, 3, 4, 64, 700, 613, 600];
  const rnd = (shape: number[], seed: number) => fon.tensor(fon.randn(shape, { seed }).dataSync(), shape);
  const [q, w, x] = [rnd([b, n, heads, d], 1), rnd([b, n, heads], 2), rnd([b, tmax, d], 3)];
  const { codes, scales } = quantizeInt4(x);
  const values = dequantizeInt4(codes, scales, 'f32');
  const o = { l, pos, block: 16, scale: 0.2 };
  const want = indexBlockScores(q, w, values, o), cpuInt4 = indexBlockScores(q, w, codes, o, scales);
  const check = (x: Float32Array, y: Float32Array, what: string) => {
    let worst = 0;
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]) / Math.max(1, Math.abs(y[i])));
    assert.ok(worst < 1e-5, `${what}: worst relative error ${worst}`);
  };
  for (const key of ['max', 'logMass'] as const) check(cpuInt4[key].dataSync() as Float32Array, want[key].dataSync() as Float32Array, `cpu INT4, ${key}`);
  assert.throws(() => indexBlockScores(q, w, values, o, scales), (e: Error) => e instanceof DTypeError && /indexBlockScores: keys \(INT4 codes\)/.test(e.message));
  assert.throws(() => indexBlockScores(q, w, narrow(codes, 2, 0, 4), o, scales), (e: Error) => e instanceof ShapeError && /INT4 codes \[2, 700, 4\] and scales \[2, 700, 2\]/.test(e.message));
  if (!gpu) return;
  const on = (t: Tensor) => fon.tensor(t.dataSync(), t.shape, { backend: gpu, dtype: t.dtype });
  const seen: string[] = [];
  const rt = (gpu as WebGpuBackend).rt, run = rt.run.bind(rt);
  rt.run = (dd) => { seen.push(`${dd.kernel.name}${dd.variant.INT4 ? ' int4' : ''}`); run(dd); };
  let got;
  try { got = indexBlockScores(on(q), on(w), on(codes), o, on(scales)); } finally { rt.run = run; }
  const caps = (gpu as WebGpuBackend).caps;
  assert.deepEqual(seen, caps.subgroups && caps.subgroupMinSize >= 2 ? ['index_scores int4'] : ['int4', 'index_scores'], 'the codes read as stored where subgroups allow');
  for (const key of ['max', 'logMass'] as const) check((await got[key].data()) as Float32Array, want[key].dataSync() as Float32Array, `webgpu INT4, ${key}`);
});

test('WebGPU indexBlockScores with several lanes a key (IndexScoreTune.lanes: partial dots summed across a subgroup) equals the CPU: f16 keys, 2 and 4 lanes, each with its words loaded ahead (prefetch) and not, a cache longer than the keys read [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const caps = (gpu as WebGpuBackend).caps;
  let ran = 0;
  for (const [lanes, d, prefetch] of [[2, 32, false], [4, 32, false], [4, 64, false], [2, 32, true], [4, 64, true], [2, 128, true]] as const) {
    if (!caps.subgroups || caps.subgroupMinSize < lanes) continue;
    const [b, n, heads, tmax, l, pos] = [2, 3, 4, 700, 613, 600];
    const c = indexInputs(cpu, b, n, heads, d, tmax, 'f16'), g = indexInputs(gpu!, b, n, heads, d, tmax, 'f16');
    const rc = indexBlockScores(c.q, c.w, c.keys, { l, pos, block: 16, scale: 0.2 });
    const be = gpu as WebGpuBackend, nb = Math.ceil(l / 16);
    const [mx, lm] = webgpuIndexBlockScores(be, ref(g.q) as GpuRef, ref(g.w) as GpuRef, ref(g.keys) as GpuRef, { batch: b, n, heads, d, l, tmax, pos, block: 16, scale: 0.2 }, { lanes, prefetch });
    const got = { max: (await wrap(be, mx, [b, n, nb], 'f32').data()) as Float32Array, logMass: (await wrap(be, lm, [b, n, nb], 'f32').data()) as Float32Array };
    for (const key of ['max', 'logMass'] as const) {
      const x = got[key], y = rc[key].dataSync() as Float32Array;
      let worst = 0;
      for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]) / Math.max(1, Math.abs(y[i])));
      assert.ok(worst < 1e-5, `${lanes} lanes${prefetch ? ', prefetch' : ''}, d ${d}, ${key}: worst relative error ${worst}`);
    }
    ran++;
  }
  assert.ok(ran > 0 || !caps.subgroups || caps.subgroupMinSize < 2, 'the several-lane form ran');
});

test('flagsMaskTable writes the table spotDecodeMask builds on the host: the same entries (whole and partial) and segment ids, in the device layout; WebGPU equals the CPU [webgpu where present]', async () => {
  const rnd = lcg(23);
  // The last two write their tables over several workgroups an entry (slices of 4096 tokens, chunks of WG list entries).
  for (const [batch, tk, l] of [[2, 420, 397], [1, 1000, 1000], [3, 700, 650], [2, 20000, 19990], [1, 9000, 8193]]) {
    const valid = Math.floor((l - 1) / 16) + 1, kBlocks = Math.ceil(tk / 64);
    const flags = Int32Array.from({ length: batch * valid }, (_, i) => (i % valid === valid - 1 || rnd() < 0.55 ? 1 : 0));
    const picks = Array.from({ length: batch }, (_, b) => Array.from(flags.subarray(b * valid, (b + 1) * valid)).flatMap((f, e) => (f ? [e] : [])));
    const host = spotDecodeMask(picks, l, tk);
    const t = flagsMaskTable(fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: cpu }), { fine: 16, per: 4, tk, kBlocks, kvLength: l });
    const table = t.dataSync() as Int32Array;
    const shape = deviceMaskShape({ batch, heads: 1, tq: 1, tk, kvLength: l, qOffset: l - 1, causal: true, window: 0 }, Math.ceil(valid / 4) + 1, { segments: true });
    assert.equal(table.length, shape.segmentOffset + batch * tk + 0);
    for (let b = 0; b < batch; b++) {
      const at = table[b];
      assert.deepEqual(Array.from(table.subarray(at + 1, at + 1 + table[at])), Array.from(maskEntries(host, b, 0, 0)), `batch ${b} of ${batch}: entries`);
      assert.equal(table[shape.byKeyOffset + b * kBlocks], batch + batch * kBlocks, 'the by-key rows point at the empty list');
    }
    assert.equal(table[batch + batch * kBlocks], 0);
    assert.deepEqual(Array.from(table.subarray(shape.segmentOffset)), Array.from(host.table.subarray(host.segmentOffset, host.segmentOffset + batch * tk)), 'segment ids');
    if (gpu) {
      const g = flagsMaskTable(fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: gpu }), { fine: 16, per: 4, tk, kBlocks, kvLength: l });
      assert.deepEqual(Array.from((await g.data()) as Int32Array), Array.from(table), `webgpu ${batch} × ${tk}`);
      // The fine form decoding uses (one listed block per selected 16-token block).
      const fine = { fine: 16, per: 1, tk, kBlocks: Math.ceil(tk / 16), kvLength: l };
      const gf = flagsMaskTable(fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: gpu }), fine);
      const cf = flagsMaskTable(fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: cpu }), fine);
      assert.deepEqual(Array.from((await gf.data()) as Int32Array), Array.from(cf.dataSync() as Int32Array), `webgpu fine ${batch} × ${tk}`);
    }
    // Without segment ids: the same table, cut before them.
    for (const be of gpu ? [cpu, gpu] : [cpu]) {
      const bare = flagsMaskTable(fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: be }), { fine: 16, per: 4, tk, kBlocks, kvLength: l, segments: false });
      assert.deepEqual(Array.from((await bare.data()) as Int32Array), Array.from(table.subarray(0, shape.segmentOffset)), `${be.name}: no segment ids, ${batch} × ${tk}`);
    }
  }
});

test('selectBlockList: the flags selectOpen keeps and, from the same pass, their fine mask table (flagsMaskTable with one fine block a mask block, no segment ids), or the table alone (flags false); WebGPU equals the CPU: rows longer than a workgroup, ties, top-K and top-p, a query inside its block [webgpu where present]', async () => {
  const rnd = lcg(29);
  let checked = 0;
  for (const [batch, l, tk, p] of [[1, 397, 420, 0], [2, 1000, 1000, 0], [3, 650, 700, 0.9], [1, 19990, 20000, 0], [2, 8193, 9000, 0.5], [1, 16, 16, 0], [2, 33, 64, 1]]) {
    const valid = Math.floor((l - 1) / 16) + 1, n = valid + 3; // rows longer than the causal blocks
    const low = Math.min(valid, 8), high = Math.max(low, valid - 16);
    const rule = { valid, low, high, count: Math.floor((high - low) * rnd()), p, logMass: true };
    const scores = Float32Array.from({ length: batch * n }, () => Math.round((rnd() - 0.3) * 40) / 4);
    const mass = Float32Array.from({ length: batch * n }, () => Math.log(0.01 + rnd()));
    const on = (be: Backend) => selectBlockList(fon.tensor(scores, [batch, n], { backend: be }), fon.tensor(mass, [batch, n], { backend: be }), rule, { fine: 16, tk, kvLength: l });
    const want = on(cpu);
    const flags = want.flags!.dataSync() as Int32Array;
    assert.deepEqual(Array.from(flags), Array.from(selectOpen(fon.tensor(scores, [batch, n]), fon.tensor(mass, [batch, n]), rule).dataSync() as Int32Array), 'the flags are selectOpen\'s');
    const rows = Int32Array.from({ length: batch * valid }, (_, i) => flags[Math.floor(i / valid) * n + (i % valid)]);
    const table = want.table.dataSync() as Int32Array;
    const ref = flagsMaskTable(fon.tensor(rows, [batch, valid], { dtype: 'i32' }), { fine: 16, per: 1, tk, kBlocks: Math.ceil(tk / 16), kvLength: l, segments: false }).dataSync() as Int32Array;
    assert.deepEqual(Array.from(table), Array.from(ref), `the table is flagsMaskTable's, ${batch} × ${l}`);
    // The list of each row names its kept blocks in order, the query's own (partial where l is not a multiple of 16) last.
    const shape = deviceMaskShape({ batch, heads: 1, tq: 1, tk, kvLength: l, qOffset: l - 1, causal: true, window: 0, kBlock: 16 }, valid + 1);
    for (let b = 0; b < batch; b++) {
      const at = table[b], kept = Array.from(rows.subarray(b * valid, (b + 1) * valid)).flatMap((f, e) => (f ? [e] : []));
      assert.equal(at, shape.byKeyOffset + batch * shape.kBlocks + 1 + b * (valid + 1));
      assert.deepEqual(Array.from(table.subarray(at + 1, at + 1 + table[at])), kept.map((e) => 2 * e + (Math.min(16 * (e + 1), tk) > l ? 1 : 0)));
    }
    if (gpu) {
      const got = on(gpu);
      assert.deepEqual(Array.from((await got.flags!.data()) as Int32Array), Array.from(flags), `webgpu flags, ${batch} × ${l}, p ${p}`);
      assert.deepEqual(Array.from((await got.table.data()) as Int32Array), Array.from(table), `webgpu table, ${batch} × ${l}, p ${p}`);
      // Without its flags (a decoding step's form: NOFLAGS on webgpu) the table is the same, and no flags come back.
      const bare = selectBlockList(fon.tensor(scores, [batch, n], { backend: gpu }), fon.tensor(mass, [batch, n], { backend: gpu }), rule, { fine: 16, tk, kvLength: l, flags: false });
      assert.equal(bare.flags, undefined);
      assert.deepEqual(Array.from((await bare.table.data()) as Int32Array), Array.from(table), `webgpu table without flags, ${batch} × ${l}, p ${p}`);
    }
    checked++;
  }
  assert.equal(checked, 7);
  assert.throws(() => selectBlockList(fon.zeros([1, 30]), fon.zeros([1, 30]), { valid: 25, low: 8, high: 9, count: 1, p: 0 }, { fine: 16, tk: 200, kvLength: 390 }),
    (e) => e instanceof ArgumentError && e.message.startsWith('selectBlockList: 25 blocks of 16 keys for a query at 389 over a cache of 200'));
});

/** The rows gatherListed gives, by plain loops over each batch entry's picked blocks: (B, Hkv, count·fine, D), rows past Tmax from its last row, zero rows past the picks. */
function gatheredRows(src: Float32Array, picks: number[][], hkv: number, tmax: number, d: number, fine: number, count: number): Float32Array {
  const out = new Float32Array(picks.length * hkv * count * fine * d);
  for (let b = 0; b < picks.length; b++) for (let h = 0; h < hkv; h++) {
    picks[b].slice(0, count).forEach((e, o) => {
      for (let r = 0; r < fine; r++) {
        const s = Math.min(e * fine + r, tmax - 1);
        for (let c = 0; c < d; c++) out[(((b * hkv + h) * count + o) * fine + r) * d + c] = src[((b * hkv + h) * tmax + s) * d + c];
      }
    });
  }
  return out;
}

test('gatherListed over a flagsMaskTable\'s lists: each batch entry\'s selected blocks\' K and V rows in block order, blocks of 4, 8 and 16 keys, rows past Tmax from its last row, past the count dropped, zero rows where fewer are selected; WebGPU equals the CPU for f32, f16 and bf16 [webgpu where present]', async () => {
  const rnd = lcg(41);
  // [batch, hkv, tmax, d, fine, valid, count]: 150 blocks take three slices of the kernel's 64; the
  // first case's last block runs past Tmax (rows clamped); counts below and above what is selected.
  const cases: [number, number, number, number, number, number, number | 'all'][] = [[2, 2, 39, 8, 4, 10, 'all'], [1, 3, 2400, 6, 16, 150, 'all'], [3, 1, 100, 4, 8, 13, 3], [2, 2, 64, 8, 4, 16, 15]];
  for (const [batch, hkv, tmax, d, fine, valid, countArg] of cases) {
    const flags = Int32Array.from({ length: batch * valid }, (_, i) => (i % valid === valid - 1 || rnd() < 0.4 ? 1 : 0));
    const picks = Array.from({ length: batch }, (_, b) => Array.from(flags.subarray(b * valid, (b + 1) * valid)).flatMap((f, e) => (f ? [e] : [])));
    const count = countArg === 'all' ? Math.max(...picks.map((p) => p.length)) : countArg;
    const kh = Float32Array.from({ length: batch * hkv * tmax * d }, () => Math.round((rnd() * 2 - 1) * 256) / 64);
    const vh = Float32Array.from({ length: batch * hkv * tmax * d }, () => Math.round((rnd() * 2 - 1) * 256) / 64);
    // The reference: plain loops over the picks.
    const want = (src: Float32Array) => gatheredRows(src, picks, hkv, tmax, d, fine, count);
    const shape = [batch, hkv, tmax, d];
    for (const be of [cpu, gpu].filter((x): x is Backend => !!x)) {
      for (const dtype of ['f32', 'f16', 'bf16'] as const) {
        const f = fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: be });
        const k = fon.cast(fon.tensor(kh, shape, { backend: be }), dtype), v = fon.cast(fon.tensor(vh, shape, { backend: be }), dtype);
        // Park two dirty buffers of the outputs' size first: the zero rows must be written, not found.
        for (let i = 0; i < 2; i++) fon.full([batch * hkv * count * fine * d], 7, { backend: be, dtype }).dispose();
        const table = flagsMaskTable(f, { fine, per: 1, tk: tmax, kBlocks: valid, kvLength: tmax, segments: false });
        const got = gatherListed(table, k, v, { fine, count });
        assert.deepEqual(got.k.shape, [batch, hkv, count * fine, d]);
        assert.equal(got.k.dtype, dtype);
        // The values are exact in every dtype (multiples of 1/64 below 4).
        assert.deepEqual(Array.from((await fon.cast(got.k, 'f32').data()) as Float32Array), Array.from(want(kh)), `${be.name} ${dtype} K, ${JSON.stringify([batch, hkv, tmax, d, fine, valid, count])}`);
        assert.deepEqual(Array.from((await fon.cast(got.v, 'f32').data()) as Float32Array), Array.from(want(vh)), `${be.name} ${dtype} V`);
      }
    }
  }
});

test('gatherListed: the blocks a selectBlockList table lists, against plain loops (rows past Tmax from its last row, past the count dropped, zero rows where fewer are listed); WebGPU equals the CPU for f32, f16 and bf16, rows of 16-byte groups and of words; refused by name [webgpu where present]', async () => {
  const rnd = lcg(43);
  // [batch, hkv, tmax, d, dtype, count]: 16-key blocks; the last block of 1000 keys is partial; counts below, at and above what is listed;
  // f16 rows of 6 (12 bytes: copied a word at a time, not 16 bytes).
  const cases: [number, number, number, number, 'f32' | 'f16' | 'bf16', number | 'all' | 'more'][] = [[2, 2, 1000, 8, 'f16', 'all'], [1, 3, 400, 4, 'f32', 5], [3, 1, 260, 8, 'bf16', 'more'], [1, 8, 2048, 128, 'f16', 'all'], [2, 2, 300, 6, 'f16', 'all']];
  for (const [batch, hkv, tmax, d, dtype, countArg] of cases) {
    const valid = Math.ceil(tmax / 16);
    const flags = Int32Array.from({ length: batch * valid }, (_, i) => (i % valid === valid - 1 || rnd() < 0.3 ? 1 : 0));
    const most = Math.max(...Array.from({ length: batch }, (_, b) => flags.subarray(b * valid, (b + 1) * valid).reduce((a, x) => a + x, 0)));
    const count = countArg === 'all' ? most : countArg === 'more' ? Math.min(valid, most + 3) : countArg;
    const picks = Array.from({ length: batch }, (_, b) => Array.from(flags.subarray(b * valid, (b + 1) * valid)).flatMap((f, e) => (f ? [e] : [])));
    const kv = (seed: number) => fon.randn([batch, hkv, tmax, d], { seed });
    for (const be of gpu ? [cpu, gpu] : [cpu]) {
      const on = (x: Tensor) => fon.cast(fon.tensor(x.dataSync(), x.shape, { backend: be }), dtype);
      const k = on(kv(1)), v = on(kv(2));
      const f = fon.tensor(flags, [batch, valid], { dtype: 'i32', backend: be });
      const table = flagsMaskTable(f, { fine: 16, per: 1, tk: tmax, kBlocks: valid, kvLength: tmax, segments: false });
      const got = gatherListed(table, k, v, { fine: 16, count });
      assert.deepEqual(got.k.shape, [batch, hkv, count * 16, d]);
      for (const [x, src] of [[got.k, k], [got.v, v]]) {
        // The reference gathers the stored values (k and v in `dtype`, read back as f32): the copy is exact.
        const want = gatheredRows((await fon.cast(src, 'f32').data()) as Float32Array, picks, hkv, tmax, d, 16, count);
        assert.deepEqual(Array.from((await fon.cast(x, 'f32').data()) as Float32Array), Array.from(want), `${be.name} ${batch}×${hkv}×${tmax}×${d} ${dtype}, count ${count}`);
      }
    }
  }
  const t = fon.tensor(Int32Array.of(3, 0, 0, 0), [4], { dtype: 'i32' });
  assert.throws(() => gatherListed(t, fon.zeros([1, 1, 32, 4]), fon.zeros([1, 1, 32, 4]), { fine: 16, count: 3 }), (e) => e instanceof ArgumentError && e.message.startsWith('gatherListed: count 3 of blocks of 16 keys over a cache of 32'));
  if (gpu) {
    const g = (shape: number[]) => fon.zeros(shape, { backend: gpu, dtype: 'f16' });
    assert.throws(() => gatherListed(fon.tensor(Int32Array.of(3, 0, 0, 0), [4], { dtype: 'i32', backend: gpu }), g([1, 1, 32, 5]), g([1, 1, 32, 5]), { fine: 16, count: 1 }),
      (e) => e instanceof UnsupportedError && e.message.startsWith('webgpu: gatherListed copies rows as 32-bit words'));
  }
});

test('gatherListed refuses by name: shapes that do not agree and a count past the blocks [webgpu where present]', () => {
  const t = fon.tensor(Int32Array.of(3, 0, 0, 0), [4], { dtype: 'i32', backend: cpu });
  const k = fon.zeros([1, 2, 12, 4], { backend: cpu });
  assert.throws(() => gatherListed(t, k, fon.zeros([1, 2, 12, 5], { backend: cpu }), { fine: 4, count: 2 }), (e: unknown) => e instanceof ShapeError && /expected a flat table and two \(B, Hkv, Tmax, D\) of one dtype/.test((e as Error).message));
  assert.throws(() => gatherListed(fon.reshape(t, [2, 2]), k, k, { fine: 4, count: 2 }), (e: unknown) => e instanceof ShapeError && /gatherListed: table \[2, 2\]/.test((e as Error).message));
  assert.throws(() => gatherListed(t, k, k, { fine: 4, count: 4 }), (e: unknown) => e instanceof ArgumentError && /gatherListed: count 4 of blocks of 4 keys over a cache of 12: need fine ≥ 1 and 1 ≤ count ≤ ⌈Tmax\/fine⌉/.test((e as Error).message));
});