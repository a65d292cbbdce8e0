/**
 * Flash-decoding on WebGPU: few query rows (a GQA group's, group·Tq ≤ 16) against a long KV cache.
 * The visible keys are cut into chunks (about DECODE_GROUPS workgroups in all), a split pass
 * (`attention_decode.wgsl`, with attention_decode_step.wgsl shared with FoX/FPA's decode) writes each
 * chunk's (m, l, unnormalised O) as f32 partials, and `attention_combine.wgsl` merges them into out and
 * lse. One workgroup serves every query head of its kv head, so each K and V row is read once.
 * DecodeTune holds experimental forms of the split pass; dev/kernels/attention.ts times them. The
 * default adds each key's P to the row sums once (`lsumOnce`, 2–6% faster at 128K in four H200 runs).
 * Two other split passes were tried for dense decoding and removed, being slower on the H200 at 128K
 * (BENCHMARKS.md): lane teams with no barrier in the loop (0.296–0.444 ms against 0.24–0.33 for the
 * default) and a warp-specialised one, K of a step beside V of the step before (0.693–0.762 against
 * 0.254–0.261). Over a fine block mask's list (Spot's 16-token blocks) the step kernel took 3.4×
 * dense's time a key, and a lane-pair pass (LANES, attention_decode_lanes.wgsl: lanesForm,
 * lanesChunks, lanesUnrolled) took 1.03–1.05× on the H100: it is the default there.
 * A clean-up of this kernel's #if branches (commit 8d1bc40) ran 3× slower, and removing the row-sum
 * merge through Lred alone does it (dev versions cL, cD, cV; attention_decode_step.wgsl says so where
 * the merge is), so the branches stay as measured. Every loop over the query rows written out (so no
 * row array's index is left to the compiler's unrolling) was tried and removed: no faster dense
 * (0.249 against 0.243 ms at 128K, H100) and slower masked (0.934 against 0.830).
 */
import { UnsupportedError } from '../../../errors.ts';
import type { DType } from '../../../tensor/dtype.ts';
import { MASK_COUNT_ROWS, MASK_K_BLOCK, type AttentionArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, WebGpuBackend } from '../backend.ts';
import type { GpuCaps } from '../device.ts';
import { grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, type Variant } from '../wgsl.ts';
import { viaStorable } from './elementwise.ts';
import { DECODE_PARAMS, MASK_CONSTS, MASK_PARAMS, maskConsts, checkGrid, dt, f32in, f32out, k8Loader, kvLoaders, maskPairs, maskUniforms, maskVariant, pow2AtLeast, uniforms } from './attention_common.ts';

/** attention_decode_step.wgsl (the split pass's softmax, P·V and partials, shared with fox_fpa_decode.wgsl) for variant v. */
export function decodeStepSource(v: Variant): string {
  return preprocess(wgslSource('attention_decode_step'), { ...v, DECODE_Q: wgslSource('attention_decode_q') });
}

/**
 * The split pass: attention_decode.wgsl after its header (q, the f32 partials pm, pl and pacc,
 * DECODE_PARAMS and s0, the first chunk's index in the partials, then the K/V loaders from binding 5: K as 8-half vec4<u32> rows (up4 unpacks) and
 * V as 4-half vec2<u32> (ldv4) with K8, else scalar or vec4 loads), attention_common.wgsl and the
 * step (decodeStepSource); subgroups enabled with SG.
 */
const decodeKernel: Kernel = {
  name: 'attention_decode',
  source: (v, caps) => {
    const x = dt(v, 'X');
    const kv = v.K8 ? [k8Loader(x, 5), kvLoaders(x, true, caps.f16, 5, ['v'])].join('\n') : kvLoaders(x, !!v.VEC, caps.f16, 5);
    const head = [
      v.SG ? 'enable subgroups;' : '',
      header([{ name: 'q', dtype: x }, f32out('pm'), f32out('pl'), f32out('pacc')], caps.f16, `${DECODE_PARAMS}, s0: u32${v.MASK ? `, ${MASK_PARAMS}` : ''}${v.UCOUNT ? `, mcount: array<vec4<u32>, ${MASK_COUNT_ROWS / 4}>` : ''}`),
      kv,
      ...(v.MASK ? ['@group(0) @binding(7) var<storage, read> mask: array<i32>;', v.FINE ? maskConsts(v.MASK_KB as number) : MASK_CONSTS] : []),
    ].join('\n');
    return preprocess(wgslSource('attention_decode'), {
      ...v, DECODE_STEP: decodeStepSource(v), HEADER: head, COMMON: wgslSource('attention_common'),
      MASKING: v.MASK ? preprocess(wgslSource('attention_mask'), v) : '',
    });
  },
};

