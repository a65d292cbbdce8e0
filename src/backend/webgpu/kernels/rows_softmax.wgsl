// One workgroup per row of x (rows, cols): an online logsumexp (running max and Σexp in f32, one
// read of the row), then per variant SOFTMAX y = exp(x − m)/Σ, LSE y[row] = log Σ exp, or
// CE loss[row] = lse − x[target] (0 for the ignore index and out-of-range targets) and lse[row].
{{HEADER}}
{{COMMON}}

fn ld4_x(i: u32) -> vec4<f32> { return vec4<f32>(ld_x(i), ld_x(i + WG), ld_x(i + 2u * WG), ld_x(i + 3u * WG)); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = flat_id(wid, nw);
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  var a = vec2<f32>(-BIG, 0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { a = lse_push4(a, ld4_x(base + c)); }
  for (; c < P.cols; c += WG) { a = lse_push(a, ld_x(base + c)); }
  a = wg_lse(lid, a);
#if SOFTMAX
  for (c = lid; c < P.cols; c += WG) { st_y(base + c, exp(ld_x(base + c) - a.x) / a.y); }
#endif
#if LSE
  if (lid == 0u) { st_y(row, lse_value(a)); }
#endif
#if CE
  if (lid == 0u) {
    let l = lse_value(a);
    let t = ldi_t(row);
    var loss = 0.0;
    if (t != P.ignore && t >= 0 && t < i32(P.cols)) { loss = l - ld_x(base + u32(t)); }
    st_loss(row, loss);
    st_lse(row, l);
  }
#endif
}
