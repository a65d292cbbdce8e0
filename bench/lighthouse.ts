/**
 * Lighthouse benchmark (specs/lighthouse_fon.md Part 1, §1.9): one Lighthouse layer's forward +
 * backward at B = 1, H heads (Hkv = H), D = 128, 16-bit storage, beside FON's dense causal attention
 * forward + backward and PyTorch's scaled_dot_product_attention forward + backward (bf16, causal,
 * bench/torch_attention.py) on the same device in the same run, at each --tokens. What each column
 * times:
 *
 * - `select`: the selection (ops lighthouseSelect + invertRows: scores, pooling, the cascade, the
 *   causal placement and its inverse), no gradient;
 * - `gather`: q, k and v padded, pooled into the pyramid and gathered (lighthouseGather), forward and
 *   backward (three backward calls, one per tensor);
 * - `attention`: causal attention over the S gathered rows, forward and backward;
 * - `scatter`: the scatter-back (lighthouseScatter), forward and backward;
 * - `layer`: the whole layer as training runs it (lighthouseAttention then backward), which the four
 *   stages should add up to, near enough;
 * - `FON dense`, `SDPA`: full causal attention over the N tokens, forward and backward.
 *
 * Where one tensor of the layer (the pyramid, Hc·(total + c_L)·D 16-bit values) would pass the
 * device's binding limit (maxStorageBufferBindingSize), the heads are split into chunks of Hc and
 * each timed call runs every chunk in turn (reported: heads per chunk); FON dense likewise. Inputs
 * are made on the device from a 4096-row random block, tiled along the tokens with a scale that
 * varies per token and per head (host draws of 10^9 values would take minutes; the selection sees
 * distinct norms, which is all the timing depends on). Timing: one untimed warm-up call (it
 * compiles the pipelines), then calls under 250 ms in batches of ≥ 250 ms (the median of 3,
 * bench/lib/report.ts timeBatched) and longer calls one by one, the median of --reps; PyTorch
 * times as bench/torch_timing.py does (3 warm-up calls, CUDA events, the median of 3).
 *
 *   node --import tsx bench/lighthouse.ts [--tokens 32768,131072,262144,524288] [--heads 16] [--dim 128]
 *     [--dtype auto|f16|bf16|f32] [--levels 3] [--pool 4] [--topk 1536] [--tile 128] [--qk 64]
 *     [--dense-max 131072] [--reps 3] [--backend webgpu|cpu|wasm] [--skip-torch] [--json bench/results_lighthouse_h100.json]
 *
 * FON's dense forward + backward runs only up to --dense-max tokens (its ALU kernels take about a
 * minute a call at 128K tokens and 16 heads on the H200, and 16× that at 512K). A smoke run on the
 * CPU: --backend cpu --tokens 512,1024 --heads 2 --dim 16 --topk 64 --tile 16 --qk 8.
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import type { Backend, Tensor } from '../src/index.ts';
import type { DType } from '../src/tensor/dtype.ts';
import { attention } from '../src/ops/attention.ts';
import { LIGHTHOUSE_DEFAULTS, lighthouseGeometry, type LighthouseGeometry, type LighthouseOptions } from '../src/attention/lighthouse/geometry.ts';
import { lighthouseAttention, lighthouseGather, lighthouseSelection } from '../src/attention/lighthouse/lighthouse.ts';
import { lighthouseScatter } from '../src/attention/lighthouse/scatter.ts';
import { findPython, runPython, timeBatched, writeJson } from './lib/report.ts';
import { trim } from './lib/device_data.ts';

const { values: flags } = parseArgs({
  options: {
    tokens: { type: 'string', default: '32768,131072,262144,524288' },
    heads: { type: 'string', default: '16' },
    dim: { type: 'string', default: '128' },
    dtype: { type: 'string', default: 'auto' },
    levels: { type: 'string', default: String(LIGHTHOUSE_DEFAULTS.levels) },
    pool: { type: 'string', default: String(LIGHTHOUSE_DEFAULTS.pool) },
    topk: { type: 'string', default: String(LIGHTHOUSE_DEFAULTS.topk) },
    tile: { type: 'string', default: String(LIGHTHOUSE_DEFAULTS.tile) },
    qk: { type: 'string', default: String(LIGHTHOUSE_DEFAULTS.qk) },
    'dense-max': { type: 'string', default: '131072' },
    reps: { type: 'string', default: '3' },
    backend: { type: 'string', default: 'webgpu' },
    'skip-torch': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});

const list = (s: string) => s.split(',').filter(Boolean).map(Number);
const H = Number(flags.heads), D = Number(flags.dim), REPS = Math.max(1, Number(flags.reps)), DENSE_MAX = Number(flags['dense-max']);
const OPTIONS: LighthouseOptions = { levels: Number(flags.levels), pool: Number(flags.pool), topk: Number(flags.topk), scorer: 'norm', tile: Number(flags.tile), qk: Number(flags.qk) };

interface Row {
  tokens: number;
  /** S, the gathered length per head. */
  gathered: number;
  headsPerChunk: number;
  selectMs: number; gatherMs: number; attentionMs: number; scatterMs: number; layerMs: number;
  denseMs?: number; denseHeadsPerChunk?: number;
  torchMs?: number;
}

