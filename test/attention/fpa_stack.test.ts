/**
 * The shared-walk hard mode's explicit stack (test/attention/fpa_reference.ts FpaStack, the reference of the decode state's threshold-0 stack mode; specs/fpa_depth.md
 * §2.6 last lines, §2.3.4, §5 item 4): after every token its alive set equals the definition
 * A_i = {j ≤ i : ℓ_j ≤ φ_t ∀ t ∈ (j, i]} and the penalty-based alive set of the running minima
 * (FpaDecodeState with τ = 0: dead once λ·relu(ℓ − m) > 0), for shared walks with many ties and
 * for fields below the levels; the stack's levels never decrease; each key is popped at most once;
 * a token whose level is below its field is refused; and attention over the stack's keys is the FPA
 * op's output in the hard limit (λ large, integer walks, so every dead key is a whole step under).
 * Run: node --import tsx --test test/attention/fpa_stack.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { HostFpaDecodeState as FpaDecodeState, FpaStack } from './fpa_reference.ts';
import { fpaAttention } from '../../src/ops/fpa_attention.ts';
import { uniformStream } from '../../src/ops/random.ts';

const cpu = await fon.initBackend('cpu');

/** S walks of length T (slot-major): integer steps in {−1, 0, 1} (ties everywhere), or normal steps. */
function walks(S: number, T: number, seed: number, integer: boolean): Float32Array {
  const r = uniformStream(seed);
  const w = new Float32Array(S * T);
  for (let s = 0; s < S; s++) {
    let x = 0;
    for (let t = 0; t < T; t++) {
      x += integer ? Math.floor(r() * 3) - 1 : Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
      w[s * T + t] = x;
    }
  }
  return w;
}

/** The definition: j alive at i iff ℓ_j ≤ φ_t for every t ∈ (j, i]. */
function aliveByDefinition(phi: Float32Array, level: Float32Array, T: number, s: number, i: number): number[] {
  const out: number[] = [];
  for (let j = 0; j <= i; j++) {
    let ok = true;
    for (let t = j + 1; t <= i && ok; t++) ok = level[s * T + j] <= phi[s * T + t];
    if (ok) out.push(j);
  }
  return out;
}

/** Runs the stack and the running-minima state side by side over (φ, ℓ), checking after each token. */
function crossCheck(S: number, T: number, phi: Float32Array, level: Float32Array): { pops: number; maxAlive: number; minAlive: number } {
  const stack = new FpaStack(S, T);
  const minima = new FpaDecodeState(1, S, T, { recentreEvery: 0 });
  const ones = new Float32Array(S).fill(1);
  const col = (a: Float32Array, t: number) => Float32Array.from({ length: S }, (_, s) => a[s * T + t]);
  let pops = 0, maxAlive = 0, minAlive = T;
  for (let t = 0; t < T; t++) {
    pops += stack.step(col(phi, t), col(level, t));
    minima.observe(col(phi, t));
    minima.markDead(ones, 0);
    minima.append(col(level, t));
    for (let s = 0; s < S; s++) {
      const got = stack.alive(s);
      assert.deepEqual(got, aliveByDefinition(phi, level, T, s, t), `slot ${s} at ${t}: stack vs definition`);
      const byPenalty = Array.from({ length: minima.length }, (_, r) => minima.position[s * T + r]).filter((p) => p >= 0);
      assert.deepEqual(got, byPenalty, `slot ${s} at ${t}: stack vs the penalty-based alive set`);
      for (let k = 1; k < got.length; k++) assert.ok(stack.levels[s * T + k] >= stack.levels[s * T + k - 1], `slot ${s} at ${t}: levels decrease on the stack`);
      maxAlive = Math.max(maxAlive, got.length);
      minAlive = Math.min(minAlive, got.length);
    }
  }
  assert.ok(pops <= S * T, `${pops} pops for ${S * T} pushes`);
  // Everything pushed is alive or was popped exactly once.
  const alive = Array.from({ length: S }, (_, s) => stack.alive(s).length).reduce((a, b) => a + b, 0);
  assert.equal(pops + alive, S * T);
  return { pops, maxAlive, minAlive };
}

