/**
 * Focus prefill benchmark (specs/focus_spot.md A4, A6 Table 6): the exact hard Focus attention
 * (attention/focus/sparse.ts: group-sorted segments + cross-group band + logsumexp merge, on the
 * shared masked kernels) against FON's own dense causal attention and PyTorch's SDPA (bf16,
 * bench/torch_attention.py) on the same GPU in the same run, at B = 1, H = 32, D = 128, f16.
 * Memberships are random but balanced as trained Focus groups are (each token in k of K groups,
 * uniformly), so a group holds about k·T/K tokens.
 *
 * What each Focus row times, apart:
 * - `assign`: the group scores and causal logits (a T × C by C × 16 by 16 × K product on the GPU)
 *   and their read to the host, then the membership bits (top-k on the host);
 * - `sort+masks`: the counting sort and the two block masks built on the host (O(blocks visited))
 *   and uploaded;
 * - `attention`: the row gathers, the two masked attention calls and the merge on the GPU — the
 *   figure the speedups are computed from, beside `total` (all three).
 * The stages are the library's own (attention/focus/sparse.ts planFocusPrefill, runFocusPrefill).
 * Where q, k, v or the merge's f32 intermediates pass a WebGPU binding (2 GiB), the heads are split
 * into groups that fit and each group runs the same plan (its masks are shared by every head).
 *
 *   node --import tsx bench/focus.ts [--tokens 16384,65536,262144,1048576] [--configs 4:1,8:1,4:2]
 *                                    [--dense 16384,65536,262144] [--decode 131072] [--json bench/results_focus_h200.json]
 *
 * `--configs` lists K:k pairs, `--skip` the T:K:k runs left out (k = 2 of 4 at 1M tokens keeps 5/6
 * of the causal pairs over 2M sorted rows: minutes a call); `--dense` the lengths at which FON's
 * dense attention is timed too (1M tokens of FON's dense prefill take minutes a call); `--split`
 * the lengths at which the attention stage is also timed in parts (the row gathers, set A, set B;
 * the merge, reading A's copies in place, is what is left); `--device-plan` the lengths at which
 * the library's webgpu path is timed too (the plan built on the device, then the same prefill);
 * `--decode` times one decoding step of a Focus layer at that cache length (group lists on the
 * host, the query's keys gathered) against FON's dense decode.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { linePlot } from '../src/io/plot_svg.ts';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import type { Backend, Tensor } from '../src/index.ts';
import { attention, attentionWithLse, uploadMask } from '../src/ops/attention.ts';
import { addPrefillStats, gatherEntryRows, planFocusPrefill, rowLists, runFocusPrefill, runSortedPrefill } from '../src/attention/focus/sparse.ts';
import { planFocusPrefillOnDevice } from '../src/attention/focus/device_plan.ts';
import { focusDecodeOnDevice } from '../src/attention/focus/device_decode.ts';
import { causalLogits, groupScores, membershipBits } from '../src/attention/focus/groups.ts';
import { FocusGroupLists } from '../src/attention/focus/group_lists.ts';
import { findPython, runPython, timeBatched, writeJson } from './lib/report.ts';
import { deviceRandn, trim } from './lib/device_data.ts';

const { values: flags } = parseArgs({
  options: {
    tokens: { type: 'string', default: '16384,65536,262144,1048576' },
    configs: { type: 'string', default: '4:1,8:1,4:2' },
    dense: { type: 'string', default: '16384,65536,262144' },
    decode: { type: 'string', default: '131072' },
    split: { type: 'string', default: '16384,65536,262144' },
    'device-plan': { type: 'string', default: '16384,65536,262144' },
    skip: { type: 'string', default: '1048576:4:2' },
    window: { type: 'string', default: '128' },
    json: { type: 'string' },
  },
});

const H = 32, D = 128, C = 4096, DG = 16;
const W = Number(flags.window);
const list = (s: string) => s.split(',').filter(Boolean).map(Number);
const BINDING = 2 ** 31 - 4;

/** Balanced random memberships: each token in k distinct groups drawn uniformly (a fixed LCG). */
function balancedBits(t: number, groups: number, k: number, seed: number): Uint32Array {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const out = new Uint32Array(t);
  for (let i = 0; i < t; i++) {
    let w = 0, n = 0;
    while (n < k) { const c = Math.floor(rnd() * groups); if (!(w & (1 << c))) { w |= 1 << c; n++; } }
    out[i] = w >>> 0;
  }
  return out;
}

/** Heads per call so that a (1, heads, rows, D) tensor fits one binding in f32 (the merge works in f32). */
const headsPerCall = (rows: number) => Math.max(1, Math.min(H, Math.floor(BINDING / (rows * D * 4))));

