/**
 * Memory ownership (STYLE.md §10): tidy frees intermediates and keeps what it returns, disposed
 * tensors refuse use, graphs free what they saved (after backward, or when dropped without one),
 * and live handles return to their baseline after training-style work — for every op of the case
 * table, inside tidy or not.
 * Run: node --import tsx --test test/tensor/memory.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { DisposedError, UnsupportedError, type Tensor } from '../../src/index.ts';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import { CASES, buildInputs } from '../parity/cases.ts';

const backend = new CpuBackend();
fon.setBackend(backend);
const live = () => backend.memory().liveHandles;

test('tidy disposes intermediates and keeps the returned tensor', () => {
  const base = live();
  const x = fon.randn([4, 4], { seed: 1 });
  let inner: Tensor | null = null;
  const y = fon.tidy(() => {
    inner = fon.exp(x);
    return fon.sum(fon.mul(inner, 2));
  });
  assert.equal(inner!.disposed, true);
  assert.equal(y.disposed, false);
  assert.equal(x.disposed, false, 'tensors from outside the scope are not touched');
  assert.equal(live(), base + 2);
  y.dispose(); x.dispose();
  assert.equal(live(), base);
});

test('tidy keeps tensors nested in arrays and plain objects', () => {
  const base = live();
  const out = fon.tidy(() => {
    const a = fon.ones([2]);
    const b = fon.add(a, 1);
    const c = fon.mul(b, 2);
    const d = fon.neg(c);
    return { pair: [b, c] as const, nested: { deep: [d] }, n: 3 };
  });
  assert.deepEqual([out.pair[0].disposed, out.pair[1].disposed, out.nested.deep[0].disposed], [false, false, false]);
  assert.deepEqual(Array.from(out.nested.deep[0].dataSync()), [-4, -4]);
  assert.equal(live(), base + 3, 'the ones tensor was freed');
  for (const t of [...out.pair, ...out.nested.deep]) t.dispose();
  assert.equal(live(), base);
});

test('nested tidy: the inner result belongs to the outer scope; keep() survives both', () => {
  const base = live();
  let fromInner: Tensor | null = null, kept: Tensor | null = null;
  const r = fon.tidy(() => {
    fromInner = fon.tidy(() => fon.add(fon.ones([3]), 1));
    kept = fon.keep(fon.zeros([3]));
    return fon.mul(fromInner, 2);
  });
  assert.equal(fromInner!.disposed, true, 'moved to the outer scope and freed there');
  assert.equal(kept!.disposed, false);
  r.dispose(); kept!.dispose();
  assert.equal(live(), base);
});

test('tidy frees what it made when its function throws, and refuses async functions', () => {
  const base = live();
  const outside = fon.ones([2]);
  assert.throws(() => fon.tidy(() => { fon.add(fon.ones([2]), outside); throw new Error('boom'); }), /boom/);
  assert.equal(live(), base + 1, 'the scope freed its two tensors on the way out');
  assert.equal(outside.disposed, false);
  outside.dispose();
  assert.throws(() => fon.tidy(() => Promise.resolve(1)), /tidy: fn must be synchronous/);
  assert.equal(live(), base);
});

test('a disposed tensor refuses every use with DisposedError naming it', async () => {
  const x = fon.ones([2, 3]);
  x.dispose();
  x.dispose(); // idempotent
  const named = (e: unknown) => e instanceof DisposedError && new RegExp(`^tensor #${x.id} of shape \\[2,3\\] was disposed and cannot be used$`).test(e.message);
  assert.throws(() => fon.add(x, 1), named);
  assert.throws(() => x.dataSync(), named);
  assert.throws(() => x.dtype, named);
  await assert.rejects(x.data(), named);
  assert.equal(x.disposed, true);
  assert.match(String(x), /disposed/);
});

test('dataSync on a backend without synchronous reads is an UnsupportedError', () => {
  const b = new CpuBackend();
  (b as { readSync?: unknown }).readSync = undefined;
  const x = fon.ones([1], { backend: b });
  assert.throws(() => x.dataSync(), (e: unknown) => e instanceof UnsupportedError && /dataSync: backend 'cpu' reads asynchronously/.test(e.message));
});

test('leak check: forward + backward in tidy, then zeroGrad, returns live handles to the baseline', () => {
  const w = fon.randn([33, 7], { seed: 2, requiresGrad: true });
  const b = fon.zeros([7], { requiresGrad: true });
  const x = fon.randn([5, 33], { seed: 3 });
  const targets = fon.randint([5], 0, 7, { seed: 4 });
  const base = live();
  for (let step = 0; step < 3; step++) {
    fon.tidy(() => {
      const h = fon.layernorm(fon.linear(x, w, b, false), fon.ones([7]), fon.zeros([7]));
      const loss = fon.add(fon.crossEntropy(fon.gelu(h), targets), fon.mul(fon.sum(fon.square(w)), 1e-3));
      loss.backward();
    });
    assert.equal(live(), base + 2, 'only the two gradients stay');
    assert.ok(w.grad && b.grad);
    fon.zeroGrad([w, b]);
    assert.equal(live(), base);
  }
});

test('a graph dropped without backward frees its saved tensors', () => {
  const x = fon.randn([8], { seed: 5, requiresGrad: true });
  const base = live();
  const h = fon.sin(x);
  const y = fon.exp(h);
  assert.equal(live(), base + 2);
  h.dispose();
  assert.equal(live(), base + 2, "exp's node still holds h's storage");
  y.dispose();
  assert.equal(live(), base, 'dropping the last output freed the whole graph');
  assert.equal(x.disposed, false);
});

test('backward frees saved tensors at once; the outputs and the gradient stay', () => {
  const x = fon.randn([8], { seed: 6, requiresGrad: true });
  const base = live();
  const h = fon.sin(x);
  const e = fon.exp(h);
  const y = fon.sum(e);
  h.dispose();
  assert.equal(live(), base + 3, 'h is held by the graph');
  y.backward();
  assert.equal(live(), base + 3, 'h freed (−1), x.grad added (+1)');
  e.dispose(); y.dispose();
  assert.equal(live(), base + 1, 'only x.grad is left');
  x.dispose();
  assert.equal(x.grad, null, 'disposing a leaf disposes its gradient');
  assert.equal(live(), base - 1);
});

test('every op of the case table frees all it made, outside tidy, with and without gradients', () => {
  const problems: string[] = [];
  for (const withGrad of [false, true]) {
    for (const c of CASES) {
      if (withGrad && !c.grad.length) continue;
      const before = live();
      const xs = buildInputs(c, backend);
      for (const i of withGrad ? c.grad : []) xs[i].requiresGrad = true;
      const r = c.run(xs, backend);
      for (const o of Array.isArray(r) ? r : [r]) o.dispose();
      for (const x of xs) x.dispose();
      const leaked = live() - before;
      if (leaked) problems.push(`${c.name}${withGrad ? ' (requiresGrad)' : ''}: ${leaked} handle(s)`);
    }
  }
  assert.deepEqual(problems, []);
});

test('every differentiable case frees everything after backward in tidy and disposal', () => {
  const problems: string[] = [];
  for (const c of CASES.filter((k) => k.grad.length)) {
    const before = live();
    const xs = buildInputs(c, backend);
    for (const i of c.grad) xs[i].requiresGrad = true;
    fon.tidy(() => {
      const r = c.run(xs, backend);
      const outs = (Array.isArray(r) ? r : [r]) as Tensor[];
      const terms = outs.filter((o) => o.requiresGrad).map((o) => fon.sum(o));
      if (terms.length) fon.backward(terms.reduce((a, b) => fon.add(a, b)));
    });
    for (const x of xs) x.dispose();
    const leaked = live() - before;
    if (leaked) problems.push(`${c.name}: ${leaked} handle(s)`);
  }
  assert.deepEqual(problems, []);
});
