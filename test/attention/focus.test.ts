/**
 * Focus (attention/focus, specs/focus_spot.md Part A) on the CPU: Sinkhorn's invariants and its
 * values against a plain loop; the soft gates against a plain loop, and their gradients (W_g, C)
 * against central differences; the exact sparse prefill (sorted segments + cross-group band +
 * logsumexp merge) against the dense masked reference for every k of K = 4 and 5, GQA, a batch of
 * two and ragged block edges; k = K equals dense attention; the device form of the rule equals the
 * host form; causal assignments (a token's groups and output do not depend on later tokens); the
 * group lists against brute force, with truncation; a Focus model decoding token by token (and
 * after a truncate) equals its prefill logits; config errors.
 * Run: node --import tsx --test test/attention/focus.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { ConfigError, parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { KvCache } from '../../src/infer/kv_cache.ts';
import { hardFocusDense, hardFocusDenseOnDevice, hardMaskHost, softFocusAttention } from '../../src/attention/focus/dense.ts';
import { causalLogits, groupScores, membershipBits, membershipOneHot, sinkhorn } from '../../src/attention/focus/groups.ts';
import { focusSparseAttention, sortByGroup } from '../../src/attention/focus/sparse.ts';
import { FocusGroupLists } from '../../src/attention/focus/group_lists.ts';
import { FocusAttention, focusLayers, setFocusInference } from '../../src/attention/focus/index.ts';
import { keptPairs } from '../../src/attention/focus/focus.ts';
import { maxDiff } from './fixtures.ts';
import { checkDevicePlan } from './focus_device_plan.ts';
import { planFocusPrefillOnDevice } from '../../src/attention/focus/device_plan.ts';
import { focusDecodeOnDevice } from '../../src/attention/focus/device_decode.ts';

const cpu = await fon.initBackend('cpu');
const randn = (shape: number[], seed: number, std = 1) => fon.randn(shape, { backend: cpu, seed, std });
const host = async (t: fon.Tensor) => (await t.data()) as Float32Array;

/** Random membership words: every token in exactly k of K groups (group sizes uneven: group 0 favoured). */
function randomBits(n: number, groups: number, k: number, seed: number): Uint32Array {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const out = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    let w = 0;
    while (popcount(w) < k) w |= 1 << (rnd() < 0.3 ? 0 : Math.floor(rnd() * groups));
    out[i] = w >>> 0;
  }
  return out;
}
const popcount = (w: number) => { let n = 0; for (; w; w &= w - 1) n++; return n; };

test('Sinkhorn in the log domain: rows sum to 1, columns to T/K, equal to a plain loop; N = 0 is a softmax', async () => {
  const [b, t, k] = [2, 37, 4];
  const scores = randn([b, t, k], 3, 0.3);
  const s = await host(scores);
  for (const iters of [0, 3, 10]) {
    const { logG } = sinkhorn(scores, 0.1, iters);
    const g = (await host(logG)).map(Math.exp);
    // A plain loop: Q = exp(S/τ) normalised by columns, then rows, N times (a softmax when N = 0).
    for (let bb = 0; bb < b; bb++) {
      const q = Array.from({ length: t }, (_, i) => Array.from({ length: k }, (_, c) => Math.exp(s[(bb * t + i) * k + c] / 0.1 - 5)));
      for (let n = 0; n < Math.max(1, iters); n++) {
        if (iters > 0) for (let c = 0; c < k; c++) { const col = q.reduce((a, r) => a + r[c], 0); for (const r of q) r[c] /= col; }
        for (const r of q) { const row = r.reduce((a, x) => a + x, 0); for (let c = 0; c < k; c++) r[c] /= row; }
      }
      for (let i = 0; i < t; i++) for (let c = 0; c < k; c++) assert.ok(Math.abs(g[(bb * t + i) * k + c] - q[i][c]) < 1e-5, `N=${iters} (${bb}, ${i}, ${c}): ${g[(bb * t + i) * k + c]} vs ${q[i][c]}`);
      for (let i = 0; i < t; i++) assert.ok(Math.abs(q[i].reduce((a, x) => a + x, 0) - 1) < 1e-5);
      if (iters === 10) for (let c = 0; c < k; c++) assert.ok(Math.abs(q.reduce((a, r) => a + r[c], 0) - t / k) < 0.05 * t / k, `column ${c} holds about T/K`);
    }
  }
});

