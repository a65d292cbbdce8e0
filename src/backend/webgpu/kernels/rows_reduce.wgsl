// Reduces the last axis of x viewed as (rows, cols). Workgroup w reduces part (w % parts) of row
// (w / parts), the columns [part·span, min(cols, (part+1)·span)), into y[w]. parts = 1 is the
// one-pass reduce; parts > 1 is the first pass of the split for few long rows, whose (rows, parts)
// f32 partials a second dispatch with parts = 1 reduces (no atomics). max/min propagate NaN.
{{HEADER}}
{{COMMON}}

fn combine(a: f32, b: f32) -> f32 {
#if SUM
  return a + b;
#else
  if (is_nan(a)) { return a; }
  if (is_nan(b)) { return b; }
  return {{PICK}}(a, b);
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nw);
  if (w >= P.rows * P.parts) { return; }
  let row = w / P.parts;
  let start = (w % P.parts) * P.span;
  let end = min(P.cols, start + P.span);
  let base = row * P.cols;
  var acc = vec4<f32>(P.init);
  var c = start + lid;
  for (; c + 3u * WG < end; c += 4u * WG) {
    let i = base + c;
    let v = vec4<f32>(ld_x(i), ld_x(i + WG), ld_x(i + 2u * WG), ld_x(i + 3u * WG));
    acc = vec4<f32>(combine(acc.x, v.x), combine(acc.y, v.y), combine(acc.z, v.z), combine(acc.w, v.w));
  }
  for (; c < end; c += WG) { acc.x = combine(acc.x, ld_x(base + c)); }
  red[lid] = combine(combine(acc.x, acc.y), combine(acc.z, acc.w));
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = combine(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { st_y(w, red[0]); }
}
