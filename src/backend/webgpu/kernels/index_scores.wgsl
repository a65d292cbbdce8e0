// Backend.indexBlockScores (CPU reference: backend/cpu/select.ts): a lightning indexer's scores
// pooled per block in one pass over the keys. One workgroup per (chunk of WG keys, query row): the
// row's H index queries and head weights in workgroup memory; each invocation scores one key (COOP: G of them share one),
// s = Σ_h w_h · ReLU(scale · q_h·k), reading the key once for all heads (K8: in 16-byte loads); then one invocation per
// block of BLOCK keys takes the max and log Σ e^s of its visible keys (t ≤ the row's position, t < l).
// A block with no visible key gets −1e30 in both outputs.
{{HEADER}}
const WG: u32 = 256u;
const HEADS: u32 = {{HEADS}}u;
const BLOCK: u32 = {{BLOCK}}u;
const HIDDEN: f32 = -3.0e38; // a key the row does not see (scores never come near it)

var<workgroup> ws: array<f32, HEADS>;
var<workgroup> sc: array<f32, WG>;
#if COOP
// COOP (the default where subgroups allow, G = 2; IndexScoreTune.lanes sets G): G lanes a key, lanes j … of one subgroup: lane j reads
// the key's 16-byte words j, j + G, … (a subgroup's loads cover whole rows, contiguous), dots its
// share with the query (in workgroup memory as vec4s), and the G partial dots are summed by
// subgroupShuffleXor; each loop step scores WG / G keys, G steps a chunk. K8 keys only.
const G: u32 = {{G}}u;
var<workgroup> qv: array<vec4<f32>, {{QW}} / 4>;
#else
var<workgroup> qs: array<f32, {{QW}}>;
#endif

// The block reduction after the chunk's scores are in sc: one invocation per block of BLOCK keys.
fn blocks_out(chunk: u32, row: u32, lid: u32, live: bool) {
  let j = chunk * (WG / BLOCK) + lid;
  if (live && lid < WG / BLOCK && j < P.nb) {
    var m = HIDDEN;
    for (var u = 0u; u < BLOCK; u++) { m = max(m, sc[lid * BLOCK + u]); }
    var outMax = -1e30;
    var outLog = -1e30;
    if (m > -2.0e38) {
      var z = 0.0;
      for (var u = 0u; u < BLOCK; u++) {
        let v = sc[lid * BLOCK + u];
        if (v > -2.0e38) { z += exp(v - m); }
      }
      outMax = m;
      outLog = m + log(z);
    }
    st_mx(row * P.nb + j, outMax);
    st_lm(row * P.nb + j, outLog);
  }
}

#if COOP
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let chunk = wid.x;
  let row = wid.y + wid.z * 65535u;
  let live = row < P.rows;
  let hd = HEADS * P.d;
  if (live) {
    for (var e = lid; e < hd / 4u; e += WG) { qv[e] = vec4<f32>(ld_q(row * hd + 4u * e), ld_q(row * hd + 4u * e + 1u), ld_q(row * hd + 4u * e + 2u), ld_q(row * hd + 4u * e + 3u)); }
    if (lid < HEADS) { ws[lid] = ld_w(row * HEADS + lid); }
  }
  workgroupBarrier();
  let b = row / max(P.n, 1u);
  let p = P.pos + row % max(P.n, 1u);
  let grp = lid / G;
  let lane = lid % G;
#if PRE
  // PRE (IndexScoreTune.prefetch): every iteration's words of its key loaded before any is used
  // (constant indices: issued together), G · DK / 8 / G = DK / 8 words a lane.
  var pre: array<vec4<u32>, {{DK}}u / 8u>;
  for (var it = 0u; it < G; it++) {
    let t = chunk * WG + it * (WG / G) + grp;
    let base = (b * P.tmax + min(t, P.l - 1u)) * {{DK}}u;
    for (var c = 0u; c < {{DK}}u / 8u / G; c++) { pre[it * ({{DK}}u / 8u / G) + c] = k[(base >> 3u) + lane + c * G]; }
  }
#endif
  for (var it = 0u; it < G; it++) {
    let t = chunk * WG + it * (WG / G) + grp;
    // Past the keys read, the last one is read again (no branch around the loads or the shuffles).
    var dots: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) { dots[h] = 0.0; }
