/**
 * Attention forward kernel versions side by side (STYLE.md §7): each is checked against the CPU
 * reference (src/backend/cpu/attention.ts) on a small causal GQA case with a ragged length, then
 * timed on the shapes of bench/attention.ts: prefill B=1, H=32, D=128, f16 storage, causal; decode
 * of one query, GQA 32/8, D=128, over a long cache.
 *
 *   node --import tsx dev/kernels/attention.ts [--prefill 1024,4096,16384] [--decode 16384,131072] [--only p1,t1,d1]
 *                                              [--shape 16,8,512,64/16,4,256,32] (training shapes B,H,T,D, f32)
 *
 * With --shape, the training-path versions (f32 storage, causal, H = Hkv) run instead at each given
 * shape: forward alone (f*) and forward + backward (b*), each first checked against the CPU at
 * B = 1, H = 2 with the same T and D (so every tile path of the full shape runs), then timed; TFLOP/s
 * count the causal half, the backward as 2.5× the forward.
 *
 * Measured on the H200 (run of 2026-11-30T00:3x, `--shape 16,8,512,64/16,4,256,32`), ms (TFLOP/s):
 *                 small B=16 H=8 T=512 D=64     tiny B=16 H=4 T=256 D=32
 *   f1            3.377 (1.27)                  0.316 (0.85)
 *   f2            0.524 (8.20)                  0.101 (2.67)
 *   b1           15.997 (0.94)                  1.411 (0.67)
 *   b2            3.189 (4.71)                  0.389 (2.41)
 *
 *   f1  the plain forward p1 at training shapes.
 *   f2  register-blocked (attention_blocked.wgsl FWD): 4TR×32 score tiles, each of 8·TR invocations
 *       owns 4 query rows × 4 keys (dot products of vec4s from row-major padded tiles) and 4 rows ×
 *       D/32 column vec4s of O; row maxima meet in workgroup memory, partial row sums only at the
 *       end; whole-visible blocks skip the mask; TR = 16 where 46 KB of workgroup memory fit.
 *       ← src (forward the tensor-core and decode kernels do not take; D ≤ 64)
 *   b1  f1 + the plain delta, dq and dk/dv kernels.
 *   b2  f2 + the plain delta + blocked DQ (TR = 8) and DKDV (32 keys × 32 query rows per step,
 *       4 keys × D/32 column vec4s of dk and dv per invocation).   ← src (backward, D ≤ 64 on 48 KB)
 *
 * Versions, with milliseconds on one H200 (Dawn 0.6.2 through Vulkan, driver 580.159,
 * disable_robustness as node_gpu.ts sets it) from the three runs of 2026-11-30; prefill causal
 * B=1, H=32, D=128 (TFLOP/s counts the causal half: 2·T²·D·H), decode B=1, GQA 32/8, D=128 (GB/s
 * counts K and V once). PyTorch SDPA bf16 in the same runs: prefill 16K 3.90–3.94 ms, decode 128K
 * 0.126–0.130 ms (bench/attention.ts).
 *
 *   p1  plain tiled flash attention (attention_plain.wgsl FWD): 16 query rows × 16 keys per
 *       workgroup of 64, tiles in workgroup memory as f32, online softmax, O in registers.
 *       ← src fallback (tiles of f2 too large: D > 64)          4K 183.2 (0.8 TFLOP/s), 16K 2790 (0.8)
 *   t0  (not kept) first tensor-core kernel: 4 subgroups, q staged through workgroup memory, S
 *       row-major (16-way bank conflicts in the lane reads), the S accumulators declared inside
 *       the key loop without an initialiser. Wrong on the H200 (max error 2.3); t1 gives them an
 *       explicit zero constructor besides its other changes and is right (which change fixed it
 *       was not isolated: no device time for it).                      4K 11.5, 16K 165.8 (13.3)
 *   t1  (not kept) tensor cores, two passes: 4 subgroups × 16 query
 *       rows, q fragments straight from global into registers, key blocks of 32 staged in
 *       workgroup memory, S and P column-major (conflict-free lane pairs), mask tests only on
 *       boundary blocks; pass 1 lse, pass 2 O += exp(S − lse)·V (no rescaling of the opaque
 *       result matrices), f16 P.                                        4K 7.66 (17.9), 16K 112.8 (19.5)
 *   t2  (not kept) as t1 with 8 subgroups (128 query rows per workgroup).          4K 6.18 (22.2), 16K 84.4 (26.1)
 *   t3  as t2 with pass 1 keeping only the row maximum (log2 units, exp2), pass 2 summing l while
 *       writing P, out = O/l in the epilogue (attention_tc.wgsl without ONEPASS, bool-argument
 *       subgroup-matrix loads).                                           16K 78.6 (28.0)
 *   t4  as t3 with q fragments loaded again for every key block (fewer registers).  16K 97.2 (22.6)
 *   t5  as t3 with the layout of subgroup-matrix loads as a template argument (not deprecated).
 *       (src until t9 padded its rows)                                  16K 78.8–81.8 (26.9–27.9)
 *   t6  as t5 in one pass (ONEPASS): a row's running maximum moves only when a block's passes it
 *       by more than 8 (log2 units), the whole workgroup then rescaling O through workgroup
 *       memory (rare after the first block), so P ≤ 2^8 in f16. WRONG on the H200: NaNs in the
 *       check above in every form tried (2026-11-30): the pair's block maximum by a shuffle with
 *       the rescale compiled out (16K 57.9 ms), run on every block (83.5 ms), or lazy with a
 *       barrier before the flag's read; and the maximum taken by each lane over the whole row (no
 *       shuffle) with the lazy rescale. Not tried yet: no shuffle and no rescale together (which
 *       would tell whether a shuffle inside the key loop and the matrices reassigned inside a
 *       branch are two separate faults). For that: t6n (rescale dropped), t6r (row maximum
 *       without a shuffle), t6rn (both), edits of t6's generated WGSL (tcPatched below); the
 *       check now also counts NaNs, names the first rows holding one and gives the lse error.
 *       Run 2026-11-30 (later): t6n, t6r and t6rn all NaN in 108 of 1200 rows (t6rn 55.8 ms at 16K), so
 *       neither the shuffle nor the rescale is the fault. Next: t6s, t6sn, t6srn move the running
 *       maximum with select() instead of inside a branch (selectMax).
 *       Run 2026-11-30T07:0x: t6s 57.7 ms, t6sn 56.0, t6srn 56.1, all NaN in the same 108 rows
 *       (h2:64…), so moving the maximum by select() is not the fix either.
 *                                                                         16K 57.0 (38.6)
 *   t7, t7q4, t8  (not kept) t5 (8 or 4 subgroups) and t6 with K and V fragments loaded straight
 *       from global memory by subgroupMatrixLoad (the same buffers bound again as array<f16>; only
 *       a cut-off last block staged), so no staging loop and one barrier fewer a block. Run of
 *       2026-11-30T07:2x, same run: t5 87.3 ms, t7 119.6, t7q4 135.1, t8 76.6 with NaN in 11
 *       rows (h1:289…, the staged last block). Staging K and V through workgroup memory is the
 *       faster form here (measured from an uncommitted edit, not kept).
 *   d0  decode through p1 (one query row per 16-row tile).             16K 20.5, 128K 181.3 (3 GB/s)
 *   d1  flash-decoding (attention_decode.wgsl + attention_combine.wgsl), per-step row maxima by a
 *       tree in workgroup memory; K rows read per invocation, V in coalesced 4-element loads.
 *       First form (vec2<u32> K loads, 1024 workgroups, combine one invocation per output element
 *       looping over every chunk):                                     16K 0.207, 128K 0.819 (656 GB/s)
 *   d2  as d1 with subgroupMax for the row maxima, 16-byte K loads, 2048 workgroups:
 *                                                                      16K 0.180, 128K 0.805 (667 GB/s)
 *   d2g256, d2g512, d2g660, d2g1320, d2g2048  d2 (the current src kernel) with 256 … 2048 workgroups
 *       in all instead of 1024 (660 and 1320: 5 and 10 a streaming multiprocessor of the H200's 132). Run of 2026-11-30T07:0x: d2 0.381, d2g256 0.413 (fewer is slower; d2g512
 *       and d2g2048 fell outside that run's time limit).
 *   d3, d3g640  (not kept) d2 with each step's 128 K rows first staged in workgroup memory (KS):
 *       coalesced 16-byte loads by consecutive invocations, rows padded by 16 bytes, then a
 *       barrier; 1024 or 640 workgroups. Same run: d3 0.642, d3g640 0.693 (against d2 0.381).
 *   d4, d4g2048  (not kept) d2 with coalesced K loads without staging (KC): D/8 consecutive lanes
 *       share each K row (16 bytes a lane), each lane walks 16 rows a step forming 8-column
 *       partial dots, and a butterfly reduce-scatter of subgroupShuffleXor (15 shuffles a query
 *       row) leaves each lane its own key's scores. Run of 2026-11-30T07:2x: d2 0.332, d4 0.699,
 *       d4g2048 0.671. Both coalescing forms are about twice as slow as the per-lane rows of d2,
 *       so uncoalesced K loads are not what holds d2 at ~1.6 TB/s; the bar (0.256 ms) needs
 *       another lead. d3's code is at commit 74b86d5; d4 was measured from an uncommitted edit.
 *       then (current src, d1/d2 above run it with the tree / subgroup maxima): head dim a
 *       constant so the K loads of a row unroll, loads past the chunk clamped instead of
 *       branched around, 1024 workgroups, and the combine as one workgroup per row reducing
 *       over the chunks in parallel (the serial per-element loop over 256 chunks was the
 *       bottleneck).                                                   ← src   128K 0.335 (1603 GB/s)
 *
 *   t9  t5 with the staged K/V rows padded by 8 halves (KPAD: unpadded, the rows were 256 bytes
 *       apart, so the 16 rows of a fragment load started on the same banks; the GEMM's tiles are
 *       padded this way). Run of 2026-11-30T09:2x: t5 81.8 ms, t9 31.0 (30.3 in a later run).
 *       t10/t11 (t5/t9 with unguarded staging loads for whole blocks, ALIGNED, removed from src
 *       since): 83.5 / 30.7, no gain. t12 (t6 padded): 25.3 ms but NaN in 76 rows. t13 (t9 with
 *       4 subgroups): 61.7.                                                ← src   16K 30.3–31.0
 *   aP1, aPV, aQK, aSt, aExp, aMMA, aSkel  timing-only ablations of t5 (outputs wrong on purpose):
 *       without pass 1, without P·V, with 1 of 16 QKᵀ MMAs, without the K/V staging, without
 *       exp2 (P = 1), without both MMA kinds, and the bare loop (no staging, no MMAs). Same run as
 *       t9: 58.1, 59.9, 45.0, 72.3, 73.9, 25.4, 15.7 ms (t5 81.8): the MMAs' fragment loads held
 *       the time, which t9's padding removed. aV, aK, aKV: d2 without its V loads, K loads, or
 *       both: 0.767, 0.244, 0.639 ms (d2 0.332 in that run; d2g512 0.307, d2g660 0.287, d2g1320
 *       0.312, d2g2048 0.333).
 *   d5, d6, d7, d8, aC (with gN: N workgroups in all)  d2 with each K row loaded a step ahead
 *       (DecodeTune.prefetch), 256 keys a step (wg), both, the combine in 32-column slices
 *       (combineCols), and the split pass alone (noCombine, timing only). Runs of 2026-11-30T09:3x
 *       and 09:5x: d5 0.353, d5g660 0.397, d6 0.358, d6g660 0.367, d7 0.334 (d2 0.360, d2g660
 *       0.303 in that run); d8 0.355, d8g660 0.340, aC 0.305 (d2 0.405, d2g660 0.339). The split
 *       pass alone is above the 0.256 ms bar: the combine is not what holds decode back.
 *   Lu2, Lu4, Lu8, Lu4n8, Lu2n8 (gN as above; removed 2026-11-30 with their kernel)  the lane-team split pass
 *       (attention_decode_lanes.wgsl: teams of 16 lanes a key, or 8 with n8, each team its own
 *       online softmax over its keys with no barrier in the loop, u keys a team loaded per step).
 *       Run of 2026-11-30T13:0x, d2 and d9 still at 1024 workgroups: d2 0.295, d2g660 0.239, d9
 *       0.255; Lu2 0.308, Lu4 0.316, Lu8 0.349, Lu4n8 0.296, Lu2n8 0.319, Lu2g660 0.391, Lu4g660
 *       0.386, Lu4g264 0.444, Lu8g660 0.373: no gain over d2, so the barrier-per-step structure
 *       is not what holds decode back either. After this run src took 660 workgroups (d2g660 beat
 *       d2 in all four runs): d2 now runs 660.
 *
 * Timing: ≥ 0.3 s of warm-up, then the median of 3 batches of back-to-back calls, each batch
 * ≥ 0.25 s of GPU work, wall clock with one sync per batch.
 */