/**
 * The LANES split pass (attention_decode_lanes.wgsl): the header and loaders as decodeKernel binds
 * them (K as 8-half vec4<u32> rows with K8, else vec4 loads), attention_common.wgsl and the mask's
 * helpers.
 */
const lanesKernel: Kernel = {
  name: 'attention_decode_lanes',
  source: (v, caps) => {
    const x = dt(v, 'X');
    const kv = v.K8 ? [k8Loader(x, 5), kvLoaders(x, true, caps.f16, 5, ['v'])].join('\n') : kvLoaders(x, true, caps.f16, 5);
    const head = [
      'enable subgroups;',
      'diagnostic(off, subgroup_uniformity);',
      header([{ name: 'q', dtype: x }, f32out('pm'), f32out('pl'), f32out('pacc')], caps.f16, `${DECODE_PARAMS}, s0: u32, ${MASK_PARAMS}${v.UCOUNT ? `, mcount: array<vec4<u32>, ${MASK_COUNT_ROWS / 4}>` : ''}`),
      kv,
      '@group(0) @binding(7) var<storage, read> mask: array<i32>;', maskConsts(v.MASK_KB as number),
    ].join('\n');
    return preprocess(wgslSource('attention_decode_lanes'), { ...v, HEADER: head, COMMON: wgslSource('attention_common'), MASKING: preprocess(wgslSource('attention_mask'), v), DECODE_Q: wgslSource('attention_decode_q'), ...lanesUnrolled(v) });
  },
};

/**
 * A LANES iteration's V loads, K loads and dots, and P·V loop, written out for the variant's S
 * (KPI = S / 2 keys), DK (DK / 16 K groups a lane) and CPL (V column vec4s a lane): constant indices
 * throughout and every load before its first use. With PF the loads of the iteration at v0 + W·KPI
 * go into a second set of registers (vwn, kvn…) before this iteration's math, and the first
 * iteration's are loaded before the loop (ITER_BEFORE).
 */
function lanesUnrolled(v: Variant): { ITER_BEFORE: string; ITER_LOADS: string; ITER_PV: string } {
  const kpi = Number(v.S) / 2, half8 = Number(v.DK) / 16, cpl = Math.ceil(Number(v.DK) / 4 / Number(v.S));
  // The loads of the iteration at virtual key `at` into vw (an array of VR) and kv0 … (K8v), as
  // statements; `decl`: declared here (let / var) or assigned to existing ones.
  const loadsAt = (at: string, vw: string, kv: string, decl: boolean, pad: string): string[] => {
    const out: string[] = [];
    if (decl) out.push(`${pad}var ${vw}: array<VR, KPI * CPL>;`);
    out.push(`${pad}let kr_${kv} = Lst[min(${at} + kk, nv - 1u) / MASK_KB] + min(${at} + kk, nv - 1u) % MASK_KB;`);
    out.push(`${pad}let kb_${kv} = kbase + min(kr_${kv}, P.kvlen - 1u) * P.d + hh * (DK / 2u);`);
    for (let j = 0; j < kpi; j++) {
      out.push(`${pad}let row_${kv}${j} = kbase + min(Lst[min(${at} + ${j}u, nv - 1u) / MASK_KB] + min(${at} + ${j}u, nv - 1u) % MASK_KB, P.kvlen - 1u) * P.d;`);
      for (let i = 0; i < cpl; i++) out.push(`${pad}${vw}[${j * cpl + i}] = ldvr(row_${kv}${j} + 4u * min(lane + S * ${i}u, D4 - 1u));`);
    }
    for (let c = 0; c < half8; c++) out.push(`${pad}${decl ? 'let ' : ''}${kv}${c} = ldk8(kb_${kv} + ${8 * c}u);`);
    return out;
  };
  const before: string[] = [], loads: string[] = [];
  if (v.PF) {
    before.push('  var vwn: array<VR, KPI * CPL>;');
    for (let c = 0; c < half8; c++) before.push(`  var kvn${c}: K8v;`);
    before.push('  if (w * KPI < nv) {', '    let v0 = w * KPI;', ...loadsAt('v0', 'vwn', 'kvn', false, '    '), '  }');
    loads.push('    let vw = vwn;');
    for (let c = 0; c < half8; c++) loads.push(`    let kv${c} = kvn${c};`);
    loads.push('    if (v0 + W * KPI < nv) {', '      let vn = v0 + W * KPI;', ...loadsAt('vn', 'vwn', 'kvn', false, '      '), '    }');
  } else {
    loads.push(...loadsAt('v0', 'vw', 'kv', true, '    '));
  }
  for (let c = 0; c < half8; c++) {
    loads.push(`    for (var r = 0u; r < RM; r++) { s[r] += dot(Qs[r * D4 + hh * (D4 / 2u) + ${2 * c}u], kv${c}.lo) + dot(Qs[r * D4 + hh * (D4 / 2u) + ${2 * c + 1}u], kv${c}.hi); }`);
  }
  const pv: string[] = [];
  for (let j = 0; j < kpi; j++) {
    pv.push(`    for (var r = 0u; r < RM; r++) { let p = subgroupShuffle(s[r], ${2 * j}u);${Array.from({ length: cpl }, (_, i) => ` acc[r * CPL + ${i}u] += p * upv(vw[${j * cpl + i}]);`).join('')} }`);
  }
  return { ITER_BEFORE: before.join('\n'), ITER_LOADS: loads.join('\n'), ITER_PV: pv.join('\n') };
}

