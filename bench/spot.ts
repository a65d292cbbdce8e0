/**
 * SpotAttention decode benchmark (specs/focus_spot.md B5, the paper's Table 1): one decoding step of
 * a Spot layer at B = 1, GQA 32/8, D = 128, d_model 4096, f16 K/V and selector keys, at each cache
 * length, beside FON's dense decode and PyTorch's SDPA decode (bf16, enable_gqa,
 * bench/torch_attention.py) on the same GPU in the same run. What each row times, apart:
 *
 * - `selector`: the selection stage of a step: the selector's query projections (one
 *   Backend.matmulMany), the block scores and log-masses in one pass over the cached selector keys
 *   (Backend.indexBlockScores; INT4 keys read as stored), and the threshold search on the device
 *   writing the block mask of what it keeps in the same pass (Backend.selectBlockList,
 *   spot/device_select.ts);
 * - `attention`: the block-sparse split-K decode over the selected blocks, every head, with that mask;
 * - `step`: the layer's whole cached step as generation runs it (SpotAttention.forwardCached under
 *   noGrad, as every timing here: the K/V and selector-key writes, the selection, the attention);
 * - the budget: the tokens of the selected blocks over the causal tokens;
 * - `host` (beside step and FON dense): the host's time to record one call, the GPU not waited for
 *   (bench/lib/report.ts timeHost): where it is close to the call's time, the host sets the pace;
 * - `step GPU`: the step's GPU time alone, 50 steps recorded into one submit and timed from it to
 *   the GPU's finish (bench/lib/report.ts timeGpu), and the bind groups a step makes (cache misses:
 *   each costs host time);
 * The inputs are random (K, V and selector keys drawn on the device, x a random residual row), so the
 * top-p budget here says nothing of a trained selector's; static top-K's is fixed by its fraction.
 *
 *   node --import tsx bench/spot.ts [--tokens 16384,65536,131072,262144,524288] [--rules top-k:0.5,top-p:0.9] [--keys f16,int4]
 *                                   [--json bench/results_spot_h100.json] [--profile]
 * `--profile`: ten more steps of each case with every dispatch timed on the GPU (timestamp queries),
 * and with `--model-layers` one more token of each model,
 * printed per kernel and variant: where a step's time goes.
 * `--paths mask,gather`: the device decode paths timed (SpotAttention.decodePath; gather for top-K
 * rules only: its selector stage ends at the selection's list, its attention is the gather and a plain decode).
 * `--keys`: the selector keys' forms timed (INT4: the block scores read the codes as stored; a step quantizes its new key).
 * `--model-layers N` (N > 0) also times whole decoding steps of a model (tokens/s, a token read
 * back each step as generation does): N layers of d_model 4096, GQA 32/8, D 128, SwiGLU 11008, a
 * 32000-token vocabulary, f16 weights (random, drawn on the device: bench/lib/device_data.ts deviceDraw), at each of `--model-tokens` cached tokens (K, V and selector
 * keys of random values written straight into the cache), with Spot layers (top-K 0.5 and top-p
 * 0.9, f16 keys) and with full attention (paged K/V, FON's dense decode); PyTorch is not run there.
 * `--forms SET;SET…`: the kernels' forms each set of rows runs with (a whole step timed with a form
 * before it becomes the default), a set a comma list of `many:L/W` (matmulMany's lanes a column and
 * invocations at every K: MANY_DEFAULTS), `index-prefetch` (INDEX_SCORE_DEFAULTS.prefetch), `lanes-prefetch`
 * (DECODE_DEFAULTS.lanesPrefetch), or `default`; the model runs with the last set.
 */
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import { WebGpuBackend } from '../src/backend/webgpu/backend.ts';
import { profileTable } from '../src/backend/webgpu/profile.ts';
import { DECODE_DEFAULTS } from '../src/backend/webgpu/kernels/attention_decode.ts';
import { INDEX_SCORE_DEFAULTS } from '../src/backend/webgpu/kernels/index_scores.ts';
import { MANY_DEFAULTS } from '../src/backend/webgpu/kernels/matmul.ts';
import type { Backend } from '../src/index.ts';
import { linePlot } from '../src/io/plot_svg.ts';
import { attention } from '../src/ops/attention.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { SPOT_DEFAULTS, SpotAttention } from '../src/attention/spot/index.ts';
import { SpotKeyCache } from '../src/attention/spot/key_cache.ts';
import { gatherSelected, selectList, selectOnDevice, topKBlocks } from '../src/attention/spot/device_select.ts';
import { SPOT_DECODE_PATHS, type SpotDecodePath } from '../src/attention/spot/spot.ts';
import { ArgumentError } from '../src/errors.ts';
import { decodeBlockScores } from '../src/attention/spot/selector.ts';
import type { SpotRule } from '../src/attention/spot/selection.ts';
import type { LayerKv } from '../src/attention/mechanism.ts';
import { spotLayers } from '../src/attention/spot/index.ts';
import { Decoder } from '../src/model/decoder.ts';
import { parseModelConfig } from '../src/model/config.ts';
import { KvCache } from '../src/infer/kv_cache.ts';
import { kvWrite } from '../src/ops/attention.ts';
import { kvWritePaged } from '../src/ops/paged_attention.ts';
import { findPython, runPython, timeBatched, timeGpu, timeHost, writeJson } from './lib/report.ts';
import { deviceDraw, deviceRandn, trim } from './lib/device_data.ts';

