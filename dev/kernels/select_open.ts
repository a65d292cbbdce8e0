/**
 * Spot's selection stage, kernel by kernel, and selectOpen (rows_select.wgsl SELECT, one workgroup
 * a row) at several workgroup sizes: where a decoding step's selector time goes, at one or more cache
 * lengths, for each rule. Per length and rule:
 *
 *   profile   the selector stage as bench/spot.ts times it (query projections, block scores,
 *             selectOpen, the block mask), ten times with every dispatch on the GPU's clock
 *   wg W      selectOpen alone with W invocations a workgroup (SelectTune.wg), its flags checked
 *             equal to the default's, timed (median of batches) and on the GPU's clock
 *   rounds R  selectOpen (default size) with its source patched so that top-p's mass search runs
 *             R of its 8 rounds (top-p only; its flags then wrong; timing only): what a round costs, and what
 *             the passes around the searches cost (R = 0)
 *   list      selectBlockList (the fine mask's table from the same pass, as a Spot step runs it),
 *             unpatched and with its by-key index, its zeros after the count, its flags or all
 *             three left unwritten (timing only): what the writes cost beside the search
 *   global    the earlier form (dev/kernels/rows_select_global.wgsl: every pass reads the scores
 *             from memory, strided over the workgroup, at 512 invocations), its flags checked equal,
 *             timed likewise: what holding the spans in registers saves
 *
 * The scores are a real selector's over random keys (one random residual row, f32 weights as
 * bench/spot.ts uses), so top-p's budget is that of an untrained selector.
 *
 *   node --import tsx dev/kernels/select_open.ts [--tokens 131072,524288] [--rules top-k:0.1,top-k:0.5,top-p:0.9] [--wg 256,512,1024]
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import * as fon from '../../src/index.ts';
import '../../src/backend/webgpu/index.ts';
import { WebGpuBackend, type GpuRef } from '../../src/backend/webgpu/backend.ts';
import { selectBlockList, selectOpen } from '../../src/backend/webgpu/kernels/rows.ts';
import type { Kernel } from '../../src/backend/webgpu/runtime.ts';
import { header, preprocess } from '../../src/backend/webgpu/wgsl.ts';
import { wgslSource } from '../../src/backend/webgpu/sources.ts';
import type { DType } from '../../src/tensor/dtype.ts';
import { profileTable } from '../../src/backend/webgpu/profile.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { ref, wrap } from '../../src/ops/run.ts';
import { SPOT_DEFAULTS, SpotAttention } from '../../src/attention/spot/index.ts';
import { SpotKeyCache } from '../../src/attention/spot/key_cache.ts';
import { selectOnDevice } from '../../src/attention/spot/device_select.ts';
import { decodeBlockScores } from '../../src/attention/spot/selector.ts';
import { selectArgs, type SpotRule } from '../../src/attention/spot/selection.ts';
import type { LayerKv } from '../../src/attention/mechanism.ts';
import { timeBatched } from '../../bench/lib/report.ts';
import { deviceRandn } from '../../bench/lib/device_data.ts';

const { values: flags } = parseArgs({
  options: {
    tokens: { type: 'string', default: '131072,524288' },
    rules: { type: 'string', default: 'top-k:0.1,top-k:0.5,top-p:0.9' },
    wg: { type: 'string', default: '256,512,1024' },
  },
});
const C = 4096, HKV = 8, D = 128, PROFILED = 10;
const rules: SpotRule[] = flags.rules.split(',').filter(Boolean).map((r) => {
  const [kind, x] = r.split(':');
  return kind === 'top-k' ? { kind: 'top-k', fraction: Number(x) } : { kind: 'top-p', p: Number(x) };
});
const ruleName = (r: SpotRule) => (r.kind === 'top-k' ? `top-K ${r.fraction}` : `top-p ${r.p}`);

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  if (!(b instanceof WebGpuBackend)) throw new Error('webgpu only');
  const sync = () => b.sync();
  console.log(`Spot selection stage on ${b.caps.adapterName} (subgroups ${b.caps.subgroups ? `${b.caps.subgroupMinSize}–${b.caps.subgroupMaxSize}` : 'none'}, ${b.caps.maxInvocations} invocations and ${b.caps.maxWorkgroupStorage} bytes a workgroup at most): d_model ${C}, selector ${SPOT_DEFAULTS.heads} × ${SPOT_DEFAULTS.dim}, f16 keys`);
  const dims = { dModel: C, nLayers: 1, nHeads: 32, nKvHeads: HKV, headDim: D, normEps: 1e-5 };
  const layer = new SpotAttention({ type: 'spot', ...SPOT_DEFAULTS }, { f: new ParamFactory({ backend: b, seed: 1 }), name: 'layers.0.attn', dims });
  const x = fon.randn([1, 1, C], { seed: 8, backend: b });
  for (const t of flags.tokens.split(',').map(Number)) {
    const slot: LayerKv = { k: fon.zeros([1, 1, t, 8], { backend: b, dtype: 'f16' }), v: fon.zeros([1, 1, t, 8], { backend: b, dtype: 'f16' }) };
    const keys = SpotKeyCache.forSlot(slot, SPOT_DEFAULTS.dim, 'f16');
    const sk = deviceRandn(b, 1, t, SPOT_DEFAULTS.dim, 4);
    fon.tidy(() => keys.write(0, fon.reshape(sk, [1, t, SPOT_DEFAULTS.dim])));
    sk.dispose();
    const { max, logMass } = fon.tidy(() => {
      const s = decodeBlockScores(layer.selector, x, keys.scoring(t), { l: t, pos: t - 1 });
      return { max: fon.keep(s.max), logMass: fon.keep(s.logMass) };
    });
    const nb = max.shape[2];
    for (const rule of rules) {
      const stage = () => fon.tidy(() => {
        const s = decodeBlockScores(layer.selector, x, keys.scoring(t), { l: t, pos: t - 1 });
        selectOnDevice(s.max, s.logMass, t - 1, rule, t);
      });
      const stageMs = await timeBatched(sync, stage);
      b.rt.startProfile();
      for (let i = 0; i < PROFILED; i++) stage();
      const prof = await b.rt.stopProfile();
      console.log(`\n${t} cached tokens (${nb} blocks), ${ruleName(rule)}: selector stage ${stageMs.toFixed(3)} ms a step (median of batches); on the GPU's clock, ${PROFILED} steps summed:\n${profileTable(prof, { top: 10, byVariant: false })}`);
      const a = { rows: 1, n: nb, ...selectArgs(t - 1, rule), logMass: true };
      const call = (wg?: number) => wrap(b, selectOpen(b, ref(max) as GpuRef, ref(logMass) as GpuRef, a, wg ? { wg } : {}), [1, nb], 'i32');
      const want = call();
      const wantV = (await want.data()) as Int32Array;
      want.dispose();
      let kept = 0;
      for (const f of wantV) kept += f;
      for (const wg of flags.wg.split(',').map(Number)) {
        let out;
        try { out = call(wg); } catch (e) { console.log(`  wg ${wg}: ${(e as Error).message}`); continue; }
        const got = (await out.data()) as Int32Array;
        out.dispose();
        let diff = 0;
        for (let i = 0; i < got.length; i++) if (got[i] !== wantV[i]) diff++;
        const ms = await timeBatched(sync, () => { call(wg).dispose(); });
        b.rt.startProfile();
        for (let i = 0; i < PROFILED; i++) call(wg).dispose();
        const gpu = (await b.rt.stopProfile()).filter((p) => p.kernel === 'rows_select').reduce((s, p) => s + p.ms, 0) / PROFILED;
        console.log(`  selectOpen wg ${String(wg).padStart(4)}: ${ms.toFixed(3)} ms (${gpu.toFixed(3)} ms on the GPU's clock); ${kept} of ${nb} blocks kept, ${diff} flags differ from the default's`);
      }
      {
        // The earlier form at its own default size (512; the row kernels' 64 on software adapters).
        const globalWg = b.caps.software ? 64 : 512;
        const got = withGlobal(b, () => call(globalWg));
        const gotV = (await got.data()) as Int32Array;
        got.dispose();
        let diff = 0;
        for (let i = 0; i < gotV.length; i++) if (gotV[i] !== wantV[i]) diff++;
        const ms = await timeBatched(sync, () => withGlobal(b, () => call(globalWg).dispose()));
        b.rt.startProfile();
        for (let i = 0; i < PROFILED; i++) withGlobal(b, () => call(globalWg).dispose());
        const gpu = (await b.rt.stopProfile()).filter((p) => p.kernel.startsWith('rows_select')).reduce((s, p) => s + p.ms, 0) / PROFILED;
        console.log(`  selectOpen, the global form (wg ${globalWg}): ${ms.toFixed(3)} ms (${gpu.toFixed(3)} ms on the GPU's clock); ${diff} flags differ from the default's`);
      }
      {
        // selectBlockList (LIST: the fine mask's table from the same pass), as a Spot step runs it,
        // and with its source patched to skip some of its writes (timing only: the outputs are then
        // incomplete): what the table and the flags cost beside the search.
        const list = { fine: 16, tk: t, kBlocks: nb, kvLength: t };
        const callList = () => selectBlockList(b, ref(max) as GpuRef, ref(logMass) as GpuRef, a, list);
        for (const tag of ['none', 'no-bykey', 'no-zeros', 'no-flags', 'no-bykey-zeros-flags']) {
          const once = () => withWritePatch(b, tag, () => { const [f, tt] = callList(); b.free(f); b.free(tt); });
          const ms = await timeBatched(sync, once);
          b.rt.startProfile();
          for (let i = 0; i < PROFILED; i++) once();
          const gpu = (await b.rt.stopProfile()).filter((p) => p.kernel.startsWith('rows_select')).reduce((s, p) => s + p.ms, 0) / PROFILED;
          console.log(`  selectBlockList, writes skipped: ${tag.padEnd(20)}: ${ms.toFixed(3)} ms (${gpu.toFixed(3)} ms on the GPU's clock)`);
        }
      }
      // Top-p's mass search cut to R rounds: the cost of a round by difference, and of the rest at R = 0.
      if (rule.kind === 'top-p') for (const r of [0, 4, 8]) {
        const ms = await timeBatched(sync, () => withRounds(b, r, () => call().dispose()));
        b.rt.startProfile();
        for (let i = 0; i < PROFILED; i++) withRounds(b, r, () => call().dispose());
        const gpu = (await b.rt.stopProfile()).filter((p) => p.kernel.startsWith('rows_select')).reduce((s, p) => s + p.ms, 0) / PROFILED;
        console.log(`  selectOpen, mass search cut to ${r} of 8 rounds: ${ms.toFixed(3)} ms (${gpu.toFixed(3)} ms on the GPU's clock)`);
      }
    }
    for (const y of [max, logMass, slot.k, slot.v]) y.dispose();
    keys.dispose();
  }
  x.dispose();
}

/** Runs fn with selectOpen's kernel swapped for the earlier form (dev/kernels/rows_select_global.wgsl: reads memory each pass). */
function withGlobal<T>(b: WebGpuBackend, fn: () => T): T {
  const run = b.rt.run;
  b.rt.run = (d) => {
    if (d.kernel.name !== 'rows_select' || !d.variant.SELECT) return run.call(b.rt, d);
    // Built as rows.ts builds its row kernels, the SELECT part the earlier form's (the same header and helpers).
    globalKernel ??= { name: 'rows_select_global', source: (v, caps) => (v.SG ? 'enable subgroups;\n' : '') + preprocess(withGlobalSelect(wgslSource('rows_select')), {
      ...v,
      HEADER: header([{ name: 's', dtype: v.S as DType }, { name: 'm', dtype: v.M as DType }, { name: 'y', dtype: 'i32', write: true }], caps.f16, 'rows: u32, n: u32, valid: u32, low: u32, high: u32, count: u32, p: f32'),
      COMMON: preprocess(wgslSource('rows_common'), v),
      SELECT_COMMON: preprocess(wgslSource('select_common'), v),
    }) };
    return run.call(b.rt, { ...d, kernel: globalKernel });
  };
  try { return fn(); } finally { b.rt.run = run; }
}
let globalKernel: Kernel | undefined;

