// Column sums over row blocks for the norm weight gradients, without atomics: invocation
// (c, b) adds term(r, c) over rows r of block b = [b·span, min(rows, (b+1)·span)) into
// out[b, c] in a fixed order (deterministic). A second dispatch (PLAIN over the f32 partials,
// one block) finishes when there is more than one block. Terms: RMS dy·x·rstd[r] (RMSNorm dw),
// LNW dy·(x − mean[r])·rstd[r] (LayerNorm dw), PLAIN dy (LayerNorm db, and the second pass).
{{HEADER}}
{{COMMON}}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  let b = gid.y;
  if (c >= P.cols) { return; }
  let r0 = b * P.span;
  let r1 = min(P.rows, r0 + P.span);
  var acc = 0.0;
  for (var r = r0; r < r1; r++) {
    let i = r * P.cols + c;
#if RMS
    acc += ld_dy(i) * ld_x(i) * ld_rstd(r);
#endif
#if LNW
    acc += ld_dy(i) * ((ld_x(i) - ld_mean(r)) * ld_rstd(r));
#endif
#if PLAIN
    acc += ld_dy(i);
#endif
  }
  st_out(b * P.cols + c, acc);
}