const { values: flags } = parseArgs({
  options: {
    tokens: { type: 'string', default: '16384,65536,131072,262144,524288' },
    rules: { type: 'string', default: 'top-k:0.5,top-p:0.9' },
    keys: { type: 'string', default: 'f16,int4' },
    'model-layers': { type: 'string', default: '0' },
    'model-tokens': { type: 'string', default: '16384,65536,131072,262144,524288' },
    json: { type: 'string' },
    profile: { type: 'boolean', default: false },
    paths: { type: 'string', default: 'mask' },
    forms: { type: 'string', default: 'default' },
  },
});

const H = 32, HKV = 8, D = 128, C = 4096;
/** Steps timed per dispatch under --profile. */
const PROFILED = 10;
const list = (s: string) => s.split(',').filter(Boolean).map(Number);
const rules: SpotRule[] = flags.rules.split(',').filter(Boolean).map((r) => {
  const [kind, x] = r.split(':');
  return kind === 'top-k' ? { kind: 'top-k', fraction: Number(x) } : { kind: 'top-p', p: Number(x) };
});
const ruleName = (r: SpotRule) => (r.kind === 'top-k' ? `top-K ${r.fraction}` : `top-p ${r.p}`);

const keyForms = flags.keys.split(',').filter(Boolean) as ('f16' | 'int4')[];
const paths = flags.paths.split(',').filter(Boolean) as SpotDecodePath[];
// The two paths themselves ('auto' picks one of them a row by the tokens it selects).
const TIMED_PATHS: readonly SpotDecodePath[] = SPOT_DECODE_PATHS.filter((p) => p !== 'auto');
for (const p of paths) if (!TIMED_PATHS.includes(p)) throw new ArgumentError(`--paths: '${p}': expected ${TIMED_PATHS.join(' or ')}`);

/** The defaults as committed, which each --forms set starts from. */
const COMMITTED = { decode: { ...DECODE_DEFAULTS }, index: { ...INDEX_SCORE_DEFAULTS }, many: { ...MANY_DEFAULTS } };
/** Sets the defaults a --forms set names (the others back to theirs). */
function applyForms(set: string): void {
  Object.assign(DECODE_DEFAULTS, COMMITTED.decode);
  Object.assign(INDEX_SCORE_DEFAULTS, COMMITTED.index);
  Object.assign(MANY_DEFAULTS, COMMITTED.many);
  for (const item of set.split(',').filter(Boolean)) {
    const many = /^many:(\d+)\/(\d+)$/.exec(item);
    if (many) Object.assign(MANY_DEFAULTS, { lanes: Number(many[1]), wg: Number(many[2]), fromK: 0 });
    else if (item === 'index-prefetch') INDEX_SCORE_DEFAULTS.prefetch = true;
    else if (item === 'lanes-prefetch') DECODE_DEFAULTS.lanesPrefetch = true;
    else if (item !== 'default') throw new ArgumentError(`--forms: '${item}': expected many:L/W, index-prefetch, lanes-prefetch or default`);
  }
}
const formSets = flags.forms.split(';').filter(Boolean);
for (const set of formSets) applyForms(set); // every set checked before anything is timed (the rows apply theirs)

