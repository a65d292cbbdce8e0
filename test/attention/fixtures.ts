/**
 * What the attention-layer tests share (fpa_eviction, fpa_shared_stack, fpa_evict_webgpu, fpa_truncate,
 * fpa_device_formulation, fox_fpa_layers, token_shift): overwriting a parameter in place, the worst
 * difference of two tensors, random q, k, v and x for one layer, decoding a layer chunk by chunk
 * through its cache, and the one-layer FPA model of the decode-state tests (its config, a layer with
 * set weights, one cached call, the kept rows).
 */
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { modelDims, parseModelConfig } from '../../src/model/config.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { FpaAttention, type FpaSpec } from '../../src/attention/fpa/fpa.ts';
import type { KvCache } from '../../src/infer/kv_cache.ts';
import { FpaDecodeState, peekFpaDecodeState } from '../../src/attention/fpa/fpa_decode.ts';

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

/** The one-layer model of the FPA decode-state tests (fpa_device_formulation, fpa_truncate, fpa_evict_webgpu): FPA_H heads of FPA_D, width FPA_C. */
export const FPA_BASE = { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 32, contextLength: 40 };
/** FPA_BASE's heads, head size and model width (H, D, C). */
export const FPA_H = 2, FPA_D = 8, FPA_C = 16;

/** a, a + 1, …, b − 1. */
export const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

/**
 * One FPA layer of FPA_BASE with `attention` on `backend`: a wandering walk and, unless the spec is
 * shared, non-zero field and level offsets (normal weights drawn from `seed`: the same on every backend).
 */
export function fpaLayer(backend: fon.Backend, attention: Record<string, unknown>, seed = 3) {
  const cfg = parseModelConfig({ ...FPA_BASE, attention });
  const spec = cfg.attention[0] as FpaSpec;
  const mech = new FpaAttention(spec, { f: new ParamFactory({ backend, seed }), name: 'l0.attn', dims: modelDims(cfg) });
  setNormal(mech.walkProj.weight, 0.4, seed + 1);
  if (!spec.shared) {
    setNormal(mech.fieldProj.weight, 0.5, seed + 2);
    setNormal(mech.levelProj.weight, 0.5, seed + 3);
  }
  return { cfg, spec, mech };
}

/** One cached call of layer 0: positions [pos, pos + n) with the rows of `inp` at `from` …; sets the cache's length, returns the output read back. */
export async function fpaCall(mech: FpaAttention, cache: KvCache, inp: LayerInputs, pos: number, n: number, from = pos): Promise<Float32Array> {
  const part = (t: fon.Tensor) => fon.narrow(t, 2, from, n);
  const o = fon.noGrad(() => mech.forwardCached(part(inp.q), part(inp.k), part(inp.v), { x: fon.narrow(inp.x, 1, from, n) }, cache.layers[0], pos));
  cache.length = pos + n;
  const out = (await o.data()) as Float32Array;
  o.dispose();
  return out;
}

/** What keptRows reads of an FPA decode state. */
export interface FpaRows { position: Int32Array; rows: number; length: number }

/** Kept positions per head (FPA_H heads), in row order, of a decode state or of layer 0's in `cache` (rows past a head's survivors are padding, −1). */
export function keptRows(of: KvCache | FpaRows): number[][] {
  const st = 'layers' in of ? peekFpaDecodeState(of.layers[0])! : of;
  return range(0, FPA_H).map((h) => range(0, st.length).map((r) => st.position[h * st.rows + r]).filter((p) => p >= 0));
}
