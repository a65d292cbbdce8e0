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
    var s = g;
#if CU
    // CU (experimental): four splits an iteration, their loads independent of each other.
    var o1 = 0.0;
    var o2 = 0.0;
    var o3 = 0.0;
    let st = G * P.nrows;
    for (; s + 3u * G < P.nsplit; s += 4u * G) {
      let a0 = s * P.nrows + row;
      let x0 = pacc[a0 * P.d + c0 + c];
      let x1 = pacc[(a0 + st) * P.d + c0 + c];
      let x2 = pacc[(a0 + 2u * st) * P.d + c0 + c];
      let x3 = pacc[(a0 + 3u * st) * P.d + c0 + c];
      o += exp(pm[a0] - mm) * x0;
      o1 += exp(pm[a0 + st] - mm) * x1;
      o2 += exp(pm[a0 + 2u * st] - mm) * x2;
      o3 += exp(pm[a0 + 3u * st] - mm) * x3;
    }
    o += (o1 + o2) + o3;
#endif
    for (; s < P.nsplit; s += G) {
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