import { parseArgs } from 'node:util';
import { attention as cpuAttention } from '../../src/backend/cpu/attention.ts';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { WebGpuBackend, type GpuHandle, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { attentionBackward, attentionBlocked, attentionDelta, attentionPlain } from '../../src/backend/webgpu/kernels/attention.ts';
import { aluBackwardPlan, blockedRows } from '../../src/backend/webgpu/kernels/attention_plan.ts';
import { attentionTc, attentionTcBackward, tcBackwardEligible, tcEligible, tcKernel, tcKernelOf, type TcBackwardVariant } from '../../src/backend/webgpu/kernels/attention_tc.ts';
import { matrixCode } from '../../src/backend/webgpu/kernels/subgroup_matrix.ts';
import { readFileSync } from 'node:fs';
import { attentionDecode, decodeRows } from '../../src/backend/webgpu/kernels/attention_decode.ts';
import { f32bits, type Kernel } from '../../src/backend/webgpu/runtime.ts';
import { attentionBackward as cpuAttentionBackward } from '../../src/backend/cpu/attention.ts';
import { f32ToHost, hostToF32 } from '../../src/tensor/dtype.ts';
import { normalArray } from '../../src/ops/random.ts';

const { values: flags } = parseArgs({
  options: {
    prefill: { type: 'string', default: '1024,4096,16384' },
    decode: { type: 'string', default: '16384,131072' },
    only: { type: 'string' },
    shape: { type: 'string' },
    backward: { type: 'string' },
    'backward-bhd': { type: 'string' },
  },
});

type Run = (be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs) => [GpuHandle, GpuHandle];
interface Version { name: string; kind: 'prefill' | 'decode'; usable(be: WebGpuBackend, a: AttentionArgs): boolean; run: Run }

const readKernel: Kernel = {
  name: 'read_ceiling',
  source: () => `struct Params { n: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let stride = nw.x * 128u;
  var acc = vec4<u32>(0u);
  var i = wid.x * 128u + lid;
  for (; i + 3u * stride < P.n; i += 4u * stride) {
    let a = k[i]; let b = k[i + stride]; let c = k[i + 2u * stride]; let d = k[i + 3u * stride];
    let e = v[i]; let f = v[i + stride]; let g = v[i + 2u * stride]; let h = v[i + 3u * stride];
    acc ^= a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
  }
  for (; i < P.n; i += stride) { acc ^= k[i] ^ v[i]; }
  if (all(acc == vec4<u32>(0x9e3779b9u))) { out[0] = 1u; }
}`,
};

/** The read ceiling with g workgroups (timing only: out is the flag word, lse empty). */
function readCeiling(g: number): Run {
  return (be, q, k, v, a) => {
    const flag = be.alloc('f32', a.batch * a.heads * a.tq * a.d, 'read ceiling flag (as out)');
    be.rt.run({ kernel: readKernel, variant: {}, uniforms: [(a.kvHeads * a.tk * a.d) / 8], buffers: [k.h.buffer, v.h.buffer, flag.buffer], workgroups: [g, 1, 1] });
    return [flag, be.alloc('f32', a.batch * a.heads * a.tq, 'read ceiling lse')];
  };
}

/**
 * The one-pass tensor-core forward (t6, t12): attention_tc_onepass.wgsl beside this file, the form
 * src/.../attention_tc.wgsl had with its ONEPASS variant (a lazy rescale of O through workgroup
 * memory); out of src since 2026-12-03 because it gives NaNs on the H200. Its RESCALE code: each O
 * tile stored into the subgroup's scratch (alternating halves, so tile i + 2 is stored two barriers
 * after tile i's load), scaled row by row, loaded back.
 */
const ONEPASS_WGSL = readFileSync(new URL('./attention_tc_onepass.wgsl', import.meta.url), 'utf8');
function rescaleCode(d: number): string {
  const { load, store } = matrixCode(false);
  const lines: string[] = [];
  for (let i = 0; i < d / 16; i++) {
    const at = `sbase + ${256 * (i % 2)}u`;
    lines.push(`      ${store('&Ss', at, `o${i}`, false, '16u')};`, '      workgroupBarrier();', `      scale_tile(sg, lane, ${at});`,
      '      workgroupBarrier();', `      o${i} = ${load('subgroup_matrix_result<f32, 16, 16>', '&Ss', at, false, '16u')};`);
  }
  return lines.join('\n');
}
const tcOnePassKernel = tcKernelOf('attention_tc_onepass', () => ONEPASS_WGSL, (v) => ({ RESCALE: rescaleCode(v.D as number) }));

function attentionTcOnePass(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, kPad: number): [GpuHandle, GpuHandle] {
  return tcPatched('onepass', (src) => src, true, kPad)(be, q, k, v, a);
}

/**
 * The tensor-core forward (the one-pass file, or src's two-pass kernel with onePass false) with its
 * generated WGSL edited, to find which part gives the NaNs: the same dispatch as attentionTc,
 * another pipeline per edit.
 */
function tcPatched(tag: string, patch: (src: string) => string, onePass = true, kPad = 0): Run {
  const base = onePass ? tcOnePassKernel : tcKernel;
  const kernel: Kernel = { name: `attention_tc_${tag}`, source: (v, caps) => patch(base.source(v, caps)) };
  return (be, q, k, v, a) => {
    const nsg = 8, rows = a.batch * a.heads * a.tq;
    const out = be.alloc('f16', rows * a.d, 'attention'), lse = be.alloc('f32', rows, 'attention lse');
    be.rt.run({
      kernel, variant: { D: a.d, NSG: nsg, ONEPASS: onePass, QRELOAD: false, LOAD_ARG: false, KPAD: kPad },
      uniforms: [a.batch, a.heads, a.kvHeads, a.tq, a.tk, a.d, a.kvLength, a.qOffset >>> 0, a.causal ? 1 : 0, a.window, f32bits(a.scale), a.heads / a.kvHeads],
      buffers: [q.h.buffer, k.h.buffer, v.h.buffer, out.buffer, lse.buffer], workgroups: [Math.ceil(a.tq / (16 * nsg)), a.heads, a.batch],
    });
    return [out, lse];
  };
}
/** Drops the lazy rescale (a barrier in its place): right only while no row's maximum grows by 2^8 after its first block, as on the check's data. */
const noRescale = (src: string) => must(src, /    if \(workgroupUniformLoad\(&Moved\) == blk\) \{[\s\S]*?\n    \}\n(?=    let p0)/, '    workgroupBarrier();\n');
/** Each lane of a row's pair takes the block maximum over the whole row: no shuffle inside the key loop. */
const rowMax = (src: string) => must(must(must(src, /\n    mb = max\(mb, subgroupShuffleXor\(mb, 1u\)\);/, ''),
  /for \(var c = par; c < BK; c \+= 2u\) \{ mb = max/, 'for (var c = 0u; c < BK; c++) { mb = max'),
  /(var mb = -BIG;[\s\S]*?\} else \{\n      )for \(var c = par; c < BK; c \+= 2u\) \{/, '$1for (var c = 0u; c < BK; c++) {');
/**
 * The running maximum moved without a divergent branch (select), so no loop-carried value is
 * assigned inside a branch of a loop that also runs subgroup-matrix operations; only the flag's
 * store stays in a branch.
 */
const selectMax = (src: string) => must(src, /    var alpha = 1\.0;\n    if \(mb > m \+ SLACK\) \{[\s\S]*?\n    \}\n(?=    if \(par == 0u\))/,
  '    let up = mb > m + SLACK;\n    let alpha = select(1.0, select(0.0, exp2(m - mb), m > -BIG), up);\n    m = select(m, mb, up);\n    l *= alpha;\n    if (up && blk > 1u) { Moved = blk; }\n');

// Timing-only ablations (their outputs are wrong on purpose; the check column shows by how much):
// t5 (two passes) or d2 with one part of the kernel taken out, to see where the time goes.
/** Pass 1 skipped (m fixed at 8). */
const noPass1 = (src: string) => must(must(src, /  \/\/ Pass 1: the maximum of each row\.\n  for \(var k0 = kfirst; k0 < kend;/, '  for (var k0 = kfirst; k0 < kfirst;'), /var m = -BIG;/, 'var m = 8.0;');
/** No P·V: neither the P fragments' loads nor the MMAs into O. */
const noPV = (src: string) => must(must(src, /^    o\d+ = subgroupMatrixMultiplyAccumulate\(p.*\n/gm, ''), /^    let p\d+ = subgroupMatrixLoad.*\n/gm, '');
// Kernels bind with layout 'auto', which drops a binding the code no longer reads: each ablation
// keeps a use of q, k and v (one MMA of q0, or a load behind a branch never taken).
/** Only 1 of the 16 QKᵀ MMAs of a block in either pass (s0 += q0·K₀). */
const noQK = (src: string) => must(src, /^      s(1 = subgroupMatrixMultiplyAccumulate\(q\d|0 = subgroupMatrixMultiplyAccumulate\(q[1-9]).*\n/gm, '');
/** No global → workgroup staging of K and V (the tiles hold stale data). */
const noStage = (src: string) => must(src, /fn stage_keys\(([^)]*)\) \{[\s\S]*?\n\}\n/,
  'fn stage_keys($1) {\n  if (P.tq == 12345u) { KV[lid] = bitcast<vec2<f16>>(k8[k0].x ^ v8[k0].x).x; }\n}\n');
/** No exp2 and no S reads in pass 2's P loops (P = 1). */
const noExp = (src: string) => must(src, /let p = exp2\(Ss\[sbase \+ c \* 16u \+ r\] \* sc - m\);/, 'let p = 1.0;');
/** Decode: no V loads (a constant instead; the load stays behind a branch never taken, so the binding stays in the layout). */
const noV = (src: string) => must(src, /let vv = (ldv4\([^;]*\));/, 'var vv = vec4<f32>(f32(jj)); if (P.tq == 12345u) { vv = $1; }');
/** Decode: no K loads (a constant for each 16-byte piece; the load behind a branch never taken). */
const noK = (src: string) => must(src, /let w = (k\[\(base >> 3u\) \+ c8\]);/, 'var w = vec4<u32>(c8, j, 0u, 0u); if (P.tq == 12345u) { w = $1; }');
/**
 * Decode: the clean-up of commit 8d1bc40 as a patch of the default source (with L1), to find what
 * made it 3× slower on the H200: cL drops the row-sum merge through Lred (which adds zeros under
 * L1), cD also drops the Lred declaration; cV (with cD) folds the P·V loop's `let p` into its use.
 * H200, 2026-11-30T17:1xZ, 128K: d2 0.221, cL 0.753, cD 0.773, cV 0.754 ms: dropping the merge alone
 * is the 3×, so src keeps it.
 */
const noLredMerge = (src: string) => must(must(src, /\n\s*if \(c4 == 0u\) \{ Lred\[r\] = \(\*lsum\)\[r\]; \}/, ''), /\n\s*\(\*lsum\)\[r\] \+= Lred\[r\];/, '');
const noLred = (src: string) => must(noLredMerge(src), /\nvar<workgroup> Lred: array<f32, RM>;/, '');
const foldP = (src: string) => must(src, /let p = Ss\[r \* WG \+ jj\];\n(\s*)\(\*acc\)\[r\] \+= p \* vv;/, '(*acc)[r] += Ss[r * WG + jj] * vv;');
/** d2 with its split kernel's source patched (dispatches of attention_decode swapped while it runs). */
function decodePatched(tag: string, patch: (src: string) => string): Run {
  const kernels = new Map<Kernel, Kernel>();
  return (be, q, k, v, a) => {
    const run = be.rt.run;
    be.rt.run = (d) => {
      if (d.kernel.name !== 'attention_decode') return run.call(be.rt, d);
      let kp = kernels.get(d.kernel);
      if (!kp) { const base = d.kernel; kp = { name: `attention_decode_${tag}`, source: (vv, caps) => patch(base.source(vv, caps)) }; kernels.set(d.kernel, kp); }
      return run.call(be.rt, { ...d, kernel: kp });
    };
    try { return attentionDecode(be, q, k, v, a); } finally { be.rt.run = run; }
  };
}

function must(src: string, re: RegExp, to: string): string {
  if (!re.test(src)) throw new Error(`dev/kernels/attention.ts: the one-pass kernel no longer has ${re}; update the patch`);
  return src.replace(re, to);
}
const tc6 = (be: WebGpuBackend, a: AttentionArgs) => tcEligible(be.caps, 'f16', a.d);

// t3–t6 and d1–d2 run src's kernels with the variant options that reproduce each version.
const VERSIONS: Version[] = [
  { name: 'p1', kind: 'prefill', usable: () => true, run: attentionPlain },
  { name: 't3', kind: 'prefill', usable: (be, a) => tcEligible(be.caps, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, qReload: false, loadArg: true, kPad: 0 }) },
  { name: 't4', kind: 'prefill', usable: (be, a) => tcEligible(be.caps, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, qReload: true, loadArg: true, kPad: 0 }) },
  { name: 't5', kind: 'prefill', usable: (be, a) => tcEligible(be.caps, 'f16', a.d), run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, kPad: 0 }) },
  { name: 't6', kind: 'prefill', usable: (be, a) => tcEligible(be.caps, 'f16', a.d), run: (be, q, k, v, a) => attentionTcOnePass(be, q, k, v, a, 0) },
  // t9 (src): t5 with the staged K/V rows padded by 8 halves (KPAD, as the GEMM's tiles); t12: t6
  // (one pass) padded the same way; t13: t9 with 4 subgroups.
  { name: 't9', kind: 'prefill', usable: tc6, run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, kPad: 8 }) },
  { name: 't12', kind: 'prefill', usable: tc6, run: (be, q, k, v, a) => attentionTcOnePass(be, q, k, v, a, 8) },
  { name: 't13', kind: 'prefill', usable: tc6, run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 4, kPad: 8 }) },
  // t14: t9 with each key block's global loads issued during the block before (PREFETCH; src for
  // D ≤ 128); t15: t14 with 4 subgroups. H200, 2026-12-03T18:0xZ, with the fetch/put staging of
  // that day: t9 4K 2.177 ms, 16K 28.208; t14 2.002, 27.017; t15 3.614, 54.706.
  { name: 't14', kind: 'prefill', usable: tc6, run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 8, kPad: 8, prefetch: true }) },
  { name: 't15', kind: 'prefill', usable: tc6, run: (be, q, k, v, a) => attentionTc(be, q, k, v, a, { nsg: 4, kPad: 8, prefetch: true }) },
  { name: 't6n', kind: 'prefill', usable: tc6, run: tcPatched('n', noRescale) },
  { name: 't6r', kind: 'prefill', usable: tc6, run: tcPatched('r', rowMax) },
  { name: 't6rn', kind: 'prefill', usable: tc6, run: tcPatched('rn', (src) => noRescale(rowMax(src))) },
  { name: 't6s', kind: 'prefill', usable: tc6, run: tcPatched('s', selectMax) },
  { name: 't6sn', kind: 'prefill', usable: tc6, run: tcPatched('sn', (src) => noRescale(selectMax(src))) },
  { name: 't6srn', kind: 'prefill', usable: tc6, run: tcPatched('srn', (src) => noRescale(rowMax(selectMax(src)))) },
  // Ablations of t5 and d2 (timing only, see above); aSkel keeps only the loop, staging-free.
  { name: 'aP1', kind: 'prefill', usable: tc6, run: tcPatched('a_p1', noPass1, false) },
  { name: 'aPV', kind: 'prefill', usable: tc6, run: tcPatched('a_pv', noPV, false) },
  { name: 'aQK', kind: 'prefill', usable: tc6, run: tcPatched('a_qk', noQK, false) },
  { name: 'aSt', kind: 'prefill', usable: tc6, run: tcPatched('a_st', noStage, false) },
  { name: 'aExp', kind: 'prefill', usable: tc6, run: tcPatched('a_exp', noExp, false) },
  { name: 'aMMA', kind: 'prefill', usable: tc6, run: tcPatched('a_mma', (src) => noQK(noPV(src)), false) },
  { name: 'aSkel', kind: 'prefill', usable: tc6, run: tcPatched('a_skel', (src) => noStage(noQK(noPV(src))), false) },
  { name: 'aV', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('a_v', noV) },
  { name: 'aK', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('a_k', noK) },
  { name: 'aKV', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('a_kv', (src) => noK(noV(src))) },
  { name: 'cL', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('c_l', noLredMerge) },
  { name: 'cD', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('c_d', noLred) },
  { name: 'cV', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: decodePatched('c_v', (src) => foldP(noLred(src))) },
  { name: 'd0', kind: 'decode', usable: () => true, run: attentionPlain },
  { name: 'd1', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0, run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a, undefined, false) },
  { name: 'd2', kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups, run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a) },
  // d2 with other workgroup totals (DECODE_GROUPS was 1024 for d2; 660 since 2026-11-30T13Z): fewer workgroups stream fewer K rows
  // per SM at once (each lane reads a whole 256-byte K row in 16-byte pieces, so a warp's 32 rows
  // must stay in L1 across the row's 16 loads), more workgroups hide more latency.
  ...[256, 512, 660, 1320, 2048].map((g): Version => ({
    name: `d2g${g}`, kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups,
    run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a, Math.max(1, Math.round(g / (a.batch * a.kvHeads)))),
  })),
  // d5: d2 with each K row loaded a step ahead (PF); d6: 256 keys a step (workgroups of 256);
  // d7: both; d8: the combine in slices of 32 columns (4 workgroups a row at D = 128, 8 split
  // groups a workgroup); aC: the split pass alone (timing only); d9: V values of a step loaded
  // before its scores (vEarly); d10: the combine loading four splits at once (combineUnroll); d11:
  // d8 and d10; d12: d9 and d11; d13: V values loaded after the scores (vMid); d14: the row sums
  // added by every column group (lsumOnce false: the default before 2026-11-30T15Z); d15: d13 with
  // d14; gN: N workgroups in all, as above. Runs of 2026-11-30T14:5xZ at 128K, with d14 then
  // lsumOnce true and d2 false: d2 0.261 / 0.254, d13 0.297 / 0.279, d14 0.245 / 0.239, d15 0.289 /
  // 0.297 ms, so lsumOnce became the default. Every version here now runs with it unless its tune
  // says false; the timings quoted for d5–d13 were taken without it.
  ...([['d5', { prefetch: true }], ['d6', { wg: 256 }], ['d7', { prefetch: true, wg: 256 }], ['d8', { combineCols: 32 }], ['aC', { noCombine: true }],
    ['d9', { vEarly: true }], ['d10', { combineUnroll: true }], ['d11', { combineCols: 32, combineUnroll: true }], ['d12', { vEarly: true, combineCols: 32, combineUnroll: true }],
    ['d13', { vMid: true }], ['d14', { lsumOnce: false }], ['d15', { vMid: true, lsumOnce: false }]] as const).flatMap(([name, tune]) => [0, 660].map((g): Version => ({
    name: g ? `${name}g${g}` : name, kind: 'decode', usable: (be, a) => decodeRows(be.caps, a) > 0 && be.caps.subgroups,
    run: (be, q, k, v, a) => attentionDecode(be, q, k, v, a, g ? Math.max(1, Math.round(g / (a.batch * a.kvHeads))) : undefined, true, tune),
  }))),
  // rN: the read ceiling (timing only; run of 2026-11-30T13:3x at 128K: r660 0.140 ms, r2112 0.130,
  // r8448 0.137, d2 0.255): N workgroups of 128 stream every 16-byte piece of K and V
  // once (grid-stride, 4 pieces a lane in flight), folding them into one word so nothing is
  // dropped; no attention at all. What 16-byte WGSL loads of these buffers reach on this GPU.
  ...[660, 2112, 8448].map((g): Version => ({ name: `r${g}`, kind: 'decode', usable: () => true, run: readCeiling(g) })),
];

