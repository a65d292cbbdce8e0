// What the threshold searches of rows_select.wgsl (Spot's selectOpen) and lighthouse.wgsl (the
// cascade) share, pasted where they name SELECT_COMMON: the u32 key of a score in the same order,
// and a workgroup sum of a round's 16 counters. The including file declares WG (and SG where
// subgroups are used).

// The u32 key of a score, in the same order (−0 = +0).
fn order_key(x: f32) -> u32 {
  let u = select(bitcast<u32>(x), 0u, x == 0.0);
  return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

// Σ over the workgroup of four vec4s (a round's 16 counters), to every invocation (uniform control
// flow). SG: each subgroup's sum, then one lane a subgroup (lanes lid … lid + sgsize − 1 form one,
// as attention_decode_step.wgsl reads them too) into workgroup memory; else four tree sums.
var<workgroup> part: array<vec4<f32>, WG>;
var<workgroup> tot: array<vec4<f32>, 4>;
#if SG
fn wg_sum16(lid: u32, sgsize: u32, a: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
  var s: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) { s[i] = subgroupAdd(a[i]); }
  if (lid % sgsize == 0u) {
    for (var i = 0u; i < 4u; i++) { part[(lid / sgsize) * 4u + i] = s[i]; }
  }
  workgroupBarrier();
  if (lid < 4u) {
    var t = vec4<f32>(0.0);
    for (var g = 0u; g < (WG + sgsize - 1u) / sgsize; g++) { t += part[g * 4u + lid]; }
    tot[lid] = t;
  }
  workgroupBarrier();
  var r: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) { r[i] = tot[i]; }
  workgroupBarrier();
  return r;
}
#else
fn wg_sum16(lid: u32, sgsize: u32, a: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
  var r: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) {
    part[lid] = a[i];
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      if (lid < s) { part[lid] += part[lid + s]; }
      workgroupBarrier();
    }
    r[i] = part[0];
    workgroupBarrier();
  }
  return r;
}
#endif
