/**
 * Attention benchmark: causal prefill forward and forward+backward at B=1, H=32, D=128, and
 * one-query decode over a long KV cache with GQA 32/8, D=128 — FON's attention op on the WebGPU
 * backend (f16 storage), beside PyTorch's scaled_dot_product_attention (bf16; decode with
 * enable_gqa) on the same GPU in the same run (bench/torch_attention.py) when python3 has torch.
 * Prints a markdown table with the ratio FON speed / PyTorch speed and writes JSON.
 *
 *   node --import tsx bench/attention.ts [--prefill 1024,...,65536] [--backward 1024,...,65536] [--masked 16384]
 *                                        [--masked-decode 131072]
 *                                        [--decode 4096,...,262144] [--decode-paged 262144,1048576]
 *                                        [--page-rows 65536] [--json bench/results_attention_h200.json]
 *
 * `--masked` times the causal forward with a block mask keeping about a quarter of the causal
 * blocks (attention/block_mask.ts), reported against the full causal forward at the same length;
 * `--masked-decode` the one-query decode with a mask keeping about a quarter of the key blocks (the
 * last always), against the full decode (its GB/s counts the K and V rows it reads).
 *
 * Decode reads one contiguous K and V where they fit a WebGPU binding (2 GiB) and through the
 * paged cache's pages otherwise (1M cached tokens: 16 pages of 65536); `--decode-paged` times the
 * paged form at lengths that would also fit, to show what paging costs (ops/paged_attention.ts).
 *
 * Forward+backward at D = 128 runs the register-blocked ALU kernels (packed 16-bit tiles): 1.9 s a
 * call at 16K on the H200 (2026-11-30), so the 32K and 64K rows (about 8 s and 30 s a call, timed
 * once after one warm-up) take about two minutes together; `--backward 1024,…,16384` skips them.
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import type { Backend, Tensor } from '../src/index.ts';
import { attention } from '../src/ops/attention.ts';
import { MASK_K_BLOCK, blockMask, type BlockMask } from '../src/attention/block_mask.ts';
import { attentionPaged } from '../src/ops/paged_attention.ts';
import { checkPageRows } from '../src/infer/page_pool.ts';
import { findPython, runPython, timeBatched, writeJson } from './lib/report.ts';
import { writePlotsBeside } from './lib/plots.ts';

const { values: flags } = parseArgs({
  options: {
    prefill: { type: 'string', default: '1024,2048,4096,8192,16384,32768,65536' },
    backward: { type: 'string', default: '1024,2048,4096,8192,16384,32768,65536' },
    decode: { type: 'string', default: '4096,16384,65536,131072,262144' },
    masked: { type: 'string', default: '16384' },
    'masked-decode': { type: 'string', default: '' },
    'decode-paged': { type: 'string', default: '' },
    'page-rows': { type: 'string', default: '65536' },
    json: { type: 'string' },
  },
});

const H = 32, HKV = 8, D = 128;
const sizes = (s: string) => s.split(',').filter(Boolean).map(Number);

interface Case { key: string; op: 'prefill' | 'prefill_fwd_bwd' | 'prefill_masked' | 'decode' | 'decode_masked' | 'decode_paged'; t: number }

const PAGE_ROWS = checkPageRows(Number(flags['page-rows']), '--page-rows');
/** The largest K or V one binding takes on WebGPU (maxStorageBufferBindingSize ≈ 2 GiB). */
const BINDING = 2 ** 31 - 4;

const cases: Case[] = [
  ...sizes(flags.prefill).map((t): Case => ({ key: `prefill-${t}`, op: 'prefill', t })),
  ...sizes(flags.backward).map((t): Case => ({ key: `fwdbwd-${t}`, op: 'prefill_fwd_bwd', t })),
  ...sizes(flags.masked).map((t): Case => ({ key: `masked-${t}`, op: 'prefill_masked', t })),
  ...sizes(flags.decode).map((t): Case => (HKV * t * D * 2 <= BINDING ? { key: `decode-${t}`, op: 'decode', t } : { key: `decode-${t}`, op: 'decode_paged', t })),
  ...sizes(flags['decode-paged']).map((t): Case => ({ key: `decode_paged-${t}`, op: 'decode_paged', t })),
  ...sizes(flags['masked-decode']).map((t): Case => ({ key: `decode_masked-${t}`, op: 'decode_masked', t })),
];

