/**
 * FoX and FPA benchmark (issue 5): on the WebGPU backend, B = 1, H heads, head dim D (64 and 128
 * by default), f16 storage —
 * - causal prefill, forward and forward+backward, of FON's full attention (ops/attention.ts), FoX
 *   (ops/fox_attention.ts) and FPA (ops/fpa_attention.ts), beside PyTorch SDPA (bf16, causal) and,
 *   up to --plain-max tokens, a plain PyTorch FoX (materialised T×T scores; bench/torch_fox_fpa.py)
 *   when python3 has torch and CUDA, in the same run;
 * - decode: ms per step and the KV-cache bytes a step reads, against the cached context, for one
 *   FPA layer (attention/fpa/fpa.ts through a KvCache, as generate drives it: each step reads its
 *   output row back and settles the cache) without and with dead-key eviction
 *   (attention/fpa/fpa_decode.ts: the minima in tensors, compaction in KvCache.settle), beside PyTorch SDPA decode (one query
 *   over the same context). The layer's weights are synthetic: walk W ≡ 0, field φ ≡ 0, and levels
 *   ℓ = 100·(x₀ + 0.674), so a key survives τ = 16 when x₀ < −0.514 (about 30% of the tokens, near
 *   the "~25% of the cache" of the FPA abstract): the kept fraction column is measured, not assumed.
 *   Cache bytes = rows in use × bytes per row (k and v at 2 bytes, φ/ℓ/W state in f32).
 * Ratios are FON speed / PyTorch speed (PyTorch ms / FON ms). A case that errors or runs out of
 * memory is "—" with the reason listed under the table; the run goes on.
 *
 * On the H200 (PyTorch beside it):
 *   node --import tsx bench/fox_fpa.ts --json bench/results_fox_fpa_h200.json
 * (--fox-plain: FoX's f16 forward on the blocked/plain kernels instead of the tensor-core kernel;
 * --profile: each decode case runs its steps again with every dispatch timed on the GPU, and prints
 * wall and GPU ms a step and the kernels by GPU time; each prefill case runs once more so timed)
 * defaults: --prefill 4096,8192,16384,32768 --backward 4096,8192,16384,32768 --decode 4096,16384,65536
 *           --heads 16 --head-dim 64,128 --mechanisms full,fox,fpa --decode-steps 32 --tau 16 --plain-max 8192
 * Tiny smoke run on SwiftShader (timings meaningless):
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json FON_REQUIRE_WEBGPU=1 node --import tsx bench/fox_fpa.ts \
 *     --prefill 256 --backward 256 --decode 512 --heads 2 --head-dim 64 --decode-steps 4 --min-ms 20
 */
import { parseArgs } from 'node:util';
import * as fon from '../src/index.ts';
import '../src/backend/webgpu/index.ts';
import type { Backend, Tensor } from '../src/index.ts';
import { attention } from '../src/ops/attention.ts';
import { foxAttention } from '../src/ops/fox_attention.ts';
import { fpaAttention } from '../src/ops/fpa_attention.ts';
import { cumsum } from '../src/ops/scan_sort.ts';
import { FpaAttention, type FpaSpec } from '../src/attention/fpa/fpa.ts';
import { peekFpaDecodeState } from '../src/attention/fpa/fpa_decode.ts';
import { modelDims, parseModelConfig } from '../src/model/config.ts';
import { layoutBytesPerToken } from '../src/attention/mechanism.ts';
import { mechanismCache } from '../src/attention/table.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { KvCache } from '../src/infer/kv_cache.ts';
import { findPython, runPython, timeBatched, writeJson } from './lib/report.ts';
import { writePlotsBeside } from './lib/plots.ts';
import { foxFpaOptions } from '../src/backend/webgpu/kernels/fox_fpa_attention.ts';
import { WebGpuBackend } from '../src/backend/webgpu/backend.ts';
import { profileTable } from '../src/backend/webgpu/profile.ts';