/** ms per call of `once` (which runs its work and leaves nothing behind): one warm-up call, then timeBatched under 250 ms a call, else the median of REPS single calls. */
async function timeCall(b: Backend, once: () => void): Promise<number> {
  once();
  await b.sync();
  const t0 = performance.now();
  once();
  await b.sync();
  const first = performance.now() - t0;
  if (first < 250) return timeBatched(() => b.sync(), once);
  const ts = [first];
  for (let i = 1; i < REPS; i++) {
    const t = performance.now();
    once();
    await b.sync();
    ts.push(performance.now() - t);
  }
  ts.sort((x, y) => x - y);
  return ts[Math.floor(ts.length / 2)];
}

/** (1, heads, n, D) of `dtype` on the device: a 4096-row random block tiled along the tokens, scaled per token and per head. */
function input(b: Backend, heads: number, n: number, seed: number, dtype: DType, requiresGrad = false): Tensor {
  const x = fon.tidy(() => {
    const rows = Math.min(n, 4096), copies = Math.ceil(n / rows);
    const block = fon.randn([1, 1, rows, D], { seed, backend: b, dtype });
    const tiled = fon.narrow(fon.reshape(fon.broadcastTo(block, [1, copies, rows, D]), [1, 1, copies * rows, D]), 2, 0, n); // (1, 1, n, D)
    const perToken = fon.tensor(Float32Array.from({ length: n }, (_, t) => 1 + 0.5 * Math.sin(0.37 * t + seed)), [1, 1, n, 1], { backend: b, dtype });
    const perHead = fon.tensor(Float32Array.from({ length: heads }, (_, h) => 1 + h / (2 * heads)), [1, heads, 1, 1], { backend: b, dtype });
    return fon.keep(fon.mul(fon.mul(tiled, perToken), perHead)); // (1, heads, n, D)
  });
  x.requiresGrad = requiresGrad;
  return x;
}

const clearGrads = (xs: readonly Tensor[]) => { for (const x of xs) { x.grad?.dispose(); x.grad = null; } };

/** The most heads (a divisor of H) whose largest tensor of `rowsPerHead` rows of D values of `bytes` fits one binding. */
function headsPerChunk(binding: number, rowsPerHead: number, bytes: number): number {
  for (let hc = H; hc >= 1; hc--) if (H % hc === 0 && hc * rowsPerHead * D * bytes <= binding) return hc;
  throw new Error(`one head of ${rowsPerHead} rows × ${D} values passes the binding limit of ${binding} bytes`);
}

async function timeAt(b: Backend, t: number, dtype: DType, binding: number): Promise<Row> {
  const g: LighthouseGeometry = lighthouseGeometry(t, OPTIONS);
  const bytes = dtype === 'f32' ? 4 : 2;
  const hc = headsPerChunk(binding, g.total + g.span[g.levels - 1], bytes), chunks = H / hc;
  const scale = 1 / Math.sqrt(D);
  const made = Array.from({ length: chunks }, (_, c) => {
    const [q, k, v] = [1, 2, 3].map((i) => input(b, hc, t, 10 * c + i, dtype, true));
    const gy = input(b, hc, t, 10 * c + 4, dtype);
    return { q, k, v, gy };
  });
  const all = made.flatMap((m) => [m.q, m.k, m.v]);
  const time = async (what: string, once: () => void) => {
    const ms = await timeCall(b, once);
    console.error(`  ${t} tokens, ${what}: ${ms.toFixed(3)} ms`);
    return ms;
  };
  const layerMs = await time('layer fwd+bwd', () => {
    for (const m of made) fon.tidy(() => fon.backward(lighthouseAttention(m.q, m.k, m.v, OPTIONS), m.gy));
    clearGrads(all);
  });
  const selectMs = await time('select', () => { for (const m of made) fon.tidy(() => lighthouseSelection(m.q, m.k, OPTIONS).dispose()); });
  // The stages apart, over a selection made once per chunk, with random gradients of the stages' outputs.
  const sels = made.map((m) => lighthouseSelection(m.q, m.k, OPTIONS));
  const S = g.gathered;
  const gs = input(b, hc, S, 7, dtype);
  const gatherMs = await time('gather fwd+bwd', () => {
    made.forEach((m, c) => fon.tidy(() => { for (const x of [m.q, m.k, m.v]) fon.backward(lighthouseGather(x, sels[c]), gs); }));
    clearGrads(all);
  });
  // One chunk's gathered q, k, v (every chunk's attention has this shape), run once per chunk.
  const gathered = [1, 2, 3].map((i) => input(b, hc, S, 20 + i, dtype, true));
  const attentionMs = await time('attention fwd+bwd', () => {
    for (let c = 0; c < chunks; c++) fon.tidy(() => fon.backward(attention(gathered[0], gathered[1], gathered[2], { causal: true, scale }), gs));
    clearGrads(gathered);
  });
  const scatterMs = await time('scatter fwd+bwd', () => {
    made.forEach((m, c) => fon.tidy(() => fon.backward(lighthouseScatter(gathered[0], sels[c]), m.gy)));
    clearGrads(gathered);
  });
  for (const s of sels) s.dispose();
  for (const x of [gs, ...gathered]) x.dispose();
  const row: Row = { tokens: t, gathered: S, headsPerChunk: hc, selectMs, gatherMs, attentionMs, scatterMs, layerMs };
  if (t <= DENSE_MAX) {
    // Dense over the same chunks where a chunk's q fits (it is smaller than the pyramid), else split further.
    row.denseHeadsPerChunk = hc;
    row.denseMs = await time('FON dense fwd+bwd', () => {
      for (const m of made) fon.tidy(() => fon.backward(attention(m.q, m.k, m.v, { causal: true, scale }), m.gy));
      clearGrads(all);
    });
  }
  for (const m of made) for (const x of [m.q, m.k, m.v, m.gy]) x.dispose();
  trim(b);
  return row;
}

