// Reduces the last axis of x viewed as (rows, cols). Workgroup w reduces part (w % parts) of row
// (w / parts), the columns [part·span, min(cols, (part+1)·span)), into y[w]. parts = 1 is the
// one-pass reduce; parts > 1 is the first pass of the split for few long rows, whose (rows, parts)
// partials a second dispatch with parts = 1 reduces (no atomics). max/min propagate NaN.
// Floats accumulate in f32. INT (i32 and u8 inputs) accumulates exactly in i32, sums wrapping
// modulo 2^32 as the CPU's Int32Array; its split partials are i32 too. An INT result bound for u8
// (U8_OUT) goes out through an f32 buffer as its low byte, the CPU's Uint8Array wrap.
// SHORT (rows of at most a few dozen columns): one invocation per row, combining its columns in
// order, where a workgroup per row would leave all but cols of its invocations idle (a window mean
// over 4 columns of every (row, channel) ran 64 of 256 lanes busy in 2^28 workgroups).
{{HEADER}}
{{COMMON}}

#if INT
alias T = i32;
fn ld(i: u32) -> i32 { return ldi_x(i); }
fn acc_init() -> i32 { return {{IINIT}}; }
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
fn acc_init() -> f32 { return P.init; }
fn put(i: u32, v: f32) { st_y(i, v); }
#endif

var<workgroup> acc_wg: array<T, WG>;

fn combine(a: T, b: T) -> T {
#if SUM
  return a + b;
#else
#if INT
  return {{PICK}}(a, b);
#else
  if (is_nan(a)) { return a; }
  if (is_nan(b)) { return b; }
  return {{PICK}}(a, b);
#endif
#endif
}

#if SHORT
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let row = gid.x + gid.y * nw.x * WG;
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  var acc = acc_init();
  for (var c = 0u; c < P.cols; c++) { acc = combine(acc, ld(base + c)); }
  put(row, acc);
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nw);
  if (w >= P.rows * P.parts) { return; }
  let row = w / P.parts;
  let start = (w % P.parts) * P.span;
  let end = min(P.cols, start + P.span);
  let base = row * P.cols;
  var acc = vec4<T>(acc_init());
  var c = start + lid;
  for (; c + 3u * WG < end; c += 4u * WG) {
    let i = base + c;
    let v = vec4<T>(ld(i), ld(i + WG), ld(i + 2u * WG), ld(i + 3u * WG));
    acc = vec4<T>(combine(acc.x, v.x), combine(acc.y, v.y), combine(acc.z, v.z), combine(acc.w, v.w));
  }
  for (; c < end; c += WG) { acc.x = combine(acc.x, ld(base + c)); }
  acc_wg[lid] = combine(combine(acc.x, acc.y), combine(acc.z, acc.w));
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { acc_wg[lid] = combine(acc_wg[lid], acc_wg[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { put(w, acc_wg[0]); }
}
#endif
