// SGD in place (PyTorch's update), f32 arithmetic whatever the storage:
//   g' = g·gscale + wd·p;  with momentum: buf = μ·buf + g', g' = nesterov ? g' + μ·buf : buf
//   p = p − lr·g'
// buf is read and written only when μ ≠ 0. Each invocation updates two elements, so a packed
// buffer (bf16, f16 without shader-f16) is written one whole word at a time (P_WORD / B_WORD).
{{HEADER}}

{{PACKING}}

// (p, buf) after one step of element i.
fn step(i: u32) -> vec2<f32> {
  let pi = ld_p(i);
  var gi = ld_g(i) * P.gscale + P.weight_decay * pi;
  var bi = 0.0;
  if (P.momentum != 0.0) {
    bi = P.momentum * ld_buf(i) + gi;
    gi = select(bi, gi + P.momentum * bi, P.nesterov != 0u);
  }
  return vec2<f32>(pi - P.lr * gi, bi);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let w = gid.x + gid.y * nw.x * 256u;
  let i0 = 2u * w;
  if (i0 >= P.n) { return; }
  let i1 = i0 + 1u;
  let two = i1 < P.n;
  let a = step(i0);
  var b = a;
  if (two) { b = step(i1); }
#if P_WORD
  p[w] = {{P_PACK}}(a.x, b.x);
#else
  st_p(i0, a.x);
  if (two) { st_p(i1, b.x); }
#endif
  if (P.momentum != 0.0) {
#if B_WORD
    buf[w] = {{B_PACK}}(a.y, b.y);
#else
    st_buf(i0, a.y);
    if (two) { st_buf(i1, b.y); }
#endif
  }
}
