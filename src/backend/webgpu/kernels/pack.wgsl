// Casts any input dtype into a packed output dtype (bf16 or f16 two per u32, u8 four per u32):
// each invocation writes one whole u32 word, so no two invocations share a word.
{{HEADER}}

fn to_bf16(v: f32) -> u32 {
  let u = bitcast<u32>(v);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu) != 0u) { return 0x7fc0u; }
  return ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) & 0xffffu;
}

fn to_f16(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu; }

fn to_u8(v: f32) -> u32 { return u32(i32(trunc(v))) & 0xffu; }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let w = gid.x + gid.y * nw.x * 256u;
  let per = {{PER_WORD}}u;
  let first = w * per;
  if (first >= P.n) { return; }
  var word = 0u;
  for (var k = 0u; k < per; k++) {
    let i = first + k;
    if (i < P.n) {
#if INT_IN
      let v = f32(ldi_x(i));
#else
      let v = ld_x(i);
#endif
      word |= {{CONVERT}}(v) << (k * (32u / per));
    }
  }
  y[w] = word;
}
