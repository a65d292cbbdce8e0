/**
 * The logsumexp merge (ops/attention_merge.ts, Backend.mergeLse): parts over disjoint keys merge
 * into attention over the union of their keys (against one softmax over all keys); a part's row
 * list reads it in place, as gathering first would; the fused pass equals the recorded
 * elementwise form (the one gradients take); a row no part saw is NaN, one only a part saw is
 * that part's; webgpu (SwiftShader in CI) equals the CPU in f32 and f16; bad shapes are refused.
 * Run: FON_REQUIRE_WEBGPU=1 node --import tsx --test test/ops/attention_merge.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';
import { mergeByLse, type MergePartInput } from '../../src/ops/attention_merge.ts';
import { attentionWithLse } from '../../src/ops/attention.ts';
import { hostToF32 } from '../../src/tensor/dtype.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const vals = async (t: Tensor) => Array.from(hostToF32(await t.data(), t.dtype));
function close(a: number[], b: number[], tol: number, what: string): void {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(b[i])) { assert.ok(Number.isNaN(a[i]), `${what}[${i}]: got ${a[i]}, want NaN`); continue; }
    assert.ok(Math.abs(a[i] - b[i]) <= tol * Math.max(1, Math.abs(b[i])), `${what}[${i}]: got ${a[i]}, want ${b[i]}`);
  }
}

/**
 * B 2, H 3, T 9 queries, D 5; keys split three ways (a row list for the first, in a shuffled
 * layout of 11 rows; the others plain): each part attends non-causally to its own keys, so the
 * merge must equal attention over all 3·6 keys at once. Query row 4 of batch entry 1 sees no key
 * in part 0 (−∞, its out 0) and its rows of part 2 hold NaN with lse −∞: its result is part 1's.
 */
function fixture(b: Backend, dtype: 'f32' | 'f16') {
  const B = 2, H = 3, T = 9, D = 5, S = 6;
  const q = fon.randn([B, H, T, D], { seed: 1, backend: b });
  const ks = [2, 3, 4].map((s) => fon.randn([B, H, S, D], { seed: s, backend: b }));
  const vs = [5, 6, 7].map((s) => fon.randn([B, H, S, D], { seed: s, backend: b }));
  const parts = ks.map((k, i) => attentionWithLse(q, k, vs[i], { causal: false }));
  // Part 0 laid out in 11 rows: query t of entry bb sits at row perm[bb][t]; the other rows are junk.
  const perm = [[3, 0, 10, 7, 1, 5, 9, 2, 6], [8, 2, 4, 0, 6, 10, 1, 9, 3]];
  const inv = Array.from({ length: B * H * 11 }, (_, r) => { const o = Math.floor(r / 11), row = r % 11, t = perm[Math.floor(o / H)].indexOf(row); return t < 0 ? -1 : o * T + t; });
  const pick = async (x: Tensor, w: number, junk: number) => {
    const v = await vals(x);
    return Float32Array.from({ length: B * H * 11 * w }, (_, e) => { const src = inv[Math.floor(e / w)]; return src < 0 ? junk : v[src * w + (e % w)]; });
  };
  return { B, H, T, D, q, ks, vs, parts, perm, pick, dtype };
}

async function mergeCase(b: Backend, dtype: 'f32' | 'f16') {
  const f = fixture(b, dtype);
  const [o0, l0] = f.parts[0];
  const outA = fon.tensor(await f.pick(o0, f.D, 1e4), [f.B, f.H, 11, f.D], { backend: b });
  const lseA = await f.pick(l0, 1, -Infinity);
  // Entry 1, every head, query 4: part 0 saw nothing there.
  for (let h = 0; h < f.H; h++) lseA[(1 * f.H + h) * 11 + f.perm[1][4]] = -Infinity;
  const rows = fon.tensor(Int32Array.from(f.perm.flat()), [f.B, f.T], { dtype: 'i32', backend: b });
  const [o2, l2] = f.parts[2];
  const l2v = await vals(l2), o2v = await vals(o2);
  for (let h = 0; h < f.H; h++) { l2v[(1 * f.H + h) * f.T + 4] = -Infinity; for (let c = 0; c < f.D; c++) o2v[((1 * f.H + h) * f.T + 4) * f.D + c] = NaN; }
  const cast = (x: Tensor) => (dtype === 'f32' ? x : fon.cast(x, dtype));
  const parts: MergePartInput[] = [
    [cast(outA), fon.tensor(lseA, [f.B, f.H, 11], { backend: b }), rows],
    [cast(f.parts[1][0]), f.parts[1][1]],
    [cast(fon.tensor(o2v, o2.shape, { backend: b })), fon.tensor(l2v, l2.shape, { backend: b })],
  ];
  return { f, parts };
}

