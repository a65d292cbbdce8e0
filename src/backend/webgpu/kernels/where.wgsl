// out[i] = cond[ic] != 0 ? a[ia] : b[ib], all three broadcast to out's shape.
{{HEADER}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  var rem = i;
  var oc = 0u;
  var oa = 0u;
  var ob = 0u;
  for (var d = i32(P.rank) - 1; d >= 0; d--) {
    let dim = P.shape[d / 4][d % 4];
    let k = rem % dim;
    rem = rem / dim;
    oc += k * P.sc[d / 4][d % 4];
    oa += k * P.sa[d / 4][d % 4];
    ob += k * P.sb[d / 4][d % 4];
  }
#if INT
  sti_y(i, select(ldi_b(ob), ldi_a(oa), ld_c(oc) != 0.0));
#else
  st_y(i, select(ld_b(ob), ld_a(oa), ld_c(oc) != 0.0));
#endif
}