test('shared walk (φ = ℓ = W): the stack is the alive set, by definition and by penalty, with ties', () => {
  for (const [integer, seed] of [[true, 1], [true, 2], [false, 3]] as const) {
    const S = 4, T = 120;
    const w = walks(S, T, seed, integer);
    const r = crossCheck(S, T, w, w);
    assert.ok(r.pops > 20 && r.maxAlive > 3 && r.maxAlive < T, `walks that push and pop: ${JSON.stringify(r)}`);
  }
});

test('field below the levels (ℓ_t ≥ φ_t): the stack is still the alive set', () => {
  const S = 3, T = 100;
  const w = walks(S, T, 7, true);
  const r = uniformStream(8);
  const phi = w.map((x) => x - Math.floor(r() * 3)); // u − w ∈ {0, −1, −2}
  const res = crossCheck(S, T, phi, w);
  assert.ok(res.pops > 20, `pops ${res.pops}`);
});

test('a token whose level is below its field is an ArgumentError naming slot, position and values', () => {
  const st = new FpaStack(2, 4);
  st.step([0, 0], [0, 1]);
  assert.throws(() => st.step([0, 1.5], [0, 1]), (e: unknown) => e instanceof fon.ArgumentError && /slot 1 at position 1 has level 1 below its field 1\.5/.test((e as Error).message));
  assert.throws(() => new FpaStack(0, 4), fon.ArgumentError);
  const full = new FpaStack(1, 2);
  full.step([0], [0]);
  full.step([1], [1]);
  assert.throws(() => full.step([2], [2]), (e: unknown) => e instanceof fon.ArgumentError && /holds 2 alive keys, the capacity/.test((e as Error).message));
});

test('hard limit: softmax over the stack\'s keys equals the FPA op with λ large on an integer shared walk', async () => {
  const H = 2, T = 40, D = 8;
  const w = walks(H, T, 11, true);
  const q = fon.randn([1, H, T, D], { backend: cpu, seed: 1 }), k = fon.randn([1, H, T, D], { backend: cpu, seed: 2 }), v = fon.randn([1, H, T, D], { backend: cpu, seed: 3 });
  const W = fon.tensor(w, [1, H, T], { backend: cpu });
  const o = (await fpaAttention(q, k, v, W, W, fon.full([H], 1e4, { backend: cpu })).data()) as Float32Array;
  const [qh, kh, vh] = (await Promise.all([q.data(), k.data(), v.data()])) as Float32Array[];
  const stack = new FpaStack(H, T);
  let worst = 0, sparse = 0;
  for (let i = 0; i < T; i++) {
    stack.step(Float32Array.from({ length: H }, (_, h) => w[h * T + i]), Float32Array.from({ length: H }, (_, h) => w[h * T + i]));
    for (let h = 0; h < H; h++) {
      const keys = stack.alive(h);
      if (keys.length < i + 1) sparse++;
      const s = keys.map((j) => { let d = 0; for (let e = 0; e < D; e++) d += qh[(h * T + i) * D + e] * kh[(h * T + j) * D + e]; return d / Math.sqrt(D); });
      const mx = Math.max(...s), z = s.reduce((a, x) => a + Math.exp(x - mx), 0);
      for (let e = 0; e < D; e++) {
        const want = keys.reduce((a, j, n) => a + (Math.exp(s[n] - mx) / z) * vh[(h * T + j) * D + e], 0);
        worst = Math.max(worst, Math.abs(want - o[(h * T + i) * D + e]));
      }
    }
  }
  assert.ok(sparse > T / 2, `the stack dropped keys at ${sparse} of ${H * T} queries`);
  assert.ok(worst < 1e-5, `max |Δ| ${worst}`);
});