const combineKernel: Kernel = {
  name: 'attention_combine',
  source: (v, caps) => preprocess(wgslSource('attention_combine'), {
    DC: v.DC, CU: v.CU,
    COMMON: preprocess(wgslSource('rows_common'), { WG: 256 }),
    HEADER: header([f32in('pm'), f32in('pl'), f32in('pacc'), { name: 'out', dtype: dt(v, 'Y'), write: true }, f32out('lse')], caps.f16, 'nrows: u32, d: u32, nsplit: u32'),
  }),
};

/**
 * The split pass (decodeKernel with `variant`) into
 * fresh f32 partials, then the combine (`combine` tunes it; `noCombine`: skipped, out left
 * unwritten, timing only).
 */
function splitAndCombine(be: WebGpuBackend, variant: Variant, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, rows: number, splits?: number,
  combine: { cols?: number; unroll?: boolean; noCombine?: boolean } = {}, mask?: GpuRef, nsplitLanes?: number): [GpuHandle, GpuHandle] {
  const nrows = a.batch * a.heads * a.tq;
  const cut = nsplitLanes ? { lo: 0, hi: 0, chunk: 0, nsplit: nsplitLanes } : decodeChunks(be, a, splits, Number(variant.WG));
  const { pm, pl, pacc, nsplit } = splitPass(be, variant, q, k, v, a, rows, cut, undefined, 0, mask);
  if (combine.noCombine) {
    be.free(pm); be.free(pl); be.free(pacc);
    return [be.alloc(q.dtype, nrows * a.d, 'attention'), be.alloc('f32', nrows, 'attention lse')];
  }
  return combineDecodePartials(be, { pm, pl, pacc }, nrows, a.d, nsplit, q.dtype, 'attention', combine);
}

/** The partials of `nsplit` chunks of `nrows` rows (split-major: pm, pl [split][row], pacc [split][row][d]). */
interface Partials { pm: GpuHandle; pl: GpuHandle; pacc: GpuHandle }

function allocPartials(be: WebGpuBackend, nsplit: number, nrows: number, d: number, what: string): Partials {
  return {
    pm: be.alloc('f32', nsplit * nrows, `${what} partial max`),
    pl: be.alloc('f32', nsplit * nrows, `${what} partial sum`),
    pacc: be.alloc('f32', nsplit * nrows * d, `${what} partial out`),
  };
}

/**
 * The split pass over the chunks `cut`, into chunks s0 … s0 + nsplit − 1 of `into` (fresh partials
 * of nsplit chunks by default); with `mask` (variant MASK) the kernel cuts the mask's list itself.
 */
