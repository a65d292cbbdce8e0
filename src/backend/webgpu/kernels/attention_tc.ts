/**
 * Attention on tensor cores (`chromium-experimental-subgroup-matrix`, 16×16×16 f16→f32 with
 * 32-wide subgroups): the forward (attention_tc.wgsl) and the backward's dq and dk/dv passes
 * (attention_tc_backward.wgsl), for f16 q, k, v (and dO) of head dim a multiple of 16. Subgroup
 * matrices cannot run on SwiftShader: test/backend/webgpu_attention.test.ts and
 * webgpu_modifier_tc.test.ts check these against the CPU reference on a device that has them (the
 * H200), and skip them, named, elsewhere; webgpu_tc_emulated.test.ts runs the backward's programs
 * there with ALU loops in place of the matrix statements (test/backend/tc_emulation.ts).
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import type { AttentionArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import type { Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { preprocess, type Variant } from '../wgsl.ts';
import { matrixCode, tensorCores16 } from './subgroup_matrix.ts';
import { MASK_CONSTS, MASK_PARAMS, PARAMS, checkGrid, maskPairs, maskUniforms, uniforms } from './attention_common.ts';
import { MASK_K_BLOCK, MASK_Q_BLOCK } from '../../backend.ts';

export const ATTENTION_TC_FILES = ['attention_tc', 'attention_tc_backward', 'attention_mask', 'attention_tc_keys', 'attention_tc_mod_none', 'attention_tc_mod_fox', 'attention_tc_mod_fpa'];

/**
 * A score modifier of the tensor-core forward with its side input: FoX's c (f32, per query head
 * and key) or FPA's ex = [φ | ℓ | λ] (f32; φ and ℓ per kv head and key, λ per kv head). Its WGSL
 * is attention_tc_mod_<kind>.wgsl, the hooks attention_tc_mod_none.wgsl names.
 */
export type TcModifier = { kind: 'fox'; c: GpuRef } | { kind: 'fpa'; ex: GpuHandle };

/** attention_tc_keys.wgsl's statements (the key blocks a query block visits) without its header comment. */
const keyBlocks = (v: Variant) => preprocess(wgslSource('attention_tc_keys'), v).split('\n').filter((l) => !l.startsWith('//')).join('\n').replace(/\n+$/, '');


/** Whether the tensor-core forward takes f16 inputs of head dim d on this device. */
export function tcEligible(caps: GpuCaps, dtype: DType, d: number): boolean {
  if (dtype !== 'f16' || !tensorCores16(caps)) return false;
  if (d % 16 !== 0 || d === 0 || d > 256) return false;
  return tcSmem(4, d, TC_KPAD) <= caps.maxWorkgroupStorage;
}

const TC_BK = 32;
/**
 * Halves of padding after each staged K/V row of the tensor-core forward. Unpadded rows of head dim
 * 128 lie 256 bytes apart, so the 16 rows of a fragment load start on the same banks: padding by 8
 * took 16K prefill on the H200 from 81.8 to 31.0 ms (dev/kernels/attention.ts t5 → t9).
 */
const TC_KPAD = 8;

/** Subgroups per workgroup of the tensor-core forward (16 query rows each): 8 where memory allows, else 4. */
function tcSubgroups(caps: GpuCaps, d: number): number {
  return tcSmem(8, d, TC_KPAD) <= caps.maxWorkgroupStorage && 256 <= caps.maxInvocations ? 8 : 4;
}

/** Workgroup bytes of the tensor-core forward: K and V blocks (rows of d + kPad halves), S and P, 1/l and α per row, FoX's c of a block. */
function tcSmem(nsg: number, d: number, kPad: number): number {
  return 2 * TC_BK * (d + kPad) * 2 + nsg * 16 * TC_BK * (4 + 2) + 2 * nsg * 16 * 4 + 4 + TC_BK * 4;
}

/**
 * Unrolled subgroup-matrix code for head dim d (no matrix lives in an indexed array): the q
 * fragments, the scores of a key block, the O accumulators, P·V and the epilogue.
 */