const { values: flags } = parseArgs({
  options: {
    prefill: { type: 'string', default: '4096,8192,16384,32768' },
    backward: { type: 'string', default: '4096,8192,16384,32768' },
    decode: { type: 'string', default: '4096,16384,65536' },
    heads: { type: 'string', default: '16' },
    'head-dim': { type: 'string', default: '64,128' },
    mechanisms: { type: 'string', default: 'full,fox,fpa' },
    'decode-steps': { type: 'string', default: '32' },
    tau: { type: 'string', default: '16' },
    'plain-max': { type: 'string', default: '8192' },
    'min-ms': { type: 'string', default: '250' },
    json: { type: 'string' },
    'fox-plain': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
  },
});

const sizes = (s: string) => s.split(',').filter(Boolean).map(Number);
const H = Number(flags.heads);
const DIMS = sizes(flags['head-dim']);
const MECHS = flags.mechanisms.split(',').filter(Boolean) as Mech[];
const STEPS = Number(flags['decode-steps']);
const TAU = Number(flags.tau);
const PLAIN_MAX = Number(flags['plain-max']);
const MIN_MS = Number(flags['min-ms']);
for (const m of MECHS) if (!['full', 'fox', 'fpa'].includes(m)) throw new Error(`--mechanisms: unknown '${m}'; expected full, fox, fpa`);
// --fox-plain: FoX's f16 forward off the tensor-core kernel (foxFpaOptions, on by default).
foxFpaOptions.tensorCores = !flags['fox-plain'];

type Mech = 'full' | 'fox' | 'fpa';
type Op = 'prefill' | 'prefill_fwd_bwd';
interface PrefillCase { key: string; op: Op; t: number; d: number }
interface DecodeCase { key: string; t: number; d: number }

const prefillCases: PrefillCase[] = DIMS.flatMap((d) => [
  ...sizes(flags.prefill).map((t): PrefillCase => ({ key: `prefill-d${d}-${t}`, op: 'prefill', t, d })),
  ...sizes(flags.backward).map((t): PrefillCase => ({ key: `fwdbwd-d${d}-${t}`, op: 'prefill_fwd_bwd', t, d })),
]);
const decodeCases: DecodeCase[] = DIMS.flatMap((d) => sizes(flags.decode).map((t): DecodeCase => ({ key: `decode-d${d}-${t}`, t, d })));

/** Causal FLOPs of the case (the backward counted as 2.5× the forward, as bench/attention.ts). */
const flops = (c: PrefillCase) => ((4 * c.t * c.t * c.d * H) / 2) * (c.op === 'prefill' ? 1 : 3.5);

/** A failure's reason in one line. */
const reason = (e: unknown) => `${(e as Error).name ?? 'Error'}: ${String((e as Error).message ?? e).split('\n')[0].slice(0, 200)}`;

/** ms per call: timeBatched with batches of ≥ --min-ms of GPU work. */
const timeLoop = (b: Backend, once: () => void) => timeBatched(() => b.sync(), once, MIN_MS);

/** The inputs of a prefill case, made once and shared by the mechanisms: q, k, v (f16), the output gradient, FoX's c, FPA's φ, ℓ, λ. */
interface PrefillInputs { q: Tensor; k: Tensor; v: Tensor; g: Tensor | null; c: Tensor; phi: Tensor; level: Tensor; lambda: Tensor; all: Tensor[] }

