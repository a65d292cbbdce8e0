/**
 * FPA's tensor-core backward hooks (src/backend/webgpu/kernels/attention_tc_mod_fpa.wgsl in
 * attention_tc_backward.wgsl) on a device without subgroup matrices (SwiftShader): the generated
 * DQ and DKDV programs with each subgroup-matrix statement replaced by ALU loops over the same
 * workgroup scratch (S and dP of the subgroup's 16 rows; with EMU_DQ=1 also dQ += dS·K and its
 * epilogue, which needs more workgroup memory: NSG 4 or less at D 16), f16 read as packed halves
 * into f32, and the skeleton's subgroup_id and subgroup_invocation_id taken from the invocation
 * index (SwiftShader's subgroups have 4 lanes: lane pairs still share one; the 16-lane shuffle
 * goes through workgroup memory). dφ, dℓ and dλ (from aux, reduced here as REDUCE does) are
 * compared with the CPU reference (src/backend/cpu/fpa_attention.ts); dk and dv are not emulated.
 * This checks the hooks' logic (carry posts, suffix-minimum and scan ways, cells, the DKDV carry
 * across query blocks and before the queries), not the MMAs or the H200's compiler: the real
 * kernels run in test/backend/webgpu_modifier_tc.test.ts on the GPU.
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx dev/kernels/attention_tc_emulate.ts
 *   CASES='[{"b":1,"h":2,"hkv":1,"tq":300,"tk":300,"d":16,"walk":"ties","nsg":4}]' EMU_DQ=1 …   (one case, with dq)
 */