interface FocusTiming { assignMs: number; sortMs: number; attnMs: number; devicePlanMs?: number; tableBytes: number; parts?: { gatherMs: number; setAMs: number; setBMs: number; mergeMs: number }; blocksA: number; blocksB: number; causalBlocks: number }

/** ms of the three stages of one Focus prefill at t tokens with K groups and k memberships. */
async function timeFocus(b: Backend, t: number, groups: number, k: number, split: boolean, devicePlan: boolean): Promise<FocusTiming> {
  // assign: scores and causal logits on the GPU (rows in chunks that fit a binding), read back, top-k on the host.
  const chunkRows = Math.min(t, 2 ** 16); // x in f32 for the scores (groups.ts) stays under a binding
  const x = fon.reshape(deviceRandn(b, 1, chunkRows, C, 5), [1, chunkRows, C]);
  const proj = fon.randn([DG, C], { seed: 6, backend: b, std: 1 / Math.sqrt(C) }), cent = fon.randn([groups, DG], { seed: 7, backend: b, std: 0.25 });
  const lognorm = fon.zeros([groups], { backend: b });
  await b.sync();
  let t0 = performance.now();
  for (let r = 0; r < t; r += chunkRows) {
    const logitsHost = await fon.tidy(() => causalLogits(groupScores(x, proj, cent), 0.1, lognorm)).data();
    membershipBits(logitsHost as Float32Array, chunkRows, groups, k);
  }
  const assignMs = performance.now() - t0;
  for (const y of [x, proj, cent, lognorm]) y.dispose();
  // The memberships timed below are balanced random ones (trained groups are balanced; a random
  // projection's are not), made with the same number of groups.
  const bits = balancedBits(t, groups, k, 11);
  t0 = performance.now();
  const planned = planFocusPrefill(bits, 1, t, { groups, topK: k, window: W });
  // k = K plans plain causal attention: no masks.
  const maskA = planned.maskA && uploadMask(planned.maskA, b), maskB = planned.maskB && uploadMask(planned.maskB, b);
  const plan = { ...planned, maskA, maskB };
  await b.sync();
  const sortMs = performance.now() - t0;
  const hc = headsPerCall(planned.sorted?.rows ?? t);
  const chunks: { q: Tensor; k: Tensor; v: Tensor }[] = [];
  for (let h0 = 0; h0 < H; h0 += hc) {
    const n = Math.min(hc, H - h0);
    chunks.push({ q: deviceRandn(b, n, t, D, 1 + h0), k: deviceRandn(b, n, t, D, 2 + h0), v: deviceRandn(b, n, t, D, 3 + h0) });
  }
  // The masks are built for one head: each head group runs the same plan.
  // Each head group's intermediates go back to the pool before the next group runs (at 1M tokens
  // a group's gathers and f32 merge take about 15 GiB).
  const once = () => { for (const c of chunks) fon.tidy(() => { runFocusPrefill(c.q, c.k, c.v, plan); }); };
  try {
    const attnMs = await timeBatched(() => b.sync(), once);
    const stats = { blocksA: 0, blocksB: 0, causalBlocks: 0 };
    addPrefillStats(stats, planned);
    const tableBytes = 4 * ((planned.maskA?.table.length ?? 0) + (planned.maskB?.table.length ?? 0));
    // The library's webgpu path: the plan built on the device from the membership one-hot (no
    // read-back), then the same prefill: the whole of it, plan included.
    let devicePlanMs: number | undefined;
    if (devicePlan && !plan.dense) {
      const member = fon.tensor(Float32Array.from({ length: t * groups }, (_, e) => (bits[Math.floor(e / groups)] >>> (e % groups)) & 1), [1, t, groups], { backend: b });
      devicePlanMs = await timeBatched(() => b.sync(), () => fon.tidy(() => {
        const dp = planFocusPrefillOnDevice(member, { groups, topK: k, window: W });
        for (const c of chunks) fon.tidy(() => { runSortedPrefill(c.q, c.k, c.v, dp); });
      }));
      member.dispose();
      trim(b);
    }
    if (!split || plan.dense) return { assignMs, sortMs, attnMs, devicePlanMs, tableBytes, ...stats };
    // The parts, as runFocusPrefill runs them: the gathers into the sorted layout, set A over
    // them, set B; the rest (the merge, reading A's copies in place) by difference.
    const s = planned.sorted!;
    const gather = (c: { q: Tensor; k: Tensor; v: Tensor }) => { const r = rowLists(s.position, 1, s.rows, b); return [c.q, c.k, c.v].map((x) => fon.gatherRows(x, r, 2)) as [Tensor, Tensor, Tensor]; };
    const gatherMs = await timeBatched(() => b.sync(), () => { for (const c of chunks) fon.tidy(() => { gather(c); }); });
    const gatherAMs = await timeBatched(() => b.sync(), () => { for (const c of chunks) fon.tidy(() => { attentionWithLse(...gather(c), { mask: maskA }); }); });
    const setBMs = await timeBatched(() => b.sync(), () => { for (const c of chunks) fon.tidy(() => { attentionWithLse(c.q, c.k, c.v, { mask: maskB, window: W + 1 }); }); });
    const parts = { gatherMs, setAMs: gatherAMs - gatherMs, setBMs, mergeMs: attnMs - gatherAMs - setBMs };
    return { assignMs, sortMs, attnMs, devicePlanMs, tableBytes, parts, ...stats };
  } finally {
    for (const c of chunks) for (const y of [c.q, c.k, c.v]) y.dispose();
    maskA?.device.dispose(); maskB?.device.dispose();
  }
}

