/**
 * Spot's block-sparse decode step against the dense one, by the shape of the selection (issue 21):
 * where does the masked split-K decode lose its time? At one cache length, B = 1, GQA 32/8, D = 128,
 * f16, the same q, K and V, and masks made the way Spot makes them (Backend.flagsMaskTable over
 * 16-token flags, the fine 16-key form unless said):
 *
 *   dense       no mask (FON's dense decode)
 *   fine-all    every fine block listed (reads what dense reads)
 *   fine-head   the first half of the blocks (50%, contiguous)
 *   fine-rand   a random half (50%, scattered 16-key runs)
 *   fine-rand10 a random tenth
 *   coarse-rand a random half of 64-key blocks (listed as 64-key blocks with segment ids)
 *
 * Each masked form is first checked: fine-all against dense (the same keys), the others against
 * dense attention over a compact copy of the selected keys (max |Δ| printed). Then each is timed
 * (median of batches) and once more with every dispatch timed on the GPU (attention_decode's own time).
 * fine-all is also timed with the kernel's source patched (PATCHES): which part of the masked form costs;
 * every fine form in the kernel's default form (UCOUNT: the mask's counts copied into the uniforms;
 * LPRE: the chunk's whole list read into workgroup memory before the loop) and also with the count
 * read from the table (DecodeTune.uniformCount false), in the per-key form (that, and
 * preloadList false: each key reads its block's entry in global memory, the form before both) and
 * the STAGE form (DecodeTune.stageList), and the VBLK form (DecodeTune.blockV). The patches edit the per-key form. First, dense and fine-all
 * at several split counts (withSplits): is the masked form's cost fewer workgroups resident at once?
 *
 * With --lanes, only the LANES split pass (DecodeTune.lanes: lane pairs a key, no barrier in the
 * loop) beside the step kernel, for fine-all, fine-rand and fine-rand10, with the lists' lengths
 * read from the table and known to the host (BlockMask.counts, as Spot's top-K has them), LANES at
 * 1, 2 and 4 iterations a subgroup a chunk, and its PF form (DecodeTune.lanesPrefetch: each
 * iteration's loads one ahead) at 4 and 8: each checked against its reference, timed, profiled.
 *
 *   node --import tsx dev/kernels/spot_decode.ts [--tokens 131072] [--lanes]
 */
