// Flash-decoding, combine pass: merges the P.nsplit chunk partials (m, l, unnormalised O, f32)
// of each query row into out = Σ e^(m_s − M)·O_s / Σ e^(m_s − M)·l_s and lse = M + log Σ…. One
// workgroup per row and slice of DC columns (wid.z): (M, L) by one workgroup logsumexp reduction
// over the splits (rows_common.wgsl), then invocation (c, g) sums column c over the splits g,
// g + G, … (loads independent of each other, coalesced along c) and the G partial sums meet in
// workgroup memory. A row whose chunks all saw no key (L = 0) gets
// out 0 and lse −∞.
{{HEADER}}
{{COMMON}}

const DC = {{DC}}u;
const G = WG / DC;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nw.x;
  if (row >= P.nrows) { return; }
  // Each split's (m, l) is an online-logsumexp state: merge them (rows_common.wgsl).
  var a = vec2<f32>(-BIG, 0.0);
  for (var s = lid; s < P.nsplit; s += WG) { a = lse_merge(a, vec2<f32>(pm[s * P.nrows + row], pl[s * P.nrows + row])); }
  let ml = wg_lse(lid, a);
  let mm = ml.x;
  let ll = ml.y;
  // This workgroup's DC columns: slice wid.z of the row.
  let c0 = wid.z * DC;
  let c = lid % DC;
  let g = lid / DC;
  var o = 0.0;
  if (c0 + c < P.d) {
    for (var s = g; s < P.nsplit; s += G) {
      let at = s * P.nrows + row;
      o += exp(pm[at] - mm) * pacc[at * P.d + c0 + c];
    }
  }
  red[lid] = o;
  workgroupBarrier();
  if (g == 0u && c0 + c < P.d) {
    var t = o;
    for (var k = 1u; k < G; k++) { t += red[k * DC + c]; }
    st_out(row * P.d + c0 + c, select(0.0, t / ll, ll > 0.0));
  }
  if (lid == 0u && wid.z == 0u) { lse[row] = select(f32_from_bits(0xff800000u), mm + log(ll), ll > 0.0); }
}
