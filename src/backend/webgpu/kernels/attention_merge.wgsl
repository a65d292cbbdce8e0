// The logsumexp merge of two attention parts over disjoint keys (Backend.mergeLse, ops/attention_merge.ts):
// one invocation per output element e = (row, c) of (O·M, D). Part p's row for output row
// (o, i) is o·N_p + rows_p[⌊o/share⌋·M + i] where the part has a row list (RA, RB), else o·M + i.
// A part whose row saw no key (lse ≤ −1e30) weighs 0 and its out is not read into the sum (it
// may hold anything); a row neither part saw gets NaN and lse −∞, as the composite merge gives.
{{HEADER}}

fn part_row(o: u32, n: u32, r: i32) -> u32 { return o * n + u32(r); }

// A float from its bits at run time (a constant NaN or infinity does not compile).
fn f32_from_bits(b: u32) -> f32 { var v = b; return bitcast<f32>(v); }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let e = gid.x + gid.y * nw.x * 256u;
  if (e >= P.n) { return; }
  let c = e % P.d;
  let row = e / P.d;
  let i = row % P.m;
  let o = row / P.m;
#if RA
  let ia = part_row(o, P.na, ldi_ra((o / P.share) * P.m + i));
#else
  let ia = row;
#endif
#if RB
  let ib = part_row(o, P.nb, ldi_rb((o / P.share) * P.m + i));
#else
  let ib = row;
#endif
  let la = ld_la(ia);
  let lb = ld_lb(ib);
  let sa = la > -1e30;
  let sb = lb > -1e30;
  let top = max(select(-1e30, la, sa), select(-1e30, lb, sb));
  let wa = select(0.0, exp(la - top), sa);
  let wb = select(0.0, exp(lb - top), sb);
  var num = 0.0;
  if (sa) { num += wa * ld_a(ia * P.d + c); }
  if (sb) { num += wb * ld_b(ib * P.d + c); }
  st_y(e, select(f32_from_bits(0x7fc00000u), num / (wa + wb), sa || sb));
  if (c == 0u) { st_ly(row, select(f32_from_bits(0xff800000u), top + log(wa + wb), sa || sb)); }
}