function splitPass(be: WebGpuBackend, variant: Variant, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, rows: number, cut: ReturnType<typeof decodeChunks>,
  into?: Partials, s0 = 0, mask?: GpuRef): Partials & { nsplit: number } {
  const nrows = a.batch * a.heads * a.tq;
  const { lo, hi, chunk, nsplit } = cut;
  const out = into ?? allocPartials(be, nsplit, nrows, a.d, 'attention decode');
  const words = [...uniforms(a), rows, nrows, lo, hi, chunk, nsplit, s0, ...(mask ? maskUniforms(a) : [])];
  // UCOUNT: each mask row's count copied from the table into the uniforms' mcount, the array after the
  // scalar words at the next 16-byte boundary (WGSL's alignment of an array of vec4).
  // Counts the host knows (MaskArgs.counts) are written there directly.
  const known = variant.UCOUNT && mask ? a.mask?.counts : undefined;
  const counts = variant.UCOUNT && mask && !known && a.mask?.countAt ? a.mask.countAt : undefined;
  const mcount = Math.ceil(words.length / 4) * 4;
  if (counts || known) words.push(...new Array(mcount - words.length).fill(0), ...Array.from({ length: MASK_COUNT_ROWS }, (_, r) => known?.[r] ?? 0));
  be.rt.run({
    kernel: variant.LANES ? lanesKernel : decodeKernel, variant: Object.assign({}, variant, maskVariant(a, mask)),
    uniforms: words,
    buffers: [q.h.buffer, out.pm.buffer, out.pl.buffer, out.pacc.buffer, k.h.buffer, v.h.buffer, ...(mask ? [mask.h.buffer] : [])],
    workgroups: [nsplit, a.kvHeads, a.batch],
    ...(counts ? { deviceUniforms: counts.map((at, r) => ({ buffer: mask!.h.buffer, byteOffset: 4 * at, word: mcount + r })) } : {}),
  });
  return { pm: out.pm, pl: out.pl, pacc: out.pacc, nsplit };
}

/**
 * Whether DecodeTune.blockV's VBLK form takes `a`: a fine mask in the preloaded form whose blocks
 * the P·V loop's key groups divide (NG = WG / (DM / 4) keys apart, DM the head width rounded up to
 * a power of two ≥ 16); else UnsupportedError, so that no timing is labelled VBLK without it.
 */
function blockVFits(a: AttentionArgs, tune: DecodeTune, lpre: boolean): true {
  const wg = tune.wg ?? 128, d4 = pow2AtLeast(a.d, 16) / 4;
  const ng = wg / d4;
  if (!a.mask || !lpre || !Number.isInteger(ng) || a.mask.kBlock % ng !== 0) {
    throw new UnsupportedError(`webgpu: the decode's blockV form needs a fine mask read in the preloaded form whose ${a.mask?.kBlock ?? '(no mask)'}-key blocks its ${ng} key groups divide (head width ${a.d}, ${wg} keys a step)`);
  }
  return true;
}

/** The split pass's variant for q's dtype and `a` (`tune`: DecodeTune's experimental forms). */
function decodeVariant(dtype: DType, a: AttentionArgs, rows: number, subgroups: boolean, tune: DecodeTune = {}): Variant {
  const k8 = dtype !== 'f32' && a.d % 8 === 0;
  const lpre = !!a.mask && a.mask.kBlock !== MASK_K_BLOCK && !tune.stageList && (tune.preloadList ?? true);
  return {
    X: dtype, VEC: a.d % 4 === 0, K8: k8, DK: k8 ? a.d : 0, SG: subgroups, RM: pow2AtLeast(rows, 1), DM: pow2AtLeast(a.d, 16), PF: k8 && !!tune.prefetch,
    VE: k8 && !!tune.vEarly && !tune.vMid, VM: k8 && !!tune.vMid, VW: k8 && !!(tune.vEarly || tune.vMid), L1: tune.lsumOnce ?? true, WG: tune.wg ?? 128,
    ...(tune.stageList ? { STAGE: true } : {}),
    // The mask's counts as uniforms (loop bounds the GPU's compiler sees as uniform) where their places are known.
    ...(a.mask ? { UCOUNT: !!(a.mask.countAt || a.mask.counts) && (tune.uniformCount ?? true) } : {}),
    // A fine mask's chunk list preloaded into workgroup memory (LPRE) unless a list form is asked for.
    ...(a.mask && a.mask.kBlock !== MASK_K_BLOCK ? { LPRE: lpre } : {}),
    // VBLK (experimental): the P·V loop reads a listed block's first key once, where its key groups
    // divide a block (NG = WG / (DM / 4) keys apart, MASK_KB / NG keys of each block).
    ...(tune.blockV ? { VBLK: blockVFits(a, tune, lpre) } : {}),
  };
}

