// Depth-Attention mixing (specs/fpa_depth.md §3.1), one invocation per (batch, kv head, token) row.
// The m candidates' keys and values arrive stacked in kk and vv, candidate c at element c·P.pitch
// (the host packs them with buffer copies; pitch keeps every slot on a 4-byte boundary). Arithmetic,
// the group-mean query q̄ and the softmax are f32 whatever the storage dtype.
//   FWD  q̄ = Σ_{h∈g} q_h / r; α_c = softmax_c(scale·⟨q̄, k_c⟩) (scores parked in alpha, then
//        normalised in place); out = Σ_c α_c·v_c.
//   BWD  dα_c = ⟨dout, v_c⟩, de_c = α_c·(dα_c − Σ α·dα); dv_c = α_c·dout, dk_c = scale·de_c·q̄,
//        dq_h = scale·Σ_c de_c·k_c / r for each head h of the group (each output cell has one writer).
//        dk, dv are stacked like kk, vv (element c·P.opitch).
{{HEADER}}

const WG = 64u;
const DM = {{DM}}u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let row = gid.x + gid.y * nw.x * WG;
  if (row >= P.rows) { return; }
  let i = row % P.t;
  let bg = row / P.t;            // b·hkv + g
  let g = bg % P.hkv;
  let b = bg / P.hkv;
  let o = row * P.d;             // this row's first element in every (B, Hkv, T, D) tensor
  var qbar: array<f32, DM>;
  for (var x = 0u; x < P.d; x++) { qbar[x] = 0.0; }
  for (var j = 0u; j < P.r; j++) {
    let qo = ((b * P.h + g * P.r + j) * P.t + i) * P.d;
    for (var x = 0u; x < P.d; x++) { qbar[x] += ld_q(qo + x); }
  }
  for (var x = 0u; x < P.d; x++) { qbar[x] = qbar[x] / f32(P.r); }
  let ao = row * P.m;
#if FWD
  var mx = -1e30;
  for (var c = 0u; c < P.m; c++) {
    var s = 0.0;
    for (var x = 0u; x < P.d; x++) { s += qbar[x] * ld_kk(c * P.pitch + o + x); }
    s = s * P.scale;
    alpha[ao + c] = s;
    mx = max(mx, s);
  }
  var z = 0.0;
  for (var c = 0u; c < P.m; c++) {
    let e = exp(alpha[ao + c] - mx);
    alpha[ao + c] = e;
    z += e;
  }
  for (var c = 0u; c < P.m; c++) { alpha[ao + c] = alpha[ao + c] / z; }
  for (var x = 0u; x < P.d; x++) {
    var acc = 0.0;
    for (var c = 0u; c < P.m; c++) { acc += alpha[ao + c] * ld_vv(c * P.pitch + o + x); }
    st_out(o + x, acc);
  }
#else
  var mean = 0.0;
  for (var c = 0u; c < P.m; c++) {
    var da = 0.0;
    for (var x = 0u; x < P.d; x++) { da += ld_g(o + x) * ld_vv(c * P.pitch + o + x); }
    mean += ld_alpha(ao + c) * da;
  }
  var dqbar: array<f32, DM>;
  for (var x = 0u; x < P.d; x++) { dqbar[x] = 0.0; }
  for (var c = 0u; c < P.m; c++) {
    let a = ld_alpha(ao + c);
    var da = 0.0;
    for (var x = 0u; x < P.d; x++) { da += ld_g(o + x) * ld_vv(c * P.pitch + o + x); }
    let s = a * (da - mean) * P.scale;
    for (var x = 0u; x < P.d; x++) {
      st_dv(c * P.opitch + o + x, a * ld_g(o + x));
      st_dk(c * P.opitch + o + x, s * qbar[x]);
      dqbar[x] += s * ld_kk(c * P.pitch + o + x);
    }
  }
  for (var j = 0u; j < P.r; j++) {
    let qo = ((b * P.h + g * P.r + j) * P.t + i) * P.d;
    for (var x = 0u; x < P.d; x++) { st_dq(qo + x, dqbar[x] / f32(P.r)); }
  }
#endif
}
