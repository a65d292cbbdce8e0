// Cross-entropy backward, one invocation per logit of (n, v):
// dx = dloss[r]·(exp(x − lse[r]) − [c = target]), zero on rows whose target is ignored or out of range.
{{HEADER}}
{{COMMON}}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * WG;
  if (i >= P.total) { return; }
  let r = i / P.v;
  let c = i % P.v;
  let t = ldi_t(r);
  var g = 0.0;
  if (t != P.ignore && t >= 0 && t < i32(P.v)) {
    g = ld_g(r) * (exp(ld_x(i) - ld_lse(r)) - select(0.0, 1.0, u32(t) == c));
  }
  st_y(i, g);
}