import { parseArgs } from 'node:util';
import * as fon from '../../src/index.ts';
import '../../src/backend/webgpu/index.ts';
import { WebGpuBackend, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { DECODE_DEFAULTS, attentionDecode } from '../../src/backend/webgpu/kernels/attention_decode.ts';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import { MASK_K_FINE, maskArgs } from '../../src/attention/block_mask.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';
import { attention, type UploadedMask } from '../../src/ops/attention.ts';
import { flagsMaskTable } from '../../src/ops/select.ts';
import { deviceMaskShape } from '../../src/attention/device_mask.ts';
import { timeBatched } from '../../bench/lib/report.ts';
import { deviceRandn } from '../../bench/lib/device_data.ts';

const { values: flags } = parseArgs({ options: { tokens: { type: 'string', default: '131072' }, lanes: { type: 'boolean', default: false } } });
const H = 32, HKV = 8, D = 128, FINE = 16;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** The 16-token flags of a form (the query's own last block always selected). */
function formFlags(form: string, valid: number): Int32Array {
  const rnd = lcg(7);
  const f = new Int32Array(valid);
  for (let e = 0; e < valid; e++) {
    if (form === 'fine-all') f[e] = 1;
    else if (form === 'fine-head') f[e] = e < valid / 2 ? 1 : 0;
    else if (form === 'fine-rand') f[e] = rnd() < 0.5 ? 1 : 0;
    else if (form === 'fine-rand10') f[e] = rnd() < 0.1 ? 1 : 0;
  }
  if (form === 'coarse-rand') for (let c = 0; c < valid; c += 4) { const on = rnd() < 0.5 ? 1 : 0; for (let u = c; u < Math.min(valid, c + 4); u++) f[u] = on; }
  f[valid - 1] = 1;
  return f;
}

function maskOf(b: fon.Backend, form: string, t: number): { mask: UploadedMask; keys: number[] } {
  const valid = Math.ceil(t / FINE);
  const f = formFlags(form, valid);
  const coarse = form.startsWith('coarse');
  const per = coarse ? 4 : 1;
  const table = flagsMaskTable(fon.tensor(f, [1, valid], { dtype: 'i32', backend: b }), { fine: FINE, per, tk: t, kBlocks: Math.ceil(t / (FINE * per)), kvLength: t });
  const shape = deviceMaskShape({ batch: 1, heads: 1, tq: 1, tk: t, kvLength: t, qOffset: t - 1, causal: true, window: 0, ...(coarse ? {} : { kBlock: MASK_K_FINE }) }, Math.ceil(valid / per) + 1, { segments: true });
  const keys: number[] = [];
  for (let e = 0; e < valid; e++) if (f[e]) for (let j = e * FINE; j < Math.min(t, (e + 1) * FINE); j++) keys.push(j);
  // The fine form reads its keys without segment tests (as Spot's device selection does).
  return { mask: { ...shape, ...(coarse ? {} : { segmentOffset: 0 }), device: table }, keys };
}

/**
 * Source patches of the masked split pass, for `fine-all` only (every block listed, so a virtual key
 * is its own key): `nolist` reads no list (dkey(v) = v), `nolist-vis` also tests visibility on the
 * virtual key as dense does. Timed beside the unpatched kernel: which part of the masked form costs.
 */
const PATCHES: Record<string, (src: string) => string> = {
  nolist: (src) => must(src, /fn dkey\(v: u32\) -> u32 \{ return u32\(mask\[mask_list \+ v \/ MASK_KB\] >> 1u\) \* MASK_KB \+ v % MASK_KB; \}/, 'fn dkey(v: u32) -> u32 { return v; }'),
  'nolist-vis': (src) => must(PATCHES.nolist(src), /visible_row\(r, jk\)/, 'visible_row(r, j)'),
  // The listed-block count from the uniforms (every block is listed) instead of the table through
  // workgroupUniformLoad: are loop bounds the GPU compiler cannot see as uniform what costs?
  // With no list read (nolist), the rest of what still differs from dense: the V rows through
  // mask_vrow (two clamps) against dense's min(k0 + jj, kend − 1) (vidx), the K rows likewise (kidx).
  // On the H200 nolist alone stayed at 3.40× (BENCHMARKS.md, Spot's fifth run): which one is it?
  'nolist-vidx': (src) => must(PATCHES.nolist(src), /mask_vrow\(k0 \+ jj, kend\)/, 'min(k0 + jj, kend - 1u)'),
  'nolist-kidx': (src) => must(PATCHES.nolist(src), /let base = kbase \+ drow\(jk\) \* P\.d;/, 'let base = kbase + min(j, kend - 1u) * P.d;'),
  ucount: (src) => must(src, /let nb = mask_count\(mrow, MASK_KB, MASK_KB, lid\);/, 'let nb = (P.kvlen + MASK_KB - 1u) / MASK_KB;'),
  // Every difference above at once (the H100's M1+M2 of 2026-12-06 were such a sum, on the kernel
  // that still had the Krow store): if this is near dense and no single patch is, the cost is the
  // masked form's size (registers, the compiler's unrolling), not any one of its parts.
  all: (src) => ['nolist-vis', 'nolist-vidx', 'nolist-kidx', 'ucount'].reduce((x, t) => t === 'nolist-vis' ? PATCHES[t](x) : t === 'ucount' ? PATCHES.ucount(x) : must(x, ...KEEP[t]), src),
  // Every loop over the query rows (r < RM) written out, so the row arrays (acc, lsum, dots) are
  // indexed by constants whatever the GPU compiler's unrolling decides: is the masked form's extra
  // code tipping those arrays out of registers? (UR of 2026-12-06 was timed with the Krow store in.)
  ur: (src) => unrollLoops(src, 'r', 'RM', Number(/const RM = (\d+)u;/.exec(src)?.[1] ?? NaN)),
  // (Patches M1–M4 of 2026-12-06 removed the rest of the masked form step by step and found the
  // cause: the Krow store, a workgroup word a key a step, and 83 chunks a kv head on 660 resident
  // slots; both are gone from the kernel, BENCHMARKS.md says what each cost.)
  // The loop runs to a bound made of uniforms only (the chunk's size were every block listed) and
  // leaves at the listed count with a break: valid for every form.
  ubreak: (src) => must(src, /for \(var k0 = kstart; k0 < kend; k0 \+= BKD\) \{/, 'let ubound = kstart + ((P.kvlen + MASK_KB - 1u) / MASK_KB + P.nsplit - 1u) / P.nsplit * MASK_KB;\n  for (var k0 = kstart; k0 < ubound; k0 += BKD) {\n    if (k0 >= kend) { break; }'),
};

/** The edits of nolist-vidx and nolist-kidx without their nolist (for `all`). */
const KEEP: Record<string, [RegExp, string]> = {
  'nolist-vidx': [/mask_vrow\(k0 \+ jj, kend\)/, 'min(k0 + jj, kend - 1u)'],
  'nolist-kidx': [/let base = kbase \+ drow\(jk\) \* P\.d;/, 'let base = kbase + min(j, kend - 1u) * P.d;'],
};

/**
 * Every loop `for (var NAME = 0u; NAME < BOUND; NAME++) { … }` of src written out `count` times,
 * each copy a block opening with `const NAME = iu;` (braces inside the body must balance).
 */
function unrollLoops(src: string, name: string, bound: string, count: number): string {
  if (!Number.isInteger(count) || count < 1) throw new Error(`dev/kernels/spot_decode.ts: no row count to unroll (${count})`);
  const head = `for (var ${name} = 0u; ${name} < ${bound}; ${name}++) {`;
  let out = '', at = 0;
  for (let i = src.indexOf(head); i >= 0; i = src.indexOf(head, at)) {
    let depth = 1, j = i + head.length;
    for (; j < src.length && depth > 0; j++) depth += src[j] === '{' ? 1 : src[j] === '}' ? -1 : 0;
    if (depth !== 0) throw new Error(`dev/kernels/spot_decode.ts: unbalanced braces in the loop over ${name} at ${i}`);
    out += src.slice(at, i) + Array.from({ length: count }, (_, r) => `{ const ${name} = ${r}u;${src.slice(i + head.length, j - 1)}}`).join(' ');
    at = j;
  }
  if (at === 0) throw new Error(`dev/kernels/spot_decode.ts: no loop over ${name} < ${bound} to unroll`);
  return out + src.slice(at);
}

function must(src: string, re: RegExp, to: string): string {
  if (!re.test(src)) throw new Error(`dev/kernels/spot_decode.ts: the masked decode kernel no longer has ${re}; update the patch`);
  return src.replace(re, to);
}

/** Runs fn with the attention_decode kernel's source patched. */
function patched<T>(b: WebGpuBackend, tag: string, fn: () => T): T {
  const run = b.rt.run;
  b.rt.run = (d) => {
    if (d.kernel.name !== 'attention_decode') return run.call(b.rt, d);
    const base = d.kernel;
    return run.call(b.rt, { ...d, kernel: kernelCache.get(tag) ?? kernelCache.set(tag, { name: `attention_decode_${tag}`, source: (v, caps) => PATCHES[tag](base.source(v, caps)) }).get(tag)! });
  };
  try { return fn(); } finally { b.rt.run = run; }
}
const kernelCache = new Map<string, Kernel>();

/**
 * Runs fn with the split-K decode kernel in another form than the default (UCOUNT: the counts as
 * uniforms; LPRE: the chunk's list preloaded): loaded-count (uniformCount false: each workgroup
 * reads its count from the table into workgroup memory), per-key (that, and preloadList false: each
 * key reads its block's entry in global memory, the form before both), STAGE (DecodeTune.stageList)
 * or VBLK (DecodeTune.blockV: the P·V loop reads a listed block's first key once, its rows by offset).
 */
function listForm<T>(b: WebGpuBackend, form: 'STAGE' | 'per-key' | 'loaded-count' | 'VBLK', fn: () => T): T {
  const run = b.rt.run;
  const flags: Record<string, boolean> = form === 'STAGE' ? { STAGE: true, LPRE: false, UCOUNT: false } : form === 'per-key' ? { LPRE: false, UCOUNT: false } : form === 'VBLK' ? { VBLK: true } : { UCOUNT: false };
  b.rt.run = (d) => run.call(b.rt, d.kernel.name === 'attention_decode' ? { ...d, variant: { ...d.variant, ...flags } } : d);
  try { return fn(); } finally { b.rt.run = run; }
}

/**
 * Runs fn with the decode's chunks per kv head set to `per` (at most the default's: the partials
 * are allocated for the default count), by rewriting the split pass's nsplit (and, unmasked, its
 * chunk) and the combine's nsplit in each dispatch. Is the masked form's cost the number of
 * workgroups resident at once (register pressure: fewer workgroups per SM, so more waves of them)?
 * Then fewer chunks close the gap to dense.
 */
function withSplits<T>(b: WebGpuBackend, per: number, fn: () => T): T {
  const run = b.rt.run;
  b.rt.run = (d) => {
    if (d.kernel.name === 'attention_decode') {
      const w = Array.from(d.uniforms as ArrayLike<number>);
      // DECODE_PARAMS: 12 attention words, then rows, nrows, lo, hi, chunk, nsplit.
      const masked = !!d.variant.MASK;
      let ns = Math.min(per, w[17]);
      if (!masked) {
        const blocks = Math.max(1, Math.ceil((w[15] - w[14]) / 128));
        w[16] = Math.ceil(blocks / ns) * 128;
        ns = Math.ceil((w[15] - w[14]) / w[16]);
      }
      w[17] = ns;
      lastSplits = ns;
      return run.call(b.rt, { ...d, uniforms: w, workgroups: [ns, d.workgroups[1], d.workgroups[2]] });
    }
    if (d.kernel.name === 'attention_combine') {
      const w = Array.from(d.uniforms as ArrayLike<number>);
      w[2] = lastSplits;
      return run.call(b.rt, { ...d, uniforms: w });
    }
    return run.call(b.rt, d);
  };
  try { return fn(); } finally { b.rt.run = run; }
}
/** The split count the last split pass ran with (the combine after it merges that many). */
let lastSplits = 0;

/** The --lanes mode: the LANES split pass beside the step kernel (see the header). */
async function lanesMode(b: WebGpuBackend, t: number, q: fon.Tensor, k: fon.Tensor, v: fon.Tensor, ref: fon.Tensor, dense: number): Promise<void> {
  const sync = () => b.sync();
  for (const form of ['fine-all', 'fine-rand', 'fine-rand10']) {
    const { mask, keys } = maskOf(b, form, t);
    const want = form === 'fine-all' ? ref : fon.tidy(() => {
      const idx = fon.broadcastTo(fon.tensor(Int32Array.from(keys), [1, 1, keys.length, 1], { dtype: 'i32', backend: b }), [1, HKV, keys.length, D]);
      return attention(q, fon.gather(k, idx, 2), fon.gather(v, idx, 2), { kvLength: keys.length, causal: false });
    });
    for (const known of [false, true]) {
      const m = maskArgs(known ? { ...mask, counts: [Math.ceil(keys.length / FINE)] } : mask);
      const a: AttentionArgs = { batch: 1, heads: H, kvHeads: HKV, tq: 1, tk: t, d: D, kvLength: t, qOffset: t - 1, causal: true, window: 0, scale: 1 / Math.sqrt(D), mask: m };
      for (const [name, tune] of [['step kernel', { lanes: false }], ['LANES iter 1', { lanes: true, lanesIter: 1 }], ['LANES iter 2', { lanes: true, lanesIter: 2 }], ['LANES iter 4', { lanes: true, lanesIter: 4 }],
        ['LANES PF it 4', { lanes: true, lanesIter: 4, lanesPrefetch: true }], ['LANES PF it 8', { lanes: true, lanesIter: 8, lanesPrefetch: true }]] as const) {
        const call = () => attentionDecode(b, ref_(q), ref_(k), ref_(v), a, undefined, b.caps.subgroups, tune, ref_(mask.device));
        const [o, lse] = call();
        b.free(lse);
        const out = wrap(b, o, [1, H, 1, D], 'f16');
        const diff = Math.max(...Array.from((await fon.abs(fon.sub(fon.cast(out, 'f32'), fon.cast(want, 'f32'))).data()) as Float32Array));
        out.dispose();
        const ms = await timeBatched(sync, () => { const [x, y] = call(); b.free(x); b.free(y); });
        b.rt.startProfile();
        for (let i = 0; i < 10; i++) { const [x, y] = call(); b.free(x); b.free(y); }
        const prof = await b.rt.stopProfile();
        const split = prof.filter((p) => p.kernel.startsWith('attention_decode')).reduce((s, p) => s + p.ms, 0) / 10;
        const comb = prof.filter((p) => p.kernel === 'attention_combine').reduce((s, p) => s + p.ms, 0) / 10;
        const grid = b.rt.recordDispatches(call).dispatches.filter((d) => d.kernel.startsWith('attention_decode')).map((d) => d.workgroups.join('×')).join(',');
        console.log(`  ${t} ${form.padEnd(11)} counts ${known ? 'known     ' : 'from table'} ${name.padEnd(13)}: ${ms.toFixed(3)} ms (split ${split.toFixed(3)} + combine ${comb.toFixed(3)} ms profiled, grid ${grid}), ${(4 * HKV * keys.length * D / ms / 1e6).toFixed(0)} GB/s, ${(ms / dense).toFixed(2)}× dense's time; max |Δ| ${diff.toExponential(2)}`);
      }
    }
    mask.device.dispose();
    if (want !== ref) want.dispose();
  }
}
const ref_ = (x: fon.Tensor) => ref(x) as GpuRef;

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  if (!(b instanceof WebGpuBackend)) throw new Error('webgpu only');
  const sync = () => b.sync();
  console.log(`Spot decode forms on ${b.caps.adapterName}: B 1, GQA ${H}/${HKV}, D ${D}, f16`);
  for (const t of flags.tokens.split(',').map(Number)) {
    const k = deviceRandn(b, HKV, t, D, 2), v = deviceRandn(b, HKV, t, D, 3);
    const q = fon.randn([1, H, 1, D], { seed: 5, backend: b, dtype: 'f16' });
    const dense = await timeBatched(sync, () => fon.tidy(() => { attention(q, k, v, { kvLength: t }); }));
    const grids = (fn: () => void) => b.rt.recordDispatches(() => fon.tidy(fn)).dispatches.map((d) => `${d.kernel} ${d.workgroups.join('×')}`).join(', ');
    console.log(`  ${t} dense dispatches: ${grids(() => { attention(q, k, v, { kvLength: t }); })}`);
    console.log(`  ${t} dense: ${dense.toFixed(3)} ms (${((4 * HKV * t * D) / dense / 1e6).toFixed(0)} GB/s of K and V)`);
    const ref = fon.keep(attention(q, k, v, { kvLength: t }));
    if (flags.lanes) {
      await lanesMode(b, t, q, k, v, ref, dense);
      ref.dispose();
      for (const x of [k, v, q]) x.dispose();
      continue;
    }
    // The forms below are the step kernel's (attention_decode.wgsl), reached through the attention op.
    DECODE_DEFAULTS.lanes = false;
    {
      // The split-count sweep: dense and fine-all (every block listed) at each chunks-per-kv-head count.
      const { mask } = maskOf(b, 'fine-all', t);
      for (const per of [22, 44, 66, 83]) {
        const row: string[] = [];
        for (const [name, m] of [['dense', undefined], ['fine-all', mask]] as const) {
          const call = () => attention(q, k, v, { kvLength: t, ...(m ? { mask: m } : {}) });
          const out = withSplits(b, per, call);
          const diff = Math.max(...Array.from((await fon.abs(fon.sub(fon.cast(out, 'f32'), fon.cast(ref, 'f32'))).data()) as Float32Array));
          out.dispose();
          const ms = await timeBatched(sync, () => withSplits(b, per, () => fon.tidy(() => { call(); })));
          row.push(`${name} ${ms.toFixed(3)} ms (max |Δ| ${diff.toExponential(1)})`);
        }
        console.log(`  ${t} splits ${String(per).padStart(2)} a kv head (${per * HKV} workgroups): ${row.join(', ')}`);
      }
      mask.device.dispose();
    }
    for (const form of ['fine-all', 'fine-head', 'fine-rand', 'fine-rand10', 'coarse-rand']) {
      const { mask, keys } = maskOf(b, form, t);
      // Check: against dense attention over the selected keys gathered into a compact cache.
      const want = form === 'fine-all' ? ref : fon.tidy(() => {
        const n = keys.length;
        const idx = fon.broadcastTo(fon.tensor(Int32Array.from(keys), [1, 1, n, 1], { dtype: 'i32', backend: b }), [1, HKV, n, D]);
        const kk = fon.gather(k, idx, 2), vv = fon.gather(v, idx, 2);
        return attention(q, kk, vv, { kvLength: keys.length, causal: false });
      });
      const got = attention(q, k, v, { kvLength: t, mask });
      if (form === 'fine-all') console.log(`  ${t} fine-all dispatches: ${grids(() => { attention(q, k, v, { kvLength: t, mask }); })}`);
      const diff = Math.max(...Array.from((await fon.abs(fon.sub(fon.cast(got, 'f32'), fon.cast(want, 'f32'))).data()) as Float32Array));
      const ms = await timeBatched(sync, () => fon.tidy(() => { attention(q, k, v, { kvLength: t, mask }); }));
      b.rt.startProfile();
      for (let i = 0; i < 10; i++) fon.tidy(() => { attention(q, k, v, { kvLength: t, mask }); });
      const prof = await b.rt.stopProfile();
      const kernel = prof.filter((p) => p.kernel === 'attention_decode').reduce((s, p) => s + p.ms, 0) / 10;
      const bytes = 4 * HKV * keys.length * D;
      console.log(`  ${t} ${form.padEnd(12)} ${(100 * keys.length / t).toFixed(1).padStart(5)}% of keys: ${ms.toFixed(3)} ms (attention_decode ${kernel.toFixed(3)} ms profiled), ${(bytes / ms / 1e6).toFixed(0)} GB/s, ${(ms / dense).toFixed(2)}× dense's time; max |Δ| ${diff.toExponential(2)}`);
      if (form.startsWith('fine')) {
        // The default above preloads the chunk's list (LPRE); STAGE reads a step's entries once into
        // workgroup memory; per-key reads a key's entry from global memory (the form before LPRE).
        for (const [flag, what] of [['loaded-count', 'count from table'], ['per-key', 'per-key list'], ['STAGE', 'staged list'], ['VBLK', 'V by block']] as const) {
          const out = listForm(b, flag, () => attention(q, k, v, { kvLength: t, mask }));
          const d3 = Math.max(...Array.from((await fon.abs(fon.sub(fon.cast(out, 'f32'), fon.cast(want, 'f32'))).data()) as Float32Array));
          const sm = await timeBatched(sync, () => listForm(b, flag, () => fon.tidy(() => { attention(q, k, v, { kvLength: t, mask }); })));
          console.log(`  ${t}   ${what.padEnd(17)}: ${sm.toFixed(3)} ms, ${(sm / dense).toFixed(2)}× dense's time; max |Δ| ${d3.toExponential(2)}`);
        }
      }
      if (form.startsWith('fine')) {
        // Patches that assume every block listed run on fine-all only.
        for (const tag of Object.keys(PATCHES).filter((x) => form === 'fine-all' || x === 'ubreak' || x === 'ur')) {
          try {
          // The patches edit the per-key form's source; `ur` the default form's.
          const inForm = <T>(fn: () => T): T => (tag === 'ur' ? fn() : listForm(b, 'per-key', fn));
          const out = patched(b, tag, () => inForm(() => attention(q, k, v, { kvLength: t, mask })));
          const d2 = Math.max(...Array.from((await fon.abs(fon.sub(fon.cast(out, 'f32'), fon.cast(want, 'f32'))).data()) as Float32Array));
          const pm = await timeBatched(sync, () => patched(b, tag, () => inForm(() => fon.tidy(() => { attention(q, k, v, { kvLength: t, mask }); }))));
          console.log(`  ${t}   patched ${tag.padEnd(10)}: ${pm.toFixed(3)} ms, ${(pm / dense).toFixed(2)}× dense's time; max |Δ| ${d2.toExponential(2)}`);
          } catch (e) {
            console.log(`  ${t}   patched ${tag.padEnd(10)}: failed: ${(e as Error).message.split('\n')[0].slice(0, 300)}`);
          }
        }
      }
      mask.device.dispose();
      if (want !== ref) want.dispose();
    }
    ref.dispose();
    for (const x of [k, v, q]) x.dispose();
  }
}

await main();
process.exit(0);
