// out[i] = a[ia] op b[ib] with NumPy broadcasting: ia, ib from out's index and per-input strides
// (0 on broadcast axes). FLAT: both inputs have out's shape; BSCALAR: b is one element.
{{HEADER}}

fn fop(a: f32, b: f32) -> f32 { return {{EXPR}}; }
#if INT
fn iop(a: i32, b: i32) -> i32 { return {{IEXPR}}; }
#endif

fn offsets(i: u32) -> vec2<u32> {
  var rem = i;
  var oa = 0u;
  var ob = 0u;
  for (var d = i32(P.rank) - 1; d >= 0; d--) {
    let dim = P.shape[d / 4][d % 4];
    let k = rem % dim;
    rem = rem / dim;
    oa += k * P.sa[d / 4][d % 4];
    ob += k * P.sb[d / 4][d % 4];
  }
  return vec2<u32>(oa, ob);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
#if FLAT
  let o = vec2<u32>(i, i);
#else
#if BSCALAR
  let o = vec2<u32>(i, 0u);
#else
  let o = offsets(i);
#endif
#endif
#if INT
  sti_y(i, iop(ldi_a(o.x), ldi_b(o.y)));
#else
  st_y(i, fop(ld_a(o.x), ld_b(o.y)));
#endif
}
