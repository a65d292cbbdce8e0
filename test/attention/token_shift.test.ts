/**
 * The FoX "Pro" data-dependent token shift of k and v (attention/token_shift.ts) on fox and fpa
 * layers, on the CPU: the `tokenShift` option (default off, kept only when on, errors naming the
 * key and value); the parameters it adds (shift_k / shift_v, Hkv × C, normal init); the shift
 * against a host computation of α_t y_{t−1} + (1 − α_t) y_t (zeros before position 0) and a
 * central difference of its weight gradient; the block applies it to the raw projections before
 * QK-norm; forward and backward reach shift_k / shift_v; decoding through the KV cache (one token
 * at a time, and in chunks) equals the prefill; the cache's per-sequence rows and a rewind's error;
 * a FON checkpoint round trip; the Hugging Face export (function and `fon export`) refuses them.
 * Run: node --import tsx --test test/attention/token_shift.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { ConfigError, kvBytesPerToken, parseModelConfig, type ModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { loadModel, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { hfArchitectureFor } from '../../src/io/hf/export.ts';
import { FoxAttention } from '../../src/attention/fox/fox.ts';
import { FpaAttention } from '../../src/attention/fpa/fpa.ts';
import { RECENT_ROWS, TokenShift, TokenShiftState } from '../../src/attention/common/token_shift.ts';
import { ArgumentError } from '../../src/errors.ts';
import { maxDiff } from './fixtures.ts';

const cpu = await fon.initBackend('cpu');

const BASE = { vocabSize: 40, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 24 };

/** Layouts with the token shift: fox and fpa, GQA, with QK-norm and RoPE, and a mix with a full layer. */
const VARIANTS: Record<string, Omit<Partial<ModelConfig>, 'attention'> & { attention: unknown }> = {
  fox: { ...BASE, attention: { type: 'fox', tokenShift: true } },
  'fox, output gate, GQA, qkNorm, RoPE': { ...BASE, nHeads: 4, nKvHeads: 2, qkNorm: true, positions: 'rope', attention: { type: 'fox', outputGate: true, tokenShift: true } },
  'fpa fox walk': { ...BASE, attention: { type: 'fpa', tokenShift: true } },
  'fpa tanh walk, GQA, qkNorm': { ...BASE, nHeads: 4, nKvHeads: 1, qkNorm: true, attention: { type: 'fpa', walk: 'tanh', tokenShift: true } },
  'mix full / fox / fpa': { ...BASE, nLayers: 3, attention: [{ type: 'full' }, { type: 'fox', tokenShift: true }, { type: 'fpa', walk: 'linear', tokenShift: true }] },
};

const config = (name: string) => parseModelConfig(VARIANTS[name]);
const model = (cfg: ModelConfig, seed = 7) => new Decoder(cfg, new ParamFactory({ backend: cpu, seed }));
const ids = (b: number, t: number, seed: number) => fon.randint([b, t], 0, 40, { backend: cpu, seed });

/**
 * The shift on the host: y (B, T, H, D), x (B, T, C), w (H, C) → α_t y_{t−1} + (1 − α_t) y_t with
 * α_t = σ(w·x_t) per head and y_{−1} = `first` (B, H, D; zeros when absent).
 */
function hostShift(y: Float32Array, x: Float32Array, w: Float32Array, [b, t, h, d]: number[], c: number, first?: Float32Array): Float32Array {
  const out = new Float32Array(y.length);
  for (let bi = 0; bi < b; bi++) for (let ti = 0; ti < t; ti++) for (let hi = 0; hi < h; hi++) {
    let z = 0;
    for (let ci = 0; ci < c; ci++) z += w[hi * c + ci] * x[(bi * t + ti) * c + ci];
    const alpha = 1 / (1 + Math.exp(-z));
    for (let di = 0; di < d; di++) {
      const at = ((bi * t + ti) * h + hi) * d + di;
      const prev = ti > 0 ? y[at - h * d] : first ? first[(bi * h + hi) * d + di] : 0;
      out[at] = alpha * prev + (1 - alpha) * y[at];
    }
  }
  return out;
}