#if INT4
    // INT4 (keys as INT4 codes): the row's groups of 32 codes, a lane a group at a time (four words,
    // eight codes c + 8 a word, value i of the group in bits 4·(i mod 8) of word ⌊i/8⌋); the group's
    // dots with q are taken on the codes c and scaled once by the group's scale.
    let row_at = b * P.tmax + min(t, P.l - 1u);
    for (var gi = lane; gi < {{DK}}u / 32u; gi += G) {
      let wv = k[row_at * ({{DK}}u / 32u) + gi];
      let sc = ld_ks(row_at * ({{DK}}u / 32u) + gi);
      var part: array<f32, HEADS>;
      for (var h = 0u; h < HEADS; h++) { part[h] = 0.0; }
      for (var j = 0u; j < 4u; j++) {
        let word = wv[j];
        let lo = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - vec4<f32>(8.0);
        let hi = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - vec4<f32>(8.0);
        for (var h = 0u; h < HEADS; h++) {
          let o = (h * {{DK}}u + 32u * gi + 8u * j) / 4u;
          part[h] += dot(qv[o], lo) + dot(qv[o + 1u], hi);
        }
      }
      for (var h = 0u; h < HEADS; h++) { dots[h] += sc * part[h]; }
    }
#else
    let base = (b * P.tmax + min(t, P.l - 1u)) * {{DK}}u;
    for (var c8 = lane; c8 < {{DK}}u / 8u; c8 += G) {
#if PRE
      let wv = pre[it * ({{DK}}u / 8u / G) + c8 / G];
#else
      let wv = k[(base >> 3u) + c8];
#endif
      let lo = up4(wv.xy);
      let hi = up4(wv.zw);
      for (var h = 0u; h < HEADS; h++) {
        let o = (h * {{DK}}u + 8u * c8) / 4u;
        dots[h] += dot(qv[o], lo) + dot(qv[o + 1u], hi);
      }
    }
#endif
    for (var h = 0u; h < HEADS; h++) {
      if (G > 1u) { dots[h] += subgroupShuffleXor(dots[h], 1u); }
      if (G > 2u) { dots[h] += subgroupShuffleXor(dots[h], 2u); }
      if (G > 4u) { dots[h] += subgroupShuffleXor(dots[h], 4u); }
      if (G > 8u) { dots[h] += subgroupShuffleXor(dots[h], 8u); }
    }
    if (lane == 0u) {
      var s = HIDDEN;
      if (live && t < P.l && t <= p) {
        s = 0.0;
        for (var h = 0u; h < HEADS; h++) { s += ws[h] * max(0.0, P.scale * dots[h]); }
      }
      sc[it * (WG / G) + grp] = s;
    }
  }
  workgroupBarrier();
  blocks_out(chunk, row, lid, live);
}
#else
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let chunk = wid.x;
  let row = wid.y + wid.z * 65535u;
  let live = row < P.rows;
  let hd = HEADS * P.d;
  if (live) {
    for (var j = lid; j < hd; j += WG) { qs[j] = ld_q(row * hd + j); }
    if (lid < HEADS) { ws[lid] = ld_w(row * HEADS + lid); }
  }
  workgroupBarrier();
  let b = row / max(P.n, 1u);
  let p = P.pos + row % max(P.n, 1u);
  let t = chunk * WG + lid;
  var s = HIDDEN;
  if (live && t < P.l && t <= p) {
    var dots: array<f32, HEADS>;
    for (var h = 0u; h < HEADS; h++) { dots[h] = 0.0; }
    let base = (b * P.tmax + t) * P.d;
#if K8
    // K8: the key row in DK/8 16-byte loads (a constant trip count: issued together).
    for (var c8 = 0u; c8 < {{DK}}u / 8u; c8++) {
      let wv = k[(base >> 3u) + c8];
      let lo = up4(wv.xy);
      let hi = up4(wv.zw);
      for (var h = 0u; h < HEADS; h++) {
        let o = h * P.d + 8u * c8;
        dots[h] += dot(vec4<f32>(qs[o], qs[o + 1u], qs[o + 2u], qs[o + 3u]), lo) + dot(vec4<f32>(qs[o + 4u], qs[o + 5u], qs[o + 6u], qs[o + 7u]), hi);
      }
    }
#else
    for (var e = 0u; e < P.d; e++) {
      let k = ld_k(base + e);
      for (var h = 0u; h < HEADS; h++) { dots[h] += qs[h * P.d + e] * k; }
    }
#endif
    s = 0.0;
    for (var h = 0u; h < HEADS; h++) { s += ws[h] * max(0.0, P.scale * dots[h]); }
  }
  sc[lid] = s;
  workgroupBarrier();
  blocks_out(chunk, row, lid, live);
}
#endif
