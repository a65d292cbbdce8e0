import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { cachedStep, generationCache, generationDtype } from '../../src/infer/generate.ts';
import { denseAttention } from '../../src/attention/dense.ts';
import type { FullAttention } from '../../src/attention/full/full.ts';

const cpu = await fon.initBackend('cpu');

/** Small configs that cover every option: GQA, QK-norm, local layers, LayerNorm+GELU+learned positions, untied head. */
const VARIANTS: Record<string, Partial<ModelConfig>> = {
  llama: { vocabSize: 40, dModel: 24, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 40, contextLength: 24, qkNorm: true, attention: [{ type: 'full' }, { type: 'local', window: 5 }] },
  gpt2: { vocabSize: 40, dModel: 24, nLayers: 2, nHeads: 3, nKvHeads: 3, headDim: 8, mlp: 'gelu', mlpHidden: 48, norm: 'layernorm', positions: 'learned', bias: true, tieEmbeddings: false, contextLength: 24 },
  nopos: { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 6, positions: 'none', mlpHidden: 32, contextLength: 24 },
};

function model(name: string, seed = 5): Decoder {
  return new Decoder(parseModelConfig(VARIANTS[name]), new ParamFactory({ backend: cpu, seed }));
}

function ids(b: number, t: number, seed: number): fon.Tensor {
  return fon.randint([b, t], 0, 40, { backend: cpu, seed });
}

async function close(a: fon.Tensor, b: fon.Tensor, tol: number, what: string) {
  const x = await a.data(), y = await b.data();
  assert.equal(x.length, y.length, what);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  assert.ok(worst <= tol, `${what}: max |Δ| ${worst} > ${tol}`);
}

/** Runs the model with every layer's flash attention replaced by the dense reference. */
function withDense<T>(m: Decoder, fn: () => T): T {
  const mechs = m.layers.map((l) => l.attn.mechanism as FullAttention);
  const saved = mechs.map((x) => x.forward);
  mechs.forEach((x) => { x.forward = (q, k, v) => denseAttention(q, k, v, { window: x.window }); });
  try { return fn(); } finally { mechs.forEach((x, i) => { x.forward = saved[i]; }); }
}

for (const name of Object.keys(VARIANTS)) {
  test(`decoder ${name}: logits with the flash kernel equal those with dense masked attention`, async () => {
    const m = model(name);
    const x = ids(2, 17, 9);
    const fast = m.forward(x);
    assert.deepEqual(fast.shape, [2, 17, 40]);
    const dense = withDense(m, () => m.forward(x));
    await close(fast, dense, 1e-5, name);
    fon.tidy(() => [fast, dense, x].forEach((t) => t.dispose()));
    m.dispose();
  });

  test(`decoder ${name}: decoding token by token through the KV cache gives the prefill logits`, async () => {
    const m = model(name);
    const t = 13;
    const x = ids(1, t, 4);
    const full = m.forward(x); // (1, T, V)
    const cache = new KvCache(m.config, 1, 20, cpu);
    const host = (await x.data()) as Int32Array;
    // A prompt of 5 in one call, then one token at a time.
    const rows: fon.Tensor[] = [m.forward(fon.tensor(host.slice(0, 5), [1, 5], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: 0 })];
    for (let p = 5; p < t; p++) rows.push(m.forward(fon.tensor([host[p]], [1, 1], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: p }));
    await close(fon.concat(rows, 1), full, 2e-5, `${name} cached`);
    const last = m.forward(fon.tensor(host.slice(0, t), [1, t], { backend: cpu, dtype: 'i32' }), { lastOnly: true });
    await close(last, fon.narrow(full, 1, t - 1, 1), 1e-6, `${name} lastOnly`);
    cache.dispose();
    m.dispose();
  });
}

test('decoder: every parameter gets a gradient and the loss starts near ln(V)', async () => {
  const m = model('llama');
  const x = ids(2, 16, 1), y = ids(2, 16, 2);
  const loss = m.loss(x, y);
  loss.backward();
  const l = (await loss.data())[0];
  assert.ok(Math.abs(l - Math.log(40)) < 0.3, `initial loss ${l}`);
  for (const [name, p] of m.namedParameters()) {
    assert.ok(p.grad, `${name} has no gradient`);
    const g = (await p.grad!.data()) as Float32Array;
    assert.ok(g.some((v) => v !== 0), `${name}: gradient is all zero`);
  }
  m.dispose();
});

