/**
 * The Backend contract (STYLE.md §5): memory (alloc from host, read back, free, sync) plus one
 * method per primitive kernel. Kernels see contiguous row-major data only; the op layer in
 * src/ops/ checks shapes and dtypes, moves the working axis last, and records gradients, so a
 * backend never branches on autograd and a model never branches on the backend.
 *
 * `Kernels` is the op table's backend half: a backend that misses one is a compile error.
 * A backend that lacks a kernel for a dtype throws UnsupportedError naming the op and the backend.
 */
import type { Precision } from '../tensor/autocast.ts';
import type { AnyHostArray, DType, FloatDType } from '../tensor/dtype.ts';
import type { LighthouseShape } from './lighthouse_layout.ts';

/** A kernel's view of a tensor: the backend's own handle plus what the op layer knows of it. */
export interface Ref<H> {
  readonly h: H;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** One part of Backend.mergeLse: out (O, N, D) of any float dtype and lse (O, N) f32, its rows picked by rows (O / share, M) i32 or, where rows is null, N = M. */
export interface MergePart<H> { out: Ref<H>; lse: Ref<H>; rows: Ref<H> | null; n: number }

/** Backend.mergeLse's shape: O outer entries (batch·heads), M rows each of D columns, one row list per `share` outer entries; the out dtype. */
export interface MergeArgs { o: number; m: number; d: number; share: number; dtype: DType }

/**
 * Backend.selectOpen's shape: R rows of N entries (scores and masses f32). In each row the entries
 * below `low` and those in [high, valid) are reserved (always kept), those from `valid` on never;
 * the open ones [low, high) are ranked by score, highest first, ties by the lower index, and the
 * leading `count` of them kept where p = 0 (static top-K), or where p > 0 the leading
 * max(n_p, count) (dual top-p with a floor), n_p the fewest leading open entries whose masses reach
 * p of the open mass (at least 1); never more than there are. With `logMass` the masses are given as
 * logarithms (any common offset: they are exponentiated against the open entries' largest).
 */
export interface SelectArgs { rows: number; n: number; valid: number; low: number; high: number; count: number; p: number; logMass?: boolean }

/**
 * Backend.indexBlockScores' shape: rows = batch·n queries (query i of batch entry b at position
 * pos + i), H index heads of width d, keys (batch, tmax, d) of which the first l of each batch entry
 * are read, `block` tokens a block, `scale` on the dots.
 */
/**
 * Backend.flagsMaskTable's shape: batch rows of `valid` fine-block flags (`fine` keys each), `per`
 * fine blocks to a mask block of the table (MASK_K_BLOCK keys), a cache of tk keys (kBlocks mask
 * blocks), one query row per batch entry at position kvLength − 1, whose mask block is listed last.
 */
export interface FlagsMaskArgs {
  batch: number; valid: number; fine: number; per: number; tk: number; kBlocks: number; kvLength: number;
  /** Whether the table carries the segment ids after its lists (default true; a decode of a fine mask reads none). */
  segments?: boolean;
}

/**
 * Backend.selectBlockList's table: the selected entries are fine blocks of `fine` keys of a cache of
 * tk keys (kBlocks fine blocks), one query row per batch entry at position kvLength − 1. `flags`
 * false: the flags need not be written (the first handle returned is then the backend's to fill or
 * not, and the caller frees it unread; a decoding step that reads only the table skips their writes).
 */
export interface BlockListArgs { fine: number; tk: number; kBlocks: number; kvLength: number; flags?: boolean }

/**
 * Backend.gatherListed's shape: `count` listed blocks of `fine` keys gathered for each batch entry over
 * a cache (batch, hkv, tmax, d).
 */
export interface GatherListArgs { batch: number; fine: number; count: number; hkv: number; tmax: number; d: number }

/**
 * Backend.lighthouseSelect's shape (specs/lighthouse_fon.md §1.4–§1.5; the arithmetic of
 * LighthouseShape is backend/lighthouse_layout.ts): `lists` = B·H query lists of n tokens of width
 * d, key list ⌊s/group⌋ for query list s (GQA: group = H/Hkv), `qk` of each tile's `tile` refined
 * entries chosen by the query scores.
 */
export interface LighthouseSelectArgs extends LighthouseShape { lists: number; group: number; d: number; qk: number }

/** Backend.invertRows' shape: `lists` lists of m rows, each row in [0, n) and distinct within its list. */
export interface InvertRowsArgs { lists: number; m: number; n: number }

/**
 * One level of a pyramid over n tokens (Backend.pyramidGather / pyramidScatter): rows offset …
 * offset + count − 1 of the concatenated pyramid are its entries, entry j standing for the tokens
 * [j·span + shift, (j + 1)·span + shift) ∩ [0, n), weighted by `scale`.
 */
export interface PyramidLevel { offset: number; count: number; span: number; shift: number; scale: number }

/**
 * Backend.pyramidGather's and pyramidScatter's shape: `lists` lists of n tokens of width d, m
 * pyramid rows listed per list (rows (lists, m) i32, each in [0, total)), the levels in order of
 * offset, tiling the `total` rows of the concatenated pyramid.
 */
export interface PyramidRowsArgs { lists: number; n: number; d: number; m: number; total: number; levels: readonly PyramidLevel[] }

export interface IndexScoreArgs { batch: number; n: number; heads: number; d: number; l: number; tmax: number; pos: number; block: number; scale: number }

export type UnaryOp =
  | 'neg' | 'abs' | 'exp' | 'log' | 'sqrt' | 'rsqrt' | 'tanh' | 'sigmoid' | 'silu' | 'gelu'
  | 'relu' | 'softplus' | 'square' | 'reciprocal' | 'sign' | 'sin' | 'cos';
export const UNARY_OPS: readonly UnaryOp[] = [
  'neg', 'abs', 'exp', 'log', 'sqrt', 'rsqrt', 'tanh', 'sigmoid', 'silu', 'gelu',
  'relu', 'softplus', 'square', 'reciprocal', 'sign', 'sin', 'cos',
];

/** Elementwise binary ops with NumPy broadcasting. Comparisons give 1 or 0 in the input dtype. */
export type BinaryOp = 'add' | 'sub' | 'mul' | 'div' | 'pow' | 'max' | 'min' | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge';
export const BINARY_OPS: readonly BinaryOp[] = ['add', 'sub', 'mul', 'div', 'pow', 'max', 'min', 'eq', 'ne', 'lt', 'le', 'gt', 'ge'];

export type ReduceOp = 'sum' | 'max' | 'min';
export type ScanOp = 'sum' | 'max' | 'min';

/** Batched GEMM: C[b] = op(A[b]) · op(B[b]); A is (batchA, M, K) or (batchA, K, M) when transA. */
export interface MatmulArgs {
  batch: number;
  m: number; n: number; k: number;
  transA: boolean; transB: boolean;
  /** Broadcast of a single matrix over the batch: batchA/batchB is 1 or `batch`. */
  batchA: number; batchB: number;
  /** Output dtype (the op layer uses the inputs' dtype; accumulation is f32 regardless). */
  outDType: FloatDType;
}

/**
 * Backend.matmulMany's shape: m rows of k values against weights of n_i rows of k (as a Linear
 * stores them), each product in its own dtype.
 */
export interface MatmulManyArgs { m: number; k: number; ns: readonly number[]; outDTypes: readonly FloatDType[] }

/** Strided read: out[idx] = x[offset + Σ idx[d]·strides[d]]; strides may be 0 or negative. */
export interface StridedArgs { outShape: readonly number[]; strides: readonly number[]; offset: number }

export interface NormArgs { rows: number; cols: number; eps: number }

export interface AdamWArgs {
  lr: number; beta1: number; beta2: number; eps: number; weightDecay: number;
  /** 1 − β^t for the current step t, precomputed on the host. */
  bias1: number; bias2: number;
  /** Multiplies the gradient first (clipping by global norm lands here). */
  gradScale: number;
}

export interface SGDArgs { lr: number; momentum: number; weightDecay: number; nesterov: boolean; gradScale: number }

/**
 * Attention over q (batch, heads, tq, d) and k, v (batch, kvHeads, tk, d), contiguous; query head
 * h reads kv head ⌊h / (heads/kvHeads)⌋ (GQA). Query i sits at absolute position qOffset + i; key
 * j is visible to the query at position p iff j < kvLength, j ≤ p when causal, and j > p − window
 * when window > 0 (0: unlimited).
 */
export interface AttentionArgs {
  batch: number; heads: number; kvHeads: number;
  tq: number; tk: number; d: number;
  kvLength: number; qOffset: number;
  causal: boolean; window: number; scale: number;
  /**
   * With a block mask (attention/block_mask.ts; its i32 table travels as the kernel's `mask` ref):
   * key j is visible to query i only if, besides the rule above, the mask keeps key block
   * ⌊j/MASK_K_BLOCK⌋ for query block ⌊i/MASK_Q_BLOCK⌋ of that query head (h modulo a shared
   * mask's one head).
   */
  mask?: MaskArgs;
}

/**
 * The shape of a block mask's table (attention/block_mask.ts); segmentOffset > 0 where its
 * segment ids (b·tk + position) start in the table, 0 without segments; bitsOffset > 0 where its
 * per-position bit words start (b·tk + position: a pair is visible only where the query's and the
 * key's words share no bit), 0 without.
 */
/**
 * A block mask's shape as the kernels read its table (attention/block_mask.ts). `kBlock`: keys a
 * listed block covers, MASK_K_BLOCK, or MASK_K_FINE for a mask only decode kernels take (one or a
 * few query rows: SpotAttention lists its 16-token blocks so).
 */
export interface MaskArgs {
  heads: number; qBlocks: number; kBlocks: number; kBlock: number; byKeyOffset: number; segmentOffset: number; bitsOffset: number;
  /** Where each row (b·heads + h) of query block 0 keeps its count in the table, where known (block_mask.ts countPlaces). */
  countAt?: readonly number[];
  /** Those counts themselves where the host knows them (BlockMask.counts): no copy from the table. */
  counts?: readonly number[];
}

/** The most rows (batch · heads) whose counts MaskArgs.countAt places: a decode takes them as uniforms. */
export const MASK_COUNT_ROWS = 64;

/** Query rows and keys a block of a block mask covers: part of the contract, as every kernel that reads masks tiles by them. */
export const MASK_Q_BLOCK = 128;
export const MASK_K_BLOCK = 64;
/** Keys a listed block covers in a fine mask (decode only). */
export const MASK_K_FINE = 16;

/**
 * Causal attention with a per-pair additive term (FoX: a forget-gate bias; FPA: a first-passage
 * penalty), over q (batch, heads, tq, d) and k, v (batch, kvHeads, tk, d), contiguous, GQA as in
 * AttentionArgs. Always causal, no window: query i sits at absolute position qOffset + i
 * (qOffset = kvLength − tq) and sees keys j ≤ that position (all of them < kvLength).
 */
export interface FoxAttentionArgs {
  batch: number; heads: number; kvHeads: number;
  tq: number; tk: number; d: number;
  kvLength: number; qOffset: number;
  scale: number;
}

/** FPA has FoX's geometry; its penalty inputs (phi, level per kv head; lambda per kv head) are tensors. */
export type FpaAttentionArgs = FoxAttentionArgs;

/**
 * A mechanism's score modifier (DESIGN.md: mechanisms extend the attention kernels, they do not
 * fork them), with its side inputs; both are causal, without a window:
 * - FoX (specs/fpa_depth.md §1): scores gain c[p_i] − c[j], c (batch, heads, tk) f32 the cumulative
 *   log forget gate per query head;
 * - FPA (§2.2, per-kv-head variant): scores lose pen_ij = lambda[g]·relu(level[j] − min φ over
 *   (j, p_i]) (0 on the diagonal), phi and level (batch, kvHeads, tk) f32, lambda (kvHeads) f32 > 0.
 */
export type ScoreModifier<H> =
  | { kind: 'fox'; c: Ref<H> }
  | { kind: 'fpa'; phi: Ref<H>; level: Ref<H>; lambda: Ref<H> };

/** What an attention call may add to q, k and v: a score modifier and a block mask's table (i32). */
export interface AttentionExtras<H> { modifier?: ScoreModifier<H>; mask?: Ref<H> }

/**
 * Depth-Attention mixing (specs/fpa_depth.md §3.1) of m candidate layers at the same token: q
 * (batch, heads, t, d) and keys[i], values[i] (batch, kvHeads, t, d) for i < m, all contiguous and
 * of one dtype. Per (b, kv head g, token): q̄ = mean of the heads/kvHeads query heads of group g,
 * α = softmax_i(scale·q̄·keys[i]) in f32, out = Σ_i α_i·values[i]. The candidates travel as arrays
 * of refs (one per layer, in the caller's order) so that no kernel needs them stacked in memory.
 */
export interface DepthMixArgs { batch: number; heads: number; kvHeads: number; t: number; d: number; m: number; scale: number }

/** kvWrite: x (batch, kvHeads, n, d) written into cache (batch, kvHeads, tmax, d) at rows [pos, pos + n). */
export interface KvWriteArgs { batch: number; kvHeads: number; tmax: number; n: number; d: number; pos: number }

/** One write of Backend.kvWriteMany. */
export interface KvWriteOne<H> { cache: Ref<H>; x: Ref<H>; args: KvWriteArgs }

export interface Kernels<H> {
  unary(x: Ref<H>, op: UnaryOp): H;
  binary(a: Ref<H>, b: Ref<H>, op: BinaryOp, outShape: readonly number[]): H;
  /** where(cond ≠ 0, a, b) with broadcasting of all three to outShape; dtype of a. */
  where(cond: Ref<H>, a: Ref<H>, b: Ref<H>, outShape: readonly number[]): H;
  /** Reduces the last axis of x viewed as (rows, cols) → (rows). f32 accumulation. */
  reduce(x: Ref<H>, op: ReduceOp, rows: number, cols: number): H;
  matmul(a: Ref<H>, b: Ref<H>, args: MatmulArgs): H;
  /**
   * Several projections of the same rows: a (m, k) against weights bs[i] (n_i, k) of one dtype →
   * a·bs[i]ᵀ (m, n_i) in outDTypes[i] each, f32 accumulation (a decoding step's projections of one
   * input: one dispatch on webgpu where it can, matmul_rows.wgsl MANY).
   */
  matmulMany(a: Ref<H>, bs: readonly Ref<H>[], args: MatmulManyArgs): H[];
  /** Gathers a strided view into a new contiguous tensor (permute, slice, flip, broadcast). */
  copyStrided(x: Ref<H>, args: StridedArgs): H;
  /** Copy of base with src written through the strided view (slice backward, setSlice). */
  assignStrided(base: Ref<H>, src: Ref<H>, args: StridedArgs): H;
  /** Inputs viewed as (outer, inner_i) concatenated along the second axis. */
  concat(xs: readonly Ref<H>[], outer: number, inners: readonly number[]): H;
  /** x (O, N, I), idx i32 (O, M, I) → out (O, M, I) with out[o,m,i] = x[o, idx[o,m,i], i]. */
  gather(x: Ref<H>, idx: Ref<H>, o: number, n: number, m: number, inner: number): H;
  /**
   * x (O, N, I), rows i32 (O / share, M) → out (O, M, I) with out[o,m,i] = x[o, rows[⌊o/share⌋, m], i]:
   * one list of rows for each `share` consecutive o (the heads of a batch entry), so the index is
   * M words per list, not O·M·I. Out-of-range rows throw on the CPU, give zeros on the GPU.
   */
  gatherRows(x: Ref<H>, rows: Ref<H>, o: number, n: number, m: number, inner: number, share: number): H;
  /** base (O, N, I) plus src (O, M, I) added at rows idx (O, M, I): the transpose of gather. */
  scatterAdd(base: Ref<H>, idx: Ref<H>, src: Ref<H>, o: number, n: number, m: number, inner: number): H;
  /** table (V, C), ids i32 (T) → (T, C). Out-of-range ids throw on the CPU, give zeros on the GPU. */
  embedding(table: Ref<H>, ids: Ref<H>, v: number, c: number): H;
  /** dy (T, C), ids (T) → dTable (V, C), summed over repeated ids (deterministic order). */
  embeddingBackward(dy: Ref<H>, ids: Ref<H>, v: number, c: number): H;
  softmax(x: Ref<H>, rows: number, cols: number): H;
  /** dx = y ⊙ (dy − Σ dy⊙y) per row. */
  softmaxBackward(y: Ref<H>, dy: Ref<H>, rows: number, cols: number): H;
  logsumexp(x: Ref<H>, rows: number, cols: number): H;
  /** y = x·rstd·w, rstd = 1/√(mean(x²)+eps) per row; returns y and rstd (f32, rows). */
  rmsnorm(x: Ref<H>, w: Ref<H>, args: NormArgs): [H, H];
  rmsnormBackward(x: Ref<H>, w: Ref<H>, rstd: Ref<H>, dy: Ref<H>, args: NormArgs): [H, H];
  /** y = (x−μ)·rstd·w + b; returns y, μ and rstd (f32, rows). */
  layernorm(x: Ref<H>, w: Ref<H>, b: Ref<H>, args: NormArgs): [H, H, H];
  /** Returns dx, dw, db. */
  layernormBackward(x: Ref<H>, w: Ref<H>, mean: Ref<H>, rstd: Ref<H>, dy: Ref<H>, args: NormArgs): [H, H, H];
  /**
   * Rotary embedding on x viewed as (O, T, I, D), cos/sin (T, D/2) in f32. `interleaved` pairs
   * (2j, 2j+1) (GPT-J); otherwise (j, j+D/2) (GPT-NeoX / Llama). `inverse` rotates by −θ (backward).
   */
  rope(x: Ref<H>, cos: Ref<H>, sin: Ref<H>, o: number, t: number, inner: number, d: number, interleaved: boolean, inverse: boolean): H;
  /** logits (N, V), targets i32 (N) → loss (N) f32 and logsumexp (N) f32; ignored rows give 0. */
  crossEntropy(logits: Ref<H>, targets: Ref<H>, n: number, v: number, ignoreIndex: number): [H, H];
  /** dlogits = (softmax − onehot)·dloss[row], zero on ignored rows. */
  crossEntropyBackward(logits: Ref<H>, targets: Ref<H>, lse: Ref<H>, dloss: Ref<H>, n: number, v: number, ignoreIndex: number): H;
  /** Inclusive scan of the last axis; max/min also return the i32 index where each running extreme was taken. */
  scan(x: Ref<H>, op: ScanOp, rows: number, cols: number): [H, H | null];
  /** Stable sort of each row's last axis; values and i32 indices. */
  sort(x: Ref<H>, rows: number, cols: number, descending: boolean): [H, H];
  /**
   * The entries each row keeps under SelectArgs' rule (top-K or top-p over the open entries, the
   * reserved ones kept), found without sorting: i32 flags (rows, n), 1 kept, 0 not.
   */
  selectOpen(scores: Ref<H>, mass: Ref<H>, args: SelectArgs): H;
  /**
   * The device table of a one-query-row block mask (attention/block_mask.ts's layout, with segments)
   * from selected fine blocks, flags i32 (batch, valid): the by-query index, an empty by-key index, the
   * lists (count, then each mask block holding a selected fine block, ascending, whole where every
   * key of it up to tk is visible and in a selected fine block, else partial) at a stride of
   * ⌈valid/per⌉ + 1, then (unless args.segments is false) a segment id per batch entry and key (0 in
   * a selected fine block before kvLength, 1 elsewhere) → i32 of batch·(1 + kBlocks + stride + tk) + 1
   * entries (without segments, batch·(1 + kBlocks + stride) + 1).
   */
  flagsMaskTable(flags: Ref<H>, args: FlagsMaskArgs): H;
  /**
   * selectOpen over rows of fine blocks (one row per batch entry) and, from the same pass, the
   * flagsMaskTable of its flags with one fine block a mask block and no segment ids (per 1,
   * segments false; kBlocks the cache's fine blocks): [flags (rows, n), table] in one dispatch where
   * the device has it (Spot's decoding step).
   */
  selectBlockList(scores: Ref<H>, mass: Ref<H>, args: SelectArgs, list: BlockListArgs): [H, H];
  /**
   * The K and V rows of the blocks a selectBlockList table lists (row b's list at table[b]: the
   * count, then 2·block + partial for each selected block, ascending), compacted in list order for a
   * dense decode over them: each batch entry's first `count` listed blocks' rows (rows past tmax from
   * its last row), zero rows for list places past its count.
   */
  gatherListed(table: Ref<H>, k: Ref<H>, v: Ref<H>, args: GatherListArgs): [H, H];
  /**
   * A lightning indexer's scores pooled per block, in one pass over the keys: for query r (q (rows,
   * H·d) f32, head weights w (rows, H) f32) and key t ≤ its position, t < l (keys (batch, tmax, d),
   * any float),
   * s = Σ_h w_h · ReLU(scale · q_h·k_t); per block of `block` keys, the max and the log of Σ e^s →
   * [max, logMass] (rows, ⌈l/block⌉) f32, −1e30 where a block holds no visible key. With `scales`,
   * keys are INT4 microscale codes (batch, tmax, d/8) i32 and scales (batch, tmax, d/32) f16
   * (quantizeInt4's form), read as the values they stand for (code · scale, exact in f32).
   */
  indexBlockScores(q: Ref<H>, w: Ref<H>, keys: Ref<H>, args: IndexScoreArgs, scales?: Ref<H>): [H, H];
  /**
   * Lighthouse's selection (specs/lighthouse_fon.md §1.4–§1.5), no gradient: q (lists, n, d) and k
   * (lists/group, n, d) of any float dtype → the gathered pyramid rows, i32 (lists, S), in causal
   * order. Scores: the squared L2 norm of each token's q (s^QK) and k (s^KQ), summed in f32 in index
   * order, 0 for padded tokens, max-pooled over each entry's window. Per tile and level, the `qk`
   * candidates with the largest s^QK and then the `tile − qk` others with the largest s^KQ are
   * refined (every candidate where there are no more than `tile`), ties to the lower index; the
   * rows are ordered by lighthouseSortKey. Equal scores give equal rows on every backend.
   */
  lighthouseSelect(q: Ref<H>, k: Ref<H>, args: LighthouseSelectArgs): H;
  /**
   * The inverse of row lists: rows i32 (lists, m), distinct within a list, each in [0, n) → i32
   * (lists, n) holding, for each row r, the place j where rows[list, j] = r, or m where r is not
   * listed. The CPU throws on a repeated or out-of-range row; the GPU's result is then undefined.
   */
  invertRows(rows: Ref<H>, args: InvertRowsArgs): H;
  /**
   * Listed pyramid rows straight from the tokens (Lighthouse's pooled gather, specs/lighthouse_fon.md
   * §1.3): x (lists, n, d) any float, rows i32 (lists, m) → (lists, m, d) in x's dtype, row j of a
   * list = scale_l · Σ x[t] over the tokens of pyramid row rows[j] (level l holding it), summed in
   * f32 in token order. The adjoint of pyramidScatter with the same levels. The CPU throws on a row
   * in no level; the GPU then reads nothing for it (zeros) — a repeated row breaks the adjointness.
   */
  pyramidGather(x: Ref<H>, rows: Ref<H>, args: PyramidRowsArgs): H;
  /**
   * The adjoint of pyramidGather (Lighthouse's scatter-back, §1.7): y (lists, m, d) any float,
   * inverse i32 (lists, Σ count) (invertRows of the rows: m where a row is not listed) → (lists, n,
   * d), token t of a list = Σ_l scale_l · y[inverse[offset_l + j]] over the levels whose entry j =
   * ⌊(t − shift_l)/span_l⌋ lies in [0, count_l) and is listed, summed in f32 in level order. The
   * CPU throws on an inverse entry outside [0, m]; the GPU skips it. An inverse that is not the rows'
   * (invertRows) gives a result that is not their adjoint.
   */
  pyramidScatter(y: Ref<H>, inverse: Ref<H>, args: PyramidRowsArgs): H;
  /**
   * INT4 microscale codes of x (rows, d), d a multiple of 32 (backend/cpu/int4.ts): codes i32
   * (rows, d/8), eight 4-bit codes c + 8 a word, and one scale per group of 32, max|x|/7 rounded to
   * f16: f16 (rows, d/32).
   */
  quantizeInt4(x: Ref<H>, rows: number, d: number): [H, H];
  /** The values (rows, d) in `dtype` that codes i32 (rows, d/8) and scales f16 (rows, d/32) stand for. */
  dequantizeInt4(codes: Ref<H>, scales: Ref<H>, rows: number, d: number, dtype: FloatDType): H;
  cast(x: Ref<H>, to: DType): H;
  fill(size: number, value: number, dtype: DType): H;
  /**
   * Attention, one entry for every mechanism's kernels: out (batch, heads, tq, d) of q's dtype and
   * the logsumexp of each row's scores (batch, heads, tq) in f32 (−∞ for a row that sees no key;
   * its out row is 0). Softmax of scale·q·kᵀ over the visible keys (AttentionArgs), changed by
   * `extras.modifier` (a mechanism's score modifier) and restricted by `extras.mask` (a block mask's
   * table, args.mask its shape).
   */
  attention(q: Ref<H>, k: Ref<H>, v: Ref<H>, args: AttentionArgs, extras?: AttentionExtras<H>): [H, H];
  /**
   * The logsumexp merge of two attention parts over disjoint keys (ops/attention_merge.ts): for
   * output row (o, i) of O × M, part p's row is rows_p[⌊o/share⌋, i] of its N_p (or i where rows_p
   * is null); out = (w_a·out_a + w_b·out_b) / (w_a + w_b) with w_p = e^(lse_p − max), a part whose
   * row saw no key (lse ≤ −1e30) weighing 0 → out (O, M, D) in args.dtype and lse (O, M) f32 (−∞
   * and a NaN row where neither part saw a key).
   */
  mergeLse(a: MergePart<H>, b: MergePart<H>, args: MergeArgs): [H, H];
  /**
   * Optional: q against several key sets at once (the pages of a paged KV cache), each with its
   * own AttentionArgs (q's shape alike in all), as one softmax over all their visible keys →
   * [out, lse] as `attention` gives them; undefined where the backend has no one-pass form for
   * these arguments (ops/paged_attention.ts then merges per-part `attention` results itself).
   */
  attentionMulti?(q: Ref<H>, parts: readonly { k: Ref<H>; v: Ref<H>; args: AttentionArgs }[]): [H, H] | undefined;
  /**
   * The backward of `attention` with the same extras: dq, dk, dv (dk, dv summed over the query heads
   * sharing a kv head; zero past kvLength), then the modifier's gradients (f32, zero past kvLength):
   * FoX dc; FPA dphi, dlevel (batch·kvHeads·tk) and dlambda (kvHeads), ties in the min to the latest index.
   */
  attentionBackward(q: Ref<H>, k: Ref<H>, v: Ref<H>, out: Ref<H>, lse: Ref<H>, dout: Ref<H>, args: AttentionArgs, extras?: AttentionExtras<H>): H[];
  /** Depth-Attention mixing: out (batch, kvHeads, t, d) in the values' dtype and α (batch, kvHeads, t, m) f32. */
  depthMix(q: Ref<H>, keys: readonly Ref<H>[], values: readonly Ref<H>[], args: DepthMixArgs): [H, H];
  /** From the saved α and dout: dq (q's dtype; each head of a group gets 1/r of dq̄), dkeys[i] and dvalues[i] (their dtypes). */
  depthMixBackward(q: Ref<H>, keys: readonly Ref<H>[], values: readonly Ref<H>[], alpha: Ref<H>, dout: Ref<H>, args: DepthMixArgs): [H, H[], H[]];
  /** In place: writes x into rows [pos, pos + n) of every (batch, kv head) of cache. */
  kvWrite(cache: Ref<H>, x: Ref<H>, args: KvWriteArgs): void;
  /** Several kvWrites of one step (K, V, side state), in place: one dispatch on webgpu where it can. */
  kvWriteMany(writes: readonly KvWriteOne<H>[]): void;
  /** In place: param, m, v updated (decoupled weight decay, AdamW). */
  adamw(param: Ref<H>, grad: Ref<H>, m: Ref<H>, v: Ref<H>, args: AdamWArgs): void;
  /** In place: param, momentum buffer updated. */
  sgd(param: Ref<H>, grad: Ref<H>, buf: Ref<H>, args: SGDArgs): void;
}

/** What mixed-precision training (tensor/autocast.ts) can use on a backend, and which of it runs fastest. */
export interface PrecisionSupport {
  offered: readonly Precision[];
  fastest: Precision;
  /** Why a precision is missing from `offered` (named in the error), where one is. */
  missing?: string;
}

export interface Backend<H = unknown> extends Kernels<H> {
  readonly name: string;
  /** The training precisions this backend computes (f32 always). */
  precisions(): PrecisionSupport;
  /** Copies host data into a new handle; the array's length is the element count. */
  upload(data: AnyHostArray, dtype: DType): H;
  /** Reads a handle back; the one await on the hot path (STYLE.md §11). */
  read(h: H, dtype: DType, size: number): Promise<AnyHostArray>;
  /** Synchronous read where the backend can do it (CPU backends); undefined elsewhere. */
  readSync?(h: H, dtype: DType, size: number): AnyHostArray;
  free(h: H): void;
  /** Waits until every submitted kernel has finished. */
  sync(): Promise<void>;
  /** Bytes held by live handles (and, for pooled backends, bytes parked in the pool). */
  memory(): { liveBytes: number; liveHandles: number; pooledBytes: number };
  /** Releases device resources; the backend is unusable afterwards. */
  destroy(): void;
}
