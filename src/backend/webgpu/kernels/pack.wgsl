// Casts any input dtype into a packed output dtype (bf16 or f16 two per u32, u8 four per u32):
// each invocation writes one whole u32 word, so no two invocations share a word.
{{HEADER}}

{{PACKING}}

// Float → u8: the saturated i32 of f32_to_i32 (header), wrapped mod 256, as on the CPU.
fn to_u8(v: f32) -> u32 { return u32(f32_to_i32(v)) & 0xffu; }

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
#if INT_TO_U8
      // i32 → u8 wraps the integer itself: through f32, values above 2^24 would round first.
      word |= (u32(ldi_x(i)) & 0xffu) << (k * 8u);
#else
#if INT_IN
      let v = f32(ldi_x(i));
#else
      let v = ld_x(i);
#endif
      word |= {{CONVERT}}(v) << (k * (32u / per));
#endif
    }
  }
  y[w] = word;
}
