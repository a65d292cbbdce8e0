/**
 * Attention forward kernel versions side by side (STYLE.md §7): each is checked against the CPU
 * reference (src/backend/cpu/attention.ts) on a small causal GQA case with a ragged length, then
 * timed on the shapes of bench/attention.ts: prefill B=1, H=32, D=128, f16 storage, causal; decode
 * of one query, GQA 32/8, D=128, over a long cache.
 *
 *   node --import tsx dev/kernels/attention.ts [--prefill 1024,4096,16384] [--decode 16384,131072] [--only p1,t1,d1]
 *
 * Versions, with milliseconds on one H200 (Dawn 0.6.2 through Vulkan, driver 580.159,
 * disable_robustness as node_gpu.ts sets it) from the three runs of 2026-11-30; prefill causal
 * B=1, H=32, D=128 (TFLOP/s counts the causal half: 2·T²·D·H), decode B=1, GQA 32/8, D=128 (GB/s
 * counts K and V once). PyTorch SDPA bf16 in the same runs: prefill 16K 3.90–3.94 ms, decode 128K
 * 0.126–0.130 ms (bench/attention.ts).
 *
 *   p1  plain tiled flash attention (attention_plain.wgsl FWD): 16 query rows × 16 keys per
 *       workgroup of 64, tiles in workgroup memory as f32, online softmax, O in registers.
 *       ← src fallback (no subgroup matrices, or not f16)          4K 183.2 (0.8 TFLOP/s), 16K 2790 (0.8)
 *   t0  (not kept) first tensor-core kernel: 4 subgroups, q staged through workgroup memory, S
 *       row-major (16-way bank conflicts in the lane reads), the S accumulators declared inside
 *       the key loop without an initialiser. Wrong on the H200 (max error 2.3); t1 gives them an
 *       explicit zero constructor besides its other changes and is right (which change fixed it
 *       was not isolated: no device time for it).                      4K 11.5, 16K 165.8 (13.3)
 *   t1  tensor cores, two passes (attention_tc.wgsl without MAXPASS): 4 subgroups × 16 query
 *       rows, q fragments straight from global into registers, key blocks of 32 staged in
 *       workgroup memory, S and P column-major (conflict-free lane pairs), mask tests only on
 *       boundary blocks; pass 1 lse, pass 2 O += exp(S − lse)·V (no rescaling of the opaque
 *       result matrices), f16 P.                                        4K 7.66 (17.9), 16K 112.8 (19.5)
 *   t2  as t1 with 8 subgroups (128 query rows per workgroup).          4K 6.18 (22.2), 16K 84.4 (26.1)
 *   t3  as t2 with MAXPASS: pass 1 keeps only the row maximum (log2 units, exp2), pass 2 sums
 *       l while writing P, out = O/l in the epilogue.                  ← src (f16)    16K 78.6 (28.0)
 *   t4  as t3 with q fragments loaded again for every key block (fewer registers).  16K 97.2 (22.6)
 *   d0  decode through p1 (one query row per 16-row tile).             16K 20.5, 128K 181.3 (3 GB/s)
 *   d1  flash-decoding (attention_decode.wgsl + attention_combine.wgsl), per-step row maxima by a
 *       tree in workgroup memory; K rows read per invocation, V in coalesced 4-element loads.
 *       First form (vec2<u32> K loads, 1024 workgroups, combine one invocation per output element
 *       looping over every chunk):                                     16K 0.207, 128K 0.819 (656 GB/s)
 *   d2  as d1 with subgroupMax for the row maxima, 16-byte K loads, 2048 workgroups:
 *                                                                      16K 0.180, 128K 0.805 (667 GB/s)
 *       then (current src, d1/d2 above run it with the tree / subgroup maxima): head dim a
 *       constant so the K loads of a row unroll, loads past the chunk clamped instead of
 *       branched around, 1024 workgroups, and the combine as one workgroup per row reducing
 *       over the chunks in parallel (the serial per-element loop over 256 chunks was the
 *       bottleneck).                                                   ← src   128K 0.335 (1603 GB/s)
 *
 * Timing: ≥ 0.3 s of warm-up, then the median of 3 batches of back-to-back calls, each batch
 * ≥ 0.25 s of GPU work, wall clock with one sync per batch.
 */
import { parseArgs } from 'node:util';
import { attention as cpuAttention } from '../../src/backend/cpu/attention.ts';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { WebGpuBackend, type GpuHandle, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { attentionDecode, attentionPlain, attentionTc, decodeRows, tcEligible } from '../../src/backend/webgpu/kernels/attention.ts';
import { f32ToHost, hostToF32 } from '../../src/tensor/dtype.ts';
import { normalArray } from '../../src/ops/random.ts';

const { values: flags } = parseArgs({
  options: {
    prefill: { type: 'string', default: '1024,4096,16384' },
    decode: { type: 'string', default: '16384,131072' },
    only: { type: 'string' },
  },
});

type Run = (be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs) => [GpuHandle, GpuHandle];
interface Version { name: string; kind: 'prefill' | 'decode'; usable(be: WebGpuBackend, a: AttentionArgs): boolean; run: Run }

// t1–t4 and d1–d2 run src's kernels with the variant options that reproduce each version.
const VERSIONS: Version[] = [
  { name: 'p1', kind: 'prefill', usable: () => true, run: attentionPlain },
  { name: 't1', kind: 'prefill', usable: (be, a) => tcEligible(be, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 4, maxPass: false, qReload: false }) },
  { name: 't2', kind: 'prefill', usable: (be, a) => tcEligible(be, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, maxPass: false, qReload: false }) },
  { name: 't3', kind: 'prefill', usable: (be, a) => tcEligible(be, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, maxPass: true, qReload: false }) },
  { name: 't4', kind: 'prefill', usable: (be, a) => tcEligible(be, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, maxPass: true, qReload: true }) },
  { name: 'd0', kind: 'decode', usable: () => true, run: attentionPlain },
  { name: 'd1', kind: 'decode', usable: (be, a) => decodeRows(be, a) > 0, run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a, undefined, false) },
  { name: 'd2', kind: 'decode', usable: (be, a) => decodeRows(be, a) > 0 && be.caps.subgroups, run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a) },
];