test('config: tokenShift is a fox / fpa option, off by default and kept in the entry only when on', () => {
  const c = parseModelConfig({ attention: [{ type: 'fox', tokenShift: true }, { type: 'fpa', tokenShift: true, outputGate: true }, { type: 'fox', tokenShift: false }, 'fpa'] });
  assert.deepEqual(c.attention, [
    { type: 'fox', outputGate: false, tokenShift: true }, { type: 'fpa', walk: 'fox', outputGate: true, tokenShift: true },
    { type: 'fox', outputGate: false }, { type: 'fpa', walk: 'fox', outputGate: false },
  ]);
  const evict = parseModelConfig({ attention: { type: 'fpa', tokenShift: true, evict: { tau: 8 } } }).attention[0];
  assert.deepEqual(evict, { type: 'fpa', walk: 'fox', outputGate: false, tokenShift: true, evict: { tau: 8, every: 64, deadFraction: 0.25 } });
  const bad: [unknown, RegExp][] = [
    [{ type: 'fox', tokenShift: 'yes' }, /attention\[0\]: 'tokenShift' = "yes": expected true or false/],
    [{ type: 'fpa', tokenShift: 1 }, /attention\[0\]: 'tokenShift' = 1: expected true or false/],
    [{ type: 'full', tokenShift: true }, /attention\[0\]: unknown key 'tokenShift' for attention type "full"/],
    [{ type: 'local', window: 4, tokenShift: true }, /unknown key 'tokenShift' for attention type "local"; expected window/],
    [{ type: 'fox', shift: true }, /unknown key 'shift' for attention type "fox"; expected outputGate, tokenShift/],
    [{ type: 'fpa', shift: true }, /unknown key 'shift' for attention type "fpa"; expected walk, outputGate, tokenShift, evict/],
  ];
  for (const [a, re] of bad) assert.throws(() => parseModelConfig({ attention: a }), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), JSON.stringify(a));
});

test('parameters: shift_k and shift_v (Hkv × C, normal 0.02) under the block\'s name, only with tokenShift', async () => {
  const m = model(config('mix full / fox / fpa'));
  const p = Object.fromEntries(m.namedParameters());
  assert.ok(m.layers[1].attn.mechanism instanceof FoxAttention && m.layers[2].attn.mechanism instanceof FpaAttention);
  assert.equal(m.layers[1].attn.mechanism.name, 'fox(tokenShift)');
  assert.equal(m.layers[2].attn.mechanism.name, 'fpa(walk=linear, tokenShift)');
  const shiftNames = Object.keys(p).filter((n) => n.includes('.shift_'));
  assert.deepEqual(shiftNames, ['layers.1.attn.shift_k.weight', 'layers.1.attn.shift_v.weight', 'layers.2.attn.shift_k.weight', 'layers.2.attn.shift_v.weight']);
  for (const n of shiftNames) {
    assert.deepEqual(p[n].shape, [2, 16]);
    const w = Array.from(await p[n].data());
    const std = Math.sqrt(w.reduce((s, x) => s + x * x, 0) / w.length);
    assert.ok(std > 0.008 && std < 0.04, `${n}: std ${std}`);
  }
  const gqa = model(config('fpa tanh walk, GQA, qkNorm'));
  assert.deepEqual(Object.fromEntries(gqa.namedParameters())['layers.0.attn.shift_v.weight'].shape, [1, 16], 'one α per KV head');
  const plain = model(parseModelConfig({ ...BASE, attention: 'fox' }));
  assert.ok(!plain.namedParameters().some(([n]) => n.includes('.shift_')));
  for (const x of [m, gqa, plain]) x.dispose();
});

