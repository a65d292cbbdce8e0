/**
 * The ragged decoding step (Decoder.forwardRows through infer/cached_step.ts raggedStep): N
 * sequences, each with its own batch-1 cache drawn from one shared page pool and its own position,
 * one token each. On the CPU reference every row's logits equal, bit for bit, the single-sequence
 * cachedStep's for that sequence alone — for every mechanism (full, local, FoX with and without
 * the token shift, FPA with and without eviction, Focus, Spot, a mixed stack with Depth-Attention)
 * and for learned positions, LayerNorm/GELU/biases and QK-norm with GQA — with rows at different
 * positions, one crossing a 128-row page boundary, rows leaving (their pages back to the pool) and
 * joining between steps. On wasm (whose matmul takes another kernel past 4 rows) within a stated
 * tolerance. Shapes are tiny: the whole file takes seconds.
 * Run: node --import tsx --test test/infer/ragged_step.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';
import { cachedStep, generationCache, generationDtype, raggedStep } from '../../src/infer/cached_step.ts';
import type { KvCache } from '../../src/infer/kv_cache.ts';
import { PagePool } from '../../src/infer/page_pool.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { loudModel, ORGAN_CASES, organsConfig } from './organs_fixtures.ts';

const cpu = await fon.initBackend('cpu');

const CASES: Record<string, object> = {
  ...ORGAN_CASES,
  focus: { attention: [{ type: 'focus', groups: 4, topK: 2, window: 6 }, { type: 'full' }, { type: 'focus', groups: 4, topK: 1, window: 3 }] },
  spot: { attention: [{ type: 'full' }, { type: 'spot', heads: 2, dim: 16 }, { type: 'spot', heads: 2, dim: 16, rule: 'top-k', fraction: 0.5 }] },
  'learned positions, layernorm, gelu, bias': { positions: 'learned', norm: 'layernorm', mlp: 'gelu', bias: true, tieEmbeddings: false },
  'qk-norm, GQA 4/2': { nHeads: 4, nKvHeads: 2, qkNorm: true, attention: [{ type: 'full' }, { type: 'local', window: 5 }, { type: 'full' }] },
};

/** Sequences: a prompt length each; token t of a sequence is a fixed function of (sequence, t). */
const PROMPTS = [5, 9, 125, 1];
const token = (s: number, t: number) => (s * 53 + t * 31 + 7) % 256;
/** Which sequences step together at each step: 1 joins at step 3 (its prompt crosses into its second page at step 5), 0 leaves after step 8, 3 joins at step 11. */
const SCHEDULE = [[0, 1], [0, 1], [0, 1], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 2, 1], [1, 2, 0], [0, 1, 2], [1, 2], [2, 1], [1, 2, 3], [3, 1, 2], [1, 2, 3]];

/** The largest |a − b| / (1 + |b|) over two logits rows. */
function worst(a: Float32Array, b: Float32Array): number {
  let w = 0;
  for (let i = 0; i < a.length; i++) w = Math.max(w, Math.abs(a[i] - b[i]) / (1 + Math.abs(b[i])));
  return w;
}

/**
 * Runs `schedule` (default SCHEDULE over PROMPTS) twice over `m`: each sequence alone through cachedStep (its own cache and pool)
 * and all through raggedStep with caches from one shared 128-row pool; returns the largest
 * difference seen and whether every row was bit-identical.
 */
