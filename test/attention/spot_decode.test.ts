/**
 * SpotAttention's sparse decode (attention/spot/decode_mask.ts): a step that reads the selected
 * 16-token blocks equals dense attention over exactly those keys (a masked dense reference, GQA,
 * batch 2 with different selections, a cache longer than its valid rows); selecting every block
 * equals dense decoding; the mask lists only the key blocks holding a selected block; a selection
 * that skips the query's own block or is out of order is refused. On webgpu (SwiftShader in CI)
 * the split-K decode kernel gives the CPU's result.
 * Run: FON_REQUIRE_WEBGPU=1 node --import tsx --test test/attention/spot_decode.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';
import { MASK_K_FINE, maskArgs, maskEntries } from '../../src/attention/block_mask.ts';
import { deviceMaskShape } from '../../src/attention/device_mask.ts';
import { flagsMaskTable } from '../../src/ops/select.ts';
import { spotDecodeMask } from '../../src/attention/spot/decode_mask.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { attentionDecode, lanesForm } from '../../src/backend/webgpu/kernels/attention_decode.ts';
import type { GpuRef, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import { UnsupportedError } from '../../src/errors.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();
const skip = webgpuSkipReason();

const [B, H, HKV, TK, D, L] = [2, 4, 2, 420, 8, 397]; // 25 selector blocks (the last partial), 7 mask blocks
const SELECTED = [[0, 1, 5, 6, 7, 20, 24], [2, 9, 10, 11, 12, 13, 14, 15, 16, 24]];
const vals = async (t: Tensor) => Array.from((await t.data()) as Float32Array);

function inputs(be: Backend, d = D, tk = TK) {
  const x = (shape: number[], seed: number) => fon.tensor(fon.randn(shape, { seed }).dataSync(), shape, { backend: be });
  return { q: x([B, H, 1, d], 1), k: x([B, HKV, tk, d], 2), v: x([B, HKV, tk, d], 3) };
}

/** Dense attention of each batch entry's query over the keys of its selected blocks only (heads and kv heads from the tensors' shapes). */
async function reference(q: Tensor, k: Tensor, v: Tensor, selected: number[][], l = L): Promise<number[]> {
  const Q = await vals(q), K = await vals(k), V = await vals(v);
  const [nb, h, , d] = q.shape, hkv = k.shape[1], tk = k.shape[2];
  const out: number[] = [];
  for (let b = 0; b < nb; b++) for (let hh = 0; hh < h; hh++) {
    const kv = Math.floor(hh / (h / hkv));
    const keys = Array.from({ length: l }, (_, j) => j).filter((j) => selected[b].includes(Math.floor(j / 16)));
    const s = keys.map((j) => { let a = 0; for (let e = 0; e < d; e++) a += Q[(b * h + hh) * d + e] * K[((b * hkv + kv) * tk + j) * d + e]; return a / Math.sqrt(d); });
    const mx = Math.max(...s), z = s.reduce((a, x) => a + Math.exp(x - mx), 0);
    for (let e = 0; e < d; e++) out.push(keys.reduce((a, j, n) => a + (Math.exp(s[n] - mx) / z) * V[((b * hkv + kv) * tk + j) * d + e], 0));
  }
  return out;
}

function close(a: number[], b: number[], tol: number, what: string): void {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol, `${what}[${i}]: ${a[i]} against ${b[i]}`);
}

