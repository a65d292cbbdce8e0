/**
 * Op benchmarks: GEMM (f32, and f16 on tensor cores where the GPU has them), streaming copy and
 * elementwise add in GB/s, softmax and a row reduction — on the best backend here (or
 * --backend), beside PyTorch on the same GPU (or numpy+OpenBLAS for CPU GEMM) in the same run.
 *
 *   node --import tsx bench/ops.ts [--backend auto|cpu|wasm|webgpu] [--quick] [--json FILE]
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import '../src/backend/wasm/index.ts';
import type { Backend, DType } from '../src/index.ts';
import { findPython, printTable, runPython, timeMs, writeJson, type Row } from './lib/report.ts';
import { tfjsWasmGemm } from './lib/tfjs.ts';

const { values: flags } = parseArgs({
  options: {
    backend: { type: 'string', default: 'auto' },
    quick: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});

interface Case {
  key: string;
  op: 'gemm' | 'copy' | 'add' | 'softmax' | 'sum';
  shape: number[];
  dtype: DType;
  refDtype?: DType;
  iters: number;
}

function gpuCases(f16: boolean, quick: boolean): Case[] {
  const gemmSizes = quick ? [1024, 2048] : [1024, 2048, 4096, 8192];
  const cases: Case[] = [];
  for (const s of gemmSizes) cases.push({ key: `gemm-f32-${s}`, op: 'gemm', shape: [s, s, s], dtype: 'f32', iters: s >= 8192 ? 5 : 10 });
  if (f16) for (const s of gemmSizes) cases.push({ key: `gemm-f16-${s}`, op: 'gemm', shape: [s, s, s], dtype: 'f16', refDtype: 'bf16', iters: 10 });
  const big = quick ? 1 << 24 : 1 << 28; // 1 GiB of f32 when not quick
  cases.push({ key: 'copy', op: 'copy', shape: [big], dtype: 'f32', iters: 10 });
  cases.push({ key: 'add', op: 'add', shape: [big], dtype: 'f32', iters: 10 });
  const rows = quick ? 1024 : 8192;
  cases.push({ key: 'softmax', op: 'softmax', shape: [rows, 8192], dtype: 'f32', iters: 10 });
  cases.push({ key: 'sum', op: 'sum', shape: [rows, 8192], dtype: 'f32', iters: 10 });
  return cases;
}

function cpuCases(quick: boolean, reference: boolean): Case[] {
  const sizes = quick ? [256, 512] : reference ? [256, 512] : [256, 512, 1024];
  const cases: Case[] = sizes.map((s) => ({ key: `gemm-f32-${s}`, op: 'gemm', shape: [s, s, s], dtype: 'f32', iters: s >= 1024 ? 5 : 10 }));
  const n = quick ? 1 << 20 : 1 << 24;
  cases.push({ key: 'copy', op: 'copy', shape: [n], dtype: 'f32', iters: 5 });
  cases.push({ key: 'add', op: 'add', shape: [n], dtype: 'f32', iters: 5 });
  cases.push({ key: 'softmax', op: 'softmax', shape: [1024, 1024], dtype: 'f32', iters: 5 });
  cases.push({ key: 'sum', op: 'sum', shape: [1024, 1024], dtype: 'f32', iters: 5 });
  return cases;
}

/** Work of one call: FLOPs for GEMM, bytes moved for the rest. */
function work(c: Case): { amount: number; unit: string; scale: number } {
  const elems = c.shape.reduce((a, b) => a * b, 1);
  const bytes = c.dtype === 'f32' ? 4 : 2;
  switch (c.op) {
    case 'gemm': { const [m, n, k] = c.shape; return { amount: 2 * m * n * k, unit: 'TFLOP/s', scale: 1e12 }; }
    case 'copy': return { amount: 2 * elems * bytes, unit: 'GB/s', scale: 1e9 };
    case 'add': return { amount: 3 * elems * bytes, unit: 'GB/s', scale: 1e9 };
    case 'softmax': return { amount: 2 * elems * bytes, unit: 'GB/s', scale: 1e9 };
    case 'sum': return { amount: elems * bytes, unit: 'GB/s', scale: 1e9 };
  }
}

