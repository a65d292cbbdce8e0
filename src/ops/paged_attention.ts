/**
 * Attention over a KV cache kept in pages (infer/page_pool.ts): page i of a layer holds the keys
 * and values of positions i·P … i·P + P − 1, k and v (B, Hkv, P, D) each, so that no tensor of the
 * cache passes a binding and a context grows page by page from a shared pool.
 *
 * kvWritePaged writes rows across page boundaries. attentionPaged gives what `attention` gives over
 * the positions 0 … kvLength − 1 laid end to end, computed as one kernel call per page and a merge
 * of the pages' partial results by their logsumexp (the flash-decoding combine, in ops):
 *
 *   out = Σ_i e^{lse_i − M} out_i / Σ_i e^{lse_i − M},   M = max_i lse_i,
 *
 * over the pages a query row sees at least one key of (a row that sees none of a page — a sliding
 * window past it — gets weight 0 there, whatever the kernel wrote). The call's query rows are cut
 * at page boundaries first, so each piece's own page starts at or before its first row: a row then
 * always sees its own key, earlier pages are wholly in its past (no causal mask: with a window, the
 * window alone), and no kernel is asked for a query position before its keys. Where the backend
 * has a one-pass form (Backend.attentionMulti: webgpu's flash-decoding, every page's chunks into
 * one combine) it takes the pages at once; elsewhere each page is an `attention` call and the
 * merge above runs in ops. One page holding every position is the plain `attention` call, bit for
 * bit. No autograd (cached steps only).
 */
import { ArgumentError, ShapeError } from '../errors.ts';
import type { Tensor } from '../tensor/tensor.ts';
import { attention, attentionMulti, attentionWithLse, kvWrite, type AttentionPart } from './attention.ts';
import { mergeByLse } from './attention_merge.ts';
import { concat, narrow, reshape } from './layout.ts';
import { fmt } from './run.ts';

/** Rows of a page must be a multiple of this: the decode kernels' key block (128 keys a step). */
export const PAGE_TILE = 128;

/** A layer's pages in order: k[i], v[i] (B, Hkv, P, D) hold positions i·P … i·P + P − 1. */
export interface KvPageList { readonly k: readonly Tensor[]; readonly v: readonly Tensor[]; readonly pageRows: number }

function checkPages(op: string, pages: KvPageList, rows: number): void {
  const { k, v, pageRows: p } = pages;
  if (k.length !== v.length || k.length === 0) throw new ArgumentError(`${op}: ${k.length} k pages and ${v.length} v pages: expected as many of each, at least one`);
  if (rows > k.length * p) throw new ArgumentError(`${op}: rows up to ${rows} need ${Math.ceil(rows / p)} pages of ${p} rows, the list has ${k.length}`);
  const s = k[0].shape;
  for (const t of [...k, ...v]) if (t.rank !== 4 || t.shape[0] !== s[0] || t.shape[1] !== s[1] || t.shape[2] !== p || t.shape[3] !== s[3]) throw new ShapeError(`${op}: page ${fmt(t.shape)}: expected (B, Hkv, ${p}, D) like the first, ${fmt(k[0].shape)}`);
}

/** x (B, Hkv, n, D) into the pages at rows pos … pos + n − 1, split where a page ends. */
export function kvWritePaged(pages: readonly Tensor[], pageRows: number, x: Tensor, pos: number): void {
  const n = x.shape[2];
  for (let r = 0; r < n;) {
    const page = Math.floor((pos + r) / pageRows), at = (pos + r) % pageRows, m = Math.min(n - r, pageRows - at);
    if (page >= pages.length) throw new ArgumentError(`kvWritePaged: row ${pos + r} needs page ${page}, the list has ${pages.length} pages of ${pageRows} rows`);
    kvWrite(pages[page], m === n ? x : narrow(x, 2, r, m), at);
    r += m;
  }
}

export interface PagedAttentionOptions { window?: number; scale?: number; kvLength: number }

/**
 * q (B, H, Tq, D) at positions kvLength − Tq … kvLength − 1 against the pages' positions
 * 0 … kvLength − 1, causal (and windowed with `window`) → (B, H, Tq, D). See the file comment.
 */
export function attentionPaged(q: Tensor, pages: KvPageList, opts: PagedAttentionOptions): Tensor {
  const { kvLength, window } = opts;
  const p = pages.pageRows, tq = q.shape[2];
  checkPages('attentionPaged', pages, kvLength);
  if (!Number.isInteger(kvLength) || kvLength < tq) throw new ArgumentError(`attentionPaged: kvLength ${kvLength}: expected an integer ≥ the ${tq} query rows`);
  const first = kvLength - tq;
  if (kvLength <= p) return attention(q, pages.k[0], pages.v[0], { causal: true, window, scale: opts.scale, kvLength });
  const pieces: Tensor[] = [];
  for (let r = 0; r < tq;) {
    const at = first + r, own = Math.floor(at / p), m = Math.min(tq - r, (own + 1) * p - at);
    pieces.push(piece(tq === m ? q : narrow(q, 2, r, m), pages, own, at, opts));
    r += m;
  }
  return pieces.length === 1 ? pieces[0] : concat(pieces, 2);
}

/** Rows at positions at … at + m − 1, all in page `own`: the own page causal, the pages before it merged in. */
function piece(q: Tensor, pages: KvPageList, own: number, at: number, opts: PagedAttentionOptions): Tensor {
  const p = pages.pageRows, m = q.shape[2], w = opts.window;
  const parts: AttentionPart[] = [{ k: pages.k[own], v: pages.v[own], opts: { causal: true, window: w, scale: opts.scale, kvLength: at + m - own * p } }];
  // Earlier pages: wholly before every row; the first row sees back to at − w + 1.
  const from = w === undefined ? 0 : Math.max(0, Math.floor((at - w + 1) / p));
  for (let i = from; i < own; i++) {
    // With a window, the kernel places the rows at their positions relative to the page (past its end).
    const o = w === undefined ? { causal: false, scale: opts.scale } : { causal: true, window: w, scale: opts.scale, qOffset: at - i * p };
    parts.push({ k: pages.k[i], v: pages.v[i], opts: { ...o, kvLength: p } });
  }
  if (parts.length === 1) return attention(q, parts[0].k, parts[0].v, parts[0].opts);
  return attentionMulti(q, parts) ?? mergeByLse(parts.map((r) => attentionWithLse(q, r.k, r.v, r.opts)), q.dtype);
}
