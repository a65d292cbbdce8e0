// Flash-decoding, combine pass: merges the P.nsplit chunk partials (m, l, unnormalised O, f32)
// of each query row into out = Σ e^(m_s − M)·O_s / Σ e^(m_s − M)·l_s and lse = M + log Σ…. One
// workgroup per row: M and L by workgroup reductions over the splits, then invocation (c, g) sums
// column c over the splits g, g + G, … (loads independent of each other, coalesced along c) and
// the G partial sums meet in workgroup memory. A row whose chunks all saw no key (L = 0) gets
// out 0 and lse −∞.
{{HEADER}}

const WG = 256u;
const DC = {{DC}}u;
const G = WG / DC;
const BIG: f32 = 0x1.fffffep+127f;

var<workgroup> red: array<f32, WG>;

fn f32_from_bits(b: u32) -> f32 { var v = b; return bitcast<f32>(v); }

fn wg_max(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn wg_sum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nw.x;
  if (row >= P.nrows) { return; }
  var m = -BIG;
  for (var s = lid; s < P.nsplit; s += WG) { m = max(m, pm[s * P.nrows + row]); }
  let mm = wg_max(lid, m);
  var l = 0.0;
  for (var s = lid; s < P.nsplit; s += WG) { l += exp(pm[s * P.nrows + row] - mm) * pl[s * P.nrows + row]; }
  let ll = wg_sum(lid, l);
  let c = lid % DC;
  let g = lid / DC;
  for (var c0 = 0u; c0 < P.d; c0 += DC) {
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
    workgroupBarrier();
  }
  if (lid == 0u) { lse[row] = select(f32_from_bits(0xff800000u), mm + log(ll), ll > 0.0); }
}
