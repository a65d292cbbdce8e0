// Shared by every kernel that writes packed 16-bit floats (substituted as {{PACKING}} by
// kernel() in elementwise.ts): f32 → bf16 bits (round to nearest even, NaN stays NaN) and
// f32 → f16 bits, one value or two packed into a u32 word.
fn to_bf16(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u) { return 0x7fc0u; }
  return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}
fn to_f16(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu; }
fn pack_bf16(a: f32, b: f32) -> u32 { return to_bf16(a) | (to_bf16(b) << 16u); }
fn pack_f16(a: f32, b: f32) -> u32 { return pack2x16float(vec2<f32>(a, b)); }