/**
 * Query rows one decode workgroup serves (the whole GQA group's), or 0 when the decode kernel does
 * not take the call. A block mask must be one list for the workgroup's rows: shared by the heads
 * (mask heads 1) or a group of one head.
 */
export function decodeRows(caps: GpuCaps, a: AttentionArgs): number {
  const rows = (a.heads / a.kvHeads) * a.tq;
  if (rows > 16 || a.d > 256) return 0;
  if (a.mask && a.mask.heads !== 1 && a.heads !== a.kvHeads) return 0;
  const rm = pow2AtLeast(rows, 1), dm = pow2AtLeast(a.d, 16);
  const bytes = (2 * rm * dm + 2 * rm * 128 + 3 * rm) * 4;
  return bytes <= caps.maxWorkgroupStorage ? rows : 0;
}

/**
 * Workgroups the decode kernel aims at in all (chunks × kv heads × batch). 660 (5 per SM of the
 * H200's 132) beat 1024 in each of four H200 runs at 128K cached tokens (0.239–0.339 ms against
 * 0.295–0.405, dev/kernels/attention.ts d2g660 against d2); 512, 1320 and 2048 were slower.
 */
const DECODE_GROUPS = 660;
const DECODE_GROUPS_SOFTWARE = 8;
/** The most listed blocks a masked decode chunk takes (LMAX in attention_decode.wgsl). */
const LIST_MAX = 512;

/**
 * Experimental forms of the decode split pass (dev/kernels/attention.ts): `prefetch` loads each
 * invocation's K row one step ahead (K8 only), `wg` sets the keys a step (invocations a workgroup),
 * `vEarly` loads each invocation's V
 * values of a step before the scores (K8 only), `vMid` after
 * them (K8 only; K's registers are free by then), `lsumOnce` (the default; false: the old form) adds each key's P to the row sums once
 * (by the invocation that owns the key) instead of once per column group, `combineCols`
 * sets the columns a combine workgroup takes and `combineUnroll` has it load four splits at once;
 * `noCombine` (timing only: out is left unwritten) skips the combine pass; `stageList` (fine masks
 * only) reads a step's list entries once into workgroup memory instead of once a key; `preloadList`
 * (fine masks; the default, false: each key reads its block's entry from the list in global memory)
 * reads the chunk's whole list into workgroup memory before the loop; `uniformCount` (masks whose
 * count places are known; the default, false: each workgroup reads its count from the table into
 * workgroup memory) copies the mask's counts into the uniforms before the dispatch; `blockV`
 * (experimental, fine masks in the preloaded form whose blocks the P·V loop's key groups divide)
 * has the P·V loop read each listed block's first key once and its V rows by offset, not each key's
 * place through the list (dev/kernels/spot_decode.ts times it beside the other forms; the H200's
 * 3.4× per key stays with no list read at all, BENCHMARKS.md Spot's fifth run); `lanes` (fine masks
 * where lanesForm takes the call; the default unless one of the step kernel's forms above is asked
 * for; false: the step kernel) runs attention_decode_lanes.wgsl, lane pairs a key with no barrier in
 * the loop, `lanesIter` the iterations a subgroup takes a chunk (default LANES_ITER) where the host
 * knows the lists' lengths, `lanesPrefetch` its PF form (each iteration's loads one iteration ahead:
 * slower, so off by default; in a Spot step at 128K keys, top-K 0.1, 61.7 against 44.9 µs, the step
 * 0.106 against 0.093 ms on the H100: bench/results_spot_1207b_forms_h100.log).
 */