test('TokenShift.forward is α_t y_{t−1} + (1 − α_t) y_t per KV head (zeros before position 0), and its weight gradient matches central differences', async () => {
  const cfg = parseModelConfig({ ...BASE, dModel: 5, nHeads: 3, nKvHeads: 3, headDim: 4, attention: { type: 'fox', tokenShift: true } });
  const shift = new TokenShift(new ParamFactory({ backend: cpu, seed: 3 }), 'attn', cfg, 'test');
  const dims = [2, 6, 3, 4];
  const k = fon.randn(dims, { backend: cpu, seed: 1 }), v = fon.randn(dims, { backend: cpu, seed: 2 });
  const x = fon.randn([2, 6, 5], { backend: cpu, seed: 4, std: 10 }); // large, so α ranges far from 0.5 (against the 0.02 init)
  const [ks, vs] = shift.forward(k, v, x);
  const xh = (await x.data()) as Float32Array;
  for (const [y, out, w] of [[k, ks, shift.shiftK.weight], [v, vs, shift.shiftV.weight]] as const) {
    const want = hostShift((await y.data()) as Float32Array, xh, (await w.data()) as Float32Array, dims, 5);
    const got = await out.data();
    let worst = 0;
    for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
    assert.ok(worst < 1e-5, `max |Δ| ${worst}`);
  }
  // And the shift is not the identity: the output differs from y.
  assert.ok((await maxDiff(ks, k)) > 0.1);

  // d/dW of L = Σ ks ⊙ r at one weight, against (L(w + h) − L(w − h)) / 2h.
  const r = fon.randn(dims, { backend: cpu, seed: 5 });
  const lossOf = () => fon.sum(fon.mul(shift.forward(k, v, x)[0], r));
  fon.backward(lossOf());
  const analytic = (await shift.shiftK.weight.grad!.data())[7]; // head 1, input feature 2
  const w = (await shift.shiftK.weight.data()) as Float32Array;
  const h = 1e-3, w0 = w[7];
  const at = async (val: number) => {
    const copy = Float32Array.from(w);
    copy[7] = val;
    fon.noGrad(() => fon.kvWrite(fon.reshape(shift.shiftK.weight, [1, 1, 3, 5]), fon.tensor(copy, [1, 1, 3, 5], { backend: cpu }), 0));
    return (await fon.noGrad(lossOf).data())[0];
  };
  const numeric = ((await at(w0 + h)) - (await at(w0 - h))) / (2 * h);
  assert.ok(Math.abs(analytic) > 1e-3, `gradient ${analytic} is not negligible`);
  assert.ok(Math.abs(analytic - numeric) < 1e-3 * Math.abs(numeric) + 2e-2, `analytic ${analytic} vs numeric ${numeric}`);
  shift.dispose();
});

test('the block shifts the raw k and v projections before QK-norm (and not after)', async () => {
  const cfg = parseModelConfig({ ...BASE, nLayers: 1, qkNorm: true, attention: { type: 'fox', tokenShift: true } });
  const m = model(cfg, 13);
  const block = m.layers[0].attn;
  const mech = block.mechanism as FoxAttention;
  const [b, t, c, h, d] = [2, 7, 16, 2, 8];
  const x = fon.randn([b, t, c], { backend: cpu, seed: 8 });
  const got = fon.noGrad(() => block.forward(x, { pos: 0 }).out);
  const xh = (await x.data()) as Float32Array;
  const raw = (lin: typeof block.k) => fon.reshape(lin.forward(x), [b, t, h, d]);
  const hostShifted = async (y: fon.Tensor, w: fon.Tensor) => fon.tensor(hostShift((await y.data()) as Float32Array, xh, (await w.data()) as Float32Array, [b, t, h, d], c), [b, t, h, d], { backend: cpu });
  const toHeads = (y: fon.Tensor) => fon.permute(y, [0, 2, 1, 3]);
  const finish = (k: fon.Tensor, v: fon.Tensor) => {
    const q = toHeads(block.qNorm!.forward(raw(block.q)));
    const a = mech.forward(q, toHeads(k), toHeads(v), { x });
    return block.o.forward(fon.reshape(fon.permute(a, [0, 2, 1, 3]), [b, t, h * d]));
  };
  const vShifted = await hostShifted(raw(block.v), mech.tokenShift!.shiftV.weight);
  const want = finish(block.kNorm!.forward(await hostShifted(raw(block.k), mech.tokenShift!.shiftK.weight)), vShifted);
  const d1 = await maxDiff(got, want);
  assert.ok(d1 < 1e-5, `max |Δ| ${d1}`);
  // Shifting after the norm gives other outputs: the placement is observable.
  const after = finish(await hostShifted(block.kNorm!.forward(raw(block.k)), mech.tokenShift!.shiftK.weight), vShifted);
  assert.ok((await maxDiff(got, after)) > 1e-4);
  m.dispose();
});