export function tcBody(d: number, qReload: boolean, boolArg: boolean): Record<string, string> {
  const L = 'subgroup_matrix_left<f16, 16, 16>', R = 'subgroup_matrix_right<f16, 16, 16>', A = 'subgroup_matrix_result<f32, 16, 16>';
  const { load, store } = matrixCode(boolArg);
  const nd = d / 16;
  const qload: string[] = [], scores: string[] = [`    {`, `      var s0 = ${A}();`, `      var s1 = ${A}();`];
  const oinit: string[] = [], pv: string[] = [], epilogue: string[] = [];
  for (let i = 0; i < nd; i++) {
    const qi = load(L, '&q16', `(qrow0 + rb) * D + ${16 * i}u`, false, 'D');
    if (qReload) scores.push(`      let q${i} = ${qi};`);
    else qload.push(`  let q${i} = ${qi};`);
    scores.push(`      s0 = subgroupMatrixMultiplyAccumulate(q${i}, ${load(R, '&KV', `${16 * i}u`, true, 'KD')}, s0);`);
    scores.push(`      s1 = subgroupMatrixMultiplyAccumulate(q${i}, ${load(R, '&KV', `16u * KD + ${16 * i}u`, true, 'KD')}, s1);`);
    oinit.push(`  var o${i} = ${A}();`);
    epilogue.push(`  ${store('&Ss', 'sg * SP', `o${i}`, false, '16u')};`, '  workgroupBarrier();', `  put_tile(sg, lane, qrow0, rb, ${16 * i}u, i0);`, '  workgroupBarrier();');
  }
  scores.push(`      ${store('&Ss', 'sbase', 's0', true, '16u')};`, `      ${store('&Ss', 'sbase + 256u', 's1', true, '16u')};`, '    }');
  for (let kk = 0; kk < TC_BK / 16; kk++) pv.push(`    let p${kk} = ${load(L, '&Ps', `sbase + ${256 * kk}u`, true, '16u')};`);
  for (let n = 0; n < nd; n++) {
    for (let kk = 0; kk < TC_BK / 16; kk++) {
      pv.push(`    o${n} = subgroupMatrixMultiplyAccumulate(p${kk}, ${load(R, '&KV', `BK * KD + ${16 * kk}u * KD + ${16 * n}u`, false, 'KD')}, o${n});`);
    }
  }
  return { QLOAD: qload.join('\n'), SCORES: scores.join('\n'), OINIT: oinit.join('\n'), PV: pv.join('\n'), STORE: epilogue.join('\n') };
}

/**
 * The tensor-core forward as a Kernel over a WGSL text of attention_tc.wgsl's form (`text`), with
 * `extra` placeholders: src's kernel is tcKernel; dev/kernels/attention.ts builds its one-pass
 * version from its own file this way.
 */
export function tcKernelOf(name: string, text: () => string, extra: (v: Variant) => Record<string, string> = () => ({})): Kernel {
  return { name, source: (v) => tcSource(text(), v, extra(v)) };
}

/**
 * What every tensor-core attention kernel's header opens with: the uniformity diagnostic lifted
 * (matrix offsets derive from subgroup_id), the extensions, and the uniforms (with a mask's after PARAMS).
 */
function tcHeaderStart(v: Variant): string[] {
  return [
    'diagnostic(off, chromium.subgroup_matrix_uniformity);',
    'enable f16;',
    'enable subgroups;',
    'enable chromium_experimental_subgroup_matrix;',
    `struct Params { ${PARAMS}${v.MASK ? `, ${MASK_PARAMS}` : ''} }`,
    '@group(0) @binding(0) var<uniform> P: Params;',
  ];
}

function tcSource(text: string, v: Variant, extra: Record<string, string>): string {
  const head = [
    ...tcHeaderStart(v),
    '@group(0) @binding(1) var<storage, read> q16: array<f16>;',
    '@group(0) @binding(2) var<storage, read> k8: array<vec4<u32>>;',
    '@group(0) @binding(3) var<storage, read> v8: array<vec4<u32>>;',
    '@group(0) @binding(4) var<storage, read_write> out: array<f16>;',
    '@group(0) @binding(5) var<storage, read_write> lse: array<f32>;',
    v.MOD ? '@group(0) @binding(6) var<storage, read> ex: array<f32>;\nfn mod_in(i: u32) -> f32 { return ex[i]; }' : '',
    v.MASK ? `@group(0) @binding(${v.MOD ? 7 : 6}) var<storage, read> mask: array<i32>;` : '',
    MASK_CONSTS,
  ].join('\n');
  return preprocess(text, {
    ...v, ...tcBody(v.D as number, !!v.QRELOAD, !!v.LOAD_ARG), HEADER: head, COMMON: wgslSource('attention_common'),
    ...modifierCode(v),
    MASKING: preprocess(wgslSource('attention_mask'), v), KEY_BLOCKS: keyBlocks(v), ...extra,
  });
}

