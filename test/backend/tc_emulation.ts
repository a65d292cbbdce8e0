/**
 * The tensor-core attention kernels (src/backend/webgpu/kernels/attention_tc.wgsl and
 * attention_tc_backward.wgsl, with a modifier's hooks and block masks) run on a device without
 * subgroup matrices or shader-f16 (SwiftShader), so that the skeletons' and the hooks' logic is
 * checked in CI: the generated programs with each subgroup-matrix statement replaced by ALU loops
 * over the same workgroup scratch —
 *   SCORES / PRODUCTS  S (and the backward's dP; Sᵀ, dPᵀ in DKDV) of the subgroup's 16 rows against
 *             the staged block, written where the matrix stores put them (column c of 16 rows at
 *             sbase + 16c);
 *   PV / UPDATE  O += P·V (forward), dQ += dS·K (DQ), dV += Pᵀ·dO and dK += dSᵀ·Q (DKDV) into
 *             per-subgroup f32 accumulators in workgroup memory (zero at the start of each workgroup);
 *   STORE     the accumulators copied where the matrix store leaves them for put_tile;
 * f16 read as packed halves into f32 (every f16 of the program becomes f32, the outputs too), and
 * subgroup_id / subgroup_invocation_id taken from the invocation index: SwiftShader's subgroups have
 * 4 lanes, so a lane pair still shares one and the 16-lane shuffle goes through workgroup memory.
 * What this does not check: the MMAs' fragment layouts and the GPU compiler (a real run on the H200
 * does, test/backend/webgpu_modifier_tc.test.ts and webgpu_attention.test.ts).
 */