for (const name of Object.keys(VARIANTS)) {
  test(`${name}: forward and backward reach every parameter, shift_k and shift_v included`, async () => {
    const m = model(config(name));
    const loss = m.loss(ids(2, 9, 3), ids(2, 9, 4));
    const l0 = (await loss.data())[0];
    assert.ok(Math.abs(l0 - Math.log(40)) < 0.5, `initial loss ${l0} near ln 40`);
    fon.backward(loss);
    let shifts = 0;
    for (const [n, t] of m.namedParameters()) {
      assert.ok(t.grad, `${n} has a gradient`);
      const g = await t.grad!.data();
      assert.ok(g.every(Number.isFinite), `${n}: finite`);
      assert.ok(g.some((v) => v !== 0), `${n}: not all zero`);
      if (n.includes('.shift_')) shifts++;
    }
    assert.equal(shifts, 2 * m.layers.filter((l) => l.attn.mechanism.name.includes('tokenShift')).length);
    assert.ok(shifts > 0);
    m.dispose();
  });

  test(`${name}: decoding through the KV cache, one token at a time and in chunks, equals the prefill logits`, async () => {
    const cfg = config(name);
    const m = model(cfg);
    const t = 13;
    const x = ids(2, t, 9);
    const host = (await x.data()) as Int32Array;
    const full = fon.noGrad(() => m.forward(x));
    for (const cuts of [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], [0, 3, 8, 10, 13]]) {
      const cache = new KvCache(cfg, 2, 20, cpu);
      const rows: fon.Tensor[] = [];
      for (let i = 0; i + 1 < cuts.length; i++) {
        const [a, e] = [cuts[i], cuts[i + 1]];
        const part = new Int32Array(2 * (e - a));
        for (let bi = 0; bi < 2; bi++) part.set(host.subarray(bi * t + a, bi * t + e), bi * (e - a));
        rows.push(fon.noGrad(() => m.forward(fon.tensor(part, [2, e - a], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: a })));
      }
      const d = await maxDiff(fon.concat(rows, 1), full);
      assert.ok(d < 2e-5, `cuts ${cuts}: max |Δ| ${d}`);
      cache.dispose();
    }
    m.dispose();
  });
}

test('decoding without the shift state would differ: the cached step really uses the stored row of position pos − 1', async () => {
  const cfg = config('fox');
  const m = model(cfg);
  const x = ids(1, 6, 2);
  const host = (await x.data()) as Int32Array;
  const full = await fon.noGrad(() => m.forward(x)).data();
  const cache = new KvCache(cfg, 1, 8, cpu);
  fon.noGrad(() => m.forward(fon.tensor(host.slice(0, 5), [1, 5], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: 0 }));
  // Zero the stored rows of layer 0: the step at position 5 must now come out different.
  const shift = cache.layers[0].side!.shift as TokenShiftState;
  for (const ring of [shift.k, shift.v]) fon.noGrad(() => fon.kvWrite(ring, fon.zeros([1, 2, RECENT_ROWS, 8], { backend: cpu }), 0));
  const last = await fon.noGrad(() => m.forward(fon.tensor(host.slice(5, 6), [1, 1], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: 5 })).data();
  let worst = 0;
  for (let i = 0; i < 40; i++) worst = Math.max(worst, Math.abs(last[i] - full[5 * 40 + i]));
  assert.ok(worst > 1e-4, `max |Δ| ${worst}`);
  cache.dispose();
  m.dispose();
});

test('KV cache: the token shift keeps rings of the last RECENT_ROWS pre-shift k and v rows (B, Hkv, R, D) f32 per sequence, outside the per-token bytes', () => {
  const cfg = config('mix full / fox / fpa');
  const cache = new KvCache(cfg, 3, 10, cpu, 'f16');
  assert.equal(cache.layers[0].state, undefined);
  assert.deepEqual(Object.keys(cache.layers[1].state!), ['c']);
  assert.deepEqual(Object.keys(cache.layers[2].state!), ['phi', 'level', 'walk']);
  assert.deepEqual(Object.keys(cache.layers[1].side!), ['shift']);
  assert.deepEqual(Object.keys(cache.layers[2].side!), ['shift', 'fpa']);
  for (const l of [1, 2]) {
    const st = cache.layers[l].side!.shift as TokenShiftState;
    for (const ring of [st.k, st.v]) { assert.deepEqual(ring.shape, [3, 2, RECENT_ROWS, 8]); assert.equal(ring.dtype, 'f32'); }
    assert.equal(st.bytes, 2 * 3 * 2 * RECENT_ROWS * 8 * 4);
  }
  assert.equal(cache.bytes, 10 * 3 * kvBytesPerToken(cfg, 2) + 2 * (2 * 3 * 2 * RECENT_ROWS * 8 * 4) + cache.layers[2].side!.fpa.bytes);
  assert.equal(kvBytesPerToken(cfg, 4), kvBytesPerToken(parseModelConfig({ ...VARIANTS['mix full / fox / fpa'], attention: [{ type: 'full' }, { type: 'fox' }, { type: 'fpa', walk: 'linear' }] }), 4));
  cache.dispose();
});