/** A modifier's hooks (attention_tc_mod_<MOD or none>.wgsl) and its score terms, for the MODIFIER, BIAS and BIAS_T placeholders. */
function modifierCode(v: Variant): Record<string, string> {
  const mod = (v.MOD as string | undefined) || 'none';
  return {
    MODIFIER: preprocess(wgslSource(`attention_tc_mod_${mod}`), v),
    BIAS: mod === 'none' ? '' : ' + mod_bias(c, full)',
    BIAS_T: mod === 'none' ? '' : ' + mod_bias_t(c, full)',
  };
}

const modifierBuffers = (m?: TcModifier) => (!m ? [] : m.kind === 'fox' ? [m.c.h.buffer] : [m.ex.buffer]);

export const tcKernel: Kernel = tcKernelOf('attention_tc', () => wgslSource('attention_tc'));

/**
 * Tensor-core forward variants (dev/kernels/attention.ts t3–t13): subgroups per workgroup; whether
 * q fragments are loaded again for every key block instead of held in registers (fewer registers,
 * more loads); the older bool-argument form of the subgroup-matrix loads (subgroup_matrix.ts); the
 * padding of the staged K/V rows in halves (TC_KPAD; 0 is the unpadded t5); whether a key block's
 * global loads are issued while the block before is multiplied (PREFETCH, t14).
 */
export interface TcVariant { nsg: number; qReload: boolean; loadArg: boolean; kPad: number; prefetch: boolean }

export function tcVariant(caps: GpuCaps, d: number): TcVariant {
  return { nsg: tcSubgroups(caps, d), qReload: false, loadArg: false, kPad: TC_KPAD, prefetch: d <= 128 };
}

/**
 * The tensor-core forward (callers check tcEligible); with a `modifier` (causal only) FoX's or FPA's
 * forward (fox_fpa_attention.ts); with `mask` (a block mask's table, a.mask its shape) only the key
 * blocks it lists. Exported for tests and dev/kernels/attention.ts.
 */
export function attentionTc(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, variant: Partial<TcVariant> = {}, modifier?: TcModifier, mask?: GpuRef): [GpuHandle, GpuHandle] {
  if (modifier && (mask || !a.causal || a.window !== 0)) throw new UnsupportedError(`webgpu: the tensor-core ${modifier.kind} forward is causal, without a window or block mask`);
  const { nsg, qReload, loadArg, kPad, prefetch } = { ...tcVariant(be.caps, a.d), ...variant };
  if (!tcEligible(be.caps, q.dtype, a.d) || a.tq < 16) throw new UnsupportedError(`webgpu: the tensor-core attention does not take ${q.dtype} inputs of head dim ${a.d} on ${be.caps.adapterName}`);
  if (tcSmem(nsg, a.d, kPad) > be.caps.maxWorkgroupStorage) throw new UnsupportedError(`webgpu: the tensor-core attention with ${nsg} subgroups and rows padded by ${kPad} halves needs ${tcSmem(nsg, a.d, kPad)} bytes of workgroup memory; ${be.caps.adapterName} has ${be.caps.maxWorkgroupStorage}`);
  if (mask && MASK_Q_BLOCK % (16 * nsg) !== 0) throw new UnsupportedError(`webgpu: the masked tensor-core forward takes workgroups of rows dividing ${MASK_Q_BLOCK}, not ${16 * nsg}`);
  const rows = a.batch * a.heads * a.tq;
  const gx = Math.ceil(a.tq / (16 * nsg));
  checkGrid('attention', gx, a.heads, a.batch);
  const out = be.alloc('f16', rows * a.d, 'attention');
  const lse = be.alloc('f32', rows, 'attention lse');
  be.rt.run({
    kernel: tcKernel, variant: { D: a.d, NSG: nsg, QRELOAD: qReload, LOAD_ARG: loadArg, KPAD: kPad, PREFETCH: prefetch, MOD: modifier?.kind ?? '', MASK: !!mask, SEG: !!mask && maskPairs(a) },
    uniforms: [...uniforms(a), ...maskUniforms(a)], buffers: [q.h.buffer, k.h.buffer, v.h.buffer, out.buffer, lse.buffer, ...modifierBuffers(modifier), ...(mask ? [mask.h.buffer] : [])], workgroups: [gx, a.heads, a.batch],
  });
  return [out, lse];
}

