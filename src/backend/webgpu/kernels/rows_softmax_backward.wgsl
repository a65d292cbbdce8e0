// Softmax backward, one workgroup per row: dx = y ⊙ (dy − Σ dy⊙y), the dot product in f32.
{{HEADER}}
{{COMMON}}

fn ld4_y(i: u32) -> vec4<f32> { return vec4<f32>(ld_y(i), ld_y(i + WG), ld_y(i + 2u * WG), ld_y(i + 3u * WG)); }
fn ld4_dy(i: u32) -> vec4<f32> { return vec4<f32>(ld_dy(i), ld_dy(i + WG), ld_dy(i + 2u * WG), ld_dy(i + 3u * WG)); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = flat_id(wid, nw);
  if (row >= P.rows) { return; }
  let base = row * P.cols;
  var d = vec4<f32>(0.0);
  var c = lid;
  for (; c + 3u * WG < P.cols; c += 4u * WG) { d += ld4_y(base + c) * ld4_dy(base + c); }
  for (; c < P.cols; c += WG) { d.x += ld_y(base + c) * ld_dy(base + c); }
  let dot = wg_sum(lid, hsum(d));
  for (var c = lid; c < P.cols; c += WG) { st_dx(base + c, ld_y(base + c) * (ld_dy(base + c) - dot)); }
}
