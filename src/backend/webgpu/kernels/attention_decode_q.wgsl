// The query load the decode split passes share (attention_decode_step.wgsl, hence attention_decode.wgsl
// and fox_fpa_decode.wgsl, and attention_decode_lanes.wgsl), pasted where they name DECODE_Q. The
// including file declares WG, RM, D4, Qs (RM·D4 vec4), qrow(b, kvh, r) and the loader ld_q.

// The group's query rows into Qs, pre-scaled, 4 columns a vec4; rows past P.rows and columns past
// P.d as zeros.
fn decode_load_q(lid: u32, b: u32, kvh: u32) {
  for (var e = lid; e < RM * D4; e += WG) {
    let r = e / D4;
    let c = (e % D4) * 4u;
    var x = vec4<f32>(0.0);
    if (r < P.rows && c < P.d) {
      let o = qrow(b, kvh, r) * P.d + c;
      x.x = ld_q(o);
      if (c + 1u < P.d) { x.y = ld_q(o + 1u); }
      if (c + 2u < P.d) { x.z = ld_q(o + 2u); }
      if (c + 3u < P.d) { x.w = ld_q(o + 3u); }
      x *= P.scale;
    }
    Qs[e] = x;
  }
}