// ------------------------------------------------------------------------------------ backward

/**
 * Workgroup bytes of a tensor-core backward pass: a block of `rows` staged rows of two tensors
 * (DQ: 32 keys of K and V; DKDV: the query block of q and dO), S and dP (f32) and the f16 products
 * of each subgroup's 16 × rows tile, DKDV's row statistics.
 */
function tcBackwardSmem(pass: 'dq' | 'dkdv', nsg: number, d: number, kPad: number, rows = 32): number {
  const tiles = 2 * rows * (d + kPad) * 2, sp = 16 * rows;
  return tiles + nsg * sp * 4 * 2 + nsg * sp * 2 * (pass === 'dq' ? 1 : 2) + (pass === 'dq' ? 0 : 2 * rows * 4);
}

/**
 * Workgroup bytes a modifier adds to a backward pass of `nsg` subgroups staging `rows` keys (DQ) or
 * query rows (DKDV) a step (attention_tc_mod_fox.wgsl, attention_tc_mod_fpa.wgsl). DQ: FoX's c of a
 * key block; FPA's φ, ℓ, suffix minima and their places of a key block, two per-subgroup sums a
 * key, two per-row posts, two flags a subgroup. DKDV: FoX's c of a query block; FPA's φ and its
 * prefix minima of a query block and a word per invocation for the first key carry.
 */
function tcModifierSmem(kind: 'fox' | 'fpa' | undefined, pass: 'dq' | 'dkdv', nsg: number, rows: number): number {
  if (!kind) return 0;
  if (pass === 'dkdv') return kind === 'fox' ? 4 * rows : 4 * (2 * rows + 32 * nsg);
  return kind === 'fox' ? 4 * rows : 4 * (4 * rows + 2 * nsg * rows + 2 * 16 * nsg + 2 * nsg);
}

/** Workgroup bytes of the larger pass of backward variant `v` at head dim d, with a modifier's. */
function tcBackwardNeed(v: TcBackwardVariant, d: number, kind?: 'fox' | 'fpa'): number {
  return Math.max(tcBackwardSmem('dq', v.nsg, d, v.kPad, v.dqKeys) + tcModifierSmem(kind, 'dq', v.nsg, v.dqKeys),
    tcBackwardSmem('dkdv', v.kvNsg, d, v.kPad, v.kvRows) + tcModifierSmem(kind, 'dkdv', v.kvNsg, v.kvRows));
}

/**
 * Whether the tensor-core backward (with `modifier`'s hooks) takes these inputs: q, k, v and dO in
 * f16 on a device with 16×16×16 f16 subgroup matrices, head dim a multiple of 16 up to 256 whose
 * tiles (and the modifier's scratch) fit, and at least 16 query rows and 16 keys (a cut-off last
 * block moves back inside them).
 */
export function tcBackwardEligible(caps: GpuCaps, x: DType, g: DType, a: AttentionArgs, modifier?: 'fox' | 'fpa'): boolean {
  if (x !== 'f16' || g !== 'f16' || !tensorCores16(caps)) return false;
  if (a.d % 16 !== 0 || a.d === 0 || a.d > 256 || a.tq < 16 || a.tk < 16) return false;
  const v = TC_BACKWARD_DEFAULT;
  return tcBackwardNeed(v, a.d, modifier) <= caps.maxWorkgroupStorage && 32 * Math.max(v.nsg, v.kvNsg) <= caps.maxInvocations;
}

/**
 * Tensor-core backward variants (dev/kernels/attention.ts): subgroups a DQ workgroup; whether DKDV
 * loads its k and v fragments again at every use instead of holding them (16 fewer matrices in
 * registers); the padding of staged rows in halves; subgroups a DKDV workgroup and the query rows
 * it stages a step (16 or 32); the keys a DQ step stages (16 or 32); whether a DQ (DKDV) step's
 * global loads are issued while the step before is multiplied (PREFETCH; dev/kernels tb10, tb14).
 */
export interface TcBackwardVariant { nsg: number; kReload: boolean; kPad: number; kvNsg: number; kvRows: number; dqKeys: number; dqPrefetch: boolean; kvPrefetch: boolean }