interface Row { forms: string; tokens: number; rule: string; keys: string; selectorMs: number; attentionMs: number; stepMs: number; stepHostMs: number; stepGpuMs?: number; groups?: number; budget: number; denseMs: number; denseHostMs: number; torchMs?: number }

async function timeAt(b: Backend, t: number, layer: SpotAttention): Promise<Omit<Row, 'forms'>[]> {
  const sync = () => b.sync();
  const k = deviceRandn(b, HKV, t, D, 2), v = deviceRandn(b, HKV, t, D, 3);
  const sk = deviceRandn(b, 1, t, SPOT_DEFAULTS.dim, 4);
  const caches = keyForms.map((form) => {
    const slot: LayerKv = { k, v };
    const keys = SpotKeyCache.forSlot(slot, SPOT_DEFAULTS.dim, form);
    slot.side = { spot: keys };
    fon.tidy(() => keys.write(0, fon.reshape(sk, [1, t, SPOT_DEFAULTS.dim])));
    return { form, slot, keys };
  });
  sk.dispose();
  const q = fon.randn([1, H, 1, D], { seed: 5, backend: b, dtype: 'f16' });
  const kNew = fon.randn([1, HKV, 1, D], { seed: 6, backend: b, dtype: 'f16' }), vNew = fon.randn([1, HKV, 1, D], { seed: 7, backend: b, dtype: 'f16' });
  const x = fon.randn([1, 1, C], { seed: 8, backend: b });
  const rows: Omit<Row, 'forms'>[] = [];
  try {
    const denseMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { attention(q, k, v, { kvLength: t }); })));
    const denseHostMs = await timeHost(sync, () => fon.noGrad(() => fon.tidy(() => { attention(q, k, v, { kvLength: t }); })));
    for (const { form, slot, keys } of caches) for (const rule of rules) for (const path of paths) {
      if (path === 'gather' && rule.kind !== 'top-k') continue;
      layer.setRule(rule);
      layer.decodePath = path;
      const scores = () => decodeBlockScores(layer.selector, x, keys.scoring(t), { l: t, pos: t - 1 });
      let selectorMs: number, attentionMs: number, budget: number;
      if (rule.kind === 'top-k' && path === 'gather') {
        // Gathered: the selector stage ends at the selection's list; the attention is the gather and a plain decode.
        const listOf = () => { const { max, logMass } = scores(); return selectList(max, logMass, t - 1, rule, t).table; };
        selectorMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { listOf(); })));
        const chosen = fon.noGrad(() => fon.tidy(() => fon.keep(listOf())));
        attentionMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { const g = gatherSelected(chosen, t - 1, rule, k, v); attention(q, g.k, g.v, { kvLength: g.kvLength }); })));
        budget = topKBlocks(t - 1, rule).tokens / t;
        chosen.dispose();
      } else {
        const select = () => { const { max, logMass } = scores(); return selectOnDevice(max, logMass, t - 1, rule, t); };
        selectorMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { select(); })));
        const chosen = fon.noGrad(() => fon.tidy(() => { const s = select(); return { mask: { ...s.mask, device: fon.keep(s.mask.device) }, tokens: fon.keep(s.tokens()) }; }));
        attentionMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { attention(q, k, v, { kvLength: t, mask: chosen.mask }); })));
        budget = (await chosen.tokens.data())[0] / t;
        chosen.mask.device.dispose();
        chosen.tokens.dispose();
      }
      const stepMs = await timeBatched(sync, () => fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); })));
      const stepHostMs = await timeHost(sync, () => fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); })));
      let stepGpuMs: number | undefined, groups: number | undefined;
      if (b instanceof WebGpuBackend) {
        stepGpuMs = (await timeGpu(b.rt, sync, () => fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); })))) ?? undefined;
        const made = b.rt.bindGroupsMade;
        for (let i = 0; i < 10; i++) fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); }));
        groups = (b.rt.bindGroupsMade - made) / 10;
      }
      if (flags.profile && b instanceof WebGpuBackend) {
        // --profile: ten more steps, each dispatch timed on the GPU: where a step's time goes.
        await b.sync();
        b.rt.startProfile();
        for (let i = 0; i < PROFILED; i++) fon.noGrad(() => fon.tidy(() => { layer.forwardCached(q, kNew, vNew, { x }, slot, t - 1); }));
        const kernels = await b.rt.stopProfile();
        console.error(`  profile of a step (${PROFILED} steps, ms summed), ${t} ${ruleName(rule)} (${path}), ${form} keys:\n${profileTable(kernels, { top: 14, byVariant: true })}`);
      }
      layer.resetStats();
      rows.push({ tokens: t, rule: `${ruleName(rule)}${path === 'gather' ? ' gathered' : ''}`, keys: form, selectorMs, attentionMs, stepMs, stepHostMs, budget, denseMs, denseHostMs, ...(stepGpuMs !== undefined ? { stepGpuMs } : {}), ...(groups !== undefined ? { groups } : {}) });
    }
  } finally {
    for (const y of [k, v, q, kNew, vNew, x]) y.dispose();
    for (const c of caches) c.keys.dispose();
  }
  return rows;
}

