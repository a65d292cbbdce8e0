/**
 * The `cpu` backend: plain, readable TypeScript over typed arrays. It is the reference every
 * other backend is checked against, so clarity wins over speed here; `wasm` is the fast CPU path.
 */
import type { AnyHostArray, DType } from '../../tensor/dtype.ts';
import type { Backend, PrecisionSupport } from '../backend.ts';
import { adamw, sgd } from './optim.ts';
import { kvWrite } from './attention.ts';
import { attentionBackwardEntry, attentionEntry } from './attention_entry.ts';
import { depthMix, depthMixBackward } from './depth_mix.ts';
import { binary, cast, fill, unary, where } from './elementwise.ts';
import { crossEntropy, crossEntropyBackward, layernorm, layernormBackward, rmsnorm, rmsnormBackward, rope } from './fused.ts';
import type { CpuHandle } from './host.ts';
import { mergeLse } from './attention_merge.ts';
import { flagsMaskTable, gatherListed, indexBlockScores, selectBlockList, selectOpen } from './select.ts';
import { invertRows, lighthouseSelect } from './lighthouse.ts';
import { pyramidGather, pyramidScatter } from './pyramid_rows.ts';
import { dequantizeInt4, quantizeInt4 } from './int4.ts';
import { assignStrided, concat, copyStrided, embedding, embeddingBackward, gather, gatherRows, scatterAdd } from './layout.ts';
import { matmul } from './matmul.ts';
import { logsumexp, reduce, scan, softmax, softmaxBackward, sort } from './reduce.ts';

export class CpuBackend implements Backend<CpuHandle> {
  readonly name: string = 'cpu';

  /** Every precision (16-bit values are rounded on store and computed in f32); f32 is fastest, as no kernel here is faster in 16 bits. */
  precisions(): PrecisionSupport {
    return { offered: ['f32', 'bf16', 'f16'], fastest: 'f32' };
  }
  private live = new Set<CpuHandle>();

  /** Every handle a kernel returns passes through here, so `memory()` sees it. */
  protected track<T extends CpuHandle | null>(h: T): T {
    if (h !== null) this.live.add(h);
    return h;
  }

  upload(data: AnyHostArray, _dtype: DType): CpuHandle { return this.track(data.slice()); }
  async read(h: CpuHandle): Promise<AnyHostArray> { return h.slice(); }
  readSync(h: CpuHandle): AnyHostArray { return h.slice(); }
  free(h: CpuHandle): void { this.live.delete(h); }
  async sync(): Promise<void> {}
  memory() {
    let bytes = 0;
    for (const h of this.live) bytes += h.byteLength;
    return { liveBytes: bytes, liveHandles: this.live.size, pooledBytes: 0 };
  }
  destroy(): void { this.live.clear(); }