test('decoder: parameter names follow the documented state dict', () => {
  const m = model('gpt2');
  const names = m.namedParameters().map(([n]) => n);
  for (const n of ['embed.weight', 'pos_embed.weight', 'layers.0.attn_norm.weight', 'layers.0.attn_norm.bias', 'layers.0.attn.q.weight', 'layers.0.attn.q.bias',
    'layers.1.attn.o.weight', 'layers.1.mlp.up.weight', 'layers.1.mlp.down.bias', 'layers.1.mlp_norm.weight', 'norm.weight', 'lm_head.weight']) {
    assert.ok(names.includes(n), `missing ${n}`);
  }
  assert.ok(!names.some((n) => n.includes('gate')), 'a GELU MLP has no gate');
  assert.equal(new Set(names).size, names.length);
  m.dispose();
});

test('decoder: weights from a state dict rebuild the same model; a missing or misshapen tensor is named', async () => {
  const a = model('llama', 1);
  const weights = Object.fromEntries(a.namedParameters());
  const b = new Decoder(a.config, new ParamFactory({ backend: cpu, weights, source: 'w.safetensors' }));
  const x = ids(1, 9, 3);
  await close(a.forward(x), b.forward(x), 0, 'reloaded');
  const { ['layers.1.mlp.up.weight']: _drop, ...missing } = weights;
  assert.throws(() => new Decoder(a.config, new ParamFactory({ backend: cpu, weights: missing, source: 'w.safetensors' })), /w\.safetensors: tensor 'layers\.1\.mlp\.up\.weight' is missing \(expected shape \[40,24\]\)/);
  const bad = { ...weights, 'norm.weight': fon.zeros([7], { backend: cpu }) };
  assert.throws(() => new Decoder(a.config, new ParamFactory({ backend: cpu, weights: bad, source: 'w.safetensors' })), /tensor 'norm\.weight' has shape \[7\], the config expects \[24\]/);
  a.dispose(); b.dispose();
});

test('decoder: positions past the context and bad ids are errors', () => {
  const m = model('nopos');
  assert.throws(() => m.forward(ids(1, 25, 1)), /positions 0 … 24 pass the context length 24/);
  assert.throws(() => m.forward(fon.zeros([1, 3], { backend: cpu })), /ids must be i32 \(B, T\), got f32 \[1,3\]/);
  m.dispose();
});

test('RoPE tables grow on demand: none at construction, 4,096 rows first, doubling, never past the context; rows past a growth equal a fresh model\'s', async () => {
  const huge = { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 1, nKvHeads: 1, headDim: 1024, mlpHidden: 16, contextLength: 2 ** 21 };
  const big = new Decoder(parseModelConfig(huge), new ParamFactory({ backend: cpu, seed: 1 })); // 8 GB of tables if made up front
  assert.equal(big.ropePositions, 0);
  big.dispose();
  const cfg = parseModelConfig({ vocabSize: 40, dModel: 8, nLayers: 1, nHeads: 1, nKvHeads: 1, headDim: 8, mlpHidden: 8, contextLength: 10000 });
  const grown = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const fresh = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const x = ids(1, 4, 3);
  fon.tidy(() => grown.forward(x)).dispose();
  assert.equal(grown.ropePositions, 4096);
  const a = grown.forward(x, { pos: 4094 }); // positions 4094 … 4097 cross the first table's end
  assert.equal(grown.ropePositions, 8192);
  const b = fresh.forward(x, { pos: 4094 });
  assert.equal(fresh.ropePositions, 4098);
  assert.deepEqual(await a.data(), await b.data());
  fon.tidy(() => grown.forward(x, { pos: 9996 })).dispose();
  assert.equal(grown.ropePositions, 10000);
  // RoPE is relative: without a cache, the same ids at positions 4094 … give the logits of positions 0 … (to f32 rounding of the angles).
  await close(a, fon.tidy(() => fresh.forward(x)), 1e-3, 'shifted positions');
  [a, b, x].forEach((t) => t.dispose());
  grown.dispose();
  fresh.dispose();
});