/** The soft gate on the host, one head, no GQA: the definition of dense.ts softFocusAttention written as loops. */
function softHost(q: Float32Array, k: Float32Array, v: Float32Array, g: Float32Array, t: number, d: number, kk: number, o: { window: number; gate: 'literal' | 'mask'; lambda: number; beta: number }): Float32Array {
  const out = new Float32Array(t * d);
  const sig = (x: number) => 1 / (1 + Math.exp(-x));
  for (let i = 0; i < t; i++) {
    const s: number[] = [];
    for (let j = 0; j <= i; j++) {
      let dot = 0, a = 0;
      for (let c = 0; c < d; c++) dot += q[i * d + c] * k[j * d + c];
      for (let c = 0; c < kk; c++) a += g[i * kk + c] * g[j * kk + c];
      dot /= Math.sqrt(d);
      const local = i - j <= o.window;
      s.push(local ? dot : o.gate === 'literal' ? dot * sig(o.lambda * a) : dot + Math.log(sig(o.lambda * (a - o.beta))));
    }
    const m = Math.max(...s);
    const e = s.map((x) => Math.exp(x - m)), z = e.reduce((x, y) => x + y, 0);
    for (let j = 0; j <= i; j++) for (let c = 0; c < d; c++) out[i * d + c] += (e[j] / z) * v[j * d + c];
  }
  return out;
}

for (const gate of ['literal', 'mask'] as const) {
  test(`soft gate "${gate}" equals a plain loop, and its gradient in W_g and C matches central differences`, async () => {
    const [t, d, c, kk, dg] = [11, 4, 6, 3, 2];
    const o = { window: 2, gate, lambda: 4, beta: 0.5 };
    const q = randn([1, 1, t, d], 1), k = randn([1, 1, t, d], 2), v = randn([1, 1, t, d], 3), x = randn([1, t, c], 4);
    const proj = randn([dg, c], 5, 0.5), cent = randn([kk, dg], 6, 0.7);
    proj.requiresGrad = true; cent.requiresGrad = true;
    const loss = () => {
      const g = fon.exp(sinkhorn(groupScores(x, proj, cent), 0.5, 3).logG);
      return { g, o: softFocusAttention(q, k, v, g, o) };
    };
    const { g, o: out } = loss();
    const want = softHost(await host(q), await host(k), await host(v), await host(g), t, d, kk, o);
    const got = await host(out);
    for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i] - want[i]) < 1e-5, `${i}: ${got[i]} vs ${want[i]}`);
    // Gradient of Σ out·w for a fixed random w.
    const w = randn([1, 1, t, d], 7);
    fon.backward(fon.sum(fon.mul(out, w)));
    for (const p of [proj, cent]) {
      const grad = await host(p.grad!);
      const base = await host(p);
      for (const at of [0, base.length - 1, Math.floor(base.length / 2)]) {
        const f = async (delta: number) => {
          const moved = Float32Array.from(base); moved[at] += delta;
          fon.noGrad(() => fon.kvWrite(fon.reshape(p, [1, 1, p.shape[0], p.shape[1]]), fon.reshape(fon.tensor(moved, p.shape, { backend: cpu }), [1, 1, p.shape[0], p.shape[1]]), 0));
          const r = fon.noGrad(() => fon.sum(fon.mul(loss().o, w)));
          return (await host(r))[0];
        };
        const h = 1e-2;
        const fd = ((await f(h)) - (await f(-h))) / (2 * h);
        await f(0);
        assert.ok(Math.abs(fd - grad[at]) < 2e-3 + 2e-2 * Math.abs(fd), `${gate} ${p === proj ? 'W_g' : 'C'}[${at}]: autograd ${grad[at]}, central difference ${fd}`);
      }
    }
  });
}

