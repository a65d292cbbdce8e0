/**
 * CPU reference for attention (Backend.attention / attentionBackward / kvWrite): row by row over
 * (batch, head, query), scores of the visible keys into one scratch row, softmax in f32 with the
 * row maximum subtracted, then the weighted sum of values. The backward is the flash-attention
 * backward written row by row: P is recomputed from q, k and the saved logsumexp, and
 *   dv_j += P_j·dO,  dS_j = P_j·(dO·v_j − dO·O),  dq += scale·Σ dS_j·k_j,  dk_j += scale·dS_j·q,
 * with dk, dv summed over the query heads of a GQA group. Inputs are read as f32 once; scratch rows
 * are allocated once per call, so the inner loops are plain indexed arithmetic.
 */
import { MASK_K_BLOCK, MASK_Q_BLOCK, type AttentionArgs, type KvWriteArgs } from '../backend.ts';
import { f32, store, type CpuHandle, type CpuRef } from './host.ts';

/** Σ a[ao + c]·b[bo + c] over c < n, four independent partial sums (a dependency chain of one add per element otherwise). */
export function dot(a: Float32Array, ao: number, b: Float32Array, bo: number, n: number): number {
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0, c = 0;
  for (; c + 3 < n; c += 4) {
    s0 += a[ao + c] * b[bo + c];
    s1 += a[ao + c + 1] * b[bo + c + 1];
    s2 += a[ao + c + 2] * b[bo + c + 2];
    s3 += a[ao + c + 3] * b[bo + c + 3];
  }
  for (; c < n; c++) s0 += a[ao + c] * b[bo + c];
  return (s0 + s1) + (s2 + s3);
}

/** The visible key range [lo, hi) of the query at absolute position p. */
export function visibleKeys(p: number, a: AttentionArgs): [number, number] {
  const hi = a.causal ? Math.min(a.kvLength, p + 1) : a.kvLength;
  const lo = a.window > 0 ? Math.max(0, p - a.window + 1) : 0;
  return [lo, Math.max(lo, hi)];
}

/**
 * The end of a forward row, shared by the attention references (this file, fox_attention.ts,
 * fpa_attention.ts): softmax of the n scores s[0 … n) (key first + t at s[t]) with their maximum m
 * subtracted, out[qo …] = Σ P·v over those keys, and the row's logsumexp returned.
 */
export function finishRow(s: Float32Array, m: number, first: number, n: number, vv: Float32Array, kvBase: number, d: number, acc: Float32Array, out: Float32Array, qo: number): number {
  acc.fill(0);
  let l = 0;
  for (let t = 0; t < n; t++) {
    // A key a block mask drops (score −∞) adds nothing, not even 0·v (NaN where v is not finite);
    // every other key adds p·v, so NaN in a visited score or value still shows in the row.
    if (s[t] === -Infinity) continue;
    const p = Math.exp(s[t] - m);
    l += p;
    const vo = kvBase + (first + t) * d;
    for (let c = 0; c < d; c++) acc[c] += p * vv[vo + c];
  }
  for (let c = 0; c < d; c++) out[qo + c] = acc[c] / l;
  return m + Math.log(l);
}

/**
 * With a block mask: which key blocks query block ⌊i/MASK_Q_BLOCK⌋ of (b, h) keeps (1 or 0 per
 * key block), else null (every key block).
 */
export function keptKeyBlocks(mask: CpuRef | undefined, a: AttentionArgs, b: number, h: number, i: number): Uint8Array | null {
  if (!mask || !a.mask) return null;
  const m = a.mask, t = mask.h as Int32Array;
  const at = t[(b * m.heads + (m.heads === 1 ? 0 : h)) * m.qBlocks + Math.floor(i / MASK_Q_BLOCK)]; // the by-query index (block_mask.ts)
  const kept = new Uint8Array(m.kBlocks);
  for (let n = 0; n < t[at]; n++) kept[t[at + 1 + n] >> 1] = 1;
  return kept;
}

/**
 * With a block mask of segments or bit words (MaskArgs.segmentOffset, bitsOffset > 0): whether
 * query i (at position p) and key j of batch entry b lie in different segments or have words that
 * share a bit, so that the pair is dropped; else null.
 */
export function segmentsApart(mask: CpuRef | undefined, a: AttentionArgs, b: number): ((p: number, j: number) => boolean) | null {
  if (!mask || !a.mask || (a.mask.segmentOffset === 0 && a.mask.bitsOffset === 0)) return null;
  const t = mask.h as Int32Array, seg = a.mask.segmentOffset, bits = a.mask.bitsOffset;
  const at = seg + b * a.tk, bt = bits + b * a.tk;
  return (p, j) => (seg > 0 && t[at + p] !== t[at + j]) || (bits > 0 && (t[bt + p] & t[bt + j]) !== 0);
}

