// INT4 microscale codes (Backend.quantizeInt4 / dequantizeInt4; CPU reference backend/cpu/int4.ts).
// QUANT: one invocation per group of 32 values: s = max|x| / 7 rounded to f16 (through
// pack2x16float, which needs no f16 feature), c = round(x / s) clamped to −7 … 7 (halves up, as
// Math.round: floor(v + 0.5)), eight codes c + 8 a word, the group's four words written by it alone;
// the scale goes out in f16 where the device stores f16, else in f32 (the host casts it to f16,
// exactly). DEQUANT: one invocation per value.
{{HEADER}}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 64u;
#if QUANT
  if (i >= P.n) { return; }
  let at = i * 32u;
  var top = 0.0;
  for (var j = 0u; j < 32u; j++) { top = max(top, abs(ld_x(at + j))); }
  let s = unpack2x16float(pack2x16float(vec2<f32>(top / 7.0, 0.0))).x;
  for (var w = 0u; w < 4u; w++) {
    var word = 0u;
    for (var j = 0u; j < 8u; j++) {
      var c = 0i;
      if (s > 0.0) { c = clamp(i32(floor(ld_x(at + w * 8u + j) / s + 0.5)), -7i, 7i); }
      word |= u32(c + 8i) << (4u * j);
    }
    sti_codes(i * 4u + w, bitcast<i32>(word));
  }
  st_scales(i, s);
#else
  if (i >= P.n) { return; }
  let word = bitcast<u32>(ldi_codes(i >> 3u));
  let c = i32((word >> (4u * (i & 7u))) & 15u) - 8i;
  st_y(i, f32(c) * ld_scales(i / 32u));
#endif
}