function args(b: number, h: number, hkv: number, tq: number, tk: number, d: number): AttentionArgs {
  return { batch: b, heads: h, kvHeads: hkv, tq, tk, d, kvLength: tk, qOffset: tk - tq, causal: true, window: 0, scale: 1 / Math.sqrt(d) };
}

function upload(be: WebGpuBackend, n: number, seed: number): GpuRef {
  return { h: be.upload(f32ToHost(normalArray(seed, n), 'f16'), 'f16'), shape: [n], dtype: 'f16' };
}

/**
 * Worst |gpu − cpu| / (1 + |cpu|) of out on a small case, and where it goes wrong: NaNs in out
 * (how many, and the first rows holding one), the worst lse error.
 */
async function check(be: WebGpuBackend, ver: Version): Promise<string> {
  const a = ver.kind === 'prefill' ? args(1, 4, 2, 300, 300, 128) : args(1, 32, 8, 1, 1000, 128);
  if (!ver.usable(be, a)) return 'n/a';
  const hq = f32ToHost(normalArray(1, a.heads * a.tq * a.d), 'f16'), hk = f32ToHost(normalArray(2, a.kvHeads * a.tk * a.d), 'f16'), hv = f32ToHost(normalArray(3, a.kvHeads * a.tk * a.d), 'f16');
  const [want, wantLse] = cpuAttention({ h: hq, shape: [], dtype: 'f16' }, { h: hk, shape: [], dtype: 'f16' }, { h: hv, shape: [], dtype: 'f16' }, a);
  const refs = [hq, hk, hv].map((h) => ({ h: be.upload(h, 'f16'), shape: [], dtype: 'f16' as const }));
  const [out, lse] = ver.run(be, refs[0], refs[1], refs[2], a);
  const got = hostToF32(await be.read(out, 'f16', want.length), 'f16'), w = hostToF32(want, 'f16');
  const gotLse = hostToF32(await be.read(lse, 'f32', wantLse.length), 'f32'), wl = hostToF32(wantLse, 'f32');
  let worst = 0, nans = 0, lseWorst = 0;
  const nanRows = new Set<number>();
  for (let i = 0; i < w.length; i++) {
    if (Number.isNaN(got[i])) { nans++; nanRows.add(Math.floor(i / a.d)); continue; }
    worst = Math.max(worst, Math.abs(got[i] - w[i]) / (1 + Math.abs(w[i])));
  }
  for (let i = 0; i < wl.length; i++) lseWorst = Math.max(lseWorst, Number.isNaN(gotLse[i]) ? Infinity : Math.abs(gotLse[i] - wl[i]));
  for (const h of [out, lse, ...refs.map((r) => r.h)]) be.free(h);
  if (nans === 0) return `${worst.toExponential(2)} (lse ${lseWorst.toExponential(1)})`;
  const rows = [...nanRows].slice(0, 6).map((r) => `h${Math.floor(r / a.tq)}:${r % a.tq}`).join(' ');
  return `${worst.toExponential(2)}, ${nans} NaN in ${nanRows.size} rows (${rows}…), lse ${lseWorst.toExponential(1)}`;
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

// ------------------------------------------------------------------------ training shapes (--shape)

/** A training-path version: forward, or forward + backward; returns every handle it made. */
interface TrainVersion { name: string; run(be: WebGpuBackend, x: GpuRef[], a: AttentionArgs): GpuHandle[] }

function fwdBwd(fwd: (be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs) => [GpuHandle, GpuHandle], blocked: boolean) {
  return (be: WebGpuBackend, x: GpuRef[], a: AttentionArgs): GpuHandle[] => {
    const [o, l] = fwd(be, x[0], x[1], x[2], a);
    const f32 = (h: GpuHandle): GpuRef => ({ h, shape: [], dtype: 'f32' });
    return [o, l, ...attentionBackward(be, x[0], x[1], x[2], f32(o), f32(l), x[3], a, blocked ? aluBackwardPlan(be.caps, a, 'f32', 'f32') : { dq: 'plain', dkdv: 'plain' })];
  };
}

const TRAIN: TrainVersion[] = [
  { name: 'f1', run: (be, x, a) => attentionPlain(be, x[0], x[1], x[2], a) },
  { name: 'f2', run: (be, x, a) => attentionBlocked(be, x[0], x[1], x[2], a) },
  { name: 'b1', run: fwdBwd(attentionPlain, false) },
  { name: 'b2', run: fwdBwd(attentionBlocked, true) },
];

function trainInputs(be: WebGpuBackend, a: AttentionArgs): { host: Float32Array[]; refs: GpuRef[] } {
  const n = a.batch * a.heads * a.tq * a.d;
  const host = [1, 2, 3, 4].map((seed) => normalArray(seed, n));
  return { host, refs: host.map((h) => ({ h: be.upload(h, 'f32'), shape: [], dtype: 'f32' as const })) };
}

/** Worst |gpu − cpu| / (1 + |cpu|) over out (and dq, dk, dv) at B = 1, H = 2. */
async function trainCheck(be: WebGpuBackend, ver: TrainVersion, t: number, d: number): Promise<string> {
  const a = args(1, 2, 2, t, t, d);
  const { host, refs } = trainInputs(be, a);
  const c = (h: Float32Array) => ({ h, shape: [], dtype: 'f32' as const });
  const [o, l] = cpuAttention(c(host[0]), c(host[1]), c(host[2]), a);
  const want = [o, ...(ver.name.startsWith('b') ? cpuAttentionBackward(c(host[0]), c(host[1]), c(host[2]), c(o as Float32Array), c(l as Float32Array), c(host[3]), a) : [])];
  const got = ver.run(be, refs, a);
  const outs = ver.name.startsWith('b') ? [got[0], got[2], got[3], got[4]] : [got[0]];
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const g = await be.read(outs[i], 'f32', want[i].length) as Float32Array, w = want[i] as Float32Array;
    for (let j = 0; j < w.length; j++) worst = Math.max(worst, Math.abs(g[j] - w[j]) / (1 + Math.abs(w[j])));
  }
  for (const h of [...got, ...refs.map((r) => r.h)]) be.free(h);
  return worst.toExponential(2);
}