const CASES = [
  { name: 'K 4, T 300 (ragged blocks), w 40, GQA 4/2, batch 2', b: 2, h: 4, hkv: 2, t: 300, d: 8, groups: 4, window: 40 },
  { name: 'K 5, T 200, w 0, batch 1', b: 1, h: 2, hkv: 2, t: 200, d: 4, groups: 5, window: 0 },
];

for (const c of CASES) {
  test(`sparse prefill (sorted segments + band + merge) equals the dense masked reference for every k: ${c.name}`, async () => {
    const q = randn([c.b, c.h, c.t, c.d], 11), k = randn([c.b, c.hkv, c.t, c.d], 12), v = randn([c.b, c.hkv, c.t, c.d], 13);
    for (let topK = 1; topK <= c.groups; topK++) {
      const bits = randomBits(c.b * c.t, c.groups, topK, 100 + topK);
      const stats = { blocksA: 0, blocksB: 0, causalBlocks: 0 };
      const got = focusSparseAttention(q, k, v, bits, { groups: c.groups, topK, window: c.window }, stats);
      const want = hardFocusDense(q, k, v, bits, c.window);
      const err = await maxDiff(got, want);
      assert.ok(err <= 1e-5, `k=${topK}: max |Δ| ${err}`);
      assert.ok(stats.blocksA > 0 && stats.causalBlocks > 0 && (topK === c.groups ? stats.blocksA === stats.causalBlocks : stats.blocksB > 0), `k=${topK}: blocks ${JSON.stringify(stats)}`);
    }
    // k = K keeps every causal pair: plain causal attention.
    const all = new Uint32Array(c.b * c.t).fill(2 ** c.groups - 1);
    assert.ok(await maxDiff(focusSparseAttention(q, k, v, all, { groups: c.groups, topK: c.groups, window: c.window }), fon.attention(q, k, v)) <= 1e-5);
  });
}

test('the sort by group is stable, copies each token once per group, and refuses a word with another count of groups', () => {
  const one = sortByGroup(Uint32Array.from([0b10, 0b01, 0b10, 0b01, 0b01]), 1, 5, 2, 1);
  assert.deepEqual(Array.from(one.position), [1, 3, 4, 0, 2], 'group 0 in order, then group 1');
  assert.deepEqual(Array.from(one.start), [0, 3, 5]);
  const two = sortByGroup(Uint32Array.from([0b011, 0b110, 0b101]), 1, 3, 3, 2);
  assert.deepEqual(Array.from(two.position), [0, 2, 0, 1, 1, 2]);
  assert.deepEqual(Array.from(two.group), [0, 0, 1, 1, 2, 2]);
  assert.deepEqual(Array.from(two.copyRow), [0, 2, 3, 4, 1, 5], "each token's rows, its groups ascending");
  assert.throws(() => sortByGroup(Uint32Array.from([0b011, 0b001]), 1, 2, 2, 2), /token 1 of batch entry 0 is in 1 groups \(word 1\); expected 2/);
});

test('device form of the rule (one-hot on the device) equals the host form; membership bits take the top-k logits', async () => {
  const [b, h, t, d, kk] = [2, 2, 70, 4, 4];
  const logits = randn([b, t, kk], 21);
  const q = randn([b, h, t, d], 22), k = randn([b, h, t, d], 23), v = randn([b, h, t, d], 24);
  const lh = await host(logits);
  for (const topK of [1, 2, 3]) {
    const bits = membershipBits(lh, b * t, kk, topK);
    for (let r = 0; r < b * t; r++) {
      const order = [0, 1, 2, 3].sort((x, y) => lh[r * kk + y] - lh[r * kk + x] || x - y).slice(0, topK);
      assert.equal(bits[r], order.reduce((w, c) => w | (1 << c), 0), `row ${r}`);
    }
    const onDevice = hardFocusDenseOnDevice(q, k, v, membershipOneHot(logits, topK), 5);
    assert.ok(await maxDiff(onDevice, hardFocusDense(q, k, v, bits, 5)) <= 1e-6, `k=${topK}`);
  }
  // The mask keeps exactly: causal and (local or shared).
  const m = hardMaskHost(Uint32Array.from([1, 2, 1, 2]), 1, 4, 4, 1);
  assert.deepEqual(Array.from(m, (x) => (x === 0 ? 1 : 0)), [1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1]);
});

