// Data movement on raw bits: each invocation assembles one whole output word from the source
// elements its output elements come from, so packed dtypes (bf16, f16 without shader-f16, u8)
// never share a word between invocations and i32 moves exactly. SP / DP are the elements per u32
// word of the source and of the output (1, 2 or 4; they differ only when widening to, or packing
// from, one element per word). The mode picks where output element e comes from:
//   STRIDED  x[offset + Σ k_d·stride_d]  (strides may be 0 or negative: u32 arithmetic wraps)
//   GATHER   x[(a·rows + idx[e])·inner + c]  for e = (a, j, c) in (O, M, inner)
//   ROWS     x[(a·rows + idx[⌊a/share⌋·M + j])·inner + c]  for e = (a, j, c) in (O, M, inner)
//   EMBED    x[idx[t]·c + j]  for e = (t, j) in (T, C)
//   CONCAT   one input's block of columns [col, col+inner) of each of `outer` rows of width
//            `total`; invocation (row, q) owns the words of its row's block not already owned by
//            the row before, and keeps the bits of elements that belong to other inputs.
// Indices out of range give 0.
#if STRIDED
struct Params { n: u32, rank: u32, offset: u32, pad: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2> }
#endif
#if GATHER
struct Params { n: u32, m: u32, inner: u32, rows: u32 }
#endif
#if ROWS
struct Params { n: u32, m: u32, inner: u32, rows: u32, share: u32 }
#endif
#if EMBED
struct Params { n: u32, c: u32, v: u32, pad: u32 }
#endif
#if CONCAT
struct Params { outer: u32, total: u32, col: u32, inner: u32, words_per_row: u32 }
#endif
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
#if INDEXED
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
#else
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
#endif

const SP = {{SP}}u;
const DP = {{DP}}u;
const NONE = 0xffffffffu;

fn load_bits(s: u32) -> u32 {
  return (x[s / SP] >> ((s % SP) * (32u / SP))) & (0xffffffffu >> (32u - 32u / SP));
}

#if STRIDED
fn src_index(e: u32) -> u32 {
  var rem = e;
  var o = P.offset;
  for (var d = i32(P.rank) - 1; d >= 0; d--) {
    let dim = P.shape[d / 4][d % 4];
    o += (rem % dim) * P.strides[d / 4][d % 4];
    rem = rem / dim;
  }
  return o;
}
#endif
#if GATHER
fn src_index(e: u32) -> u32 {
  let r = idx[e];
  if (r < 0 || u32(r) >= P.rows) { return NONE; }
  let a = e / (P.m * P.inner);
  return (a * P.rows + u32(r)) * P.inner + e % P.inner;
}
#endif
#if ROWS
fn src_index(e: u32) -> u32 {
  let j = (e / P.inner) % P.m;
  let a = e / (P.m * P.inner);
  let r = idx[(a / P.share) * P.m + j];
  if (r < 0 || u32(r) >= P.rows) { return NONE; }
  return (a * P.rows + u32(r)) * P.inner + e % P.inner;
}
#endif
#if EMBED
fn src_index(e: u32) -> u32 {
  let id = idx[e / P.c];
  if (id < 0 || u32(id) >= P.v) { return NONE; }
  return u32(id) * P.c + e % P.c;
}
#endif

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let t = gid.x + gid.y * nw.x * 256u;
#if CONCAT
  if (t >= P.outer * P.words_per_row) { return; }
  let row = t / P.words_per_row;
  let start = row * P.total + P.col;
  let w = start / DP + t % P.words_per_row;
  if (w * DP >= start + P.inner) { return; }
  if (row > 0u && w * DP < start - P.total + P.inner) { return; }
  var word = 0u;
  if (DP > 1u) { word = y[w]; }
  let n = P.outer * P.total;
  for (var k = 0u; k < DP; k++) {
    let e = w * DP + k;
    if (e >= n) { break; }
    let r = e / P.total;
    let c = e % P.total;
    if (c >= P.col && c < P.col + P.inner) {
      let sh = k * (32u / DP);
      let mask = (0xffffffffu >> (32u - 32u / DP)) << sh;
      word = (word & ~mask) | (load_bits(r * P.inner + c - P.col) << sh);
    }
  }
  y[w] = word;
#else
  let first = t * DP;
  if (first >= P.n) { return; }
  var word = 0u;
  for (var k = 0u; k < DP; k++) {
    let e = first + k;
    if (e >= P.n) { break; }
    let s = src_index(e);
    if (s != NONE) { word |= load_bits(s) << (k * (32u / DP)); }
  }
  y[t] = word;
#endif
}