async function trainTime(be: WebGpuBackend, ver: TrainVersion, a: AttentionArgs): Promise<number> {
  const { refs } = trainInputs(be, a);
  const once = () => { for (const h of ver.run(be, refs, a)) be.free(h); };
  const batch = async (n: number) => { const t0 = performance.now(); for (let i = 0; i < n; i++) once(); await be.sync(); return performance.now() - t0; };
  let n = 1;
  let t = await batch(n);
  while (t < 250 && n < 100_000) { n = Math.ceil(n * Math.min(10, 300 / Math.max(t, 0.5))); t = await batch(n); }
  const ts = [await batch(n), await batch(n), await batch(n)].sort((x, y) => x - y);
  for (const r of refs) be.free(r.h);
  return ts[1] / n;
}

// ------------------------------------------------------------------- f16 backward (--backward)

/**
 * A backward version at the prefill shapes (f16, causal, B = 1, H = 32, D = 128): dq, dk, dv from
 * q, k, v, dO, the forward's out and lse and delta = rowsum(dO∘O), precomputed once outside the
 * timing (what attentionBackward's DELTA pass adds is not in these figures).
 */
interface BackwardVersion { name: string; usable(be: WebGpuBackend, a: AttentionArgs): boolean; run(be: WebGpuBackend, x: GpuRef[], o: GpuRef, lse: GpuHandle, delta: GpuHandle, a: AttentionArgs): GpuHandle[] }