/** ms of FON's dense causal prefill at t tokens (heads split as for Focus). */
async function timeDense(b: Backend, t: number): Promise<number> {
  const hc = headsPerCall(t);
  const chunks: Tensor[][] = [];
  for (let h0 = 0; h0 < H; h0 += hc) {
    const n = Math.min(hc, H - h0);
    chunks.push([1, 2, 3].map((s) => deviceRandn(b, n, t, D, s + h0)));
  }
  try {
    return await timeBatched(() => b.sync(), () => { for (const [q, k, v] of chunks) fon.tidy(() => { attention(q, k, v); }); });
  } finally {
    for (const c of chunks) for (const y of c) y.dispose();
  }
}

/** ms of one Focus decoding step at t cached tokens (K groups, k memberships, GQA 32/8) against the dense decode. */
async function timeDecode(b: Backend, t: number, groups: number, k: number): Promise<{ focusMs: number; deviceMs: number; denseMs: number; keys: number }> {
  const opts = { backend: b, dtype: 'f16' as const };
  const q = fon.randn([1, H, 1, D], { seed: 1, ...opts });
  const kc = deviceRandn(b, 8, t, D, 2), vc = deviceRandn(b, 8, t, D, 3);
  const bits = balancedBits(t, groups, k, 13);
  const lists = new FocusGroupLists(1, t, groups);
  lists.append(0, bits);
  const keysOf = lists.visible(0, t - 1, W);
  const member = fon.tensor(Float32Array.from({ length: t * groups }, (_, e) => (bits[Math.floor(e / groups)] >>> (e % groups)) & 1), [1, t, groups], { backend: b });
  try {
    const focusMs = await timeBatched(() => b.sync(), () => fon.tidy(() => {
      const keys = lists.visible(0, t - 1, W); // the host's share of a step: the query's key list
      attention(q, gatherEntryRows(kc, 0, keys), gatherEntryRows(vc, 0, keys), { causal: false });
    }));
    // The library's webgpu step: the decode kernels with bit words over the whole cache (k + 2 parts).
    const deviceMs = await timeBatched(() => b.sync(), () => fon.tidy(() => { focusDecodeOnDevice(q, kc, vc, member, { topK: k, window: W, kvLength: t }); }));
    const denseMs = await timeBatched(() => b.sync(), () => fon.tidy(() => { attention(q, kc, vc); }));
    return { focusMs, deviceMs, denseMs, keys: keysOf.length };
  } finally {
    for (const y of [q, kc, vc, member]) y.dispose();
  }
}

/**
 * Writes the JSON (--json) as rows come, so a run cut short keeps what it measured, and beside it
 * the prefill time against tokens (log-log): FON dense, PyTorch SDPA and each Focus configuration.
 */