test('mergeByLse: three parts (one read through its row list) equal one softmax over all their keys; a row only one part saw is that part\'s; fused equals the recorded form', async () => {
  const { f, parts } = await mergeCase(cpu, 'f32');
  const got = await vals(mergeByLse(parts, 'f32'));
  const all = await vals(fon.attention(f.q, fon.concat(f.ks, 2), fon.concat(f.vs, 2), { causal: false }));
  const only1 = await vals(f.parts[1][0]);
  const want = all.map((x, e) => { const row = Math.floor(e / f.D), o = Math.floor(row / f.T), t = row % f.T; return Math.floor(o / f.H) === 1 && t === 4 ? only1[e] : x; });
  // Entry 1's query 4 saw part 1's keys alone: its result is part 1's row exactly; every other row, all 18 keys.
  close(got, want, 1e-5, 'merged against attention over every key');
  // The recorded form (what gradients take) gives the same.
  const withGrad = parts.map((p) => { const o = fon.tensor(p[0].dataSync(), p[0].shape, { requiresGrad: true }); return (p.length === 3 ? [o, p[1], p[2]] : [o, p[1]]) as MergePartInput; });
  const rec = mergeByLse(withGrad, 'f32');
  assert.ok(rec.requiresGrad, 'the recorded form records');
  close(await vals(rec), got, 1e-6, 'recorded against fused');
  fon.backward(fon.sum(rec));
  assert.ok(withGrad[0][0].grad && withGrad[1][0].grad, 'gradients reach every part');
  // A row no part saw is NaN (no softmax over nothing), lse −∞ inside a chained merge.
  const none = mergeByLse([[f.parts[1][0], fon.full(f.parts[1][1].shape, -Infinity)], [f.parts[2][0], fon.full(f.parts[2][1].shape, -Infinity)]], 'f32');
  assert.ok((await vals(none)).every(Number.isNaN));
});

test('mergeByLse refuses parts of mismatched shapes, naming them', () => {
  const o = fon.zeros([1, 2, 4, 3]), l = fon.zeros([1, 2, 4]);
  assert.throws(() => mergeByLse([[o, l], [fon.zeros([1, 2, 4, 5]), l]], 'f32'), /mergeByLse: part 1's out \[1, 2, 4, 5\] must be \(1, 2, N, 3\)/);
  assert.throws(() => mergeByLse([[o, fon.zeros([1, 2, 3])]], 'f32'), /mergeByLse: part 0's lse \[1, 2, 3\] must be \(1, 2, 4\)/);
  assert.throws(() => mergeByLse([[o, l], [o, l, fon.zeros([3, 4], { dtype: 'i32' })]], 'f32'), /mergeByLse: part 1's rows \[3, 4\] must be \(S, M\) with S dividing 1 × 2/);
  assert.throws(() => mergeByLse([[o, l], [o, l, fon.zeros([1, 5], { dtype: 'i32' })]], 'f32'), /mergeByLse: part 1 gives 5 rows; part 0 gives 4/);
  assert.throws(() => mergeByLse([], 'f32'), /mergeByLse: no parts to merge/);
});

test('mergeByLse on webgpu equals the CPU: row lists, chained parts, a row one part saw, f32 and f16 [webgpu]', { skip }, async () => {
  for (const dtype of ['f32', 'f16'] as const) {
    const c = await mergeCase(cpu, dtype), g = await mergeCase(gpu!, dtype);
    const want = await vals(mergeByLse(c.parts, dtype));
    const got = mergeByLse(g.parts, dtype);
    assert.equal(got.dtype, dtype);
    close(await vals(got), want, dtype === 'f32' ? 1e-5 : 2e-3, `${dtype} merge`);
  }
});