function args(b: number, h: number, hkv: number, tq: number, tk: number, d: number): AttentionArgs {
  return { batch: b, heads: h, kvHeads: hkv, tq, tk, d, kvLength: tk, qOffset: tk - tq, causal: true, window: 0, scale: 1 / Math.sqrt(d) };
}

function upload(be: WebGpuBackend, n: number, seed: number): GpuRef {
  return { h: be.upload(f32ToHost(normalArray(seed, n), 'f16'), 'f16'), shape: [n], dtype: 'f16' };
}

/** Worst |gpu − cpu| / (1 + |cpu|) of out on a small case. */
async function check(be: WebGpuBackend, ver: Version): Promise<string> {
  const a = ver.kind === 'prefill' ? args(1, 4, 2, 300, 300, 128) : args(1, 32, 8, 1, 1000, 128);
  if (!ver.usable(be, a)) return 'n/a';
  const hq = f32ToHost(normalArray(1, a.heads * a.tq * a.d), 'f16'), hk = f32ToHost(normalArray(2, a.kvHeads * a.tk * a.d), 'f16'), hv = f32ToHost(normalArray(3, a.kvHeads * a.tk * a.d), 'f16');
  const [want] = cpuAttention({ h: hq, shape: [], dtype: 'f16' }, { h: hk, shape: [], dtype: 'f16' }, { h: hv, shape: [], dtype: 'f16' }, a);
  const refs = [hq, hk, hv].map((h) => ({ h: be.upload(h, 'f16'), shape: [], dtype: 'f16' as const }));
  const [out, lse] = ver.run(be, refs[0], refs[1], refs[2], a);
  const got = hostToF32(await be.read(out, 'f16', want.length), 'f16'), w = hostToF32(want, 'f16');
  let worst = 0;
  for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(got[i] - w[i]) / (1 + Math.abs(w[i])));
  for (const h of [out, lse, ...refs.map((r) => r.h)]) be.free(h);
  return worst.toExponential(2);
}

async function time(be: WebGpuBackend, ver: Version, a: AttentionArgs): Promise<number> {
  const q = upload(be, a.heads * a.tq * a.d, 1), k = upload(be, a.kvHeads * a.tk * a.d, 2), v = upload(be, a.kvHeads * a.tk * a.d, 3);
  const once = () => { const [o, l] = ver.run(be, q, k, v, a); be.free(o); be.free(l); };
  const batch = async (n: number) => { const t0 = performance.now(); for (let i = 0; i < n; i++) once(); await be.sync(); return performance.now() - t0; };
  let n = 1;
  let t = await batch(n);
  while (t < 250 && n < 100_000) { n = Math.ceil(n * Math.min(10, 300 / Math.max(t, 0.5))); t = await batch(n); }
  const ts = [await batch(n), await batch(n), await batch(n)].sort((x, y) => x - y);
  for (const r of [q, k, v]) be.free(r.h);
  return ts[1] / n;
}

const be = await WebGpuBackend.create();
console.log(`attention kernels on ${be.caps.adapterName} (f16 ${be.caps.f16}, subgroup matrix ${be.caps.subgroupMatrix ? 'yes' : 'no'})`);
const pick = flags.only ? new Set(flags.only.split(',')) : null;
const prefill = flags.prefill.split(',').filter(Boolean).map(Number), decode = flags.decode.split(',').filter(Boolean).map(Number);
for (const ver of VERSIONS) {
  if (pick && !pick.has(ver.name)) continue;
  const err = await check(be, ver);
  const cells: string[] = [];
  for (const t of ver.kind === 'prefill' ? prefill : decode) {
    const a = ver.kind === 'prefill' ? args(1, 32, 32, t, t, 128) : args(1, 32, 8, 1, t, 128);
    if (!ver.usable(be, a)) { cells.push(`${t}: n/a`); continue; }
    const ms = await time(be, ver, a);
    const flops = ver.kind === 'prefill' ? (4 * a.tq * a.tk * a.d * a.heads) / 2 : 0;
    const bytes = 2 * a.kvHeads * a.tk * a.d * 2;
    cells.push(`${t}: ${ms.toFixed(3)} ms (${ver.kind === 'prefill' ? `${(flops / ms / 1e9).toFixed(1)} TFLOP/s` : `${(bytes / ms / 1e6).toFixed(0)} GB/s`})`);
  }
  console.log(`${ver.name.padEnd(3)} max err ${err.padEnd(9)} ${cells.join('  ')}`);
}
be.destroy();
process.exit(0);