import * as fon from '../../src/index.ts';
await import('../../src/backend/webgpu/index.ts');
import type { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { tcBackwardKernel } from '../../src/backend/webgpu/kernels/attention_tc.ts';
import { uniforms } from '../../src/backend/webgpu/kernels/attention_common.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';
import * as cpuFpa from '../../src/backend/cpu/fpa_attention.ts';
import { f32ToHost, hostToF32, type AnyHostArray } from '../../src/tensor/dtype.ts';
import { foxArgs, randomF32, walks, type Walk } from '../../test/backend/fox_fpa_inputs.ts';
import { cref } from '../../test/backend/gpu_compare.ts';
const gpu = (await fon.initBackend('webgpu')) as WebGpuBackend;

/** The generated program with its subgroup-matrix statements replaced (see the file comment). */
function emulate(code: string, dkdv: boolean): string {
  const row0 = dkdv ? 'kvrow0 + kb' : 'qrow0 + rb';
  const emu = `  for (var e = lane; e < 16u * SC; e += 32u) {
    let rr = e % 16u; let cc = e / 16u;
    var s = 0.0; var dp = 0.0;
    for (var dd = 0u; dd < D; dd++) {
      let fi = (${row0} + rr) * D + dd;
      s += unpack2x16float(fa[fi / 2u])[fi % 2u] * T[cc * KD + dd];
      dp += unpack2x16float(fb[fi / 2u])[fi % 2u] * T[SC * KD + cc * KD + dd];
    }
    Ss[sbase + cc * 16u + rr] = s;
    Ds[sbase + cc * 16u + rr] = dp;
  }`;
  let c = code.replace('  var s0 = subgroup_matrix_result<f32, 16, 16>();', emu);
  if (!dkdv && process.env.EMU_DQ) {
    c = c.replace(/^  let op0 = .*$/m, `  for (var e = lane; e < 16u * D; e += 32u) {
    let rr = e / D; let nn = e % D;
    var s = 0.0;
    for (var cc = 0u; cc < SC; cc++) { s += Ps[sbase + cc * 16u + rr] * T[cc * KD + nn]; }
    ACC[sg * 16u * D + e] += s;
  }`);
    c = c.replace(/subgroupMatrixStore<row_major>\(&Ss, sg \* SP, o(\d+)x, 16u\);/g, (_m, n) => `for (var e = lane; e < 256u; e += 32u) { Ss[sg * SP + e] = ACC[sg * 16u * D + (e / 16u) * D + ${16 * Number(n)}u + e % 16u]; }`);
    c += '\nvar<workgroup> ACC: array<f32, NSG * 16u * D>;\n';
  }
  c = c.split('\n').filter((l) => !/subgroupMatrix|subgroup_matrix|enable f16|chromium/.test(l) || l.startsWith('//')).join('\n');
  c = c.replace('var<storage, read> fa: array<f16>', 'var<storage, read> fa: array<u32>').replace('var<storage, read> fb: array<f16>', 'var<storage, read> fb: array<u32>');
  c = c.replace(/bitcast<vec2<f16>>\(/g, 'unpack2x16float(').replace(/\bf16\b/g, 'f32');
  c = c.replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_id) sg_hw: u32').replace('@builtin(subgroup_invocation_id) lane: u32', '@builtin(subgroup_invocation_id) lane_hw: u32');
  c = c.replace(dkdv ? '  let g = wid.y;' : '  let h = wid.y;', (m) => `  let sg = lid / 32u;\n  let lane = lid % 32u;\n${m}`);
  c = c.replace(/subgroupShuffleXor\((\w+), 16u\)/g, 'xch16($1, lid)');
  c += `\nvar<workgroup> XCH: array<f32, 256>;\nfn xch16(x: f32, lid: u32) -> f32 { workgroupBarrier(); XCH[lid] = x; workgroupBarrier(); let y = XCH[lid ^ 16u]; workgroupBarrier(); return y; }\n`;
  if (process.env.DUMP) console.log(c);
  return c;
}
const emuKernel: Kernel = { name: 'emu_tc_backward', source: (v, caps) => emulate(tcBackwardKernel.source(v, caps), !!v.DKDV) };

/** A case: shapes as test/backend/fox_fpa_inputs.ts, φ's walk, the DQ step's keys (SC) and subgroups (NSG). */
interface C { b: number; h: number; hkv: number; tq: number; tk: number; d: number; kvLength?: number; walk: Walk; sc?: number; nsg?: number }
const CASES: C[] = process.env.CASES ? JSON.parse(process.env.CASES) : [
  { b: 1, h: 2, hkv: 2, tq: 200, tk: 200, d: 16, walk: 'ties' },
  { b: 1, h: 4, hkv: 2, tq: 77, tk: 130, d: 16, kvLength: 120, walk: 'smooth' },
  { b: 2, h: 4, hkv: 2, tq: 100, tk: 100, d: 16, walk: 'kill' },
  { b: 1, h: 2, hkv: 1, tq: 66, tk: 80, d: 16, kvLength: 75, walk: 'rise' },
  { b: 1, h: 2, hkv: 1, tq: 300, tk: 300, d: 32, walk: 'ties', nsg: 4 },
  { b: 1, h: 2, hkv: 2, tq: 40, tk: 260, d: 16, walk: 'ties' },
  { b: 1, h: 2, hkv: 1, tq: 300, tk: 300, d: 16, walk: 'smooth', sc: 32, nsg: 2 },
  { b: 1, h: 4, hkv: 1, tq: 150, tk: 400, d: 16, kvLength: 390, walk: 'ties' },
  { b: 1, h: 2, hkv: 2, tq: 16, tk: 300, d: 16, walk: 'smooth' },
];
let seed = 300, bad = 0;
for (const c of CASES) {
  seed += 10;
  const a = foxArgs(c);
  const n = [c.b * c.h * c.tq * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.hkv * c.tk * c.d, c.b * c.h * c.tq * c.d];
  const host = n.map((len, i) => f32ToHost(randomF32(len, seed + i, i === 0 ? 2 : 1), 'f16'));
  const [phi, level, lam] = walks(c.b * c.hkv, c.tk, c.hkv, c.walk, seed + 9);
  const [q, k, v, g] = host.map((x) => cref(x, 'f16'));
  const ex = [phi, level, lam].map((x) => cref(x, 'f32'));
  const [o, l] = cpuFpa.fpaAttention(q, k, v, ex[0], ex[1], ex[2], a);
  const want = cpuFpa.fpaAttentionBackward(q, k, v, ex[0], ex[1], ex[2], cref(o as AnyHostArray, 'f16'), cref(l as AnyHostArray, 'f32'), g, a) as AnyHostArray[];
  const rows = c.b * c.h * c.tq, nkv = c.b * c.hkv * c.tk;
  const of = hostToF32(o as AnyHostArray, 'f16'), gf = hostToF32(host[3], 'f16');
  const delta = new Float32Array(rows);
  for (let r = 0; r < rows; r++) { let s = 0; for (let t = 0; t < c.d; t++) s += of[r * c.d + t] * gf[r * c.d + t]; delta[r] = s; }
  const exv = new Float32Array(2 * rows + 2 * nkv + c.hkv);
  exv.set(l as Float32Array, 0); exv.set(delta, rows); exv.set(phi, 2 * rows); exv.set(level, 2 * rows + nkv); exv.set(lam, 2 * rows + 2 * nkv);
  const nsg = c.nsg ?? 8;
  const nqb = Math.ceil(c.tq / (16 * nsg));
  const auxN = rows + nkv + c.b * c.h * nqb * c.tk;
  const [rq, rk, rv, rg] = host.map((x) => gpu.upload(x, 'f16'));
  const rex = gpu.upload(exv, 'f32');
  const aux = gpu.upload(new Float32Array(auxN), 'f32');
  // f32 outputs: the emulated epilogue stores f32 (a packed-f16 buffer would be written past its end).
  const dq = gpu.alloc('f32', rows * c.d, 'dq'), dk = gpu.alloc('f32', nkv * c.d, 'dk'), dvv = gpu.alloc('f32', nkv * c.d, 'dv');
  const u = uniforms({ ...a, causal: true, window: 0 } as never);
  const sc = c.sc ?? 16;
  gpu.rt.run({ kernel: emuKernel, variant: { D: c.d, NSG: nsg, KPAD: 8, SC: sc, DQ: true, PREFETCH: true, MASK: false, SEG: false, MOD: 'fpa' }, uniforms: u, buffers: [rq.buffer, rg.buffer, rk.buffer, rv.buffer, rex.buffer, dq.buffer, aux.buffer], workgroups: [nqb, c.h, c.b] });
  gpu.rt.run({ kernel: emuKernel, variant: { D: c.d, NSG: 4, KPAD: 8, SC: 16, DKDV: true, KRELOAD: false, PREFETCH: false, MASK: false, SEG: false, MOD: 'fpa' }, uniforms: u, buffers: [rk.buffer, rv.buffer, rq.buffer, rg.buffer, rex.buffer, dk.buffer, dvv.buffer, aux.buffer], workgroups: [Math.ceil(c.tk / 64), c.hkv, c.b] });
  const ax = hostToF32(await gpu.read(aux, 'f32', auxN), 'f32');
  const group = c.h / c.hkv;
  const dphi = new Float32Array(nkv), dlev = new Float32Array(nkv), dlam = new Float32Array(c.hkv);
  for (let e = 0; e < nkv; e++) {
    const bg = Math.floor(e / c.tk), t = e % c.tk, b = Math.floor(bg / c.hkv), gg = bg % c.hkv;
    let s = 0;
    for (let hh = 0; hh < group; hh++) for (let qb = 0; qb < nqb; qb++) s += ax[rows + nkv + (((b * c.h + gg * group + hh) * nqb + qb) * c.tk) + t];
    dphi[e] = s; dlev[e] = ax[rows + e];
  }
  for (let b = 0; b < c.b; b++) for (let h = 0; h < c.h; h++) for (let i = 0; i < c.tq; i++) dlam[Math.floor(h / group)] += ax[(b * c.h + h) * c.tq + i];
  const dqv = hostToF32(await gpu.read(dq, 'f32', rows * c.d), 'f32');
  for (const [name, got, w] of [...(process.env.EMU_DQ ? [['dq', dqv, hostToF32(want[0], 'f16')] as const] : []), ['dphi', dphi, want[3]], ['dlevel', dlev, want[4]], ['dlambda', dlam, want[5]]] as const) {
    let worst = 0, at = -1;
    for (let i = 0; i < w.length; i++) { const err = Math.abs(got[i] - (w[i] as number)) / (1 + Math.abs(w[i] as number)); if (!(err <= worst)) { worst = err; at = i; } }
    const ok = worst <= 1e-2;
    if (!ok) bad++;
    console.log(`${JSON.stringify(c)} ${name}: worst ${worst.toExponential(2)} at ${at} (gpu ${got[at]}, cpu ${w[at]}) ${ok ? 'ok' : 'BAD'}`);
  }
  for (const hd of [rq, rk, rv, rg, rex, aux, dq, dk, dvv]) gpu.free(hd);
}
console.log(bad ? `${bad} BAD` : 'all ok');
process.exit(bad ? 1 : 0);