export interface DecodeTune { prefetch?: boolean; wg?: number; vEarly?: boolean; vMid?: boolean; lsumOnce?: boolean; combineCols?: number; combineUnroll?: boolean; noCombine?: boolean; stageList?: boolean; preloadList?: boolean; uniformCount?: boolean; blockV?: boolean; lanes?: boolean; lanesIter?: number; lanesPrefetch?: boolean }

/**
 * What attentionDecode does where DecodeTune is silent: `lanes`, the LANES split pass for fine masks
 * (dev/kernels/spot_decode.ts turns it off to time the step kernel's forms through the attention op),
 * and `lanesPrefetch`, its PF form (off: slower; bench/spot.ts --forms sets it to time a whole step with it).
 */
export const DECODE_DEFAULTS = { lanes: true, lanesPrefetch: false };

/** Subgroups a LANES workgroup holds at most, the iterations each takes a chunk, and its list's room (LMAX). */
const LANES_W = 8;
const LANES_ITER = 4;
const LANES_LMAX = 512;

/**
 * The LANES form's subgroup size S and subgroups a workgroup W where it takes the call: a fine mask
 * with no pair predicate, a head dim that is a multiple of 16, subgroups of one fixed size (the
 * adapter's least and largest agree: the kernel pairs lanes by index), and workgroup memory for W
 * subgroups' partials (W halves until they fit); else undefined.
 */
export function lanesForm(caps: GpuCaps, a: AttentionArgs, rows: number): { S: number; W: number } | undefined {
  const s = caps.subgroupMinSize;
  if (!a.mask || a.mask.kBlock === MASK_K_BLOCK || !caps.subgroups || s < 2 || s !== caps.subgroupMaxSize || a.d % 16 !== 0 || maskPairs(a)) return undefined;
  const rm = pow2AtLeast(rows, 1), d4 = a.d / 4;
  for (let w = LANES_W; w >= 1; w /= 2) {
    const bytes = 16 * rm * d4 + 4 * LANES_LMAX + 8 * w * rm + 16 * w * rm * d4;
    if (w * s <= caps.maxInvocations && bytes <= caps.maxWorkgroupStorage) return { S: s, W: w };
  }
  return undefined;
}

/**
 * The LANES form's chunk count: where the host knows the lists' lengths, chunks of about `iter`
 * iterations of every subgroup (W·S/2 keys an iteration), else about DECODE_GROUPS workgroups in all
 * (the kernel then sizes its chunks from the count it reads); never a chunk of more than LMAX blocks.
 */
function lanesChunks(be: WebGpuBackend, a: AttentionArgs, form: { S: number; W: number }, splits?: number, iter = LANES_ITER): number {
  const m = a.mask!;
  const least = Math.ceil(m.kBlocks / LANES_LMAX);
  const known = m.counts;
  let nsplit: number;
  if (splits !== undefined) nsplit = splits;
  else if (known?.length) nsplit = Math.ceil(Math.max(...known) / Math.max(1, Math.ceil((form.W * form.S / 2 * iter) / m.kBlock)));
  else nsplit = Math.min(m.kBlocks, Math.floor((be.caps.software ? DECODE_GROUPS_SOFTWARE : DECODE_GROUPS) / (a.batch * a.kvHeads)));
  nsplit = Math.max(1, least, nsplit);
  checkGrid('attention decode', nsplit, a.kvHeads, a.batch);
  return nsplit;
}

/**
 * The visible key range [lo, hi) of a decode call and its cut into nsplit chunks of `chunk` keys
 * (a multiple of 128), about DECODE_GROUPS workgroups in all unless `splits` sets the count; a
 * masked call's chunk count alone (its kernel cuts the list in steps of `step` keys).
 */
