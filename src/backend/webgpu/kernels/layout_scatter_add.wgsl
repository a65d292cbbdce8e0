// y = base + src scattered at rows idx along the middle axis of (O, N, I), deterministically and
// without atomics: output element (a, r, c) walks the M candidates of its column in order and adds
// those whose index is r (the reference's order; f32 accumulation, i32 adds exactly with
// wrap-around under INT). Cost O(O·N·I·M).
{{HEADER}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  let c = i % P.inner;
  let r = i32((i / P.inner) % P.rows);
  let a = i / (P.inner * P.rows);
#if INT
  var acc = ldi_base(i);
#else
  var acc = ld_base(i);
#endif
  var p = a * P.m * P.inner + c;
  for (var j = 0u; j < P.m; j++) {
#if INT
    if (ldi_idx(p) == r) { acc += ldi_src(p); }
#else
    if (ldi_idx(p) == r) { acc += ld_src(p); }
#endif
    p += P.inner;
  }
#if INT
  sti_y(i, acc);
#else
  st_y(i, acc);
#endif
}