/**
 * 16 query rows a DKDV step (half the staging and scratch of 32): 16K backward on the H200 in 91.6
 * ms against 126.4 (DKDV 40.3 against 67.5 ms; dev/kernels/attention.ts tb4 against tb1); then 16
 * keys a DQ step and 8 subgroups (128 rows) a DQ workgroup: 67.7 against 89.8 ms (DQ 29.6 against
 * 51.1 ms; tb8 against tb4, one run).
 */
export const TC_BACKWARD_DEFAULT: TcBackwardVariant = { nsg: 8, kReload: false, kPad: TC_KPAD, kvNsg: 4, kvRows: 16, dqKeys: 16, dqPrefetch: true, kvPrefetch: false };

/** The unrolled subgroup-matrix code of one backward pass for head dim d (see attention_tc_backward.wgsl). */
function tcBackwardBody(pass: 'dq' | 'dkdv', d: number, reload: boolean, cols: number): Record<string, string> {
  const L = 'subgroup_matrix_left<f16, 16, 16>', R = 'subgroup_matrix_right<f16, 16, 16>', A = 'subgroup_matrix_result<f32, 16, 16>';
  const { load, store } = matrixCode(false);
  const nd = d / 16;
  const row0 = pass === 'dq' ? 'qrow0 + rb' : 'kvrow0 + kb';
  const frag = (src: 'a' | 'b', i: number) => load(L, `&f${src}`, `(${row0}) * D + ${16 * i}u`, false, 'D');
  const frags: string[] = [], products: string[] = ['{'], update: string[] = ['{'], accinit: string[] = [], stores: string[] = [];
  for (let i = 0; i < nd; i++) {
    if (reload) continue;
    frags.push(`  let a${i} = ${frag('a', i)};`, `  let b${i} = ${frag('b', i)};`);
  }
  const fa = (i: number) => (reload ? frag('a', i) : `a${i}`), fb = (i: number) => (reload ? frag('b', i) : `b${i}`);
  // S (Sᵀ) from the first staged tensor, dP (dPᵀ) from the second: `cols` staged rows, in halves of 16.
  const halves = cols / 16;
  for (const [acc, src, at, scratch] of [['s', fa, '0u', '&Ss'], ['d', fb, `${cols}u * KD`, '&Ds']] as const) {
    for (let hf = 0; hf < halves; hf++) products.push(`  var ${acc}${hf} = ${A}();`);
    for (let i = 0; i < nd; i++) {
      for (let hf = 0; hf < halves; hf++) {
        products.push(`  ${acc}${hf} = subgroupMatrixMultiplyAccumulate(${src(i)}, ${load(R, '&T', `${at} + ${16 * hf}u * KD + ${16 * i}u`, true, 'KD')}, ${acc}${hf});`);
      }
    }
    for (let hf = 0; hf < halves; hf++) products.push(`  ${store(scratch, `sbase + ${256 * hf}u`, `${acc}${hf}`, true, '16u')};`);
  }
  products.push('}');
  // dQ += dS·K (DQ); dV += Pᵀ·dO and dK += dSᵀ·Q (DKDV).
  const updates: [string, string, string][] = pass === 'dq' ? [['o', '&Ps', '0u']] : [['v', '&Pt', `${cols}u * KD`], ['k', '&Dt', '0u']];
  for (const [acc, scratch, at] of updates) {
    for (let hf = 0; hf < halves; hf++) update.push(`  let ${acc}p${hf} = ${load(L, scratch, `sbase + ${256 * hf}u`, true, '16u')};`);
    for (let n = 0; n < nd; n++) {
      for (let hf = 0; hf < halves; hf++) {
        update.push(`  ${acc}${n}x = subgroupMatrixMultiplyAccumulate(${acc}p${hf}, ${load(R, '&T', `${at} + ${16 * hf}u * KD + ${16 * n}u`, false, 'KD')}, ${acc}${n}x);`);
      }
    }
    for (let n = 0; n < nd; n++) {
      accinit.push(`  var ${acc}${n}x = ${A}();`);
      const put = pass === 'dq' ? `put_tile(sg, lane, qrow0, rb, ${16 * n}u, i0)` : `put_tile(sg, lane, kvrow0, kb, ${16 * n}u, ${acc === 'k' ? 0 : 1}u, j0)`;
      stores.push(`  ${store('&Ss', 'sg * SP', `${acc}${n}x`, false, '16u')};`, '  workgroupBarrier();', `  ${put};`, '  workgroupBarrier();');
    }
  }
  update.push('}');
  return { FRAGS: frags.join('\n'), PRODUCTS: products.join('\n'), UPDATE: update.join('\n'), ACCINIT: accinit.join('\n'), STORE: stores.join('\n') };
}

