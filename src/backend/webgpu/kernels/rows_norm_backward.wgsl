// dx of RMSNorm (default) or LayerNorm (LAYER), one workgroup per row; the per-row sums in f32.
// RMSNorm: dx = dy·w·s − x·(Σ dy·w·x)·s³/cols. LayerNorm, with x̂ = (x−μ)·s and g = dy·w:
// dx = s·(g − Σg/cols − x̂·Σ(g·x̂)/cols). dw and db (sums over rows) are rows_colsum's job.
{{HEADER}}
{{COMMON}}

fn ld4_x(i: u32) -> vec4<f32> { return vec4<f32>(ld_x(i), ld_x(i + WG), ld_x(i + 2u * WG), ld_x(i + 3u * WG)); }
fn ld4_dy(i: u32) -> vec4<f32> { return vec4<f32>(ld_dy(i), ld_dy(i + WG), ld_dy(i + 2u * WG), ld_dy(i + 3u * WG)); }
fn ld4_w(i: u32) -> vec4<f32> { return vec4<f32>(ld_w(i), ld_w(i + WG), ld_w(i + 2u * WG), ld_w(i + 3u * WG)); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = flat_id(wid, nw);
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  let n = f32(P.cols);
  let s = ld_rstd(row);
#if LAYER
  let mu = ld_mean(row);
  var sg = vec4<f32>(0.0);
  var sgx = vec4<f32>(0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) {
    let g = ld4_dy(base + c) * ld4_w(c);
    sg += g;
    sgx += g * (ld4_x(base + c) - mu) * s;
  }
  for (; c < P.cols; c += WG) {
    let g = ld_dy(base + c) * ld_w(c);
    sg.x += g;
    sgx.x += g * (ld_x(base + c) - mu) * s;
  }
  let sums = wg_sum2(lid, vec2<f32>(hsum(sg), hsum(sgx)));
  for (c = lid; c < P.cols; c += WG) {
    let g = ld_dy(base + c) * ld_w(c);
    let xh = (ld_x(base + c) - mu) * s;
    st_dx(base + c, s * (g - sums.x / n - xh * sums.y / n));
  }
#else
  var d = vec4<f32>(0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { d += ld4_dy(base + c) * ld4_w(c) * ld4_x(base + c); }
  for (; c < P.cols; c += WG) { d.x += ld_dy(base + c) * ld_w(c) * ld_x(base + c); }
  let k = wg_sum(lid, hsum(d)) * s * s * s / n;
  for (c = lid; c < P.cols; c += WG) { st_dx(base + c, ld_dy(base + c) * ld_w(c) * s - ld_x(base + c) * k); }
#endif
}