function prefillInputs(b: Backend, c: PrefillCase): PrefillInputs {
  const grad = c.op === 'prefill_fwd_bwd';
  const all: Tensor[] = [];
  const mk = (t: Tensor) => { all.push(t); return t; };
  try {
    const shape = [1, H, c.t, c.d];
    const f16 = { backend: b, dtype: 'f16' as const, requiresGrad: grad };
    const q = mk(fon.randn(shape, { seed: 1, ...f16 })), k = mk(fon.randn(shape, { seed: 2, ...f16 })), v = mk(fon.randn(shape, { seed: 3, ...f16 }));
    const g = grad ? mk(fon.randn(shape, { seed: 4, backend: b, dtype: 'f16' })) : null;
    // A FoX-like walk: log σ(a), a ~ N(3, 1) (forget gates near 0.95); FPA adds field and level offsets (std 0.5) to it.
    const walk = mk(fon.noGrad(() => cumsum(fon.neg(fon.softplus(fon.neg(fon.randn([1, H, c.t], { seed: 5, backend: b, mean: 3 })))), -1)));
    const cg = mk(fon.noGrad(() => fon.add(walk, 0)));
    const phi = mk(fon.noGrad(() => fon.add(walk, fon.randn([1, H, c.t], { seed: 6, backend: b, std: 0.5 }))));
    const level = mk(fon.noGrad(() => fon.add(walk, fon.randn([1, H, c.t], { seed: 7, backend: b, std: 0.5 }))));
    const lambda = mk(fon.ones([H], { backend: b }));
    for (const t of [cg, phi, level, lambda]) t.requiresGrad = grad;
    return { q, k, v, g, c: cg, phi, level, lambda, all };
  } catch (e) {
    for (const t of all) t.dispose();
    throw e;
  }
}

/** One mechanism's prefill (forward, or forward + backward) on the case's inputs: ms per call. */
async function timePrefill(b: Backend, mech: Mech, x: PrefillInputs): Promise<number> {
  const run = () => {
    switch (mech) {
      case 'full': return attention(x.q, x.k, x.v);
      case 'fox': return foxAttention(x.q, x.k, x.v, x.c);
      case 'fpa': return fpaAttention(x.q, x.k, x.v, x.phi, x.level, x.lambda);
    }
  };
  const leaves = [x.q, x.k, x.v, x.c, x.phi, x.level, x.lambda];
  const clear = () => { for (const t of leaves) { t.grad?.dispose(); t.grad = null; } };
  const once = () => {
    fon.tidy(() => {
      const o = run();
      if (x.g) fon.backward(o, x.g);
    });
    clear();
  };
  try {
    const ms = await timeLoop(b, once);
    if (flags.profile && b instanceof WebGpuBackend) {
      // --profile: one more call with every dispatch timed on the GPU: where its time goes.
      b.rt.startProfile();
      once();
      console.error(`  profile, ${mech}${x.g ? ' forward+backward' : ''}, ${x.q.shape[2]} tokens:\n${profileTable(await b.rt.stopProfile(), { top: 12 })}`);
    }
    return ms;
  } finally {
    clear();
    await b.sync().catch(() => {});
  }
}

interface DecodeResult { ms: number; kept: number; rows: number; bytes: number; compactions: number }

/**
 * One FPA layer decoding STEPS tokens after a prefill of c.t tokens, as generate drives it: each
 * step reads its output back and settles the cache (eviction: kept counts, compaction).
 */