test('group lists: visible keys equal brute force; truncate cuts every list; appends must follow the length', () => {
  const [t, kk, k, w] = [90, 4, 2, 7];
  const bits = randomBits(t, kk, k, 5);
  const lists = new FocusGroupLists(1, 128, kk);
  lists.append(0, bits.subarray(0, 50));
  lists.append(50, bits.subarray(50, t));
  const brute = (p: number) => Array.from({ length: p + 1 }, (_, j) => j).filter((j) => p - j <= w || (bits[p] & bits[j]) !== 0);
  for (const p of [0, 3, 20, 89]) assert.deepEqual(Array.from(lists.visible(0, p, w)), brute(p), `p=${p}`);
  lists.truncate(30);
  assert.equal(lists.length, 30);
  for (let c = 0; c < kk; c++) assert.ok(Array.from(lists.group(0, c)).every((p) => p < 30 && (bits[p] & (1 << c))));
  assert.throws(() => lists.append(31, bits.subarray(0, 1)), /hold 30 positions; a step at 31 must follow them/);
  lists.append(30, bits.subarray(30, 60));
  assert.deepEqual(Array.from(lists.visible(0, 59, w)), brute(59));
});

const BASE = { vocabSize: 50, dModel: 16, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 200 };
const focusConfig = (over: Record<string, unknown> = {}) => parseModelConfig({ ...BASE, attention: [{ type: 'full' }, { type: 'focus', groups: 4, topK: 2, window: 12, ...over }] });

test('config: focus takes the spec\'s defaults, and refuses k outside [1, K], non-positive K or d_g, and unknown keys, naming them', () => {
  const c = parseModelConfig({ attention: 'focus' });
  assert.deepEqual(c.attention[0], { type: 'focus', groups: 8, topK: 2, groupDim: 16, window: 128, tau: 0.1, sinkhornIters: 10, gate: 'mask', lambda: 10, beta: 0.5 });
  const bad: [unknown, RegExp][] = [
    [{ type: 'focus', groups: 4, topK: 5 }, /'topK' = 5: expected k in \[1, K = 4\]/],
    [{ type: 'focus', topK: 0 }, /'topK' = 0: expected a positive integer/],
    [{ type: 'focus', groups: 0 }, /'groups' = 0: expected a positive integer/],
    [{ type: 'focus', groups: 33 }, /'groups' = 33: expected at most 32/],
    [{ type: 'focus', groupDim: -1 }, /'groupDim' = -1: expected a positive integer/],
    [{ type: 'focus', tau: 0 }, /'tau' = 0: expected a finite number > 0/],
    [{ type: 'focus', gate: 'soft' }, /'gate' = "soft": expected one of "literal", "mask"/],
    [{ type: 'focus', K: 4 }, /unknown key 'K' for attention type "focus"/],
  ];
  for (const [a, re] of bad) assert.throws(() => parseModelConfig({ attention: a }), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), JSON.stringify(a));
});