/** A model's decoding figures: ms a token, and of it the host's recording of the step and the wait for its logits (the GPU's work and the read). */
interface ModelRow { tokens: number; layers: number; attention: string; msPerToken: number; tokensPerSecond: number; recordMs: number; waitMs: number }

/**
 * ms per decoded token of an L-layer model at t cached tokens, for Spot layers under each rule and
 * for full attention, each row handed to `onRow` as it is measured (a run cut short keeps them).
 */
async function timeModel(b: Backend, t: number, layers: number, onRow: (r: ModelRow) => void): Promise<void> {
  const base = { vocabSize: 32000, dModel: C, nLayers: layers, nHeads: H, nKvHeads: HKV, headDim: D, mlpHidden: 11008, contextLength: t + 64, positions: 'rope' as const };
  const draws = deviceDraw(b);
  const spot = new Decoder(parseModelConfig({ ...base, attention: [{ type: 'spot', ...SPOT_DEFAULTS }] }), new ParamFactory({ backend: b, seed: 1, dtype: 'f16', draw: draws.draw }));
  draws.dispose();
  const dense = new Decoder(parseModelConfig({ ...base, attention: [{ type: 'full' }] }), new ParamFactory({ backend: b, dtype: 'f16', weights: Object.fromEntries(spot.namedParameters().filter(([n]) => !n.includes('.attn.spot.'))), source: 'the Spot model' }));
  try {
    const spotRuns = rules.flatMap((r) => paths.filter((p) => p === 'mask' || r.kind === 'top-k').map((p) => [`Spot ${ruleName(r)}${p === 'gather' ? ' gathered' : ''}`, spot, r, p] as const));
    for (const [label, model, rule, path] of [['full attention (dense decode)', dense, null, 'mask'], ...spotRuns] as [string, Decoder, SpotRule | null, SpotDecodePath][]) {
      if (rule) for (const [, l] of spotLayers(model)) { l.setRule(rule); l.decodePath = path; }
      const cache = new KvCache(model.config, 1, t + 16, b, 'f16');
      try {
        cache.layers.forEach((slot, i) => fon.tidy(() => {
          const k = deviceRandn(b, HKV, t, D, 10 + i), v = deviceRandn(b, HKV, t, D, 20 + i);
          if (slot.pages) {
            slot.pages.reserve(t);
            kvWritePaged(slot.pages.k, slot.pages.pageRows, k, 0);
            kvWritePaged(slot.pages.v, slot.pages.pageRows, v, 0);
          } else {
            kvWrite(slot.k, k, 0);
            kvWrite(slot.v, v, 0);
            (slot.side!.spot as SpotKeyCache).write(0, fon.reshape(deviceRandn(b, 1, t, SPOT_DEFAULTS.dim, 30 + i), [1, t, SPOT_DEFAULTS.dim]));
          }
          k.dispose();
          v.dispose();
        }));
        let id = 1, recordMs = 0, readMs = 0;
        const step = async (pos: number) => {
          const t0 = performance.now();
          const logits = fon.noGrad(() => fon.tidy(() => model.forward(fon.tensor(Int32Array.of(id), [1, 1], { dtype: 'i32', backend: b }), { cache: cache.layers, pos, lastOnly: true })));
          const t1 = performance.now();
          const scores = (await logits.data()) as Float32Array;
          recordMs += t1 - t0;
          readMs += performance.now() - t1;
          logits.dispose();
          let best = 0;
          for (let i = 1; i < 32000; i++) if (scores[i] > scores[best]) best = i;
          id = best;
        };
        await step(t);
        await step(t + 1); // compiled, warm
        recordMs = readMs = 0;
        const n = 8, t0 = performance.now();
        for (let s = 0; s < n; s++) await step(t + 2 + s);
        const ms = (performance.now() - t0) / n;
        onRow({ tokens: t, layers, attention: label, msPerToken: ms, tokensPerSecond: 1000 / ms, recordMs: recordMs / n, waitMs: readMs / n });
        if (flags.profile && b instanceof WebGpuBackend) {
          // --profile: one more token with every dispatch timed on the GPU: where a token's time goes.
          b.rt.startProfile();
          await step(t + 2 + n);
          console.error(`  profile of one token, ${layers} layers at ${t} cached tokens, ${label}:\n${profileTable(await b.rt.stopProfile(), { top: 16, byVariant: true })}`);
        }
      } finally {
        cache.dispose();
      }
      trim(b);
    }
  } finally {
    spot.dispose();
    dense.dispose();
  }
}