function decodeChunks(be: WebGpuBackend, a: AttentionArgs, splits?: number, step = 128): { lo: number; hi: number; chunk: number; nsplit: number } {
  const target = be.caps.software ? DECODE_GROUPS_SOFTWARE : DECODE_GROUPS;
  if (a.mask) {
    // The kernel cuts the list it reads into nsplit chunks of whole blocks (lo, hi, chunk unused).
    // A fine mask's chunk lists at most LIST_MAX blocks (the LPRE form holds a chunk's list in workgroup memory).
    const least = a.mask.kBlock !== MASK_K_BLOCK ? Math.ceil(a.mask.kBlocks / LIST_MAX) : 1;
    // At most `target` workgroups in all (rounded down: 83 a kv head made 664 on the H100's 660
    // resident slots, a second wave of 4 that cost 27%, 0.33 against 0.26 ms at 128K).
    let nsplit = Math.max(1, least, Math.min(a.mask.kBlocks, splits ?? Math.floor(target / (a.batch * a.kvHeads))));
    // Where the host knows the lists' lengths (MaskArgs.counts), no chunk is left empty: the kernel
    // cuts chunks of whole steps, so the longest list's steps over ⌈steps / nsplit⌉ a chunk are all
    // the chunks there are (Spot's top-K 0.1 at 128K: 52 a kv head, not 82 of which 30 read nothing).
    const known = a.mask.counts;
    if (known?.length && splits === undefined) {
      const steps = Math.max(1, Math.ceil((Math.max(...known) * a.mask.kBlock) / step));
      nsplit = Math.max(least, Math.ceil(steps / Math.ceil(steps / nsplit)));
    }
    checkGrid('attention decode', nsplit, a.kvHeads, a.batch);
    return { lo: 0, hi: 0, chunk: 0, nsplit };
  }
  const lo = a.window > 0 ? Math.max(0, a.qOffset - a.window + 1) : 0;
  const hi = Math.max(lo, a.causal ? Math.min(a.kvLength, a.qOffset + a.tq) : a.kvLength);
  const blocks = Math.max(1, Math.ceil((hi - lo) / 128));
  let nsplit = Math.max(1, Math.min(blocks, splits ?? Math.ceil(target / (a.batch * a.kvHeads))));
  const chunk = Math.ceil(blocks / nsplit) * 128;
  nsplit = Math.max(1, Math.ceil((hi - lo) / chunk));
  checkGrid('attention decode', nsplit, a.kvHeads, a.batch);
  return { lo, hi, chunk, nsplit };
}

/**
 * Flash-decoding (split + combine); callers check decodeRows. With `mask` (a block mask's table,
 * a.mask its shape) only the key blocks it lists are read. Exported for tests and dev/kernels.
 */
export function attentionDecode(be: WebGpuBackend, q: GpuRef, k: GpuRef, v: GpuRef, a: AttentionArgs, splits?: number, subgroups = be.caps.subgroups, tune: DecodeTune = {}, mask?: GpuRef): [GpuHandle, GpuHandle] {
  const rows = decodeRows(be.caps, a);
  if (rows === 0) throw new UnsupportedError(`webgpu: attention decode kernel does not take ${a.heads / a.kvHeads}×${a.tq} query rows of head dim ${a.d}${a.mask ? ` with a mask of ${a.mask.heads} heads` : ''}`);
  // A masked step covers two listed blocks: workgroups of 128 keys, and none of the experimental forms.
  const kBlock = a.mask?.kBlock ?? MASK_K_BLOCK;
  if (mask && kBlock === MASK_K_BLOCK && (tune.wg ?? 128) !== 2 * MASK_K_BLOCK) throw new UnsupportedError(`webgpu: the masked attention decode takes ${2 * MASK_K_BLOCK} keys a step, not ${tune.wg}`);
  if (mask && kBlock !== MASK_K_BLOCK && (tune.wg ?? 128) % kBlock !== 0) throw new UnsupportedError(`webgpu: a fine mask's ${kBlock}-key blocks must divide the decode's ${tune.wg} keys a step`);
  if (mask && (tune.prefetch || tune.vEarly || tune.vMid)) throw new UnsupportedError('webgpu: the masked attention decode has no prefetch, vEarly or vMid form');
  const combine = { cols: tune.combineCols, unroll: tune.combineUnroll, noCombine: tune.noCombine };
  // LANES by default where it takes the call, unless a form of the step kernel is asked for.
  const stepForm = tune.blockV || tune.stageList || tune.preloadList !== undefined || tune.uniformCount !== undefined || tune.wg !== undefined;
  const lanes = mask && (tune.lanes ?? (DECODE_DEFAULTS.lanes && !stepForm)) && subgroups ? lanesForm(be.caps, a, rows) : undefined;
  if (lanes) {
    const variant: Variant = { X: q.dtype, K8: q.dtype !== 'f32', DK: a.d, RM: pow2AtLeast(rows, 1), S: lanes.S, W: lanes.W, LMAX: LANES_LMAX, LANES: true, UCOUNT: !!(a.mask!.countAt || a.mask!.counts), PF: tune.lanesPrefetch ?? DECODE_DEFAULTS.lanesPrefetch };
    return splitAndCombine(be, variant, q, k, v, a, rows, splits, combine, mask, lanesChunks(be, a, lanes, splits, tune.lanesIter));
  }
  return splitAndCombine(be, decodeVariant(q.dtype, a, rows, subgroups, tune), q, k, v, a, rows, splits, combine, mask);
}

