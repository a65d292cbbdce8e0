// Backend.pyramidGather (GATHER) and Backend.pyramidScatter (else), one invocation per output value;
// the CPU reference is src/backend/cpu/pyramid_rows.ts. Level l of the table: lv[l] = (offset,
// count, span, shift), sc[l / 4][l % 4] its scale.
// GATHER: value (s, j, c) of the (lists, m, d) output = scale · Σ x[s, t, c] over the tokens t of
//   pyramid row rows[s, j] (sum in token order); consecutive invocations read consecutive c.
// else:   value (s, t, c) of the (lists, n, d) output = Σ_l scale_l · y[s, inverse[s, offset_l + e], c]
//   over the levels whose entry e = ⌊(t − shift_l)/span_l⌋ lies in [0, count_l) and is listed
//   (inverse < m), in level order.
{{HEADER}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.values) { return; }
  let c = i % P.d;
  let row = i / P.d;
#if GATHER
  let s = row / P.m;
  let r = u32(ldi_rows(row));
  var l = 0u;
  for (var k = 0u; k < P.levels; k++) {
    if (r >= P.lv[k].x && r < P.lv[k].x + P.lv[k].y) { l = k; }
  }
  let lo = (r - P.lv[l].x) * P.lv[l].z + P.lv[l].w;
  let hi = min(P.n, lo + P.lv[l].z);
  var acc = 0.0;
  var at = (s * P.n + lo) * P.d + c;
  for (var t = lo; t < hi; t++) {
    acc += ld_x(at);
    at += P.d;
  }
  st_out(i, P.sc[l / 4u][l % 4u] * acc);
#else
  let s = row / P.n;
  let t = row % P.n;
  var acc = 0.0;
  for (var k = 0u; k < P.levels; k++) {
    let lv = P.lv[k];
    if (t < lv.w) { continue; }
    let e = (t - lv.w) / lv.z;
    if (e >= lv.y) { continue; }
    let j = u32(ldi_inverse(s * P.total + lv.x + e));
    if (j >= P.m) { continue; }
    acc += P.sc[k / 4u][k % 4u] * ld_y((s * P.m + j) * P.d + c);
  }
  st_out(i, acc);
#endif
}
