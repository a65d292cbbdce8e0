// Inclusive scan of each row of x (rows, cols), one workgroup per row walking the row in chunks of
// WG·K elements: each invocation scans K consecutive elements in registers, a Hillis–Steele scan
// combines the invocations' totals in workgroup memory, and a carry crosses chunks (f32 throughout;
// INT, for i32 and u8 inputs, in i32: exact, sums wrapping modulo 2^32 as the CPU's Int32Array, and
// a u8 result (U8_OUT) stored through an f32 buffer as its low byte, the CPU's Uint8Array wrap).
// max/min (EXTREME) also write the index where the running extreme was taken: the LATEST one on
// ties (`>=`/`<=` as the CPU reference). A NaN at column 0 sticks; a later NaN is skipped, as on the
// CPU; both are expressed through an identity element (index −1) so the operator stays associative.
{{HEADER}}
{{COMMON}}
const K: u32 = {{K}}u;

#if INT
alias T = i32;
fn ld(i: u32) -> i32 { return ldi_x(i); }
fn put(i: u32, v: i32) {
#if U8_OUT
  st_y(i, f32(v & 255i));
#else
  sti_y(i, v);
#endif
}
#else
alias T = f32;
fn ld(i: u32) -> f32 { return ld_x(i); }
fn put(i: u32, v: f32) { st_y(i, v); }
#endif

struct S { v: T, i: i32 }

var<workgroup> sval: array<T, WG>;
var<workgroup> sidx: array<i32, WG>;

// a is the earlier part of the row, b the later one.
fn comb(a: S, b: S) -> S {
#if EXTREME
  if (b.i < 0) { return a; }
  if (a.i < 0) { return b; }
#if INT
#else
  // A NaN here is the row's first element, which sticks. Tested by its bits: NVIDIA's compiler
  // folds a comparison with NaN as if NaN did not exist.
  if (is_nan(a.v)) { return a; }
#endif
  if (b.v {{CMP}} a.v) { return b; }
  return a;
#else
  return S(a.v + b.v, 0);
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = flat_id(wid, nw);
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  let none = S(T(0), -1);
  var carry = none;
  for (var c0 = 0u; c0 < P.cols; c0 += WG * K) {
    var loc: array<S, K>;
    var acc = none;
    for (var k = 0u; k < K; k++) {
      let c = c0 + lid * K + k;
      var e = none;
      if (c < P.cols) {
        let v = ld(base + c);
        e = S(v, i32(c));
#if EXTREME
#if INT
#else
        if (c > 0u && is_nan(v)) { e.i = -1; }
#endif
#endif
      }
      acc = comb(acc, e);
      loc[k] = acc;
    }
    sval[lid] = acc.v;
    sidx[lid] = acc.i;
    workgroupBarrier();
    for (var off = 1u; off < WG; off <<= 1u) {
      var t = S(sval[lid], sidx[lid]);
      if (lid >= off) { t = comb(S(sval[lid - off], sidx[lid - off]), t); }
      workgroupBarrier();
      sval[lid] = t.v;
      sidx[lid] = t.i;
      workgroupBarrier();
    }
    var pre = carry;
    if (lid > 0u) { pre = comb(carry, S(sval[lid - 1u], sidx[lid - 1u])); }
    for (var k = 0u; k < K; k++) {
      let c = c0 + lid * K + k;
      if (c < P.cols) {
        let r = comb(pre, loc[k]);
        put(base + c, r.v);
#if EXTREME
        sti_idx(base + c, r.i);
#endif
      }
    }
    carry = comb(carry, S(sval[WG - 1u], sidx[WG - 1u]));
    workgroupBarrier();
  }
}