async function compare(m: Decoder, backend: Backend, prompts = PROMPTS, schedule = SCHEDULE): Promise<{ worst: number; identical: boolean; pool: PagePool }> {
  const pool = new PagePool(backend, { batch: 1, kvHeads: m.config.nKvHeads, headDim: m.config.headDim, dtype: generationDtype(m) }, 128);
  const alone: (KvCache | undefined)[] = [], shared: (KvCache | undefined)[] = [];
  const pos = prompts.map(() => 0);
  let w = 0, identical = true;
  const check = (a: Float32Array, b: Float32Array) => {
    w = Math.max(w, worst(a, b));
    if (a.length !== b.length || a.some((x, i) => !Object.is(x, b[i]))) identical = false;
  };
  try {
    for (const [step, rows] of schedule.entries()) {
      for (const s of rows) {
        if (shared[s]) continue; // joining: prefill alone, then the batch
        const prompt = Array.from({ length: prompts[s] }, (_, t) => token(s, t));
        alone[s] = generationCache(m, 160, { pageRows: 128 });
        shared[s] = generationCache(m, 160, { pool });
        check(await cachedStep(m, shared[s]!, prompt, 0), await cachedStep(m, alone[s]!, prompt, 0));
        pos[s] = prompts[s];
      }
      const got = await raggedStep(m, rows.map((s) => ({ cache: shared[s]!, token: token(s, pos[s]), pos: pos[s] })));
      for (const [i, s] of rows.entries()) {
        check(got[i], await cachedStep(m, alone[s]!, [token(s, pos[s])], pos[s]));
        assert.equal(shared[s]!.length, pos[s] + 1, `step ${step}: the cache's length`);
        pos[s]++;
      }
      // Leaving: the sequences of this step that are not in the next give their pages back.
      for (const s of rows) {
        if (schedule[step + 1]?.includes(s)) continue;
        shared[s]!.dispose(); alone[s]!.dispose();
        shared[s] = alone[s] = undefined;
      }
    }
  } finally {
    for (const c of [...alone, ...shared]) c?.dispose();
  }
  return { worst: w, identical, pool };
}

for (const [name, extra] of Object.entries(CASES)) {
  test(`ragged step equals each sequence's own cached step bit for bit on the CPU: ${name}`, async () => {
    const m = loudModel(organsConfig(extra, 257, 200), cpu);
    const r = await compare(m, cpu);
    assert.ok(r.identical, `${name}: max relative |Δ| ${r.worst}`);
    if (m.layers.some((l) => l.attn.mechanism.name.startsWith('full') || l.attn.mechanism.name.startsWith('local'))) {
      assert.ok(r.pool.pagesFree >= 2, 'pages came back to the shared pool and were reused');
    }
    assert.equal(r.pool.pagesInUse, 0, 'every page given back');
    r.pool.dispose();
    m.dispose();
  });
}

test('ragged step on wasm: each row within 1e-5 (relative) of its own cached step (its matmul takes another kernel past 4 rows)', async () => {
  const wasm = await fon.initBackend('wasm');
  const m = loudModel(organsConfig(CASES['mixed + depth'], 257, 200), wasm);
  // Seven sequences: steps of 2, 7 and 5 rows (GEMV up to 4 rows, the blocked GEMM past them).
  const r = await compare(m, wasm, [5, 9, 125, 1, 3, 17, 2], [[0, 1], [0, 1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1, 0], [1, 2, 3, 5, 6], [1, 2, 3, 5, 6]]);
  console.log(`wasm: max relative |Δ| ${r.worst}, bit-identical: ${r.identical}`);
  assert.ok(r.worst <= 1e-5, `max relative |Δ| ${r.worst}`);
  r.pool.dispose();
  m.dispose();
});

test('ragged step: bad rows are errors naming the value', async () => {
  const m = loudModel(organsConfig({}), cpu);
  const c = generationCache(m, 8);
  const ids = (n: number) => fon.tensor(new Int32Array(n), [n, 1], { backend: cpu, dtype: 'i32' });
  assert.throws(() => m.forwardRows(ids(2), [{ pos: 0, cache: c.layers }]), (e) => e instanceof fon.ArgumentError && /1 rows for ids of 2 sequences/.test((e as Error).message));
  assert.throws(() => m.forwardRows(ids(1), [{ pos: 64, cache: c.layers }]), (e) => e instanceof fon.ArgumentError && /row 0's position 64 must be an integer in \[0, 63\]/.test((e as Error).message));
  assert.throws(() => m.forwardRows(ids(1), [{ pos: 0, cache: c.layers.slice(1) }]), (e) => e instanceof fon.ArgumentError && /row 0's cache has 2 layers, the model 3/.test((e as Error).message));
  assert.throws(() => m.forwardRows(fon.tensor(new Int32Array(2), [1, 2], { backend: cpu, dtype: 'i32' }), [{ pos: 0, cache: c.layers }]), (e) => e instanceof fon.ShapeError && /ids must be i32 \(N, 1\)/.test((e as Error).message));
  c.dispose();
  m.dispose();
});