async function main(): Promise<void> {
  const b = await fon.initBackend(flags.backend as fon.BackendName);
  const caps = (b as unknown as { caps?: { adapterName: string; maxBinding: number } }).caps;
  const adapter = caps?.adapterName ?? b.name;
  const offered = b.precisions().offered;
  const dtype = (flags.dtype === 'auto' ? (b.name === 'webgpu' ? (offered.includes('f16') ? 'f16' : 'bf16') : 'f32') : flags.dtype) as DType;
  const binding = caps?.maxBinding ?? Infinity;
  console.log(`FON Lighthouse bench on ${adapter} (${b.name}): B 1, H ${H}, D ${D}, ${dtype}; lighthouse L ${OPTIONS.levels}, p ${OPTIONS.pool}, k ${OPTIONS.topk}, tile ${OPTIONS.tile}, qk ${OPTIONS.qk}`);
  const tokens = list(flags.tokens);
  const torch = new Map<number, number>();
  const python = flags['skip-torch'] ? null : findPython('torch', ['python3', '/usr/bin/python3']);
  if (python) {
    const res = runPython(python, new URL('./torch_attention.py', import.meta.url).pathname, tokens.map((t) => ({ key: `fwdbwd-${t}`, op: 'prefill_fwd_bwd', t, h: H, hkv: H, d: D })), 3_600_000) as { key: string; ms: number }[] | null;
    for (const r of res ?? []) torch.set(Number(r.key.split('-')[1]), r.ms);
    if (!torch.size) console.log('(PyTorch found but no CUDA timings came back: reference column left empty)');
  } else console.log(flags['skip-torch'] ? '(--skip-torch: reference column left empty)' : '(no PyTorch found: reference column left empty)');
  const rows: Row[] = [];
  const save = () => {
    if (flags.json) writeJson(flags.json, { date: new Date().toISOString(), adapter, backend: b.name, shapes: { batch: 1, heads: H, kvHeads: H, headDim: D, dtype: `${dtype} (FON), bf16 (PyTorch)` }, lighthouse: OPTIONS, rows });
  };
  for (const t of tokens) {
    const row = await timeAt(b, t, dtype, binding);
    const torchMs = torch.get(t);
    if (torchMs !== undefined) row.torchMs = torchMs;
    rows.push(row);
    save();
  }
  const f = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(x >= 100 ? 0 : 2));
  const ratio = (a: number | undefined, b: number) => (a === undefined ? '—' : `${(a / b).toFixed(2)}×`);
  console.log('\nms per call, forward + backward unless noted; "× SDPA" and "× FON dense" are their time over Lighthouse\'s layer time (above 1: Lighthouse is faster)\n');
  console.log('| tokens | S | heads/chunk | select (fwd) | gather | attention (S) | scatter | Lighthouse layer | FON dense | PyTorch SDPA | × SDPA | × FON dense |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.tokens} | ${r.gathered} | ${r.headsPerChunk} | ${f(r.selectMs)} | ${f(r.gatherMs)} | ${f(r.attentionMs)} | ${f(r.scatterMs)} | ${f(r.layerMs)} | ${f(r.denseMs)} | ${f(r.torchMs)} | ${ratio(r.torchMs, r.layerMs)} | ${ratio(r.denseMs, r.layerMs)} |`);
  }
  if (flags.json) console.log(`\nwrote ${flags.json}`);
}

await main();
await fon.shutdownBackends();
process.exit(0);
