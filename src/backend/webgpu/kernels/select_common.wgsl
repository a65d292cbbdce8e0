// What the threshold searches of rows_select.wgsl (Spot's selectOpen) and lighthouse.wgsl (the
// cascade) share, pasted where they name SELECT_COMMON: the u32 key of a score in the same order,
// a round's 16 counters (digit_count, digit_pick) and their workgroup sum. The including file declares WG (and SG where
// subgroups are used).

// The u32 key of a score, in the same order (−0 = +0).
fn order_key(x: f32) -> u32 {
  let u = select(bitcast<u32>(x), 0u, x == 0.0);
  return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

// One entry of a threshold search's round (digits 4 bits a round from the top, θ's higher digits
// fixed): an entry whose key is at or above θ adds its weight w to the counters of the candidate
// digits 1 … min(15, (key − θ) >> s) (counter j − 1 for digit j).
fn digit_count(a: ptr<function, array<vec4<f32>, 4>>, key: u32, theta: u32, s: u32, w: f32) {
  if (key < theta) { return; }
  let lv = vec4<f32>(f32(min(15u, (key - theta) >> s)));
  let wv = vec4<f32>(w);
  let z = vec4<f32>(0.0);
  (*a)[0] += select(z, wv, lv >= vec4<f32>(1.0, 2.0, 3.0, 4.0));
  (*a)[1] += select(z, wv, lv >= vec4<f32>(5.0, 6.0, 7.0, 8.0));
  (*a)[2] += select(z, wv, lv >= vec4<f32>(9.0, 10.0, 11.0, 12.0));
  (*a)[3] += select(z, wv, lv >= vec4<f32>(13.0, 14.0, 15.0, 16.0));
}

// The round's digit from the workgroup's counters f: the largest j whose weight at or above
// θ | j << s reaches goal (0 if none; the weight only falls with j).
fn digit_pick(f: array<vec4<f32>, 4>, goal: f32) -> u32 {
  var j = 0u;
  for (var i = 0u; i < 15u; i++) { if (f[i / 4u][i % 4u] >= goal) { j = i + 1u; } }
  return j;
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