export const tcBackwardKernel: Kernel = {
  name: 'attention_tc_backward',
  source: (v) => {
    const dkdv = !!v.DKDV;
    const head = [
      ...tcHeaderStart(v),
      // Fragment sources (DQ: q, dO; DKDV: k, v), then the staged pair (DQ: k, v; DKDV: q, dO).
      '@group(0) @binding(1) var<storage, read> fa: array<f16>;',
      '@group(0) @binding(2) var<storage, read> fb: array<f16>;',
      '@group(0) @binding(3) var<storage, read> x8a: array<vec4<u32>>;',
      '@group(0) @binding(4) var<storage, read> x8b: array<vec4<u32>>;',
      // With a modifier: [lse | delta | its inputs] in one buffer at 5, the outputs from 6, then its gradients' partials (aux).
      ...(v.MOD ? ['@group(0) @binding(5) var<storage, read> ex: array<f32>;']
        : ['@group(0) @binding(5) var<storage, read> lse: array<f32>;', '@group(0) @binding(6) var<storage, read> delta: array<f32>;']),
      `@group(0) @binding(${v.MOD ? 6 : 7}) var<storage, read_write> y16a: array<f16>;`,
      dkdv ? `@group(0) @binding(${v.MOD ? 7 : 8}) var<storage, read_write> y16b: array<f16>;` : '',
      v.MOD ? `@group(0) @binding(${dkdv ? 8 : 7}) var<storage, read_write> aux: array<f32>;` : '',
      v.MASK ? `@group(0) @binding(${dkdv ? 9 : 8}) var<storage, read> mask: array<i32>;` : '',
      MASK_CONSTS,
    ].join('\n');
    return preprocess(wgslSource('attention_tc_backward'), {
      ...v, ...tcBackwardBody(dkdv ? 'dkdv' : 'dq', v.D as number, !!v.KRELOAD, v.SC as number), HEADER: head, COMMON: wgslSource('attention_common'),
      MASKING: preprocess(wgslSource('attention_mask'), v), KEY_BLOCKS: keyBlocks(v), ...modifierCode(v),
    });
  },
};

/**
 * What the tensor-core backward reads beside q, k, v and dO: softmax attention's f32 lse and delta
 * (rowsum dO∘O) of the forward, or a modifier's `ex` = [lse | delta | its inputs] with `aux`, the
 * zeroed f32 buffer its gradients' partials go into (fox_fpa_attention.ts turns them into the
 * modifier's gradients). FoX: the inputs are c per query head and key, aux the rows + b·h·tk words
 * of the dS row and column sums (COMBINE makes dc of them). FPA: the inputs are [φ | ℓ | λ], aux
 * dλ's row partials, dℓ per (batch, kv head, key) and the dφ cells, tk words per (batch, head,
 * query block of tcDqRows() rows) (REDUCE).
 */
export type TcBackwardStats = { lse: GpuHandle; delta: GpuHandle } | { modifier: { kind: 'fox' | 'fpa'; ex: GpuHandle; aux: GpuHandle } };

/** Query rows a DQ workgroup of the default tensor-core backward takes (FPA's dφ cells are per block of them). */
export const tcDqRows = () => 16 * TC_BACKWARD_DEFAULT.nsg;

/**
 * dq, dk, dv on tensor cores from f16 q, k, v, dO and `stats` (callers check tcBackwardEligible; a
 * modifier, FoX or FPA, is causal, without a window or mask). Exported for tests and dev/kernels/attention.ts.
 */