const tcBwd = (variant: Partial<TcBackwardVariant>): BackwardVersion['run'] => (be, x, _o, lse, delta, a) => attentionTcBackward(be, x[0], x[1], x[2], x[3], { lse, delta }, a, variant);

/**
 * Backward versions (`--backward 4096,16384`, at B = 1, H = 32, D = 128 unless `--backward-bhd B,H,D`), causal, f16; ms per backward
 * (TFLOP/s counting 2.5× the causal forward), and each pass's GPU time. H200 runs of 2026-12-03
 * (11:1xZ and 11:4xZ):
 *
 *   ab1  attention_blocked.wgsl DQ and DKDV with packed 16-bit tiles (the ALU backward, src's
 *        default before the tensor-core passes; timed with its own DELTA pass).
 *                                                      4K 116.0 (3.0), 16K 1826.0 (3.0)
 *   tb1  attention_tc_backward.wgsl, 4 subgroups, k/v fragments held in registers, 32 query rows a
 *        DKDV step.                                    4K 7.9 (43.2), 16K 126.4–127.4 (43.5) [DKDV 67.5, DQ 50.8]
 *   tb2  tb1 with the DKDV k/v fragments loaded again at every use (KRELOAD).
 *                                                      4K 9.1 (37.7), 16K 142.8 (38.5)
 *   tb3  tb1 with 2 subgroups a workgroup.             4K 19.0 (18.1), 16K 295.8 (18.6)
 *   tb4  tb1 with 16 query rows a DKDV step (half the staging and scratch).   ← src
 *                                                      4K 6.7 (51.3), 16K 91.6 (60.0) [DQ 50.8, DKDV 40.3]
 *   tb5  tb4 with 8 subgroups a DKDV workgroup (128 keys: half the q/dO staging per key).
 *                                                      4K 6.8 (50.6), 16K 97.8 (56.2) [DQ 50.8, DKDV 38.9]
 *   tb6  tb5 with the k/v fragments reloaded (KRELOAD). (not timed yet: the run's limit came first)
 *   tb7  tb4 with 16 keys a DQ step (half the DQ staging and scratch).
 *                                                      4K 5.1 (67.0), 16K 72.0 (76.4) [DKDV 38.1, DQ 30.5]
 *   tb8  tb7 with 8 subgroups a DQ workgroup (128 rows: half the k/v staging per row).   ← src
 *                                                      4K 5.1 (67.6), 16K 67.7 (81.2) [DKDV 38.1, DQ 29.6]
 *        (tb4 in the same run: 4K 6.5, 16K 89.8 [DQ 51.1, DKDV 38.1]; 2026-12-03T14:5xZ)
 *   tb9  tb8 with the DKDV k/v fragments reloaded (KRELOAD).
 *   (2026-12-03T18:0xZ) the staging of every pass rewritten as fetch (each invocation's 16-byte
 *        pieces of a block into registers, a loop of constant trip count) then put (registers into
 *        workgroup memory), where it was one loop of load-and-store; src's tb8 in that run:
 *                                                      4K 4.1 (83.9), 16K 57.8 (95.1) [DKDV 28.9, DQ 25.9]
 *   tb10 tb8 with PREFETCH in both passes: a step's fetch issued right after the step before is
 *        in workgroup memory.                          4K 4.3 (79.6), 16K 59.0 (93.2) [DKDV 34.0, DQ 24.0]
 *   tb11 tb10 with 32 query rows a DKDV step.          4K 5.5 (62.5), 16K 76.7 (71.7) [DKDV 52.1, DQ 24.2]
 *   tb12 tb10 with 8 subgroups a DKDV workgroup.       4K 4.6 (75.3), 16K 58.1 (94.6) [DKDV 33.5, DQ 24.2]
 *   tb13 tb8 with PREFETCH in the DQ pass only (DKDV loses it to register pressure).   ← src
 *
 * DKDV now holds more than half of the time: the next lead.
 */