async function timeDecode(b: Backend, c: DecodeCase, evict: boolean): Promise<DecodeResult> {
  const C = H * c.d, warm = 2;
  const rows = c.t + warm + STEPS * (flags.profile ? 2 : 1);
  const cfg = parseModelConfig({ vocabSize: 16, dModel: C, nLayers: 1, nHeads: H, nKvHeads: H, headDim: c.d, mlpHidden: 16, contextLength: rows, attention: { type: 'fpa', walk: 'linear', ...(evict ? { evict: { tau: TAU } } : {}) } });
  const mech = new FpaAttention(cfg.attention[0] as FpaSpec, { f: new ParamFactory({ backend: b, seed: 1 }), name: 'l0.attn', dims: modelDims(cfg) });
  // Walk and field rows zero (W ≡ 0, φ ≡ 0); level ℓ = 100·(x₀ + 0.674): see the file comment.
  const lw = new Float32Array(H * C);
  for (let h = 0; h < H; h++) lw[h * C] = 100;
  const setParam = (p: Tensor, vals: Float32Array) => {
    const v = fon.reshape(p, [1, 1, p.shape[0], p.size / p.shape[0]]);
    fon.noGrad(() => fon.kvWrite(v, fon.tensor(vals, v.shape, { backend: b }), 0));
    v.dispose();
  };
  setParam(mech.walkProj.weight, new Float32Array(H * C));
  setParam(mech.levelProj.weight, lw);
  setParam(mech.levelProj.bias!, new Float32Array(H).fill(67.4));
  const cache = new KvCache(cfg, 1, rows, b, 'f16');
  const made: Tensor[] = [];
  try {
    // Inputs made (and uploaded) before the timing: q, k, v (1, H, n, D) f16 and x (1, n, C) per step.
    const inputs = (n: number, seed: number) => {
      const t = [1, 2, 3].map((s) => fon.randn([1, H, n, c.d], { seed: seed + s, backend: b, dtype: 'f16' }));
      t.push(fon.randn([1, n, C], { seed: seed + 4, backend: b }));
      made.push(...t);
      return t;
    };
    let host = 0;
    const step = async ([q, k, v, x]: Tensor[], pos: number) => {
      const h0 = performance.now();
      const o = fon.noGrad(() => fon.tidy(() => mech.forwardCached(q, k, v, { x }, cache.layers[0], pos)));
      const row = fon.narrow(o, 2, o.shape[2] - 1, 1);
      const pending = Promise.all([row.data(), cache.settle()]);
      host += performance.now() - h0;
      await pending;
      o.dispose();
      row.dispose();
    };
    await step(inputs(c.t, 100), 0);
    for (let i = 0; i < warm; i++) await step(inputs(1, 200 + 10 * i), c.t + i);
    const timed = Array.from({ length: STEPS }, (_, i) => inputs(1, 1000 + 10 * i));
    await b.sync();
    const t0 = performance.now();
    for (let i = 0; i < STEPS; i++) await step(timed[i], c.t + warm + i);
    const ms = (performance.now() - t0) / STEPS;
    // The cache as the timed steps left it (before any profiled steps).
    const kept = cache.kept()[0];
    const st = peekFpaDecodeState(cache.layers[0]);
    const used = evict && st ? st.length : c.t + warm + STEPS;
    const compactions = evict && st ? st.compactions : 0;
    if (flags.profile && b instanceof WebGpuBackend) {
      // --profile: as many steps again, each dispatch timed on the GPU: where a step's time goes.
      const more = Array.from({ length: STEPS }, (_, i) => inputs(1, 5000 + 10 * i));
      await b.sync();
      b.rt.startProfile();
      const t1 = performance.now();
      host = 0;
      for (let i = 0; i < STEPS; i++) await step(more[i], c.t + warm + STEPS + i);
      const wall = (performance.now() - t1) / STEPS, hostMs = host / STEPS;
      const kernels = await b.rt.stopProfile();
      const gpu = kernels.reduce((a, k) => a + k.ms, 0) / STEPS, n = kernels.reduce((a, k) => a + k.dispatches, 0) / STEPS;
      console.error(`  profile, ${c.t} tokens${evict ? ', eviction' : ''}: ${wall.toFixed(3)} ms a step wall (dispatches timed one pass each), ${hostMs.toFixed(3)} ms of it recording on the host, ${gpu.toFixed(3)} ms GPU, ${n.toFixed(1)} dispatches\n${profileTable(kernels, { top: 12 })}`);
    }
    return { ms, kept: kept.reduce((a, x) => a + x, 0) / kept.length, rows: used, bytes: used * layoutBytesPerToken(mechanismCache(cfg.attention[0], modelDims(cfg)), modelDims(cfg), 2), compactions };
  } finally {
    for (const t of made) t.dispose();
    cache.dispose();
    mech.dispose();
    await b.sync().catch(() => {});
  }
}

