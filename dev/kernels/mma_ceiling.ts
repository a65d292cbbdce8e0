/**
 * What WebGPU's subgroup matrices can reach on this GPU at all: the tensor-core throughput ceiling
 * that every FON kernel on them (the f16 GEMM, the attention forward and backward) lives under.
 * No global memory in the loop: each version runs ITER steps of 16×16×16 f16→f32
 * subgroupMatrixMultiplyAccumulate per subgroup, on 132 × 16 workgroups.
 *
 *   node --import tsx dev/kernels/mma_ceiling.ts [--iter 4096] [--only r4x4,s4x4]
 *   python3 dev/kernels/gemm_torch.py 8192        (cuBLAS beside it, same machine session)
 *
 * Versions (name: what a subgroup does per step; NSG subgroups a workgroup):
 *   rAxN  A independent accumulators, each += L·R with one left and one right fragment held in
 *         registers the whole loop (N subgroups): the MMA unit alone, A chains to hide latency.
 *   g4x4  4 left × 4 right fragments in registers, 16 accumulators (the GEMM's register tile, no loads).
 *   h1xJnN  one left fragment held in registers, J right fragments loaded from the workgroup tile a
 *         step into J accumulators: the attention kernels' QKᵀ step (q held, K loaded).
 *   sIxJ[nN][b]  the GEMM's inner loop without global memory: per step I left and J right fragments
 *         loaded from a workgroup tile (rows 136 halves apart, as the attention's K tile), I·J MMAs
 *         into I·J accumulators; nN: N subgroups (else 4); b: a workgroupBarrier every step.
 *
 * H200, 2026-12-03T17:4xZ (Dawn through Vulkan, driver 580.159.04), 4096 steps; cuBLAS in the same
 * machine session (gemm_torch.py 8192): bf16 750.0, fp16 738.2 TFLOP/s; FON's f16 GEMM (gemm.ts t16,
 * src's) 253.9 at 8192³:
 *   r1x4 586.5   r2x4 617.4   r4x4 640.9   r8x4 644.8   r4x1 291.5   r4x8 606.6   r8x8 629.0
 *   g4x4 627.3   s2x2 469.4   s4x4 598.3   s4x4n8 615.8   s4x4b 604.8   s1x2n8 323.0   s1x2n8b 301.8
 * So the MMA unit behind WebGPU's subgroup matrices reaches 0.85× cuBLAS, and 0.80–0.82× with the
 * GEMM's fragment loads from workgroup memory and a barrier a step: the GEMM (0.34×) loses its
 * time outside the MMAs and fragment loads (global staging, occupancy). One subgroup a workgroup
 * reaches half (r4x1: 4 warps an SM are too few). With three fragment loads per two MMAs (s1x2)
 * the ceiling falls to ~320; the attention kernels load about one fragment per MMA (q, or k and v,
 * held in registers; the staged tiles' fragments loaded): between the two (not measured).
 *
 * Each version is checked first: inputs all 1/32, so after ITER steps every accumulator holds
 * ITER·16/1024 exactly (f32; the store runs only in the check, behind a uniform flag the compiler
 * cannot see through). Timing: bench/lib/report.ts timeBatched (median of 3 batches of back-to-back
 * dispatches, ≥ 0.25 s each).
 */
import { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';
import { matrixCode } from '../../src/backend/webgpu/kernels/subgroup_matrix.ts';
import { f32ToHost } from '../../src/tensor/dtype.ts';
import { timeBatched } from '../../bench/lib/report.ts';

const L = 'subgroup_matrix_left<f16, 16, 16>', R = 'subgroup_matrix_right<f16, 16, 16>', A = 'subgroup_matrix_result<f32, 16, 16>';
const { load, store } = matrixCode(false);
const LD = 136;

interface Version { name: string; nsg: number; accs: number; body(): string }

const header = (nsg: number) => [
  'diagnostic(off, chromium.subgroup_matrix_uniformity);', 'enable f16;', 'enable subgroups;', 'enable chromium_experimental_subgroup_matrix;',
  'struct Params { iter: u32, store: u32 }', '@group(0) @binding(0) var<uniform> P: Params;',
  '@group(0) @binding(1) var<storage, read> src: array<f16>;', '@group(0) @binding(2) var<storage, read_write> dst: array<f32>;',
  `const NSG = ${nsg}u;`, `var<workgroup> W: array<f16, ${64 * LD}>;`,
].join('\n');

/** The kernel around a step body: fill W from src, hold or load fragments, store the accumulators when asked. */
function kernelText(v: Version, pre: string, step: string): string {
  const accs = Array.from({ length: v.accs }, (_, i) => i);
  return `${header(v.nsg)}
@compute @workgroup_size(${32 * v.nsg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sg: u32) {
  for (var e = lid; e < ${64 * LD}u; e += ${32 * v.nsg}u) { W[e] = src[e % 512u]; }
  workgroupBarrier();
${accs.map((i) => `  var c${i} = ${A}();`).join('\n')}
${pre}
  for (var it = 0u; it < P.iter; it++) {
${step}
  }
  if (P.store == 1u) {
    let base = ((wid.x * NSG + sg) * ${v.accs}u) * 256u;
${accs.map((i) => `    ${store('&dst', `base + ${256 * i}u`, `c${i}`, false, '16u')};`).join('\n')}
  }
}`;
}

function regVersion(accs: number, nsg: number): Version {
  const v: Version = { name: `r${accs}x${nsg}`, nsg, accs, body: () => '' };
  v.body = () => kernelText(v, `  let l0 = ${load(L, '&W', '0u', false, `${LD}u`)};\n  let r0 = ${load(R, '&W', `${16 * LD}u`, true, `${LD}u`)};`,
    Array.from({ length: accs }, (_, i) => `    c${i} = subgroupMatrixMultiplyAccumulate(l0, r0, c${i});`).join('\n'));
  return v;
}

function gridVersion(): Version {
  const v: Version = { name: 'g4x4', nsg: 4, accs: 16, body: () => '' };
  const pre: string[] = [];
  for (let i = 0; i < 4; i++) pre.push(`  let l${i} = ${load(L, '&W', `${16 * i * LD}u`, false, `${LD}u`)};`, `  let r${i} = ${load(R, '&W', `${16 * i * LD + 16}u`, true, `${LD}u`)};`);
  const step: string[] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) step.push(`    c${4 * i + j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, c${4 * i + j});`);
  v.body = () => kernelText(v, pre.join('\n'), step.join('\n'));
  return v;
}