test('a Focus layer: parameters under the block, lognorm untrained; hard forward is causal (a prefix gives the same rows)', async () => {
  const cfg = focusConfig();
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 3 }));
  const names = m.namedParameters().map(([n]) => n).filter((n) => n.includes('focus'));
  assert.deepEqual(names, ['layers.1.attn.focus.centroids', 'layers.1.attn.focus.lognorm', 'layers.1.attn.focus.proj.weight']);
  const [[, f]] = focusLayers(m);
  assert.ok(f instanceof FocusAttention && f.lognorm.requiresGrad === false);
  const ids = fon.randint([1, 150], 0, 50, { backend: cpu, seed: 9 });
  const full = fon.noGrad(() => m.forward(ids));
  const prefix = fon.noGrad(() => m.forward(fon.narrow(ids, 1, 0, 100)));
  assert.ok(await maxDiff(fon.narrow(full, 1, 0, 100), prefix) <= 1e-5);
});

test('a Focus model decodes token by token (and after a truncate) to its prefill logits, for k = 1 and 2', async () => {
  for (const topK of [1, 2]) {
    const cfg = focusConfig({ topK });
    const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 4 }));
    const t = 60;
    const ids = fon.randint([2, t], 0, 50, { backend: cpu, seed: 10 });
    const want = fon.noGrad(() => m.forward(ids));
    const cache = new KvCache(cfg, 2, t, cpu);
    const steps: fon.Tensor[] = [fon.noGrad(() => m.forward(fon.narrow(ids, 1, 0, 20), { cache: cache.layers, pos: 0 }))];
    cache.length = 20;
    for (let p = 20; p < t; p += p < 40 ? 1 : 7) {
      const n = Math.min(p < 40 ? 1 : 7, t - p);
      steps.push(fon.noGrad(() => m.forward(fon.narrow(ids, 1, p, n), { cache: cache.layers, pos: p })));
      cache.length = p + n;
    }
    assert.ok(await maxDiff(fon.concat(steps, 1), want) <= 1e-4, `k=${topK}: step by step`);
    // Rewind 15 positions (rejected drafts) and decode them again.
    cache.truncate(t - 15);
    const again = fon.noGrad(() => m.forward(fon.narrow(ids, 1, t - 15, 15), { cache: cache.layers, pos: t - 15 }));
    assert.ok(await maxDiff(again, fon.narrow(want, 1, t - 15, 15)) <= 1e-4, `k=${topK}: after truncate`);
    cache.dispose();
  }
});

test('setFocusInference: k = K makes a Focus layer plain causal attention; a k outside [1, K] is refused naming the layer', async () => {
  const cfg = focusConfig();
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 5 }));
  const ref = new Decoder(parseModelConfig({ ...BASE, attention: [{ type: 'full' }, { type: 'full' }] }), new ParamFactory({ backend: cpu, seed: 5 }));
  const ids = fon.randint([1, 140], 0, 50, { backend: cpu, seed: 11 });
  setFocusInference(m, { topK: 4 });
  assert.ok(await maxDiff(fon.noGrad(() => m.forward(ids)), fon.noGrad(() => ref.forward(ids))) <= 1e-5);
  assert.throws(() => setFocusInference(m, { topK: 5 }), /focus top-k 5: layer 1 has K = 4 groups; expected k in \[1, 4\]/);
  // Hard k = 1 differs from dense once sequences pass the window.
  setFocusInference(m, { topK: 1 });
  assert.ok(await maxDiff(fon.noGrad(() => m.forward(ids)), fon.noGrad(() => ref.forward(ids))) > 1e-3);
});

test('training the centroids moves the running log-normalizers and lowers the loss with the rest frozen', async () => {
  const cfg = focusConfig();
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 6 }));
  const [[, f]] = focusLayers(m);
  const trainable = [f.proj.weight, f.centroids];
  for (const p of m.parameters()) if (!trainable.includes(p)) p.requiresGrad = false;
  const opt = new fon.AdamW(trainable, { lr: 3e-2 });
  const ids = fon.randint([2, 48], 0, 50, { backend: cpu, seed: 12 });
  const x = fon.narrow(ids, 1, 0, 47), y = fon.narrow(ids, 1, 1, 47);
  const before = Array.from(await host(f.lognorm));
  const losses: number[] = [];
  const frozen = await host(m.layers[0].attn.q.weight);
  for (let s = 0; s < 12; s++) {
    const loss = m.loss(x, y);
    losses.push((await host(loss))[0]);
    fon.backward(loss);
    opt.step();
    opt.zeroGrad();
  }
  assert.ok(losses[11] < losses[0], `loss ${losses[0]} → ${losses[11]}`);
  assert.notDeepEqual(Array.from(await host(f.lognorm)), before, 'the log-normalizers follow Sinkhorn\'s potentials');
  assert.deepEqual(Array.from(await host(m.layers[0].attn.q.weight)), Array.from(frozen), 'frozen weights unchanged');
  void causalLogits;
});