async function timeCase(b: Backend, c: Case): Promise<number> {
  const opts = { backend: b, dtype: c.dtype };
  const inputs = c.op === 'gemm'
    ? [fon.randn([c.shape[0], c.shape[2]], { seed: 1, ...opts }), fon.randn([c.shape[2], c.shape[1]], { seed: 2, ...opts })]
    : [fon.randn(c.shape, { seed: 1, ...opts }), fon.randn(c.shape, { seed: 2, ...opts })];
  const [x, y] = inputs;
  const body = (): fon.Tensor => {
    switch (c.op) {
      case 'gemm': return fon.matmul(x, y);
      case 'copy': return fon.clone(x);
      case 'add': return fon.add(x, y);
      case 'softmax': return fon.softmax(x, -1);
      case 'sum': return fon.sum(x, -1);
    }
  };
  const once = () => fon.tidy(() => { body(); });
  await b.sync();
  let perOp: number;
  if (b.name === 'webgpu') {
    // Waiting for the GPU costs a few ms of polling latency in Dawn's Node binding, and it varies:
    // queue enough ops per wait that the GPU works ≥ 250 ms, so the latency stays within ~2%.
    const batch = async (n: number) => { for (let i = 0; i < n; i++) once(); await b.sync(); };
    let n = c.iters;
    let t = await timeMs(() => batch(n), 1, 1);
    while (t < 250 && n < 200_000) {
      n = Math.ceil(n * Math.min(10, 300 / Math.max(t, 1)));
      t = await timeMs(() => batch(n), 1, 0);
    }
    perOp = (await timeMs(() => batch(n), 3, 0)) / n;
  } else {
    perOp = await timeMs(once, c.iters, 1);
  }
  for (const t of inputs) t.dispose();
  return perOp;
}

async function main(): Promise<void> {
  const b = await fon.initBackend(flags.backend as fon.BackendName | 'auto');
  fon.setBackend(b);
  const gpu = b.name === 'webgpu';
  const caps = gpu ? (b as unknown as { caps: { f16: boolean; subgroupMatrix: unknown; adapterName: string } }).caps : null;
  const cases = gpu ? gpuCases(!!caps?.f16, flags.quick) : cpuCases(flags.quick, b.name === 'cpu');
  console.log(`FON ops bench on '${b.name}'${caps ? ` (${caps.adapterName}; f16 ${caps.f16}, subgroup matrix ${caps.subgroupMatrix ? 'yes' : 'no'})` : ''}`);

  const python = findPython(gpu ? 'torch' : 'numpy');
  const refs = new Map<string, { ms: number; name: string }>();
  if (python) {
    const res = runPython(python, new URL('./torch_ops.py', import.meta.url).pathname, cases) as { key: string; ms: number; name: string }[] | null;
    for (const r of res ?? []) refs.set(r.key, r);
  } else console.log(`(no ${gpu ? 'PyTorch' : 'numpy'} found: reference column left empty)`);

  const rows: Row[] = [];
  for (const c of cases) {
    const ms = await timeCase(b, c);
    const w = work(c);
    const ref = refs.get(c.key);
    const scale = c.op === 'gemm' && !gpu ? 1e9 : w.scale;
    const unit = c.op === 'gemm' && !gpu ? 'GFLOP/s' : w.unit;
    rows.push({
      op: c.op, shape: c.shape.join('×'), dtype: c.dtype, ms, unit,
      fon: w.amount / (ms / 1e3) / scale,
      ...(ref ? { ref: w.amount / (ref.ms / 1e3) / scale, refName: ref.name } : {}),
    });
    console.error(`  ${c.key}: ${ms.toFixed(3)} ms`);
  }
  printTable(`FON (${b.name}) vs ${gpu ? 'PyTorch' : 'numpy'}`, rows);
  const peer = gpu ? [] : await peerRows(cases, rows);
  if (peer.length) printTable(`FON (${b.name}) vs ${peer[0].refName}`, peer);
  if (flags.json) writeJson(flags.json, { date: new Date().toISOString(), backend: b.name, adapter: caps?.adapterName ?? null, rows, peer });
}

/** The CPU GEMM rows again, against TensorFlow.js's wasm backend (when installed). */
async function peerRows(cases: Case[], rows: Row[]): Promise<Row[]> {
  const gemms = cases.map((c, i) => ({ c, row: rows[i] })).filter(({ c }) => c.op === 'gemm');
  const tf = await tfjsWasmGemm(gemms.map(({ c }) => c.shape[0]), 5);
  if (!tf) return [];
  return gemms.map(({ c, row }) => {
    const ms = tf.ms.get(c.shape[0])!;
    return { ...row, ref: work(c).amount / (ms / 1e3) / 1e9, refName: tf.name };
  });
}

await main();
await fon.shutdownBackends();
process.exit(0);