interface PrefillRow {
  key: string; op: Op; headDim: number; tokens: number;
  /** Per mechanism: ms and TFLOP/s, or the reason it has none. */
  fon: Partial<Record<Mech, { ms: number; tflops: number } | { error: string }>>;
  sdpaMs?: number; plainFoxMs?: number; torchErrors?: string[];
  /** FON speed / SDPA speed, per mechanism. */
  ratio: Partial<Record<Mech, number>>;
}
interface DecodeRow {
  key: string; headDim: number; context: number; evict: boolean;
  fon?: DecodeResult; error?: string; sdpaMs?: number; ratio?: number; torchErrors?: string[];
}

interface TorchResult { key: string; sdpa?: number; plain_fox?: number; errors?: string[] }

async function main(): Promise<void> {
  const b = await fon.initBackend('webgpu');
  const caps = (b as unknown as { caps: { adapterName: string; f16: boolean; subgroupMatrix: unknown } }).caps;
  console.log(`FON FoX / FPA bench on ${caps.adapterName} (f16 ${caps.f16}, subgroup matrix ${caps.subgroupMatrix ? 'yes' : 'no'}); B=1, H=${H}, D ∈ {${DIMS.join(', ')}}`);
  const python = findPython('torch', ['python3', '/usr/bin/python3']);
  const refs = new Map<string, TorchResult>();
  if (python) {
    const input = [
      ...prefillCases.map((c) => ({ key: c.key, op: c.op, t: c.t, h: H, d: c.d, plain: c.t <= PLAIN_MAX })),
      ...decodeCases.map((c) => ({ key: c.key, op: 'decode', t: c.t, h: H, d: c.d, plain: false })),
    ];
    const res = runPython(python, new URL('./torch_fox_fpa.py', import.meta.url).pathname, input, 3_600_000) as TorchResult[] | null;
    for (const r of res ?? []) refs.set(r.key, r);
  } else console.log('(no PyTorch found: reference columns left empty)');

  const prefill: PrefillRow[] = [];
  for (const c of prefillCases) {
    const row: PrefillRow = { key: c.key, op: c.op, headDim: c.d, tokens: c.t, fon: {}, ratio: {} };
    const ref = refs.get(c.key);
    if (ref?.sdpa !== undefined) row.sdpaMs = ref.sdpa;
    if (ref?.plain_fox !== undefined) row.plainFoxMs = ref.plain_fox;
    if (ref?.errors?.length) row.torchErrors = ref.errors;
    let inputs: PrefillInputs | null = null;
    try {
      inputs = prefillInputs(b, c);
    } catch (e) {
      for (const m of MECHS) row.fon[m] = { error: `inputs: ${reason(e)}` };
    }
    for (const m of MECHS) {
      if (!inputs) break;
      try {
        const ms = await timePrefill(b, m, inputs);
        row.fon[m] = { ms, tflops: flops(c) / (ms / 1e3) / 1e12 };
        if (row.sdpaMs !== undefined) row.ratio[m] = row.sdpaMs / ms;
        console.error(`  ${c.key} ${m}: ${ms.toFixed(3)} ms`);
      } catch (e) {
        row.fon[m] = { error: reason(e) };
        console.error(`  ${c.key} ${m}: — (${reason(e)})`);
      }
    }
    for (const t of inputs?.all ?? []) t.dispose();
    prefill.push(row);
  }

  const decode: DecodeRow[] = [];
  for (const c of decodeCases) {
    for (const evict of [false, true]) {
      const row: DecodeRow = { key: `${c.key}${evict ? '-evict' : ''}`, headDim: c.d, context: c.t, evict };
      const sdpa = refs.get(c.key)?.sdpa;
      if (sdpa !== undefined) row.sdpaMs = sdpa;
      if (!evict && refs.get(c.key)?.errors?.length) row.torchErrors = refs.get(c.key)!.errors;
      try {
        row.fon = await timeDecode(b, c, evict);
        if (sdpa !== undefined) row.ratio = sdpa / row.fon.ms;
        console.error(`  ${row.key}: ${row.fon.ms.toFixed(3)} ms/step, kept ${(100 * row.fon.kept).toFixed(1)}%`);
      } catch (e) {
        row.error = reason(e);
        console.error(`  ${row.key}: — (${row.error})`);
      }
      decode.push(row);
    }
  }

  const notes: string[] = [];
  const note = (what: string, why: string) => { notes.push(`${what}: ${why}`); return `— [${notes.length}]`; };
  const ms = (x: number | undefined) => (x === undefined ? '—' : x.toFixed(3));
  const ratio = (x: number | undefined) => (x === undefined ? '—' : `${x.toFixed(3)}×`);
  const mechHead = MECHS.map((m) => `FON ${m} ms (TFLOP/s)`);
  console.log(`\n### Prefill (causal, B=1, H=${H}, f16 FON / bf16 PyTorch)\n`);
  console.log(`| op | D | tokens | ${mechHead.join(' | ')} | SDPA ms | PyTorch FoX plain ms | ${MECHS.map((m) => `${m} / SDPA`).join(' | ')} |`);
  console.log(`|${'---|'.repeat(3 + MECHS.length + 2 + MECHS.length)}`);
  for (const r of prefill) {
    const cells = MECHS.map((m) => {
      const x = r.fon[m];
      if (!x) return '—';
      if ('error' in x) return note(`${m} ${r.key}`, x.error);
      return `${x.ms.toFixed(3)} (${x.tflops.toPrecision(3)})`;
    });
    const plain = r.plainFoxMs !== undefined ? ms(r.plainFoxMs) : r.tokens > PLAIN_MAX ? '— (skipped)' : '—';
    console.log(`| ${r.op} | ${r.headDim} | ${r.tokens} | ${cells.join(' | ')} | ${ms(r.sdpaMs)} | ${plain} | ${MECHS.map((m) => ratio(r.ratio[m])).join(' | ')} |`);
    for (const e of r.torchErrors ?? []) notes.push(`PyTorch ${r.key}: ${e}`);
  }
  console.log(`\n### Decode, one FPA layer (H=${H}, k/v f16, ${STEPS} steps after the prefill, each reading its output back; evict τ=${TAU}; webgpu)\n`);
  console.log('| D | context | evict | ms/step | kept | rows in use | cache bytes | SDPA decode ms | FON / SDPA |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of decode) {
    const f = r.fon;
    const cell = f ? [f.ms.toFixed(3), `${(100 * f.kept).toFixed(1)}%`, String(f.rows), `${(f.bytes / 2 ** 20).toFixed(2)} MiB`] : [note(r.key, r.error ?? 'no result'), '—', '—', '—'];
    console.log(`| ${r.headDim} | ${r.context} | ${r.evict ? 'yes' : 'no'} | ${cell.join(' | ')} | ${ms(r.sdpaMs)} | ${ratio(r.ratio)} |`);
    for (const e of r.torchErrors ?? []) notes.push(`PyTorch ${r.key}: ${e}`);
  }
  if (notes.length) {
    console.log('\nNotes:');
    notes.forEach((n, i) => console.log(`[${i + 1}] ${n}`));
  }
  if (flags.json) {
    const results = {
      date: new Date().toISOString(), adapter: caps.adapterName,
      shapes: { batch: 1, heads: H, headDims: DIMS, dtype: 'f16 (FON), bf16 (PyTorch)', decodeSteps: STEPS, tau: TAU, plainFoxMaxTokens: PLAIN_MAX },
      prefill, decode,
    };
    writeJson(flags.json, results);
    await writePlotsBeside(flags.json, results);
  }
}

await main();
await fon.shutdownBackends();
process.exit(0);