/** tb1 in full: every other version names what it changes from it (src's default has moved since, TC_BACKWARD_DEFAULT). */
const TB1: TcBackwardVariant = { nsg: 4, kReload: false, kPad: 8, kvNsg: 4, kvRows: 32, dqKeys: 32, dqPrefetch: false, kvPrefetch: false };

const BACKWARD_VERSIONS: BackwardVersion[] = [
  { name: 'ab1', usable: () => true, run: (be, x, o, lse, _delta, a) => attentionBackward(be, x[0], x[1], x[2], o, { h: lse, shape: [], dtype: 'f32' }, x[3], a, aluBackwardPlan(be.caps, a, 'f16', 'f16')) },
  { name: 'tb1', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd(TB1) },
  { name: 'tb2', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kReload: true }) },
  { name: 'tb3', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, nsg: 2 }) },
  { name: 'tb4', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16 }) },
  { name: 'tb5', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvNsg: 8, kvRows: 16 }) },
  { name: 'tb6', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvNsg: 8, kvRows: 16, kReload: true }) },
  { name: 'tb7', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16 }) },
  { name: 'tb8', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16, nsg: 8 }) },
  { name: 'tb9', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16, nsg: 8, kReload: true }) },
  { name: 'tb10', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16, nsg: 8, dqPrefetch: true, kvPrefetch: true }) },
  { name: 'tb11', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 32, dqKeys: 16, nsg: 8, dqPrefetch: true, kvPrefetch: true }) },
  { name: 'tb12', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16, nsg: 8, kvNsg: 8, dqPrefetch: true, kvPrefetch: true }) },
  { name: 'tb13', usable: (be, a) => tcBackwardEligible(be.caps, 'f16', 'f16', a), run: tcBwd({ ...TB1, kvRows: 16, dqKeys: 16, nsg: 8, dqPrefetch: true }) },
];

