// AdamW in place (PyTorch's update, decoupled weight decay), f32 arithmetic whatever the storage:
//   g' = g·gscale;  m = β1·m + (1−β1)·g';  v = β2·v + (1−β2)·g'²
//   p = p·(1 − lr·wd) − (lr / bias1) · m / (√v / √bias2 + eps)
// Each invocation updates two elements, so a packed buffer (bf16, f16 without shader-f16) is
// written one whole word at a time (P_WORD / M_WORD / V_WORD, packed with {{*_PACK}}).
{{HEADER}}

{{PACKING}}

// (p, m, v) after one step of element i.
fn step(i: u32) -> vec3<f32> {
  let gi = ld_g(i) * P.gscale;
  let mi = P.beta1 * ld_exp_avg(i) + P.one_minus_beta1 * gi;
  let vi = P.beta2 * ld_exp_avg_sq(i) + P.one_minus_beta2 * gi * gi;
  let denom = sqrt(vi) / P.sqrt_bias2 + P.eps;
  return vec3<f32>(ld_p(i) * P.decay - P.step_size * (mi / denom), mi, vi);
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
#if M_WORD
  exp_avg[w] = {{M_PACK}}(a.y, b.y);
#else
  st_exp_avg(i0, a.y);
  if (two) { st_exp_avg(i1, b.y); }
#endif
#if V_WORD
  exp_avg_sq[w] = {{V_PACK}}(a.z, b.z);
#else
  st_exp_avg_sq(i0, a.z);
  if (two) { st_exp_avg_sq(i1, b.z); }
#endif
}