/** rows_select.wgsl with its SELECT part replaced by the earlier form's (dev/kernels/rows_select_global.wgsl). */
function withGlobalSelect(src: string): string {
  const from = src.indexOf('#if SELECT'), to = src.indexOf('#if MASKTABLE');
  if (from < 0 || to < from) throw new Error('dev/kernels/select_open.ts: rows_select.wgsl no longer has a SELECT part before MASKTABLE; update withGlobalSelect');
  return src.slice(0, from) + readFileSync(new URL('./rows_select_global.wgsl', import.meta.url), 'utf8') + '\n' + src.slice(to);
}

/**
 * Runs fn with rows_select's LIST writes patched out (timing only): `no-bykey` the by-key index,
 * `no-zeros` the list's zeros after its count, `no-flags` the flags, or all three; `none` unpatched.
 */
function withWritePatch<T>(b: WebGpuBackend, tag: string, fn: () => T): T {
  if (tag === 'none') return fn();
  const run = b.rt.run;
  const cut: Record<string, [string, string][]> = {
    bykey: [['for (var c = lid; c < P.kblocks; c += WG) { sti_t(P.rows + row * P.kblocks + c, i32(empty)); }', '']],
    zeros: [['for (var x = count + lid; x < P.valid; x += WG) { sti_t(list + 1u + x, 0i); }', '']],
    flags: [['sti_y(base + first + i, select(0i, 1i, kept));', ''], ['if (!is_open(e)) { sti_y(base + e, select(0i, 1i, e < P.valid)); }', '']],
  };
  const parts = tag === 'no-bykey-zeros-flags' ? ['bykey', 'zeros', 'flags'] : [tag.slice(3)];
  b.rt.run = (d) => {
    if (d.kernel.name !== 'rows_select' || !d.variant.LIST) return run.call(b.rt, d);
    const base = d.kernel;
    const kernel = writeKernels.get(tag) ?? writeKernels.set(tag, { name: `rows_select_${tag}`, source: (v, caps) => {
      let src = base.source(v, caps);
      for (const p of parts) for (const [from, to] of cut[p]) {
        if (!src.includes(from)) throw new Error(`dev/kernels/select_open.ts: rows_select no longer has '${from}'; update the patch`);
        src = src.replace(from, to);
      }
      return src;
    } }).get(tag)!;
    return run.call(b.rt, { ...d, kernel });
  };
  try { return fn(); } finally { b.rt.run = run; }
}
const writeKernels = new Map<string, Kernel>();

/** Runs fn with rows_select's mass search (top-p) cut to `rounds` of its 8 rounds (timing only: the flags are wrong). */
function withRounds<T>(b: WebGpuBackend, rounds: number, fn: () => T): T {
  const run = b.rt.run;
  b.rt.run = (d) => {
    if (d.kernel.name !== 'rows_select' || !d.variant.SELECT) return run.call(b.rt, d);
    const base = d.kernel;
    const kernel = roundKernels.get(rounds) ?? roundKernels.set(rounds, { name: `rows_select_r${rounds}`, source: (v, caps) => {
      const src = base.source(v, caps), from = 'for (var s = 28i; s >= 0i; s -= 4i) {';
      if (!src.includes(from)) throw new Error(`dev/kernels/select_open.ts: rows_select no longer has '${from}'; update the patch`);
      return src.replace(from, `for (var s = 28i; s >= ${32 - 4 * rounds}i; s -= 4i) {`);
    } }).get(rounds)!;
    return run.call(b.rt, { ...d, kernel });
  };
  try { return fn(); } finally { b.rt.run = run; }
}
const roundKernels = new Map<number, Kernel>();

await main();
process.exit(0);
