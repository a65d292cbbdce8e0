// Rotary embedding, one invocation per rotated pair of x viewed as (O, T, I, D): pair j of
// vector q = (o·T + t)·I + i is (2j, 2j+1) when INTERLEAVED (GPT-J), else (j, j + D/2)
// (NeoX, Llama); cos/sin (T, D/2) f32; sgn = −1 rotates by −θ (the backward).
{{HEADER}}
{{COMMON}}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * WG;
  if (i >= P.pairs) { return; }
  let j = i % P.half;
  let q = i / P.half;
  let p = (q / P.inner) % P.t;
  let base = q * 2u * P.half;
#if INTERLEAVED
  let i0 = base + 2u * j;
  let i1 = i0 + 1u;
#else
  let i0 = base + j;
  let i1 = i0 + P.half;
#endif
  let c = ld_cos(p * P.half + j);
  let s = P.sgn * ld_sin(p * P.half + j);
  let x0 = ld_x(i0);
  let x1 = ld_x(i1);
  st_y(i0, x0 * c - x1 * s);
  st_y(i1, x0 * s + x1 * c);
}