test('a cached step must continue where the last ended (or restart at 0): otherwise an ArgumentError naming the positions', async () => {
  const cfg = config('fpa fox walk');
  const m = model(cfg);
  const x = ids(1, 10, 6);
  const host = (await x.data()) as Int32Array;
  const step = (cache: KvCache, a: number, e: number) => fon.noGrad(() => m.forward(fon.tensor(host.slice(a, e), [1, e - a], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: a }));
  const cache = new KvCache(cfg, 1, 12, cpu);
  step(cache, 0, 8);
  assert.throws(() => step(cache, 5, 6), (e: unknown) => e instanceof ArgumentError && /fpa\(walk=fox, tokenShift\): token shift at position 5 needs the pre-shift k and v of position 4, but the cache holds those up to position 7/.test((e as Error).message));
  const fresh = new KvCache(cfg, 1, 12, cpu);
  assert.throws(() => step(fresh, 3, 4), (e: unknown) => e instanceof ArgumentError && /position 3 needs .* of position 2, but the cache holds none/.test((e as Error).message));
  // A restart at position 0 resets the shift (zeros before position 0): decoding again equals the prefill.
  const rows = [step(cache, 0, 4)];
  for (let p = 4; p < 10; p++) rows.push(step(cache, p, p + 1));
  const d = await maxDiff(fon.concat(rows, 1), fon.noGrad(() => m.forward(x)));
  assert.ok(d < 2e-5, `max |Δ| ${d}`);
  cache.dispose();
  fresh.dispose();
  m.dispose();
});

test('FON checkpoint round trip keeps tokenShift and the shift weights; the Hugging Face export refuses the model', async () => {
  const cfg = parseModelConfig({ ...VARIANTS['mix full / fox / fpa'], vocabSize: 257 }); // the byte tokenizer's size
  const m = model(cfg);
  const dir = mkdtempSync(join(tmpdir(), 'fon-tokenshift-'));
  await saveCheckpoint(dir, 'step-000001', m, byteTokenizer());
  const loaded = await loadModel(dir, cpu);
  assert.deepEqual(loaded.config, cfg);
  assert.deepEqual(loaded.model.namedParameters().map(([n]) => n), m.namedParameters().map(([n]) => n));
  const p = Object.fromEntries(m.namedParameters()), q = Object.fromEntries(loaded.model.namedParameters());
  for (const n of ['layers.1.attn.shift_k.weight', 'layers.2.attn.shift_v.weight']) assert.equal(await maxDiff(q[n], p[n]), 0, n);
  const x = ids(1, 9, 5);
  assert.equal(await maxDiff(loaded.model.forward(x), m.forward(x)), 0);
  loaded.model.dispose();
  m.dispose();

  for (const attention of [{ type: 'fox', tokenShift: true }, [{ type: 'full' }, { type: 'fpa', tokenShift: true }]]) {
    const c = parseModelConfig({ ...BASE, attention, positions: 'rope', qkNorm: true });
    assert.throws(() => hfArchitectureFor(c), (e: unknown) => e instanceof fon.UnsupportedError && /"(fox|fpa)" layers .*have no Hugging Face counterpart/.test((e as Error).message));
  }
  const r = spawnSync(process.execPath, [join(import.meta.dirname, '../../bin/fon.js'), 'export', '--model', dir, '--format', 'hf', '--out', join(dir, 'hf')], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /"fox" layers .*have no Hugging Face counterpart/);
  assert.ok(!existsSync(join(dir, 'hf', 'model.safetensors')), 'nothing written');
});

test('KvCache.truncate rewinds the token shift within its ring of RECENT_ROWS rows, and refuses farther with an ArgumentError', async () => {
  const cfg = config('fox');
  const m = model(cfg);
  const T = RECENT_ROWS + 6;
  const x = ids(1, T, 12);
  const host = (await x.data()) as Int32Array;
  const full = fon.noGrad(() => m.forward(x));
  const cache = new KvCache(cfg, 1, T + 2, cpu);
  const step = (a: number, e: number) => { const y = fon.noGrad(() => m.forward(fon.tensor(host.slice(a, e), [1, e - a], { backend: cpu, dtype: 'i32' }), { cache: cache.layers, pos: a })); cache.length = e; return y; };
  step(0, T);
  cache.truncate(T - 3); // the ring still holds position T − 4
  const again = [step(T - 3, T - 2), step(T - 2, T)];
  assert.ok(await maxDiff(fon.concat(again, 1), fon.narrow(full, 1, T - 3, 3)) < 2e-5, 'the rewound steps equal the prefill');
  assert.throws(() => cache.truncate(T - RECENT_ROWS - 2), (e: unknown) => e instanceof ArgumentError && new RegExp(`token shift: cannot truncate to ${T - RECENT_ROWS - 2} positions: the cache keeps the pre-shift rows of the last ${RECENT_ROWS} positions \\(${T - RECENT_ROWS} … ${T - 1}\\)`).test((e as Error).message));
  cache.dispose();
  m.dispose();
});
