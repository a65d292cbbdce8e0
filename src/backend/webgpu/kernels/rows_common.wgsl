// Helpers every row kernel shares (substituted for the COMMON placeholder after the header): the
// workgroup size, the workgroup → row mapping, a NaN test that survives fast-math, and workgroup
// tree reductions (plain sums and the (max, Σexp) pairs of an online logsumexp), all in f32.
const WG: u32 = {{WG}}u;
// Largest finite f32. Seeds the running max of an online logsumexp: unlike -inf it keeps
// exp(m_a - m) finite when no element has been seen, so an all -inf row gives Σexp = 0, not NaN.
const BIG: f32 = 0x1.fffffep+127f;

var<workgroup> red: array<f32, WG>;
var<workgroup> red2: array<f32, WG>;

// Rows beyond 65535 workgroups wrap into the grid's second dimension.
fn flat_id(wid: vec3<u32>, nw: vec3<u32>) -> u32 { return wid.x + wid.y * nw.x; }

fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

fn is_nan(v: f32) -> bool { return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u; }

// Σ v over the workgroup, returned to every invocation (call from uniform control flow).
fn wg_sum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// max over the workgroup, returned to every invocation (call from uniform control flow).
fn wg_max(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// Two sums at once.
fn wg_sum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
  red[lid] = v.x;
  red2[lid] = v.y;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; red2[lid] += red2[lid + s]; }
    workgroupBarrier();
  }
  let r = vec2<f32>(red[0], red2[0]);
  workgroupBarrier();
  return r;
}

// Row loops read four columns WG apart per iteration (ld4_NAME in each kernel, then a tail loop)
// into independent accumulators: four loads in flight per invocation instead of one, which is
// what keeps a latency-bound row walk near the memory's bandwidth.

// Online logsumexp state a = (running max m, Σ exp(x − m)); seed with vec2(-BIG, 0). A NaN input
// makes Σ NaN for good (tested by bits: NVIDIA's compiler drops comparisons with NaN), so the
// row's result is NaN as on the CPU.
// (NaN and −inf are made at run time: a constant bitcast to them does not compile.)
fn f32_from_bits(b: u32) -> f32 { var v = b; return bitcast<f32>(v); }

// exp(x − m) for x ≤ m, with exp(∞ − ∞) = 1: a row holding +∞ has logsumexp +∞, not NaN.
fn exp_below(x: f32, m: f32) -> f32 { return select(exp(x - m), 1.0, x == m); }
fn exp_below4(v: vec4<f32>, m: f32) -> vec4<f32> { return select(exp(v - vec4<f32>(m)), vec4<f32>(1.0), v == vec4<f32>(m)); }

fn lse_push(a: vec2<f32>, x: f32) -> vec2<f32> {
  if (is_nan(x)) { return vec2<f32>(a.x, f32_from_bits(0x7fc00000u)); }
  if (x > a.x) { return vec2<f32>(x, a.y * exp_below(a.x, x) + 1.0); }
  return vec2<f32>(a.x, a.y + exp_below(x, a.x));
}

fn lse_push4(a: vec2<f32>, v: vec4<f32>) -> vec2<f32> {
  if (is_nan(v.x) || is_nan(v.y) || is_nan(v.z) || is_nan(v.w)) { return vec2<f32>(a.x, f32_from_bits(0x7fc00000u)); }
  let m = max(a.x, max(max(v.x, v.y), max(v.z, v.w)));
  let e = exp_below4(v, m);
  return vec2<f32>(m, a.y * exp_below(a.x, m) + ((e.x + e.y) + (e.z + e.w)));
}

fn lse_merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let m = max(a.x, b.x);
  return vec2<f32>(m, a.y * exp_below(a.x, m) + b.y * exp_below(b.x, m));
}

fn wg_lse(lid: u32, a: vec2<f32>) -> vec2<f32> {
  red[lid] = a.x;
  red2[lid] = a.y;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let r = lse_merge(vec2<f32>(red[lid], red2[lid]), vec2<f32>(red[lid + s], red2[lid + s]));
      red[lid] = r.x;
      red2[lid] = r.y;
    }
    workgroupBarrier();
  }
  let r = vec2<f32>(red[0], red2[0]);
  workgroupBarrier();
  return r;
}

// log Σ exp of a finished state: NaN when a NaN was seen, -inf when nothing but -inf was (Σ = 0;
// returned explicitly, since log(0) is not -inf on every implementation).
fn lse_value(a: vec2<f32>) -> f32 {
  if (is_nan(a.y)) { return f32_from_bits(0x7fc00000u); }
  if (a.y <= 0.0) { return f32_from_bits(0xff800000u); }
  return a.x + log(a.y);
}