export function attentionTcBackward(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, g: GpuRef, stats: TcBackwardStats, a: AttentionArgs, variant: Partial<TcBackwardVariant> = {}, mask?: GpuRef): [GpuHandle, GpuHandle, GpuHandle] {
  const full = { ...TC_BACKWARD_DEFAULT, ...variant };
  const { nsg, kReload, kPad, kvNsg, kvRows, dqKeys, dqPrefetch, kvPrefetch } = full;
  if (dqKeys !== 16 && dqKeys !== 32) throw new UnsupportedError(`webgpu: the tensor-core attention backward's dq pass stages 16 or 32 keys a step, not ${dqKeys}`);
  // With a block mask a DKDV workgroup's keys are one mask block of 64 (4 subgroups), and a DQ
  // workgroup's rows lie inside one mask block of 128.
  if (mask && MASK_Q_BLOCK % (16 * nsg) !== 0) throw new UnsupportedError(`webgpu: the masked tensor-core dq pass takes workgroups of rows dividing ${MASK_Q_BLOCK}, not ${16 * nsg}`);
  if (mask && 16 * kvNsg !== MASK_K_BLOCK) throw new UnsupportedError(`webgpu: the masked tensor-core dk/dv pass takes ${MASK_K_BLOCK / 16} subgroups (one mask block of keys), not ${kvNsg}`);
  if (kvRows !== 16 && kvRows !== 32) throw new UnsupportedError(`webgpu: the tensor-core attention backward stages 16 or 32 query rows a step, not ${kvRows}`);
  if (!tcBackwardEligible(be.caps, q.dtype, g.dtype, a)) throw new UnsupportedError(`webgpu: the tensor-core attention backward does not take ${q.dtype} inputs (dO ${g.dtype}) of head dim ${a.d} with ${a.tq} query rows and ${a.tk} keys on ${be.caps.adapterName}`);
  const mod = 'modifier' in stats ? stats.modifier : null;
  if (mod?.kind === 'fpa' && nsg !== TC_BACKWARD_DEFAULT.nsg) throw new UnsupportedError(`webgpu: the tensor-core FPA backward's dq pass takes ${TC_BACKWARD_DEFAULT.nsg} subgroups (its dφ cells are per ${tcDqRows()} query rows), not ${nsg}`);
  const need = tcBackwardNeed(full, a.d, mod?.kind);
  if (need > be.caps.maxWorkgroupStorage || 32 * Math.max(nsg, kvNsg) > be.caps.maxInvocations) throw new UnsupportedError(`webgpu: the tensor-core attention backward with ${nsg} and ${kvNsg} subgroups (${kvRows} query rows a dk/dv step) and rows padded by ${kPad} halves needs ${need} bytes of workgroup memory; ${be.caps.adapterName} has ${be.caps.maxWorkgroupStorage}`);
  const rows = a.batch * a.heads * a.tq, kvSize = a.batch * a.kvHeads * a.tk * a.d;
  const gq = Math.ceil(a.tq / (16 * nsg)), gk = Math.ceil(a.tk / (16 * kvNsg));
  checkGrid('attention backward', gq, gk, a.heads, a.batch);
  const u = [...uniforms(a), ...maskUniforms(a)];
  const m = mask ? [mask.h.buffer] : [];
  const dq = be.alloc('f16', rows * a.d, 'attention dq');
  const dk = be.alloc('f16', kvSize, 'attention dk');
  const dv = be.alloc('f16', kvSize, 'attention dv');
  if (mod && (mask || !a.causal || a.window !== 0)) throw new UnsupportedError(`webgpu: the tensor-core ${mod.kind} backward is causal, without a window or block mask`);
  const st = 'modifier' in stats ? [stats.modifier.ex.buffer] : [stats.lse.buffer, stats.delta.buffer];
  const aux = mod ? [mod.aux.buffer] : [];
  const seg = !!mask && maskPairs(a);
  be.rt.run({
    kernel: tcBackwardKernel, variant: { D: a.d, NSG: nsg, KPAD: kPad, SC: dqKeys, DQ: true, PREFETCH: dqPrefetch, MASK: !!mask, SEG: seg, MOD: mod?.kind ?? '' },
    uniforms: u, buffers: [q.h.buffer, g.h.buffer, k.h.buffer, v.h.buffer, ...st, dq.buffer, ...aux, ...m], workgroups: [gq, a.heads, a.batch],
  });
  be.rt.run({
    kernel: tcBackwardKernel, variant: { D: a.d, NSG: kvNsg, KPAD: kPad, SC: kvRows, DKDV: true, KRELOAD: kReload, PREFETCH: kvPrefetch, MASK: !!mask, SEG: seg, MOD: mod?.kind ?? '' },
    uniforms: u, buffers: [k.h.buffer, v.h.buffer, q.h.buffer, g.h.buffer, ...st, dk.buffer, dv.buffer, ...aux, ...m], workgroups: [gk, a.kvHeads, a.batch],
  });
  return [dq, dk, dv];
}