test('ParamFactory draw: normal-initialised parameters come from the draw (cast to the storage dtype), ones and zeros and loaded weights do not; a misshapen draw is refused by name', () => {
  const cfg = parseModelConfig({ vocabSize: 11, dModel: 8, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 4, mlpHidden: 12, contextLength: 16 });
  const asked: string[] = [];
  const draw = (name: string, shape: readonly number[], std: number) => { asked.push(name); return fon.full(shape, std, { backend: cpu }); };
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, dtype: 'f16', draw }));
  const plain = new Decoder(cfg, new ParamFactory({ backend: cpu }));
  const named = new Map(m.namedParameters());
  for (const [name, p] of plain.namedParameters()) {
    const got = named.get(name)!;
    assert.equal(got.dtype, 'f16', name);
    const vals = Array.from(fon.cast(got, 'f32').dataSync() as Float32Array), ref = Array.from(p.dataSync() as Float32Array);
    const constant = ref.every((x) => x === ref[0]);
    // A normal init became one value (the draw's std); ones and zeros stay as they were, and were never asked for.
    if (constant) { assert.deepEqual(vals, ref.map((x) => Math.fround(x)), name); assert.ok(!asked.includes(name), name); } else { assert.ok(asked.includes(name), name); assert.ok(vals.every((x) => x === vals[0] && x > 0), name); }
  }
  assert.ok(asked.length >= 4, `asked for ${asked.length}`);
  // Weights given: loaded, not drawn.
  const asked2: string[] = [];
  const loaded = new Decoder(cfg, new ParamFactory({ backend: cpu, weights: Object.fromEntries(plain.namedParameters()), draw: (n, s, std) => { asked2.push(n); return fon.full(s, std, { backend: cpu }); } }));
  assert.equal(asked2.length, 0);
  loaded.dispose();
  assert.throws(() => new Decoder(cfg, new ParamFactory({ backend: cpu, draw: (_n, s) => fon.zeros([...s, 1], { backend: cpu }) })), (e) => e instanceof fon.ArgumentError && /^ParamFactory: draw gave '[^']+' shape \[[\d,]+\], dtype f32 on 'cpu'; expected \[[\d,]+\], a float dtype on 'cpu'$/.test(e.message));
  m.dispose();
  plain.dispose();
});

test('a model whose weights are f16 or bf16 gives f32 logits, through forward and through generation\'s cache (in the weights\' dtype), within 16-bit rounding of the same weights in f32', async () => {
  const cfg = parseModelConfig({ vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 4, mlpHidden: 24, contextLength: 16, positions: 'rope', norm: 'rmsnorm', mlp: 'swiglu' });
  const ref = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 3 }));
  const ids = [5, 9, 2, 31, 7];
  const want = fon.tidy(() => ref.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { dtype: 'i32', backend: cpu }), { lastOnly: true })).dataSync() as Float32Array;
  for (const dtype of ['f16', 'bf16'] as const) {
    // The same values, stored in 16 bits (as a checkpoint's weights kept in their dtype).
    const m = new Decoder(cfg, new ParamFactory({ backend: cpu, dtype, weights: Object.fromEntries(ref.namedParameters()) }));
    const direct = fon.tidy(() => m.forward(fon.tensor(Int32Array.from(ids), [1, ids.length], { dtype: 'i32', backend: cpu }), { lastOnly: true }));
    assert.equal(direct.dtype, 'f32', `${dtype}: forward's logits`);
    assert.equal(generationDtype(m), dtype);
    const cache = generationCache(m, 16);
    const stepped = await cachedStep(m, cache, ids, 0);
    const tol = dtype === 'f16' ? 2e-3 : 2e-2;
    for (const [what, got] of [['forward', direct.dataSync() as Float32Array], ['cached step', stepped]] as const) {
      assert.equal(got.length, cfg.vocabSize);
      const worst = Math.max(...Array.from(want, (w, i) => Math.abs(w - got[i])));
      assert.ok(worst < tol, `${dtype} ${what}: max |Δ| ${worst} against the f32 model's logits`);
    }
    cache.dispose();
    direct.dispose();
    m.dispose();
  }
  ref.dispose();
});

test('a 16-bit model with Spot layers decodes with selection (its selector scores in f32): the cached steps\' logits within 16-bit rounding of the f32 model\'s', async () => {
  const cfg = parseModelConfig({ vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 64, positions: 'rope', attention: [{ type: 'spot', heads: 2, dim: 16, rule: 'top-k', fraction: 0.5 }, { type: 'full' }] });
  const ref = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 4 }));
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, dtype: 'f16', weights: Object.fromEntries(ref.namedParameters()) }));
  const ids = Array.from({ length: 40 }, (_, i) => (i * 7) % 40);
  const [c32, c16] = [generationCache(ref, 64), generationCache(m, 64)];
  let want = await cachedStep(ref, c32, ids, 0), got = await cachedStep(m, c16, ids, 0);
  for (let step = 0; step < 3; step++) {
    const worst = Math.max(...Array.from(want, (w, i) => Math.abs(w - got[i])));
    assert.ok(worst < 5e-3, `step ${step}: max |Δ| ${worst}`);
    want = await cachedStep(ref, c32, [step + 1], ids.length + step);
    got = await cachedStep(m, c16, [step + 1], ids.length + step);
  }
  for (const x of [c32, c16, ref, m]) x.dispose();
});