test('a training step whose Sinkhorn potentials are not finite leaves the log-normalizers as they were', async () => {
  const m = new Decoder(focusConfig(), new ParamFactory({ backend: cpu, seed: 6 }));
  const [[, f]] = focusLayers(m);
  const ids = fon.randint([1, 24], 0, 50, { backend: cpu, seed: 3 });
  m.loss(fon.narrow(ids, 1, 0, 23), fon.narrow(ids, 1, 1, 23)); // one finite step moves u off 0
  const before = Array.from(await host(f.lognorm));
  assert.ok(before.some((x) => x !== 0) && before.every(Number.isFinite));
  const c = Float32Array.from(await host(f.centroids));
  c[0] = NaN;
  fon.kvWrite(fon.reshape(f.centroids, [1, 1, c.length, 1]), fon.tensor(c, [1, 1, c.length, 1]), 0);
  const loss = m.loss(fon.narrow(ids, 1, 0, 23), fon.narrow(ids, 1, 1, 23));
  assert.ok(Number.isNaN((await host(loss))[0]), 'the step diverged');
  assert.deepEqual(Array.from(await host(f.lognorm)), before);
});

test('pairs kept: the host count from bit words equals brute force and the device count, for k = 1 … 3', async () => {
  const [b, t, kk, w] = [2, 75, 4, 9];
  for (const topK of [1, 2, 3]) {
    const bits = randomBits(b * t, kk, topK, 40 + topK);
    let brute = 0;
    for (let bb = 0; bb < b; bb++) for (let i = 0; i < t; i++) for (let j = 0; j <= i; j++) if (i - j <= w || (bits[bb * t + i] & bits[bb * t + j]) !== 0) brute++;
    assert.deepEqual(keptPairs(bits, b, t, w), [brute, (b * t * (t + 1)) / 2], `k=${topK}`);
  }
  // Through a layer: the device form's (forced by a backend without readSync) and the host form's pairs agree.
  const cfg = focusConfig({ topK: 2 });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 8 }));
  const [[, f]] = focusLayers(m);
  const ids = fon.randint([1, 90], 0, 50, { backend: cpu, seed: 13 });
  fon.noGrad(() => m.forward(ids));
  const host = Array.from(await f.stats.pairs!.data());
  f.resetStats();
  const readSync = cpu.readSync;
  (cpu as { readSync?: unknown }).readSync = undefined;
  try {
    fon.noGrad(() => m.forward(ids));
  } finally {
    (cpu as { readSync?: unknown }).readSync = readSync;
  }
  assert.deepEqual(Array.from(await f.stats.pairs!.data()), host);
  assert.ok(host[0] < host[1] && host[0] > 0);
});

test('the device form keeps the group lists in step: a truncate after device-form decoding (draft–revise) rewinds, and decoding again equals the prefill', async () => {
  const cfg = focusConfig({ topK: 2 });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 14 }));
  const ids = fon.randint([1, 40], 0, 50, { backend: cpu, seed: 15 });
  const want = fon.noGrad(() => m.forward(ids));
  const readSync = cpu.readSync;
  (cpu as { readSync?: unknown }).readSync = undefined;
  try {
    const cache = new KvCache(cfg, 1, 40, cpu);
    fon.noGrad(() => m.forward(fon.narrow(ids, 1, 0, 30), { cache: cache.layers, pos: 0 }));
    cache.length = 30;
    for (let p = 30; p < 35; p++) { fon.noGrad(() => m.forward(fon.narrow(ids, 1, p, 1), { cache: cache.layers, pos: p })); cache.length = p + 1; }
    cache.truncate(32);
    const again = fon.noGrad(() => m.forward(fon.narrow(ids, 1, 32, 8), { cache: cache.layers, pos: 32 }));
    assert.ok(await maxDiff(again, fon.narrow(want, 1, 32, 8)) <= 1e-4);
    cache.dispose();
  } finally {
    (cpu as { readSync?: unknown }).readSync = readSync;
  }
});

