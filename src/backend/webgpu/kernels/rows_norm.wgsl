// RMSNorm (default) or LayerNorm (LAYER) forward, one workgroup per row of x (rows, cols);
// statistics in f32. RMSNorm: y = x·rstd·w, rstd = 1/√(mean(x²)+eps). LayerNorm: two passes
// (mean, then Σ(x−μ)², as the CPU reference) and y = (x−μ)·rstd·w + b. mean and rstd are f32.
{{HEADER}}
{{COMMON}}

fn ld4_x(i: u32) -> vec4<f32> { return vec4<f32>(ld_x(i), ld_x(i + WG), ld_x(i + 2u * WG), ld_x(i + 3u * WG)); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = flat_id(wid, nw);
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  let n = f32(P.cols);
#if LAYER
  var s = vec4<f32>(0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { s += ld4_x(base + c); }
  for (; c < P.cols; c += WG) { s.x += ld_x(base + c); }
  let mu = wg_sum(lid, hsum(s)) / n;
  var q = vec4<f32>(0.0);
  c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { let d = ld4_x(base + c) - mu; q += d * d; }
  for (; c < P.cols; c += WG) { let d = ld_x(base + c) - mu; q.x += d * d; }
  let rstd = 1.0 / sqrt(wg_sum(lid, hsum(q)) / n + P.eps);
  for (c = lid; c < P.cols; c += WG) { st_y(base + c, (ld_x(base + c) - mu) * rstd * ld_w(c) + ld_b(c)); }
  if (lid == 0u) { st_mean(row, mu); st_rstd(row, rstd); }
#else
  var q = vec4<f32>(0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { let v = ld4_x(base + c); q += v * v; }
  for (; c < P.cols; c += WG) { let v = ld_x(base + c); q.x += v * v; }
  let rstd = 1.0 / sqrt(wg_sum(lid, hsum(q)) / n + P.eps);
  for (c = lid; c < P.cols; c += WG) { st_y(base + c, ld_x(base + c) * rstd * ld_w(c)); }
  if (lid == 0u) { st_rstd(row, rstd); }
#endif
}
