/**
 * What the attention-layer tests share (fpa_eviction, fpa_shared_stack, fpa_evict_webgpu, fpa_truncate,
 * fox_fpa_layers, token_shift): overwriting a parameter in place, the worst difference of two
 * tensors, random q, k, v and x for one layer, and decoding a layer chunk by chunk through its cache.
 */
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import type { FpaAttention } from '../../src/attention/fpa/fpa.ts';
import type { KvCache } from '../../src/infer/kv_cache.ts';
import { FpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';

/** Overwrites parameter p in place (a 4-D view of its storage, as kvWrite takes it) with `values`. */
export function setParam(p: fon.Tensor, values: fon.Tensor): void {
  const v = fon.reshape(p, [1, 1, p.shape[0], p.size / p.shape[0]]);
  fon.noGrad(() => fon.kvWrite(v, fon.reshape(values, v.shape), 0));
}

/** Overwrites p with normal(0, std) values of `seed` (drawn on the host: the same on every backend). */
export const setNormal = (p: fon.Tensor, std: number, seed: number) => setParam(p, fon.randn(p.shape, { backend: p.backend, std, seed }));

/** The largest |a − b| over two tensors of the same size. */
export async function maxDiff(a: fon.Tensor, b: fon.Tensor): Promise<number> {
  const x = await a.data(), y = await b.data();
  assert.equal(x.length, y.length);
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
  return worst;
}

/** Random q, k, v (1, h, t, d) and x (1, t, c) on `backend`. */
export function layerInputs(backend: fon.Backend, t: number, seed: number, h: number, d: number, c: number) {
  const r = (shape: number[], s: number) => fon.randn(shape, { backend, seed: seed + s });
  return { q: r([1, h, t, d], 0), k: r([1, h, t, d], 1), v: r([1, h, t, d], 2), x: r([1, t, c], 3) };
}
export type LayerInputs = ReturnType<typeof layerInputs>;

/**
 * The layer's cached outputs for chunks [0, c0), [c0, c1), … (positions in `cuts`) → (1, H, T, D),
 * as generate drives a cache: after each chunk the cache's length is set and, unless `settle` is
 * false, the cache settled (commits, and compacts where FPA eviction says so); `each(end)` then.
 */
export async function decodeChunks(mech: FpaAttention, cache: KvCache, inp: LayerInputs, cuts: number[], each?: (end: number) => void | Promise<void>, opts: { settle?: boolean } = {}): Promise<fon.Tensor> {
  const outs: fon.Tensor[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) {
    const [a, b] = [cuts[i], cuts[i + 1]];
    const part = (t: fon.Tensor) => fon.narrow(t, 2, a, b - a);
    outs.push(fon.noGrad(() => mech.forwardCached(part(inp.q), part(inp.k), part(inp.v), { x: fon.narrow(inp.x, 1, a, b - a) }, cache.layers[0], a)));
    cache.length = b;
    if (opts.settle !== false) await cache.settle();
    await each?.(b);
  }
  return fon.concat(outs, 2);
}

/** Sets the FPA decode states' re-centring period in every layer of `cache` (0 = never). */
export function setRecentre(cache: KvCache, every: number): void {
  for (const l of cache.layers) {
    const st = l.side?.fpa;
    if (st instanceof FpaDecodeState) st.recentreEvery = every;
  }
}
