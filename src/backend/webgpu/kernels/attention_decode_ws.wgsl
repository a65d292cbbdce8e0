// Flash-decoding, split pass, warp-specialised form (experimental; 16-bit K/V, head dim DK = 8·2^i
// up to 256 so that DK/4 divides 128, subgroups): attention_decode.wgsl's steps of 128 keys, with
// the K work of step t and the V work of step t − 1 in the same phase, done by different
// invocations, so that K and V loads are in flight together and no invocation holds both in
// registers.
//   producers (lid < 128): invocation t scores key k0 + t of step t (16-byte K loads, dotted with
//           every query row, q pre-scaled in workgroup memory) into S[t mod 2], and its
//           subgroup's maximum of each row into Mx[t mod 2];
//   consumers (lid ≥ 128): invocation (c4, g) adds P·V of step t − 1 (keys g, g + NG, …, columns
//           4·c4 … 4·c4 + 3; P from S[(t − 1) mod 2]) to its RM accumulators.
// Then, behind barriers, the short part of step t: each row's new maximum and rescale α (one
// invocation a row), P = exp(s − m) in place in S[t mod 2] (every invocation, two cells each,
// adding its P to its own share of each row's sum l) and the consumers' O *= α. The loop runs
// one more step than there are key steps, so the last P·V drains. At the end the consumers' NG key
// groups meet in workgroup memory, l is summed over all invocations, and the chunk's (m, l,
// unnormalised O) go out as attention_decode.wgsl's partials.
// The producers' subgroupMax sits behind a branch on the invocation index that is uniform within each
// subgroup (subgroups never straddle the 128-invocation halves), which the analysis cannot see.
diagnostic(off, subgroup_uniformity);
{{HEADER}}
{{COMMON}}

const WG = 256u;
const BKD = 128u;
const RM = {{RM}}u;
const DK = {{DK}}u;
const D4 = DK / 4u;
const NG = BKD / D4;

var<workgroup> Qs: array<vec4<f32>, RM * D4>;
var<workgroup> Ss: array<f32, 2u * RM * BKD>;
var<workgroup> Mx: array<f32, 2u * RM * BKD>;
var<workgroup> Mrow: array<f32, RM>;
var<workgroup> Arow: array<f32, RM>;
var<workgroup> Red: array<vec4<f32>, RM * D4>;

fn qrow(b: u32, kvh: u32, r: u32) -> u32 {
  let hh = r / P.tq;
  return (b * P.h + kvh * P.group + hh) * P.tq + r % P.tq;
}