  unary: Backend<CpuHandle>['unary'] = (x, op) => this.track(unary(x, op));
  binary: Backend<CpuHandle>['binary'] = (a, b, op, s) => this.track(binary(a, b, op, s));
  where: Backend<CpuHandle>['where'] = (c, a, b, s) => this.track(where(c, a, b, s));
  reduce: Backend<CpuHandle>['reduce'] = (x, op, r, c) => this.track(reduce(x, op, r, c));
  matmul: Backend<CpuHandle>['matmul'] = (a, b, args) => this.track(matmul(a, b, args));
  matmulMany: Backend<CpuHandle>['matmulMany'] = (a, bs, { m, k, ns, outDTypes }) =>
    bs.map((b, i) => this.track(matmul(a, b, { batch: 1, m, n: ns[i], k, transA: false, transB: true, batchA: 1, batchB: 1, outDType: outDTypes[i] })));
  copyStrided: Backend<CpuHandle>['copyStrided'] = (x, args) => this.track(copyStrided(x, args));
  assignStrided: Backend<CpuHandle>['assignStrided'] = (b, s, args) => this.track(assignStrided(b, s, args));
  concat: Backend<CpuHandle>['concat'] = (xs, o, i) => this.track(concat(xs, o, i));
  gather: Backend<CpuHandle>['gather'] = (x, i, o, n, m, c) => this.track(gather(x, i, o, n, m, c));
  gatherRows: Backend<CpuHandle>['gatherRows'] = (x, r, o, n, m, c, share) => this.track(gatherRows(x, r, o, n, m, c, share));
  scatterAdd: Backend<CpuHandle>['scatterAdd'] = (b, i, s, o, n, m, c) => this.track(scatterAdd(b, i, s, o, n, m, c));
  embedding: Backend<CpuHandle>['embedding'] = (t, ids, v, c) => this.track(embedding(t, ids, v, c));
  embeddingBackward: Backend<CpuHandle>['embeddingBackward'] = (g, ids, v, c) => this.track(embeddingBackward(g, ids, v, c));
  softmax: Backend<CpuHandle>['softmax'] = (x, r, c) => this.track(softmax(x, r, c));
  softmaxBackward: Backend<CpuHandle>['softmaxBackward'] = (y, g, r, c) => this.track(softmaxBackward(y, g, r, c));
  logsumexp: Backend<CpuHandle>['logsumexp'] = (x, r, c) => this.track(logsumexp(x, r, c));
  rmsnorm: Backend<CpuHandle>['rmsnorm'] = (x, w, a) => this.trackAll(rmsnorm(x, w, a));
  rmsnormBackward: Backend<CpuHandle>['rmsnormBackward'] = (x, w, s, g, a) => this.trackAll(rmsnormBackward(x, w, s, g, a));
  layernorm: Backend<CpuHandle>['layernorm'] = (x, w, b, a) => this.trackAll(layernorm(x, w, b, a));
  layernormBackward: Backend<CpuHandle>['layernormBackward'] = (x, w, m, s, g, a) => this.trackAll(layernormBackward(x, w, m, s, g, a));
  rope: Backend<CpuHandle>['rope'] = (x, c, s, o, t, i, d, il, inv) => this.track(rope(x, c, s, o, t, i, d, il, inv));
  crossEntropy: Backend<CpuHandle>['crossEntropy'] = (l, t, n, v, ig) => this.trackAll(crossEntropy(l, t, n, v, ig));
  crossEntropyBackward: Backend<CpuHandle>['crossEntropyBackward'] = (l, t, s, g, n, v, ig) => this.track(crossEntropyBackward(l, t, s, g, n, v, ig));
  scan: Backend<CpuHandle>['scan'] = (x, op, r, c) => this.trackAll(scan(x, op, r, c));
  sort: Backend<CpuHandle>['sort'] = (x, r, c, d) => this.trackAll(sort(x, r, c, d));
  selectOpen: Backend<CpuHandle>['selectOpen'] = (s, m, a) => this.track(selectOpen(s, m, a));
  flagsMaskTable: Backend<CpuHandle>['flagsMaskTable'] = (f, a) => this.track(flagsMaskTable(f, a));
  selectBlockList: Backend<CpuHandle>['selectBlockList'] = (s, m, a, l) => this.trackAll(selectBlockList(s, m, a, l));
  gatherListed: Backend<CpuHandle>['gatherListed'] = (t, k, v, a) => this.trackAll(gatherListed(t, k, v, a));
  indexBlockScores: Backend<CpuHandle>['indexBlockScores'] = (q, w, k, a, s) => this.trackAll(indexBlockScores(q, w, k, a, s));
  lighthouseSelect: Backend<CpuHandle>['lighthouseSelect'] = (q, k, a) => this.track(lighthouseSelect(q, k, a));
  invertRows: Backend<CpuHandle>['invertRows'] = (r, a) => this.track(invertRows(r, a));
  pyramidGather: Backend<CpuHandle>['pyramidGather'] = (x, r, a) => this.track(pyramidGather(x, r, a));
  pyramidScatter: Backend<CpuHandle>['pyramidScatter'] = (y, inv, a) => this.track(pyramidScatter(y, inv, a));
  quantizeInt4: Backend<CpuHandle>['quantizeInt4'] = (x, r, d) => this.trackAll(quantizeInt4(x, r, d));
  dequantizeInt4: Backend<CpuHandle>['dequantizeInt4'] = (c, s, r, d, t) => this.track(dequantizeInt4(c, s, r, d, t));
  cast: Backend<CpuHandle>['cast'] = (x, to) => this.track(cast(x, to));
  fill: Backend<CpuHandle>['fill'] = (n, v, d) => this.track(fill(n, v, d));
  attention: Backend<CpuHandle>['attention'] = (q, k, v, a, x) => this.trackAll(attentionEntry(q, k, v, a, x));
  mergeLse: Backend<CpuHandle>['mergeLse'] = (a, b, args) => this.trackAll(mergeLse(a, b, args));
  attentionBackward: Backend<CpuHandle>['attentionBackward'] = (q, k, v, o, l, g, a, x) => this.trackAll(attentionBackwardEntry(q, k, v, o, l, g, a, x));
  depthMix: Backend<CpuHandle>['depthMix'] = (q, ks, vs, a) => this.trackAll(depthMix(q, ks, vs, a));
  depthMixBackward: Backend<CpuHandle>['depthMixBackward'] = (q, ks, vs, al, g, a) => {
    const [dq, dks, dvs] = depthMixBackward(q, ks, vs, al, g, a);
    this.trackAll([dq, ...dks, ...dvs]);
    return [dq, dks, dvs];
  };
  kvWrite: Backend<CpuHandle>['kvWrite'] = (c, x, a) => kvWrite(c, x, a);
  kvWriteMany: Backend<CpuHandle>['kvWriteMany'] = (writes) => { for (const w of writes) kvWrite(w.cache, w.x, w.args); };
  adamw: Backend<CpuHandle>['adamw'] = (p, g, m, v, a) => adamw(p, g, m, v, a);
  sgd: Backend<CpuHandle>['sgd'] = (p, g, b, a) => sgd(p, g, b, a);

  private trackAll<T extends (CpuHandle | null)[]>(hs: T): T {
    for (const h of hs) this.track(h);
    return hs;
  }
}