/** FLOPs (prefill: causal, the backward counted as 2.5× the forward) or bytes of K and V read (decode). */
function work(c: Case): { amount: number; unit: string; scale: number } {
  const fwd = (4 * c.t * c.t * D * H) / 2;
  if (c.op === 'prefill' || c.op === 'prefill_masked') return { amount: fwd, unit: 'TFLOP/s', scale: 1e12 };
  if (c.op === 'prefill_fwd_bwd') return { amount: 3.5 * fwd, unit: 'TFLOP/s', scale: 1e12 };
  const kept = c.op === 'decode_masked' ? decodeMask(c.t).visited / Math.ceil(c.t / MASK_K_BLOCK) : 1;
  return { amount: kept * 2 * HKV * c.t * D * 2, unit: 'GB/s', scale: 1e9 };
}

const decodeMasks = new Map<number, BlockMask>();
/** A one-query mask keeping about a quarter of the key blocks (hash-chosen) and the last, shared by the heads. */
function decodeMask(t: number): BlockMask {
  let m = decodeMasks.get(t);
  if (!m) {
    const last = Math.ceil(t / MASK_K_BLOCK) - 1;
    m = blockMask({ batch: 1, heads: 1, tq: 1, tk: t }, (_b, _h, _qb, kb) => kb === last || ((kb * 2654435761) >>> 0) % 4 === 0);
    console.error(`  decode_masked-${t}: the mask keeps ${m.visited} of ${last + 1} key blocks (${(m.visited / (last + 1)).toFixed(3)})`);
    decodeMasks.set(t, m);
  }
  return m;
}

/**
 * A block mask keeping about a quarter of the causal blocks (every head alike): each query block's
 * diagonal blocks and a fixed hash-chosen quarter of the rest, as a block-sparse selector would.
 */
function quarterMask(t: number): BlockMask {
  const m = blockMask({ batch: 1, heads: 1, tq: t, tk: t }, (_b, _h, qb, kb) => kb >= 2 * qb || ((qb * 2654435761 + kb * 40503) >>> 0) % 4 === 0);
  console.error(`  masked-${t}: the mask keeps ${m.visited} of ${m.predicateBlocks} causal blocks (${(m.visited / m.predicateBlocks).toFixed(3)})`);
  return m;
}

/** ms per call of a case (timeBatched: batches of ≥ 250 ms of GPU work, median of 3). */
async function timeCase(b: Backend, c: Case): Promise<number> {
  const opts = { backend: b, dtype: 'f16' as const };
  if (c.op === 'decode_paged') return timePaged(b, c.t);
  const grad = c.op === 'prefill_fwd_bwd';
  const dec = c.op === 'decode' || c.op === 'decode_masked';
  const q = fon.randn(dec ? [1, H, 1, D] : [1, H, c.t, D], { seed: 1, ...opts, requiresGrad: grad });
  const kvShape = dec ? [1, HKV, c.t, D] : [1, H, c.t, D];
  const k = fon.randn(kvShape, { seed: 2, ...opts, requiresGrad: grad });
  const v = fon.randn(kvShape, { seed: 3, ...opts, requiresGrad: grad });
  const g = grad ? fon.randn(q.shape, { seed: 4, ...opts }) : null;
  const mask = c.op === 'prefill_masked' ? quarterMask(c.t) : c.op === 'decode_masked' ? decodeMask(c.t) : undefined;
  const once = () => {
    fon.tidy(() => {
      const o = attention(q, k, v, { mask });
      if (g) fon.backward(o, g);
    });
    if (grad) for (const t of [q, k, v]) { t.grad?.dispose(); t.grad = null; }
  };
  try {
    return await timeBatched(() => b.sync(), once);
  } finally {
    for (const x of [q, k, v, ...(g ? [g] : [])] as Tensor[]) x.dispose();
  }
}