test('the device plan (sort, row lists and masks from the membership one-hot, generic ops only) equals the host plan for every k < K, batch 2, ragged blocks; its mask refuses a gradient', async () => {
  for (const topK of [1, 2, 3]) await checkDevicePlan(cpu, { batch: 2, t: 300, groups: 4, topK, window: 20, heads: 2, kvHeads: 1, d: 4 });
  await checkDevicePlan(cpu, { batch: 1, t: 130, groups: 32, topK: 2, window: 0, heads: 1, kvHeads: 1, d: 4 });
  // Large groups: query blocks inside one segment, with whole key blocks before them.
  await checkDevicePlan(cpu, { batch: 2, t: 1200, groups: 2, topK: 1, window: 70, heads: 1, kvHeads: 1, d: 4 });
  const member = fon.tensor(Float32Array.from({ length: 40 * 4 }, (_, e) => (e % 4 === Math.floor(e / 4) % 4 ? 1 : 0)), [1, 40, 4]);
  const plan = planFocusPrefillOnDevice(member, { groups: 4, topK: 1, window: 3 });
  const q = fon.randn([1, 1, 40, 4], { requiresGrad: true }), x = fon.randn([1, 1, 40, 4]);
  assert.throws(() => fon.attention(fon.narrow(fon.concat([q, q], 2), 2, 0, 40), x, x, { mask: plan.maskA }), /attention: this block mask was built for the forward only \(its by-key lists are empty\); run it under noGrad or build the mask on the host/);
  assert.throws(() => planFocusPrefillOnDevice(member, { groups: 4, topK: 4, window: 3 }), /focus: a device plan needs k in 1 … K − 1 and membership \(B, T, 4\); got k 4/);
});

test('a decoding step on the device (decode kernels with bit words: a part per query group, the band, the own key) equals the dense masked rule for every k < K, batch 2, GQA, stale cache rows past the step', async () => {
  const [b, h, hkv, tmax, d, groups] = [2, 4, 2, 150, 8, 4];
  for (const [topK, window, l] of [[1, 9, 131], [2, 0, 97], [3, 20, 150], [2, 40, 20]] as const) {
    const bits = randomBits(b * tmax, groups, topK, 60 + topK);
    const member = fon.tensor(Float32Array.from({ length: b * tmax * groups }, (_, e) => (bits[Math.floor(e / groups)] >>> (e % groups)) & 1), [b, tmax, groups]);
    const q = randn([b, h, 1, d], 71), k = randn([b, hkv, tmax, d], 72), v = randn([b, hkv, tmax, d], 73);
    const got = focusDecodeOnDevice(q, k, v, member, { topK, window, kvLength: l });
    // The reference: the rule over positions 0 … l − 1, query at l − 1 (its q in the last row).
    const kl = fon.narrow(k, 2, 0, l), vl = fon.narrow(v, 2, 0, l);
    const qFull = fon.concat([fon.zeros([b, h, l - 1, d]), q], 2);
    const wordsL = Uint32Array.from({ length: b * l }, (_, i) => bits[Math.floor(i / l) * tmax + (i % l)]);
    const want = fon.narrow(hardFocusDense(qFull, kl, vl, wordsL, window), 2, l - 1, 1);
    const err = await maxDiff(got, want);
    assert.ok(err <= 1e-5, `k=${topK}, w=${window}, L=${l}: max |Δ| ${err}`);
  }
});