function save(adapter: string, rows: Record<string, unknown>[], decode: Record<string, unknown>[]): void {
  if (!flags.json) return;
  writeJson(flags.json, { date: new Date().toISOString(), adapter, shapes: { batch: 1, heads: H, headDim: D, window: W, dtype: 'f16 (FON), bf16 (PyTorch)' }, rows, decode });
  const byTokens = (key: string, pick: (r: Record<string, unknown>) => boolean) => [...new Map(rows.filter((r) => pick(r) && typeof r[key] === 'number').map((r) => [r.tokens as number, r[key] as number])).entries()];
  const series = [
    { name: 'FON dense', points: byTokens('denseMs', () => true) },
    { name: 'PyTorch SDPA (bf16)', points: byTokens('torchMs', () => true) },
    ...[...new Set(rows.map((r) => `${r.groups}:${r.k}`))].map((c) => ({ name: `Focus K=${c.split(':')[0]} k=${c.split(':')[1]}`, points: byTokens('attnMs', (r) => `${r.groups}:${r.k}` === c) })),
  ].filter((x) => x.points.length > 0);
  if (series.length === 0) return;
  writeFileSync(flags.json.replace(/\.json$/, '') + '-prefill.svg', linePlot({ title: `Focus prefill on ${adapter.split(':')[0]}`, xLabel: 'tokens', yLabel: 'ms (B 1, H 32, D 128)', series, logX: true, logY: true, markers: true }));
}

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  const caps = (b as unknown as { caps: { adapterName: string } }).caps;
  console.log(`FON Focus bench on ${caps.adapterName}: B 1, H ${H}, D ${D}, f16, w ${W}`);
  const tokens = list(flags.tokens), dense = list(flags.dense), splitAt = list(flags.split), devicePlanAt = list(flags['device-plan']);
  const skip = new Set(flags.skip.split(',').filter(Boolean));
  const configs = flags.configs.split(',').filter(Boolean).map((s) => s.split(':').map(Number) as [number, number]);
  const python = findPython('torch', ['python3', '/usr/bin/python3']);
  const torch = new Map<number, number>();
  if (python) {
    const res = runPython(python, new URL('./torch_attention.py', import.meta.url).pathname, tokens.map((t) => ({ key: `prefill-${t}`, op: 'prefill', t, h: H, hkv: H, d: D })), 1_800_000) as { key: string; ms: number }[] | null;
    for (const r of res ?? []) torch.set(Number(r.key.split('-')[1]), r.ms);
  } else console.log('(no PyTorch found: its column is left empty)');
  const rows: Record<string, unknown>[] = [];
  for (const t of tokens) {
    const denseMs = dense.includes(t) ? await timeDense(b, t) : undefined;
    trim(b);
    const torchMs = torch.get(t);
    console.error(`  ${t}: FON dense ${denseMs?.toFixed(2) ?? '—'} ms, PyTorch SDPA ${torchMs?.toFixed(2) ?? '—'} ms`);
    for (const [groups, k] of configs) {
      if (skip.has(`${t}:${groups}:${k}`)) { console.error(`  ${t} K=${groups} k=${k}: skipped (--skip)`); continue; }
      const f = await timeFocus(b, t, groups, k, splitAt.includes(t), devicePlanAt.includes(t));
      trim(b);
      const total = f.assignMs + f.sortMs + f.attnMs;
      const row = { tokens: t, groups, k, ...f, totalMs: total, denseMs, torchMs, blocksVisited: (f.blocksA + f.blocksB) / f.causalBlocks, vsDense: denseMs && denseMs / f.attnMs, vsTorch: torchMs && torchMs / f.attnMs, vsTorchTotal: torchMs && torchMs / total };
      rows.push(row);
      save(caps.adapterName, rows, []);
      const parts = f.parts ? ` = gathers ${f.parts.gatherMs.toFixed(2)} + set A ${f.parts.setAMs.toFixed(2)} + set B ${f.parts.setBMs.toFixed(2)} + merge ${f.parts.mergeMs.toFixed(2)}` : '';
      if (f.devicePlanMs !== undefined) console.error(`  ${t} K=${groups} k=${k}: planned on the device (the library's webgpu path), plan and attention: ${f.devicePlanMs.toFixed(2)} ms`);
      console.error(`  ${t} K=${groups} k=${k}: assign ${f.assignMs.toFixed(1)} ms, sort+masks ${f.sortMs.toFixed(1)} ms (tables ${(f.tableBytes / 2 ** 20).toFixed(1)} MiB), attention ${f.attnMs.toFixed(2)} ms${parts} (blocks ${(row.blocksVisited * 100).toFixed(1)}% of causal)`);
    }
  }
  const n = (x: unknown, p = 2) => (typeof x === 'number' ? x.toFixed(p) : '—');
  console.log('\n| tokens | K | k | assign ms | sort+masks ms | Focus attention ms | blocks visited | FON dense ms | PyTorch SDPA ms | vs FON dense | vs PyTorch (attention) | vs PyTorch (total) |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.tokens} | ${r.groups} | ${r.k} | ${n(r.assignMs, 1)} | ${n(r.sortMs, 1)} | ${n(r.attnMs)} | ${n((r.blocksVisited as number) * 100, 1)}% | ${n(r.denseMs)} | ${n(r.torchMs)} | ${n(r.vsDense)}× | ${n(r.vsTorch)}× | ${n(r.vsTorchTotal)}× |`);
  const decode: Record<string, unknown>[] = [];
  for (const t of list(flags.decode)) for (const [groups, k] of configs) {
    const d = await timeDecode(b, t, groups, k);
    decode.push({ tokens: t, groups, k, ...d });
    console.log(`decode at ${t} cached tokens, K=${groups} k=${k}: Focus ${d.focusMs.toFixed(3)} ms per step with host lists (${d.keys} keys read), ${d.deviceMs.toFixed(3)} ms on the device (bit words, k + 2 passes), against dense ${d.denseMs.toFixed(3)} ms = ${(d.denseMs / d.focusMs).toFixed(2)}× and ${(d.denseMs / d.deviceMs).toFixed(2)}×`);
  }
  save(caps.adapterName, rows, decode);
}

await main();
await fon.shutdownBackends();
process.exit(0);