/** Inputs of a backward version: q, k, v, dO (f16), the CPU forward's out and lse, and delta. */
function backwardInputs(be: WebGpuBackend, a: AttentionArgs, withCpu: boolean) {
  const n = a.batch * a.heads * a.tq * a.d, nk = a.batch * a.kvHeads * a.tk * a.d;
  const host = [normalArray(1, n), normalArray(2, nk), normalArray(3, nk), normalArray(4, n)].map((h) => f32ToHost(h, 'f16'));
  const refs = host.map((h) => ({ h: be.upload(h, 'f16'), shape: [], dtype: 'f16' as const }));
  const c = (h: ReturnType<typeof f32ToHost>, dtype: 'f16' | 'f32' = 'f16') => ({ h, shape: [], dtype });
  let o: ReturnType<typeof f32ToHost>, l: ReturnType<typeof f32ToHost>;
  if (withCpu) [o, l] = cpuAttention(c(host[0]), c(host[1]), c(host[2]), a);
  else {
    const [oh, lh] = attentionTc(be, refs[0], refs[1], refs[2], a);
    return { host, refs, o: { h: oh, shape: [], dtype: 'f16' as const }, lse: lh, delta: attentionDelta(be, { h: oh, shape: [], dtype: 'f16' }, refs[3], a), want: null };
  }
  const of = hostToF32(o, 'f16'), g = hostToF32(host[3], 'f16');
  const delta = Float32Array.from({ length: n / a.d }, (_, r) => { let s = 0; for (let e = 0; e < a.d; e++) s += g[r * a.d + e] * of[r * a.d + e]; return s; });
  const want = cpuAttentionBackward(c(host[0]), c(host[1]), c(host[2]), c(o), c(l, 'f32'), c(host[3]), a);
  return { host, refs, o: { h: be.upload(o, 'f16'), shape: [], dtype: 'f16' as const }, lse: be.upload(l, 'f32'), delta: be.upload(delta, 'f32'), want };
}