fn visible_row(r: u32, j: u32) -> bool { return r < P.rows && visible(r % P.tq, j); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sgsize: u32) {
  let split = wid.x;
  let kvh = wid.y;
  let b = wid.z;
  let kbase = (b * P.hkv + kvh) * P.tk * DK;
  for (var e = lid; e < RM * D4; e += WG) {
    let r = e / D4;
    let c = (e % D4) * 4u;
    var x = vec4<f32>(0.0);
    if (r < P.rows) {
      let o = qrow(b, kvh, r) * DK + c;
      x = vec4<f32>(ld_q(o), ld_q(o + 1u), ld_q(o + 2u), ld_q(o + 3u)) * P.scale;
    }
    Qs[e] = x;
  }
  if (lid < RM) { Mrow[lid] = -BIG; }
  let kstart = P.lo + split * P.chunk;
  let kend = min(P.hi, kstart + P.chunk);
  let nsteps = (kend - kstart + BKD - 1u) / BKD;
  let producer = lid < BKD;
  let cl = lid - BKD;
  let c4 = cl % D4;
  let g = cl / D4;
  var acc: array<vec4<f32>, RM>;
  var lsum: array<f32, RM>;
  for (var r = 0u; r < RM; r++) { acc[r] = vec4<f32>(0.0); lsum[r] = 0.0; }
  workgroupBarrier();
  for (var t = 0u; t <= nsteps; t++) {
    let cur = (t % 2u) * RM * BKD;
    let prev = ((t + 1u) % 2u) * RM * BKD;
    if (producer) {
      if (t < nsteps) {
        // Scores of key k0 + lid (past kend the chunk's last row is read again, then masked).
        let j = kstart + t * BKD + lid;
        let base = kbase + min(j, kend - 1u) * DK;
        var dots: array<f32, RM>;
        for (var r = 0u; r < RM; r++) { dots[r] = 0.0; }
        for (var c8 = 0u; c8 < DK / 8u; c8++) {
          let w = k[(base >> 3u) + c8];
          let lo = up4(w.xy);
          let hi = up4(w.zw);
          for (var r = 0u; r < RM; r++) { dots[r] += dot(Qs[r * D4 + 2u * c8], lo) + dot(Qs[r * D4 + 2u * c8 + 1u], hi); }
        }
        for (var r = 0u; r < RM; r++) {
          let s = select(-BIG, dots[r], j < kend && visible_row(r, j));
          Ss[cur + r * BKD + lid] = s;
          Mx[cur + r * BKD + lid] = subgroupMax(s);
        }
      }
    } else if (t > 0u && c4 < D4) {
      // P·V of the step before, its P already exponentiated and O already rescaled.
      let k0 = kstart + (t - 1u) * BKD;
      for (var i = 0u; i < BKD / NG; i++) {
        let jj = g + i * NG;
        let vv = up4(v[(kbase + min(k0 + jj, kend - 1u) * DK + 4u * c4) >> 2u]);
        for (var r = 0u; r < RM; r++) { acc[r] += Ss[prev + r * BKD + jj] * vv; }
      }
    }
    workgroupBarrier();
    if (t < nsteps) {
      if (lid < RM) {
        var mx = -BIG;
        for (var i = 0u; i < BKD; i += sgsize) { mx = max(mx, Mx[cur + lid * BKD + i]); }
        let m = max(Mrow[lid], mx);
        Arow[lid] = exp(Mrow[lid] - m);
        Mrow[lid] = m;
      }
      workgroupBarrier();
      for (var r = 0u; r < RM; r++) {
        acc[r] *= Arow[r];
        lsum[r] *= Arow[r];
      }
      for (var e = lid; e < RM * BKD; e += WG) {
        let r = e / BKD;
        let s = Ss[cur + e];
        let p = select(0.0, exp(s - Mrow[r]), s > VIS);
        Ss[cur + e] = p;
        lsum[r] += p;
      }
      workgroupBarrier();
    }
  }
  // l: each invocation's share, summed over the workgroup (through Ss, free now: RM·WG cells).
  workgroupBarrier();
  for (var r = 0u; r < RM; r++) { Ss[r * WG + lid] = lsum[r]; }
  // The consumers' key groups into group 0.
  for (var gg = 1u; gg < NG; gg++) {
    workgroupBarrier();
    if (!producer && g == gg) { for (var r = 0u; r < RM; r++) { Red[r * D4 + c4] = acc[r]; } }
    workgroupBarrier();
    if (!producer && g == 0u) { for (var r = 0u; r < RM; r++) { acc[r] += Red[r * D4 + c4]; } }
  }
  workgroupBarrier();
  if (!producer && g == 0u) {
    for (var r = 0u; r < P.rows; r++) {
      let at = split * P.nrows + qrow(b, kvh, r);
      let c = 4u * c4;
      pacc[at * DK + c] = acc[r].x;
      pacc[at * DK + c + 1u] = acc[r].y;
      pacc[at * DK + c + 2u] = acc[r].z;
      pacc[at * DK + c + 3u] = acc[r].w;
      if (c4 == 0u) {
        var l = 0.0;
        for (var i = 0u; i < WG; i++) { l += Ss[r * WG + i]; }
        pm[at] = Mrow[r];
        pl[at] = l;
      }
    }
  }
}