import type { AttentionArgs } from '../../src/backend/backend.ts';
import type { GpuHandle, WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { tcBackwardKernel, tcKernel } from '../../src/backend/webgpu/kernels/attention_tc.ts';
import { maskUniforms, uniforms } from '../../src/backend/webgpu/kernels/attention_common.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';

const half = (buf: string, i: string) => `unpack2x16float(${buf}[(${i}) / 2u])[(${i}) % 2u]`;

/** The parts common to every pass: f16 as f32 (packed inputs read as halves), subgroup ids from the invocation index, the 16-lane shuffle through workgroup memory, the accumulators. */
function emulateCommon(c0: string, halves: string[], accs: string[]): string {
  let c = c0.split('\n').filter((l) => !/subgroupMatrix|subgroup_matrix|enable f16|chromium/.test(l) || l.trimStart().startsWith('//')).join('\n');
  for (const name of halves) c = c.replace(`var<storage, read> ${name}: array<f16>`, `var<storage, read> ${name}: array<u32>`);
  c = c.replace(/bitcast<vec2<f16>>\(/g, 'unpack2x16float(').replace(/\bf16\b/g, 'f32');
  c = c.replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_id) sg_hw: u32').replace('@builtin(subgroup_invocation_id) lane: u32', '@builtin(subgroup_invocation_id) lane_hw: u32');
  c = c.replace(/^ {2}let ([gh]) = wid\.y;$/m, (m) => `  let sg = lid / 32u;\n  let lane = lid % 32u;\n${m}`);
  c = c.replace(/subgroupShuffleXor\((\w+), 16u\)/g, 'xch16($1, lid)');
  return `${c}
${accs.map((a) => `var<workgroup> ${a}: array<f32, NSG * 16u * D>;`).join('\n')}
var<workgroup> XCH: array<f32, WG>;
fn xch16(x: f32, lid: u32) -> f32 { workgroupBarrier(); XCH[lid] = x; workgroupBarrier(); let y = XCH[lid ^ 16u]; workgroupBarrier(); return y; }
`;
}

/** The accumulators' tiles where the matrix store of accumulator `acc` n would leave them (Ss, row-major, 16 a row). */
const stores = (c: string) => c.replace(/subgroupMatrixStore<row_major>\(&Ss, sg \* SP, ([okv])(\d+)x?, 16u\);/g, (_m, acc: string, n: string) =>
  `for (var e = lane; e < 256u; e += 32u) { Ss[sg * SP + e] = ACC${acc.toUpperCase()}[sg * 16u * D + (e / 16u) * D + ${16 * Number(n)}u + e % 16u]; }`);

/** The forward's program `code` with its subgroup-matrix statements replaced. */
function emulateForward(code: string): string {
  const scores = `      for (var e = lane; e < 16u * BK; e += 32u) {
        let rr = e % 16u;
        let cc = e / 16u;
        var s = 0.0;
        for (var dd = 0u; dd < D; dd++) { s += ${half('q16', '(qrow0 + rb + rr) * D + dd')} * KV[cc * KD + dd]; }
        Ss[sbase + cc * 16u + rr] = s;
      }`;
  const pv = `    for (var e = lane; e < 16u * D; e += 32u) {
      var s = 0.0;
      for (var cc = 0u; cc < BK; cc++) { s += Ps[sbase + cc * 16u + e / D] * KV[BK * KD + cc * KD + e % D]; }
      ACCO[sg * 16u * D + e] += s;
    }`;
  const c = stores(code.replaceAll('      var s0 = subgroup_matrix_result<f32, 16, 16>();', scores).replace(/^ {4}let p0 = .*$/m, pv));
  return emulateCommon(c, ['q16'], ['ACCO']);
}

/** The generated program `code` of one backward pass with its subgroup-matrix statements replaced. */
function emulate(code: string, dkdv: boolean): string {
  const row0 = dkdv ? 'kvrow0 + kb' : 'qrow0 + rb';
  const products = `  for (var e = lane; e < 16u * SC; e += 32u) {
    let rr = e % 16u;
    let cc = e / 16u;
    var s = 0.0;
    var dp = 0.0;
    for (var dd = 0u; dd < D; dd++) {
      let fi = (${row0} + rr) * D + dd;
      s += ${half('fa', 'fi')} * T[cc * KD + dd];
      dp += ${half('fb', 'fi')} * T[SC * KD + cc * KD + dd];
    }
    Ss[sbase + cc * 16u + rr] = s;
    Ds[sbase + cc * 16u + rr] = dp;
  }`;
  // acc[e] += Σ_c scratch[column c, row e / D] · T[row c of the staged tensor at `at`, column e % D].
  const update = (acc: string, scratch: string, at: string) => `  for (var e = lane; e < 16u * D; e += 32u) {
    var s = 0.0;
    for (var cc = 0u; cc < SC; cc++) { s += ${scratch}[sbase + cc * 16u + e / D] * T[${at} + cc * KD + e % D]; }
    ${acc}[sg * 16u * D + e] += s;
  }`;
  let c = code.replace('  var s0 = subgroup_matrix_result<f32, 16, 16>();', products);
  if (dkdv) {
    c = c.replace(/^ {2}let vp0 = .*$/m, update('ACCV', 'Pt', 'SC * KD')).replace(/^ {2}let kp0 = .*$/m, update('ACCK', 'Dt', '0u'));
  } else {
    c = c.replace(/^ {2}let op0 = .*$/m, update('ACCO', 'Ps', '0u'));
  }
  return emulateCommon(stores(c), ['fa', 'fb'], dkdv ? ['ACCK', 'ACCV'] : ['ACCO']);
}

const emulatedKernel: Kernel = { name: 'attention_tc_backward_emulated', source: (v, caps) => emulate(tcBackwardKernel.source(v, caps), !!v.DKDV) };
const emulatedForwardKernel: Kernel = { name: 'attention_tc_emulated', source: (v, caps) => emulateForward(tcKernel.source(v, caps)) };

/**
 * out (f32) and lse of the emulated forward: q, k, v packed f16 handles, `modifier` FoX's c or FPA's
 * [φ | ℓ | λ] (f32), `mask` a block mask's i32 table (a.mask its shape). 4 subgroups, 32 keys a
 * block, PREFETCH as asked. The caller frees what it gets.
 */
export function emulatedTcForward(gpu: WebGpuBackend, h: { q: GpuHandle; k: GpuHandle; v: GpuHandle }, a: AttentionArgs,
  opts: { modifier?: { kind: 'fox' | 'fpa'; ex: GpuHandle }; mask?: GpuHandle; prefetch?: boolean } = {}): { out: GpuHandle; lse: GpuHandle } {
  const rows = a.batch * a.heads * a.tq;
  const out = gpu.alloc('f32', rows * a.d, 'emulated out'), lse = gpu.alloc('f32', rows, 'emulated lse');
  gpu.rt.run({
    kernel: emulatedForwardKernel,
    variant: { D: a.d, NSG: EMULATED_NSG, QRELOAD: false, LOAD_ARG: false, KPAD: 8, PREFETCH: opts.prefetch ?? true, MOD: opts.modifier?.kind ?? '', MASK: !!opts.mask, SEG: !!opts.mask && (a.mask?.segmentOffset ?? 0) > 0 },
    uniforms: [...uniforms(a), ...maskUniforms(a)],
    buffers: [h.q.buffer, h.k.buffer, h.v.buffer, out.buffer, lse.buffer, ...(opts.modifier ? [opts.modifier.ex.buffer] : []), ...(opts.mask ? [opts.mask.buffer] : [])],
    workgroups: [Math.ceil(a.tq / (16 * EMULATED_NSG)), a.heads, a.batch],
  });
  return { out, lse };
}

/** Subgroups a workgroup of either emulated pass by default: 4 (64 rows or keys), within SwiftShader's 32 KiB of workgroup memory at D 16. */
export const EMULATED_NSG = 4;

/** The emulated passes' form: DQ's subgroups and keys a step (16 or 32), and each pass's PREFETCH. */
export interface EmulatedForm { dqNsg: number; dqKeys: number; dqPrefetch: boolean; kvPrefetch: boolean }
export const EMULATED_DEFAULT: EmulatedForm = { dqNsg: EMULATED_NSG, dqKeys: 16, dqPrefetch: true, kvPrefetch: false };

/**
 * dq, dk, dv (f32) of the emulated backward and, with a modifier, its zeroed `aux` after both
 * passes. q, k, v, dO: packed f16 handles; `stats`: lse and delta (no modifier) or
 * ex = [lse | delta | inputs] with `auxWords` (a modifier). The caller frees what it gets.
 */
export function emulatedTcBackward(gpu: WebGpuBackend, h: { q: GpuHandle; k: GpuHandle; v: GpuHandle; g: GpuHandle }, a: AttentionArgs,
  stats: { lse: GpuHandle; delta: GpuHandle } | { mod: 'fox' | 'fpa'; ex: GpuHandle; auxWords: number }, form: EmulatedForm = EMULATED_DEFAULT, mask?: GpuHandle): { dq: GpuHandle; dk: GpuHandle; dv: GpuHandle; aux: GpuHandle | null } {
  const rows = a.batch * a.heads * a.tq, kvSize = a.batch * a.kvHeads * a.tk * a.d;
  const dq = gpu.alloc('f32', rows * a.d, 'emulated dq'), dk = gpu.alloc('f32', kvSize, 'emulated dk'), dv = gpu.alloc('f32', kvSize, 'emulated dv');
  const mod = 'mod' in stats ? stats.mod : '';
  const aux = 'mod' in stats ? gpu.upload(new Float32Array(stats.auxWords), 'f32') : null;
  const st = 'mod' in stats ? [stats.ex.buffer] : [stats.lse.buffer, stats.delta.buffer];
  const u = [...uniforms(mod ? { ...a, causal: true, window: 0 } : a), ...maskUniforms(a)];
  const m = mask ? [mask.buffer] : [];
  const base = { D: a.d, KPAD: 8, MASK: !!mask, SEG: !!mask && (a.mask?.segmentOffset ?? 0) > 0, MOD: mod };
  gpu.rt.run({
    kernel: emulatedKernel, variant: { ...base, NSG: form.dqNsg, SC: form.dqKeys, DQ: true, PREFETCH: form.dqPrefetch }, uniforms: u,
    buffers: [h.q.buffer, h.g.buffer, h.k.buffer, h.v.buffer, ...st, dq.buffer, ...(aux ? [aux.buffer] : []), ...m], workgroups: [Math.ceil(a.tq / (16 * form.dqNsg)), a.heads, a.batch],
  });
  gpu.rt.run({
    kernel: emulatedKernel, variant: { ...base, NSG: EMULATED_NSG, SC: 16, DKDV: true, KRELOAD: false, PREFETCH: form.kvPrefetch }, uniforms: u,
    buffers: [h.k.buffer, h.v.buffer, h.q.buffer, h.g.buffer, ...st, dk.buffer, dv.buffer, ...(aux ? [aux.buffer] : []), ...m], workgroups: [Math.ceil(a.tk / (16 * EMULATED_NSG)), a.kvHeads, a.batch],
  });
  return { dq, dk, dv, aux };
}