export function attention(q: CpuRef, k: CpuRef, v: CpuRef, a: AttentionArgs, mask?: CpuRef): [CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const out = new Float32Array(batch * heads * tq * d);
  const lse = new Float32Array(batch * heads * tq);
  const s = new Float32Array(Math.max(1, a.kvLength));
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const kvBase = (b * kvHeads + Math.floor(h / group)) * tk * d;
    const apart = segmentsApart(mask, a, b);
    // The mask's kept key blocks change once per query block.
    let kept: Uint8Array | null = null;
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const [lo, hi] = visibleKeys(a.qOffset + i, a);
      if (i % MASK_Q_BLOCK === 0) kept = keptKeyBlocks(mask, a, b, h, i);
      let m = -Infinity, visited = 0;
      for (let j = lo; j < hi; j++) {
        // A key the block mask drops (or another segment's) scores −∞ (weight exactly 0).
        const dropped = (kept !== null && !kept[Math.floor(j / a.mask!.kBlock)]) || (apart !== null && apart(a.qOffset + i, j));
        const x = dropped ? -Infinity : dot(qv, qo, kv, kvBase + j * d, d) * scale;
        if (!dropped) visited++;
        s[j - lo] = x;
        if (x > m) m = x;
      }
      // A row that sees no key (none in range, or the mask drops them all) is 0 with lse −∞; a row
      // of NaN scores keeps m = −∞ and comes out NaN, as the other backends give it.
      if (visited === 0) { lse[row] = -Infinity; continue; }
      lse[row] = finishRow(s, m, lo, hi - lo, vv, kvBase, d, acc, out, qo);
    }
  }
  return [store(out, q.dtype), lse];
}

export function attentionBackward(q: CpuRef, k: CpuRef, v: CpuRef, o: CpuRef, lse: CpuRef, dout: CpuRef, a: AttentionArgs, mask?: CpuRef): [CpuHandle, CpuHandle, CpuHandle] {
  const qv = f32(q), kv = f32(k), vv = f32(v), ov = f32(o), lv = f32(lse), gv = f32(dout);
  const { batch, heads, kvHeads, tq, tk, d, scale } = a;
  const group = heads / kvHeads;
  const dq = new Float32Array(qv.length), dk = new Float32Array(kv.length), dv = new Float32Array(vv.length);
  const acc = new Float32Array(d);
  for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
    const kvBase = (b * kvHeads + Math.floor(h / group)) * tk * d;
    const apart = segmentsApart(mask, a, b);
    // The mask's kept key blocks change once per query block.
    let kept: Uint8Array | null = null;
    for (let i = 0; i < tq; i++) {
      const row = (b * heads + h) * tq + i;
      const qo = row * d;
      const [lo, hi] = visibleKeys(a.qOffset + i, a);
      if (i % MASK_Q_BLOCK === 0) kept = keptKeyBlocks(mask, a, b, h, i);
      if (hi <= lo || lv[row] === -Infinity) continue;
      let delta = 0;
      for (let c = 0; c < d; c++) delta += gv[qo + c] * ov[qo + c];
      acc.fill(0);
      for (let j = lo; j < hi; j++) {
        if ((kept && !kept[Math.floor(j / a.mask!.kBlock)]) || (apart && apart(a.qOffset + i, j))) continue;
        const ko = kvBase + j * d;
        const p = Math.exp(dot(qv, qo, kv, ko, d) * scale - lv[row]);
        const dp = dot(gv, qo, vv, ko, d);
        const ds = p * (dp - delta) * scale;
        for (let c = 0; c < d; c++) {
          dv[ko + c] += p * gv[qo + c];
          dk[ko + c] += ds * qv[qo + c];
          acc[c] += ds * kv[ko + c];
        }
      }
      for (let c = 0; c < d; c++) dq[qo + c] = acc[c];
    }
  }
  return [store(dq, q.dtype), store(dk, k.dtype), store(dv, v.dtype)];
}

/** In place: the raw elements of x (any dtype, same as cache) copied into the cache rows. */
export function kvWrite(cache: CpuRef, x: CpuRef, { batch, kvHeads, tmax, n, d, pos }: KvWriteArgs): void {
  for (let bh = 0; bh < batch * kvHeads; bh++) {
    cache.h.set(x.h.subarray(bh * n * d, (bh + 1) * n * d) as never, (bh * tmax + pos) * d);
  }
}