/**
 * Flash-decoding over several key sets (the pages of a paged cache, ops/paged_attention.ts): each
 * part's split pass, with about DECODE_GROUPS workgroups each, writes its chunks into one shared
 * set of partials after the parts before it (no copies), then one combine runs over every part's
 * chunks — a part whose visible range is empty adds a chunk of weight 0. The parts share q's
 * shape, heads and dtype; callers check decodeRows.
 */
export function attentionDecodeMulti(be: WebGpuBackend, q: GpuRef, parts: readonly { k: GpuRef; v: GpuRef; args: AttentionArgs }[]): [GpuHandle, GpuHandle] {
  const a0 = parts[0].args;
  if (parts.some((p) => p.args.mask)) throw new UnsupportedError('webgpu: the paged attention decode does not read block masks');
  const rows = decodeRows(be.caps, a0);
  if (rows === 0) throw new UnsupportedError(`webgpu: attention decode kernel does not take ${a0.heads / a0.kvHeads}×${a0.tq} query rows of head dim ${a0.d}`);
  const variant = decodeVariant(q.dtype, a0, rows, be.caps.subgroups);
  const nrows = a0.batch * a0.heads * a0.tq;
  // Each part's split pass is its own dispatch, and dispatches run one after another: each gets
  // the whole DECODE_GROUPS (shorter chunks), not a share of it, or a part's few long chunks leave
  // the GPU idle (16 pages of 65536 rows at a share each: 11.1 ms on the H200 against 0.83 ms for
  // 512K contiguous rows, BENCHMARKS.md).
  const cuts = parts.map((p) => decodeChunks(be, p.args));
  const total = cuts.reduce((n, c) => n + c.nsplit, 0);
  const partials = allocPartials(be, total, nrows, a0.d, 'paged attention decode');
  let at = 0;
  parts.forEach((p, i) => { splitPass(be, variant, q, p.k, p.v, p.args, rows, cuts[i], partials, at); at += cuts[i].nsplit; });
  return combineDecodePartials(be, partials, nrows, a0.d, total, q.dtype, 'paged attention');
}

/**
 * The second pass of flash-decoding (attention_combine.wgsl): each row's chunk partials (maximum m,
 * sum l, unnormalised O, f32) merged into out (`dtype`) and its lse; frees the partials. Shared by
 * this file's decode and FoX/FPA's (fox_fpa_decode.ts), whose partials have the same layout.
 */
export function combineDecodePartials(be: WebGpuBackend, p: { pm: GpuHandle; pl: GpuHandle; pacc: GpuHandle }, nrows: number, d: number, nsplit: number, dtype: DType, what: string,
  tune: { cols?: number; unroll?: boolean } = {}): [GpuHandle, GpuHandle] {
  const lse = be.alloc('f32', nrows, `${what} lse`);
  // Columns a workgroup: the whole row by default; `cols` (experimental, 32 … 256) slices it.
  const dc = tune.cols ?? (d <= 64 ? 64 : d <= 128 ? 128 : 256);
  const out = viaStorable(be, dtype, nrows * d, what, (buf, y) => be.rt.run({
    kernel: combineKernel, variant: { Y: y, DC: dc, CU: !!tune.unroll },
    uniforms: [nrows, d, nsplit], buffers: [p.pm.buffer, p.pl.buffer, p.pacc.buffer, buf, lse.buffer], workgroups: [...grid(nrows, 1), Math.ceil(d / dc)],
  }));
  be.free(p.pm); be.free(p.pl); be.free(p.pacc);
  return [out, lse];
}
