// y[i] = f(x[i]) for one of the unary ops; the expression comes from the variant's OP.
{{HEADER}}

fn tanh_safe(v: f32) -> f32 { return tanh(clamp(v, -15.0, 15.0)); }

fn apply(x: f32) -> f32 {
  return {{EXPR}};
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  st_y(i, apply(ld_x(i)));
}