function save(adapter: string, rows: Row[], modelRows: ModelRow[] = []): void {
  if (!flags.json) return;
  writeJson(flags.json, { date: new Date().toISOString(), adapter, shapes: { batch: 1, heads: H, kvHeads: HKV, headDim: D, dModel: C, selector: `${SPOT_DEFAULTS.heads} × ${SPOT_DEFAULTS.dim}`, dtype: 'f16 (FON), bf16 (PyTorch)' }, rows, model: modelRows });
  const configOf = (r: Row) => `${r.rule}|${r.keys}${r.forms === 'default' ? '' : `|${r.forms}`}`;
  const points = (pick: (r: Row) => number | undefined, config?: string) => [...new Map(rows.filter((r) => (!config || configOf(r) === config) && pick(r) !== undefined).map((r) => [r.tokens, pick(r)!])).entries()];
  const series = [
    { name: 'FON dense decode', points: points((r) => r.denseMs) },
    { name: 'PyTorch SDPA decode (bf16)', points: points((r) => r.torchMs) },
    ...[...new Set(rows.map(configOf))].map((c) => ({ name: `Spot ${c.replace('|', ', ').replace('|', ' keys, ')}${c.split('|').length > 2 ? '' : ' keys'}: step`, points: points((r) => r.stepMs, c) })),
  ].filter((s) => s.points.length > 0);
  if (series.length) writeFileSync(flags.json.replace(/\.json$/, '') + '-decode.svg', linePlot({ title: `Spot decode step on ${adapter.split(':')[0]}`, xLabel: 'cached tokens', yLabel: 'ms per layer (H 32/8, D 128)', series, logX: true, logY: true, markers: true }));
}

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  const caps = (b as unknown as { caps: { adapterName: string } }).caps;
  console.log(`FON Spot decode bench on ${caps.adapterName}: B 1, GQA ${H}/${HKV}, D ${D}, d_model ${C}, selector ${SPOT_DEFAULTS.heads} × ${SPOT_DEFAULTS.dim}, f16`);
  const tokens = list(flags.tokens);
  const python = findPython('torch', ['python3', '/usr/bin/python3']);
  const torch = new Map<number, number>();
  if (python) {
    const res = runPython(python, new URL('./torch_attention.py', import.meta.url).pathname, tokens.map((t) => ({ key: `decode-${t}`, op: 'decode', t, h: H, hkv: HKV, d: D }))) as { key: string; ms: number }[] | null;
    for (const r of res ?? []) torch.set(Number(r.key.split('-')[1]), r.ms);
  }
  const dims = { dModel: C, nLayers: 1, nHeads: H, nKvHeads: HKV, headDim: D, normEps: 1e-5 };
  const layer = new SpotAttention({ type: 'spot', ...SPOT_DEFAULTS }, { f: new ParamFactory({ backend: b, seed: 1 }), name: 'layers.0.attn', dims });
  const rows: Row[] = [];
  for (const forms of formSets) {
    applyForms(forms);
    if (formSets.length > 1) console.log(`  forms: ${forms}`);
    for (const t of tokens) {
      for (const r0 of await timeAt(b, t, layer)) {
        const torchMs = torch.get(t);
        const r: Row = { forms, ...r0, ...(torchMs !== undefined ? { torchMs } : {}) };
        rows.push(r);
        console.log(`  ${t} ${r.rule}, ${r.keys} keys: selector ${r.selectorMs.toFixed(3)} ms + attention ${r.attentionMs.toFixed(3)} ms (budget ${(100 * r.budget).toFixed(1)}%); step ${r.stepMs.toFixed(3)} ms (host ${r.stepHostMs.toFixed(3)}, GPU ${r.stepGpuMs?.toFixed(3) ?? '—'}, ${r.groups ?? '—'} bind groups made a step); FON dense ${r.denseMs.toFixed(3)} ms (host ${r.denseHostMs.toFixed(3)})${torchMs !== undefined ? `, PyTorch SDPA ${torchMs.toFixed(3)} ms: step ${(torchMs / r.stepMs).toFixed(2)}× SDPA${r.stepGpuMs !== undefined ? ` (GPU alone ${(torchMs / r.stepGpuMs).toFixed(2)}×)` : ''}` : ''}, ${(r.denseMs / r.stepMs).toFixed(2)}× FON dense`);
        save(caps.adapterName, rows);
      }
      trim(b);
    }
  }
  const modelLayers = Number(flags['model-layers']);
  const modelRows: ModelRow[] = [];
  if (modelLayers > 0) {
    for (const t of list(flags['model-tokens'])) {
      await timeModel(b, t, modelLayers, (r) => {
        modelRows.push(r);
        console.log(`  model of ${r.layers} layers at ${t} cached tokens, ${r.attention}: ${r.msPerToken.toFixed(2)} ms a token (host recording ${r.recordMs.toFixed(2)}, wait for the logits ${r.waitMs.toFixed(2)}), ${r.tokensPerSecond.toFixed(1)} tokens/s`);
        save(caps.adapterName, rows, modelRows);
      });
    }
  }
  const byForms = formSets.length > 1;
  console.log('\n|' + (byForms ? ' forms |' : '') + ' cached tokens | rule | keys | selector ms | attention ms | budget | step ms | step host ms | step GPU ms | FON dense ms | dense host ms | PyTorch SDPA ms | step vs SDPA | step GPU vs SDPA | step vs FON dense |');
  console.log((byForms ? '|---' : '') + '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`|${byForms ? ` ${r.forms} |` : ''} ${r.tokens} | ${r.rule} | ${r.keys} | ${r.selectorMs.toFixed(3)} | ${r.attentionMs.toFixed(3)} | ${(100 * r.budget).toFixed(1)}% | ${r.stepMs.toFixed(3)} | ${r.stepHostMs.toFixed(3)} | ${r.stepGpuMs?.toFixed(3) ?? '—'} | ${r.denseMs.toFixed(3)} | ${r.denseHostMs.toFixed(3)} | ${r.torchMs?.toFixed(3) ?? '—'} | ${r.torchMs !== undefined ? `${(r.torchMs / r.stepMs).toFixed(2)}×` : '—'} | ${r.torchMs !== undefined && r.stepGpuMs !== undefined ? `${(r.torchMs / r.stepGpuMs).toFixed(2)}×` : '—'} | ${(r.denseMs / r.stepMs).toFixed(2)}× |`);
  }
  if (modelRows.length) {
    console.log(`\n| cached tokens | model | tokens/s | ms a token | host recording ms | wait for the logits ms | against full attention |\n|---|---|---|---|---|---|---|`);
    for (const r of modelRows) {
      const full = modelRows.find((x) => x.tokens === r.tokens && x.attention.startsWith('full'))!;
      console.log(`| ${r.tokens} | ${r.layers} layers, ${r.attention} | ${r.tokensPerSecond.toFixed(1)} | ${r.msPerToken.toFixed(2)} | ${r.recordMs.toFixed(2)} | ${r.waitMs.toFixed(2)} | ${(full.msPerToken / r.msPerToken).toFixed(2)}× |`);
    }
  }
}

await main();
process.exit(0);
