// What every attention kernel shares (substituted for the COMMON placeholder after the header):
// the masking rule of ops/attention.ts and the f32 constants of the online softmax.
// Largest finite f32: seeds running maxima (−BIG) so that exp never sees −∞ − (−∞).
const BIG: f32 = 0x1.fffffep+127f;
// Scores at or below this are masked (a real scaled score never gets near it).
const VIS: f32 = -1e37;

// NaN and −∞ are made at run time: a constant bitcast to them does not compile.
fn f32_from_bits(b: u32) -> f32 { var v = b; return bitcast<f32>(v); }

// Whether key j is visible from query row i (absolute position i + qoff): inside the valid keys,
// not after the query when causal, not window or more positions before it.
fn visible(i: u32, j: u32) -> bool {
  if (i >= P.tq || j >= P.kvlen) { return false; }
  let p = i32(i) + P.qoff;
  let jj = i32(j);
  if (P.causal != 0u && jj > p) { return false; }
  if (P.window != 0u && jj <= p - i32(P.window)) { return false; }
  return true;
}

// Query rows [lo, hi) that can see some key of [j0, j0 + bk): i ≥ j0 − qoff when causal,
// i < j1 − 1 + window − qoff with a window (j1 the block's end inside the valid keys).
fn query_rows(j0: u32, bk: u32) -> vec2<i32> {
  let j1 = min(j0 + bk, P.kvlen);
  var lo = 0;
  var hi = i32(P.tq);
  if (j0 >= P.kvlen) { hi = 0; }
  if (P.causal != 0u) { lo = max(0, i32(j0) - P.qoff); }
  if (P.window != 0u) { hi = min(hi, i32(j1) - 1 + i32(P.window) - P.qoff); }
  return vec2<i32>(lo, hi);
}