/** I left and J right fragments loaded from W every step (the column moves with the step, so no load is loop-invariant). */
function smemVersion(ti: number, tj: number, nsg: number, barrier: boolean): Version {
  const v: Version = { name: `s${ti}x${tj}${nsg === 4 ? '' : `n${nsg}`}${barrier ? 'b' : ''}`, nsg, accs: ti * tj, body: () => '' };
  const step: string[] = ['    let k0 = (it % 8u) * 16u;'];
  for (let i = 0; i < ti; i++) step.push(`    let l${i} = ${load(L, '&W', `${16 * i * LD}u + k0`, false, `${LD}u`)};`);
  for (let j = 0; j < tj; j++) step.push(`    let r${j} = ${load(R, '&W', `${16 * ((j + 2) % 4) * LD}u + k0`, true, `${LD}u`)};`);
  for (let i = 0; i < ti; i++) for (let j = 0; j < tj; j++) step.push(`    c${tj * i + j} = subgroupMatrixMultiplyAccumulate(l${i}, r${j}, c${tj * i + j});`);
  if (barrier) step.push('    workgroupBarrier();');
  v.body = () => kernelText(v, '', step.join('\n'));
  return v;
}

/** The attention kernels' QKᵀ step: one left fragment held in registers (q), J right fragments (K) loaded from W a step. */
function heldVersion(tj: number, nsg: number): Version {
  const v: Version = { name: `h1x${tj}n${nsg}`, nsg, accs: tj, body: () => '' };
  const step: string[] = ['    let k0 = (it % 8u) * 16u;'];
  for (let j = 0; j < tj; j++) step.push(`    let r${j} = ${load(R, '&W', `${16 * ((j + 2) % 4) * LD}u + k0`, true, `${LD}u`)};`);
  for (let j = 0; j < tj; j++) step.push(`    c${j} = subgroupMatrixMultiplyAccumulate(l0, r${j}, c${j});`);
  v.body = () => kernelText(v, `  let l0 = ${load(L, '&W', '0u', false, `${LD}u`)};`, step.join('\n'));
  return v;
}

const VERSIONS: Version[] = [
  regVersion(1, 4), regVersion(2, 4), regVersion(4, 4), regVersion(8, 4), regVersion(4, 1), regVersion(4, 8), regVersion(8, 8),
  gridVersion(),
  smemVersion(2, 2, 4, false), smemVersion(4, 4, 4, false), smemVersion(4, 4, 8, false), smemVersion(4, 4, 4, true), smemVersion(1, 2, 8, false), smemVersion(1, 2, 8, true),
  heldVersion(2, 8), heldVersion(4, 8),
];

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const iter = Number(flag('iter') ?? 4096);
  const only = flag('only')?.split(',');
  const be = await WebGpuBackend.create();
  console.log(`# ${be.caps.adapterName}; subgroup matrix ${JSON.stringify(be.caps.subgroupMatrix)}; ${iter} steps a subgroup`);
  const groups = 132 * 16;
  const src = be.upload(f32ToHost(new Float32Array(512).fill(1 / 32), 'f16'), 'f16');
  for (const v of VERSIONS) {
    if (only && !only.includes(v.name)) continue;
    const kernel: Kernel = { name: `mma_${v.name}`, source: () => v.body() };
    try {
      // Check: 8 workgroups, 64 steps, every accumulator element = 64·16/1024 = 1.
      const n = 8 * v.nsg * v.accs * 256;
      const dst = be.alloc('f32', n, 'mma check');
      be.rt.run({ kernel, variant: {}, uniforms: [64, 1], buffers: [src.buffer, dst.buffer], workgroups: [8] });
      const got = await be.read(dst, 'f32', n) as Float32Array;
      be.free(dst);
      const bad = got.findIndex((x) => x !== 1);
      const sink = be.alloc('f32', 256, 'mma sink');
      const once = () => be.rt.run({ kernel, variant: {}, uniforms: [iter, 0], buffers: [src.buffer, sink.buffer], workgroups: [groups] });
      const ms = await timeBatched(() => be.sync(), once);
      be.free(sink);
      const flops = groups * v.nsg * v.accs * iter * 2 * 16 * 16 * 16;
      console.log(`${v.name}: check ${bad < 0 ? 'ok' : `FAILED (element ${bad} = ${got[bad]}, want 1)`} | ${(flops / ms / 1e9).toFixed(1)} TFLOP/s (${ms.toFixed(3)} ms a dispatch)`);
    } catch (e) {
      console.log(`${v.name}: ERROR ${(e as Error).message.split('\n').slice(0, 6).join(' / ')}`);
      await be.sync().catch(() => undefined);
    }
  }
  be.destroy();
}

await main().catch((e) => { console.error(e); process.exitCode = 1; });
setImmediate(() => process.exit(process.exitCode ?? 0));