test('a step over the selected blocks equals attention over exactly their keys; every block selected equals dense decoding; the mask lists only blocks with a selection', async () => {
  const { q, k, v } = inputs(cpu);
  const mask = spotDecodeMask(SELECTED, L, TK);
  // Entry 0 selects blocks 0, 1, 5, 6, 7, 20, 24: key blocks (64 keys) 0, 1, 5, 6; entry 1 (2, 9 … 16, 24) key blocks 0, 2, 3, 4, 6.
  assert.deepEqual(Array.from(maskEntries(mask, 0, 0, 0), (e) => e >> 1), [0, 1, 5, 6]);
  assert.deepEqual(Array.from(maskEntries(mask, 1, 0, 0), (e) => e >> 1), [0, 2, 3, 4, 6]);
  close(await vals(fon.attention(q, k, v, { kvLength: L, mask })), await reference(q, k, v, SELECTED), 1e-5, 'selected');
  const all = Array.from({ length: B }, () => Array.from({ length: 25 }, (_, i) => i));
  close(await vals(fon.attention(q, k, v, { kvLength: L, mask: spotDecodeMask(all, L, TK) })), await vals(fon.attention(q, k, v, { kvLength: L })), 1e-6, 'every block');
  assert.throws(() => spotDecodeMask([[0, 1]], L, TK), /spot: batch entry 0 must select its query's own block 24/);
  assert.throws(() => spotDecodeMask([[3, 1, 24]], L, TK), /spot: batch entry 0 selects block 1; expected ascending blocks in 0 … 24, each once/);
  assert.throws(() => spotDecodeMask([[0, 25]], L, TK), /selects block 25/);
});

test('the sparse decode on webgpu (split-K decode kernel with the mask) equals the CPU, f32 and f16 [webgpu]', { skip }, async () => {
  const mask = spotDecodeMask(SELECTED, L, TK);
  const want = await vals(fon.attention(inputs(cpu).q, inputs(cpu).k, inputs(cpu).v, { kvLength: L, mask }));
  for (const dtype of ['f32', 'f16'] as const) {
    const { q, k, v } = inputs(gpu!);
    const c = (x: Tensor) => (dtype === 'f32' ? x : fon.cast(x, dtype));
    const got = await vals(fon.cast(fon.attention(c(q), c(k), c(v), { kvLength: L, mask }), 'f32'));
    close(got, want, dtype === 'f32' ? 1e-5 : 5e-3, dtype);
  }
});

/** The fine mask (16-key blocks, no segments) the device path builds from the selected blocks' flags, on `be`. */
function fineMask(be: Backend, selected = SELECTED, l = L, tk = TK) {
  const valid = Math.floor((l - 1) / 16) + 1;
  const flags = Int32Array.from({ length: B * valid }, (_, i) => (selected[Math.floor(i / valid)].includes(i % valid) ? 1 : 0));
  const table = flagsMaskTable(fon.tensor(flags, [B, valid], { dtype: 'i32', backend: be }), { fine: 16, per: 1, tk, kBlocks: Math.ceil(tk / 16), kvLength: l });
  const shape = deviceMaskShape({ batch: B, heads: 1, tq: 1, tk, kvLength: l, qOffset: l - 1, causal: true, window: 0, kBlock: MASK_K_FINE }, valid + 1, { segments: true });
  return { ...shape, segmentOffset: 0, device: table };
}

test('a fine mask (a listed block per selected 16-token block, no segment test) equals attention over exactly the selected keys: on the CPU, and on webgpu\'s split-K decode, f32 and f16 [webgpu where present]', async () => {
  const { q, k, v } = inputs(cpu);
  const want = await reference(q, k, v, SELECTED);
  close(await vals(fon.attention(q, k, v, { kvLength: L, mask: fineMask(cpu) })), want, 1e-5, 'cpu, fine');
    if (!gpu) return;
  for (const dtype of ['f32', 'f16'] as const) {
    // The default form (LPRE: the chunk's list preloaded into workgroup memory), and the others: each key
    // reading its entry in global memory (DecodeTune.preloadList false), a step's entries staged (DecodeTune.stageList).
    for (const form of [{}, { LPRE: false }, { LPRE: false, STAGE: true }] as Record<string, boolean>[]) {
      const g = inputs(gpu);
      const c = (x: Tensor) => (dtype === 'f32' ? x : fon.cast(x, dtype));
      const out = withListForm(gpu, form, () => fon.attention(c(g.q), c(g.k), c(g.v), { kvLength: L, mask: fineMask(gpu!) }));
      close(await vals(fon.cast(out, 'f32')), want, dtype === 'f32' ? 1e-5 : 5e-3, `webgpu ${dtype}, fine ${JSON.stringify(form)}`);
    }
  }
});

test('a fine mask whose lists\' lengths the host knows (BlockMask.counts, Spot\'s static top-K) equals attention over exactly the selected keys on webgpu, its decode cut into no more chunks than the longest list has steps [webgpu]', { skip }, async () => {
  // Lists of 3 and 2 blocks (48 keys at most: one step of 128) where the default cut is 2 chunks a kv head.
  const selected = [[0, 5, 24], [3, 24]];
  const { q, k, v } = inputs(cpu);
  const want = await reference(q, k, v, selected);
  const g = inputs(gpu!);
  const rt = (gpu as unknown as { rt: { recordDispatches<T>(fn: () => T): { result: T; dispatches: { kernel: string; workgroups: number[] }[] } } }).rt;
  const grids: number[] = [];
  for (const counts of [undefined, selected.map((x) => x.length)]) {
    const mask = { ...fineMask(gpu!, selected), ...(counts ? { counts } : {}) };
    const { result, dispatches } = rt.recordDispatches(() => fon.attention(g.q, g.k, g.v, { kvLength: L, mask }));
    close(await vals(result), want, 1e-5, `counts ${counts}`);
    grids.push(dispatches.find((d) => d.kernel === 'attention_decode')!.workgroups[0]);
  }
  assert.ok(grids[0] > 1, `the default cut: ${grids[0]} chunks a kv head`);
  assert.equal(grids[1], 1, 'one chunk: the longest list is one step');
});

test('known lists\' lengths past the uniforms\' 64 rows (batch 65) are not used: the decode reads the counts from the table and equals the CPU [webgpu]', { skip }, async () => {
  const b = 65, h = 2, d = 8, tk = 64, l = 60, valid = Math.floor((l - 1) / 16) + 1;
  const rnd = (seed: number, shape: number[]) => fon.randn(shape, { seed });
  const [q, k, v] = [rnd(1, [b, h, 1, d]), rnd(2, [b, 1, tk, d]), rnd(3, [b, 1, tk, d])];
  const flags = Int32Array.from({ length: b * valid }, (_, i) => (i % valid === valid - 1 || (i * 7) % 3 === 0 ? 1 : 0));
  const counts = Array.from({ length: b }, (_, r) => flags.subarray(r * valid, (r + 1) * valid).reduce((x, y) => x + y, 0));
  const mask = (be: Backend) => {
    const table = flagsMaskTable(fon.tensor(flags, [b, valid], { dtype: 'i32', backend: be }), { fine: 16, per: 1, tk, kBlocks: Math.ceil(tk / 16), kvLength: l, segments: false });
    return { ...deviceMaskShape({ batch: b, heads: 1, tq: 1, tk, kvLength: l, qOffset: l - 1, causal: true, window: 0, kBlock: MASK_K_FINE }, valid + 1), device: table, counts };
  };
  assert.equal(maskArgs(mask(cpu)).counts, undefined, 'no known counts in the kernels\' arguments past 64 rows');
  const on = (x: Tensor, be: Backend) => fon.tensor(x.dataSync(), x.shape, { backend: be });
  const want = await vals(fon.attention(q, k, v, { kvLength: l, mask: mask(cpu) }));
  close(await vals(fon.attention(on(q, gpu!), on(k, gpu!), on(v, gpu!), { kvLength: l, mask: mask(gpu!) })), want, 1e-5, 'batch 65');
});

test('the P·V loop by listed block (DecodeTune.blockV, VBLK) equals attention over exactly the selected keys: chunks of several steps, head widths whose key groups divide a block (64: 8 groups, 2 keys a block each; 32: 16 groups, 1); refused where they do not (8) [webgpu]', { skip }, async () => {
  // 75 selector blocks: one batch entry every other block (38), the other 3 … 60 (58) and its own:
  // at 2 chunks a kv head (SwiftShader) a chunk spans 2–4 steps of 8 blocks, so the step's place in
  // the chunk's list (k0 − kstart) is exercised.
  const tk = 1200, l = 1190, own = Math.floor((l - 1) / 16);
  const selected = [[...Array.from({ length: 37 }, (_, i) => 2 * i), own], [...Array.from({ length: 58 }, (_, i) => 3 + i), own]];
  const be = gpu as WebGpuBackend;
  for (const d of [64, 32]) {
    const c = inputs(cpu, d, tk);
    const want = await reference(c.q, c.k, c.v, selected, l);
    for (const dtype of ['f32', 'f16'] as const) {
      const g = inputs(be, d, tk);
      const cast = (x: Tensor) => (dtype === 'f32' ? x : fon.cast(x, dtype));
      const [q, k, v] = [cast(g.q), cast(g.k), cast(g.v)];
      const m = fineMask(be, selected, l, tk);
      const a: AttentionArgs = { batch: B, heads: H, kvHeads: HKV, tq: 1, tk, d, kvLength: l, qOffset: l - 1, causal: true, window: 0, scale: 1 / Math.sqrt(d), mask: maskArgs(m) };
      const seen: unknown[] = [];
      const [o, lse] = withVariants(be, seen, () => attentionDecode(be, ref(q) as GpuRef, ref(k) as GpuRef, ref(v) as GpuRef, a, undefined, be.caps.subgroups, { blockV: true }, ref(m.device) as GpuRef));
      assert.ok(seen.some((x) => (x as Record<string, unknown>).VBLK === true), 'the VBLK form ran');
      const out = wrap(be, o, [B, H, 1, d], dtype);
      be.free(lse);
      close(await vals(fon.cast(out, 'f32')), want, dtype === 'f32' ? 1e-5 : 5e-3, `webgpu ${dtype}, d ${d}, VBLK`);
    }
  }
  const g = inputs(be, 8, tk), m = fineMask(be, selected, l, tk);
  const a: AttentionArgs = { batch: B, heads: H, kvHeads: HKV, tq: 1, tk, d: 8, kvLength: l, qOffset: l - 1, causal: true, window: 0, scale: 1 / Math.sqrt(8), mask: maskArgs(m) };
  assert.throws(() => attentionDecode(be, ref(g.q) as GpuRef, ref(g.k) as GpuRef, ref(g.v) as GpuRef, a, undefined, be.caps.subgroups, { blockV: true }, ref(m.device) as GpuRef),
    (e: Error) => e instanceof UnsupportedError && /blockV form needs a fine mask read in the preloaded form whose 16-key blocks its 32 key groups divide \(head width 8, 128 keys a step\)/.test(e.message));
});

test('the LANES split pass (DecodeTune.lanes, the default for fine masks: lane pairs a key, no barrier in the loop), also with each iteration\'s loads one ahead (lanesPrefetch), equals attention over exactly the selected keys: f32 and f16, head widths 64 and 16, lists\' lengths known and read from the table, one chunk and several, GQA 2 and 4; a head width it does not take (8) runs the step kernel, as does lanes false [webgpu]', { skip }, async () => {
  const tk = 1200, l = 1190, own = Math.floor((l - 1) / 16);
  const selected = [[...Array.from({ length: 37 }, (_, i) => 2 * i), own], [...Array.from({ length: 58 }, (_, i) => 3 + i), own]];
  const be = gpu as WebGpuBackend;
  assert.ok(lanesForm(be.caps, { batch: B, heads: H, kvHeads: HKV, tq: 1, tk, d: 64, kvLength: l, qOffset: l - 1, causal: true, window: 0, scale: 1, mask: maskArgs(fineMask(be, selected, l, tk)) }, H / HKV), 'the adapter takes the LANES form');
  for (const [d, heads, splits, known] of [[64, H, undefined, false], [64, H, 3, true], [16, 2 * H, undefined, true], [16, 2 * H, 1, false]] as const) {
    const kvHeads = heads / (d === 16 ? 4 : 2);
    const x = (b: Backend, shape: number[], seed: number) => fon.tensor(fon.randn(shape, { seed }).dataSync(), shape, { backend: b });
    const c = { q: x(cpu, [B, heads, 1, d], 1), k: x(cpu, [B, kvHeads, tk, d], 2), v: x(cpu, [B, kvHeads, tk, d], 3) };
    const want = await reference(c.q, c.k, c.v, selected, l);
    for (const dtype of ['f32', 'f16'] as const) {
      const cast = (t: Tensor) => (dtype === 'f32' ? t : fon.cast(t, dtype));
      const [q, k, v] = [cast(x(be, [B, heads, 1, d], 1)), cast(x(be, [B, kvHeads, tk, d], 2)), cast(x(be, [B, kvHeads, tk, d], 3))];
      const m = fineMask(be, selected, l, tk);
      const mask = maskArgs(known ? { ...m, counts: selected.map((s) => s.length) } : m);
      const a: AttentionArgs = { batch: B, heads, kvHeads, tq: 1, tk, d, kvLength: l, qOffset: l - 1, causal: true, window: 0, scale: 1 / Math.sqrt(d), mask };
      for (const lanesPrefetch of [false, true]) {
        const seen: unknown[] = [];
        const [o, lse] = withVariants(be, seen, () => attentionDecode(be, ref(q) as GpuRef, ref(k) as GpuRef, ref(v) as GpuRef, a, splits, be.caps.subgroups, lanesPrefetch ? { lanesPrefetch } : {}, ref(m.device) as GpuRef), 'attention_decode_lanes');
        assert.equal(seen.length, 1, 'the LANES form ran (the default)');
        assert.equal((seen[0] as Record<string, unknown>).PF, lanesPrefetch);
        const out = wrap(be, o, [B, heads, 1, d], dtype);
        be.free(lse);
        close(await vals(fon.cast(out, 'f32')), want, dtype === 'f32' ? 1e-5 : 5e-3, `webgpu ${dtype}, d ${d}, GQA ${heads / kvHeads}, splits ${splits}, counts ${known ? 'known' : 'from the table'}, prefetch ${lanesPrefetch}`);
      }
    }
  }
  const g = inputs(be, 8, tk), m = fineMask(be, selected, l, tk);
  const a: AttentionArgs = { batch: B, heads: H, kvHeads: HKV, tq: 1, tk, d: 8, kvLength: l, qOffset: l - 1, causal: true, window: 0, scale: 1 / Math.sqrt(8), mask: maskArgs(m) };
  assert.equal(lanesForm(be.caps, a, H / HKV), undefined);
  const seen: unknown[] = [];
  const [o, lse] = withVariants(be, seen, () => attentionDecode(be, ref(g.q) as GpuRef, ref(g.k) as GpuRef, ref(g.v) as GpuRef, a, undefined, be.caps.subgroups, { lanes: true }, ref(m.device) as GpuRef));
  assert.equal(seen.length, 1, 'head width 8: the step kernel ran');
  be.free(o); be.free(lse);
  // lanes false at a head width LANES takes: the step kernel.
  const g64 = inputs(be, 64, tk), seen64: unknown[] = [];
  const a64: AttentionArgs = { ...a, d: 64, scale: 1 / 8 };
  const [o64, lse64] = withVariants(be, seen64, () => attentionDecode(be, ref(g64.q) as GpuRef, ref(g64.k) as GpuRef, ref(g64.v) as GpuRef, a64, undefined, be.caps.subgroups, { lanes: false }, ref(m.device) as GpuRef));
  assert.equal(seen64.length, 1, 'lanes false: the step kernel ran');
  be.free(o64); be.free(lse64);
});

/** Runs fn, collecting the variants of its `kernel` dispatches (attention_decode by default) into `seen`. */
function withVariants<T>(be: Backend, seen: unknown[], fn: () => T, kernel = 'attention_decode'): T {
  const rt = (be as unknown as { rt: { run: (d: { kernel: { name: string }; variant: Record<string, unknown> }) => unknown } }).rt;
  const run = rt.run;
  rt.run = (d) => { if (d.kernel.name === kernel) seen.push(d.variant); return run.call(rt, d); };
  try { return fn(); } finally { rt.run = run; }
}

/** Runs fn with the split-K decode kernel's variant flags `flags` set (a list form) on `be`'s dispatches. */
function withListForm<T>(be: Backend, flags: Record<string, boolean>, fn: () => T): T {
  const rt = (be as unknown as { rt: { run: (d: { kernel: { name: string }; variant: Record<string, unknown> }) => unknown } }).rt;
  const run = rt.run;
  rt.run = (d) => run.call(rt, d.kernel.name === 'attention_decode' ? { ...d, variant: { ...d.variant, ...flags } } : d);
  try { return fn(); } finally { rt.run = run; }
}