/** ms per one-query decode over t cached tokens in pages of PAGE_ROWS (attentionPaged). */
async function timePaged(b: Backend, t: number): Promise<number> {
  const opts = { backend: b, dtype: 'f16' as const };
  const n = Math.ceil(t / PAGE_ROWS);
  const q = fon.randn([1, H, 1, D], { seed: 1, ...opts });
  // Random draws are made on the host (the same numbers on every backend): one page each of k and v,
  // the others derived on the device (16 pages of host draws at 1M took minutes, 2026-12-02).
  const k0 = fon.randn([1, HKV, PAGE_ROWS, D], { seed: 2, ...opts }), v0 = fon.randn([1, HKV, PAGE_ROWS, D], { seed: 3, ...opts });
  const k = Array.from({ length: n }, (_, i) => (i === 0 ? k0 : fon.mul(k0, 1 - i / (2 * n))));
  const v = Array.from({ length: n }, (_, i) => (i === 0 ? v0 : fon.mul(v0, 1 + i / (2 * n))));
  try {
    return await timeBatched(() => b.sync(), () => fon.tidy(() => { attentionPaged(q, { k, v, pageRows: PAGE_ROWS }, { kvLength: t }); }));
  } finally {
    for (const x of [q, ...k, ...v]) x.dispose();
  }
}

interface Row { key: string; op: string; tokens: number; ms: number; fon: number; unit: string; torchMs?: number; torch?: number; ratio?: number }

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  const caps = (b as unknown as { caps: { adapterName: string; f16: boolean; subgroupMatrix: unknown } }).caps;
  console.log(`FON attention bench on ${caps.adapterName} (f16 ${caps.f16}, subgroup matrix ${caps.subgroupMatrix ? 'yes' : 'no'})`);
  const python = findPython('torch', ['python3', '/usr/bin/python3']);
  const refs = new Map<string, number>();
  if (python) {
    const res = runPython(python, new URL('./torch_attention.py', import.meta.url).pathname, cases.filter((c) => c.op !== 'prefill_masked' && c.op !== 'decode_masked').map((c) => ({ ...c, h: H, hkv: HKV, d: D }))) as { key: string; ms: number }[] | null;
    for (const r of res ?? []) refs.set(r.key, r.ms);
  } else console.log('(no PyTorch found: reference column left empty)');
  const rows: Row[] = [];
  for (const c of cases) {
    const ms = await timeCase(b, c);
    const w = work(c);
    const torchMs = refs.get(c.key);
    const row: Row = { key: c.key, op: c.op, tokens: c.t, ms, fon: w.amount / (ms / 1e3) / w.scale, unit: w.unit };
    if (torchMs !== undefined) Object.assign(row, { torchMs, torch: w.amount / (torchMs / 1e3) / w.scale, ratio: torchMs / ms });
    rows.push(row);
    console.error(`  ${c.key}: ${ms.toFixed(3)} ms${torchMs !== undefined ? ` (PyTorch ${torchMs.toFixed(3)} ms)` : ''}`);
  }
  const f = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  console.log('\n| op | tokens | FON ms | FON | PyTorch ms | PyTorch | FON / PyTorch |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.op} | ${r.tokens} | ${r.ms.toFixed(3)} | ${f(r.fon)} ${r.unit} | ${r.torchMs?.toFixed(3) ?? '—'} | ${r.torch !== undefined ? `${f(r.torch)} ${r.unit}` : '—'} | ${r.ratio !== undefined ? `${r.ratio.toFixed(3)}×` : '—'} |`);
  }
  for (const r of rows.filter((x) => x.op === 'prefill_masked')) {
    const full = rows.find((x) => x.op === 'prefill' && x.tokens === r.tokens);
    if (full) console.log(`\nblock mask keeping a quarter of the causal blocks at ${r.tokens}: ${r.ms.toFixed(3)} ms against ${full.ms.toFixed(3)} ms for full causal attention = ${(r.ms / full.ms).toFixed(3)}×`);
  }
  for (const r of rows.filter((x) => x.op === 'decode_masked')) {
    const full = rows.find((x) => x.op === 'decode' && x.tokens === r.tokens);
    if (full) console.log(`\ndecode with a mask keeping a quarter of the key blocks at ${r.tokens}: ${r.ms.toFixed(3)} ms against ${full.ms.toFixed(3)} ms for the full decode = ${(r.ms / full.ms).toFixed(3)}×`);
  }
  if (flags.json) {
    const results = { date: new Date().toISOString(), adapter: caps.adapterName, shapes: { batch: 1, heads: H, kvHeadsDecode: HKV, headDim: D, dtype: 'f16 (FON), bf16 (PyTorch)' }, rows };
    writeJson(flags.json, results);
    await writePlotsBeside(flags.json, results);
  }
}

await main();
await fon.shutdownBackends();
process.exit(0);