/** The backward at sequence lengths `sizes`, B = 1, H = 32, D = 128, or at `heads` = [B, H, D] (--backward-bhd). */
async function runBackward(be: WebGpuBackend, sizes: number[], pick: Set<string> | null, heads: number[] = [1, 32, 128]): Promise<void> {
  const [B, H, D] = heads;
  const small = args(1, 4, 2, 300, 300, 128);
  for (const ver of BACKWARD_VERSIONS) {
    if (pick && !pick.has(ver.name)) continue;
    try {
      let err = 'n/a';
      if (ver.usable(be, small)) {
        const x = backwardInputs(be, small, true);
        const got = ver.run(be, x.refs, x.o, x.lse, x.delta, small);
        let worst = 0;
        for (let i = 0; i < 3; i++) {
          const g = hostToF32(await be.read(got[i], 'f16', x.want![i].length), 'f16'), w = hostToF32(x.want![i], 'f16');
          for (let j = 0; j < w.length; j++) worst = Math.max(worst, Number.isNaN(g[j]) ? Infinity : Math.abs(g[j] - w[j]) / (1 + Math.abs(w[j])));
        }
        err = worst.toExponential(2);
        for (const h of [...got, x.o.h, x.lse, x.delta, ...x.refs.map((r) => r.h)]) be.free(h);
      }
      const cells: string[] = [];
      for (const t of sizes) {
        const a = args(B, H, H, t, t, D);
        if (!ver.usable(be, a)) { cells.push(`${t}: n/a`); continue; }
        const x = backwardInputs(be, a, false);
        const once = () => { for (const h of ver.run(be, x.refs, x.o, x.lse, x.delta, a)) be.free(h); };
        const batch = async (n: number) => { const t0 = performance.now(); for (let i = 0; i < n; i++) once(); await be.sync(); return performance.now() - t0; };
        let n = 1;
        let ms = await batch(n);
        while (ms < 250 && n < 100_000) { n = Math.ceil(n * Math.min(10, 300 / Math.max(ms, 0.5))); ms = await batch(n); }
        const ts = [await batch(n), await batch(n), await batch(n)].sort((p, q) => p - q);
        const per = ts[1] / n, flops = 2.5 * (4 * t * t * D * B * H) / 2;
        // GPU time per kernel of one call (timestamp queries, one pass a dispatch).
        let split = '';
        if (be.caps.timestamps) {
          be.rt.startProfile();
          once();
          split = ` [${(await be.rt.stopProfile()).map((r) => `${r.kernel}${r.variant.includes('"DQ"') ? ' DQ' : r.variant.includes('"DKDV"') ? ' DKDV' : ''} ${r.ms.toFixed(2)}`).join(', ')}]`;
        }
        cells.push(`${t}: ${per.toFixed(3)} ms (${(flops / per / 1e9).toFixed(1)} TFLOP/s)${split}`);
        for (const h of [x.o.h, x.lse, x.delta, ...x.refs.map((r) => r.h)]) be.free(h);
      }
      console.log(`${ver.name.padEnd(3)} max err ${err.padEnd(9)} ${cells.join('  ')}`);
    } catch (e) { console.log(`${ver.name.padEnd(3)} failed: ${(e as Error).message.split('\n')[0]}`); }
  }
}

const be = await WebGpuBackend.create();
console.log(`attention kernels on ${be.caps.adapterName} (f16 ${be.caps.f16}, subgroup matrix ${be.caps.subgroupMatrix ? 'yes' : 'no'}, workgroup memory ${be.caps.maxWorkgroupStorage} B)`);
if (flags.shape) {
  const pickT = flags.only ? new Set(flags.only.split(',')) : null;
  for (const shape of flags.shape.split('/')) {
    const [b, h, t, d] = shape.split(',').map(Number);
    const a = args(b, h, h, t, t, d);
    console.log(`B=${b} H=${h} T=${t} D=${d} f32 causal (blocked row-threads: fwd ${blockedRows(be.caps, d, 'fwd')}, dq ${blockedRows(be.caps, d, 'dq')}, dkdv ${blockedRows(be.caps, d, 'dkdv')})`);
    for (const ver of TRAIN) {
      if (pickT && !pickT.has(ver.name)) continue;
      const err = await trainCheck(be, ver, t, d);
      const ms = await trainTime(be, ver, a);
      const flops = ((4 * t * t * d * b * h) / 2) * (ver.name.startsWith('b') ? 3.5 : 1);
      console.log(`${ver.name.padEnd(3)} max err ${err.padEnd(9)} ${ms.toFixed(3)} ms (${(flops / ms / 1e9).toFixed(2)} TFLOP/s)`);
    }
  }
  be.destroy();
  process.exit(0);
}
const pick = flags.only ? new Set(flags.only.split(',')) : null;
if (flags.backward) {
  await runBackward(be, flags.backward.split(',').filter(Boolean).map(Number), pick, flags['backward-bhd']?.split(',').map(Number));
  be.destroy();
  process.exit(0);
}
const prefill = flags.prefill.split(',').filter(Boolean).map(Number), decode = flags.decode.split(',').filter(Boolean).map(Number);
for (const ver of VERSIONS) {
  if (pick && !pick.has(ver.name)) continue;
  // A version that fails to compile or run is reported and the others go on (the device survives
  // a shader-module error; a lost device ends the run at the next version).
  try { await runVersion(ver); } catch (e) { console.log(`${ver.name.padEnd(3)} failed: ${(e as Error).message.split('\n')[0]}`); }
}
be.destroy();
process.exit(0);

async function runVersion(ver: Version): Promise<void> {
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
