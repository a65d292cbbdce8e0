// Flash-decoding's split pass over a fine block mask's list (Spot's 16-token blocks) by lane pairs:
// the LANES form of attention_decode.ts (DecodeTune.lanes). One workgroup per (chunk, kv head, batch)
// serves the GQA group's RM query rows, as attention_decode.wgsl does, but its W subgroups of S lanes
// (S the device's one subgroup size) each walk their own keys with no barrier in the loop:
//   list    the chunk's listed blocks (whole blocks of the row's list, at most LMAX) read once into
//           workgroup memory as each block's first key; virtual key v is key v % MASK_KB of block
//           v / MASK_KB, and a subgroup takes KPI = S / 2 consecutive virtual keys an iteration;
//   scores  lane pair (2·kk, 2·kk + 1) takes key kk of the iteration, each lane half of its K row
//           (16-byte loads, 8 elements each) against every row's q (pre-scaled, workgroup memory);
//           one shuffle adds the halves;
//   softmax the subgroup's running max m per row (subgroupMax), rescale α, P = exp(s − m) (0 where
//           the key is not visible: past the chunk, past kvlen, or outside causal/window);
//   P·V     lane c owns V columns 4·c, 4·(c + S), … (columns past D: the last group again, never
//           stored); the iteration's V rows are read whole by the subgroup (coalesced) before the
//           scores; each key's P comes from its pair by shuffle.
// At the end the W subgroups' (m, l, O) merge through workgroup memory into the chunk's partial, the
// layout attention_combine.wgsl merges. Taken where the subgroup size is fixed (the adapter's least
// and largest agree), the head dim is a multiple of 16, and the mask has no pair predicate. The
// loop's subgroup operations run where each subgroup's lanes agree, which Tint's analysis cannot
// see (the bound depends on the subgroup's index): the header turns subgroup_uniformity off.
{{HEADER}}
{{COMMON}}
{{MASKING}}
{{DECODE_Q}}

const S = {{S}}u;
const W = {{W}}u;
const WG = S * W;
const RM = {{RM}}u;
const DK = {{DK}}u;
const D4 = DK / 4u;
const KPI = S / 2u;
// 8-element groups of half a K row, and the V column vec4s a lane owns.
const HALF8 = DK / 16u;
const CPL = (D4 + S - 1u) / S;
const LMAX = {{LMAX}}u;

var<workgroup> Qs: array<vec4<f32>, RM * D4>;
var<workgroup> Lst: array<u32, LMAX>;
var<workgroup> Wm: array<f32, W * RM>;
var<workgroup> Wl: array<f32, W * RM>;
var<workgroup> Wacc: array<vec4<f32>, W * RM * D4>;

// Query row r of the workgroup: its row in q/out (of B·H·Tq).
fn qrow(b: u32, kvh: u32, r: u32) -> u32 {
  let hh = r / P.tq;
  return (b * P.h + kvh * P.group + hh) * P.tq + r % P.tq;
}

// Elements e … e + 7 of K (e a multiple of 8); elements e … e + 3 of V as stored (VR: packed halves
// with K8, else f32), and unpacked (upv).
struct K8v { lo: vec4<f32>, hi: vec4<f32> }
fn ldk8(e: u32) -> K8v {
#if K8
  let w = k[e >> 3u];
  return K8v(up4(w.xy), up4(w.zw));
#else
  return K8v(ldk4(e, 4u), ldk4(e + 4u, 4u));
#endif
}
#if K8
alias VR = vec2<u32>;
fn ldvr(e: u32) -> VR { return v[e >> 2u]; }
fn upv(w: VR) -> vec4<f32> { return up4(w); }
#else
alias VR = vec4<f32>;
fn ldvr(e: u32) -> VR { return v[e >> 2u]; }
fn upv(w: VR) -> vec4<f32> { return w; }
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let split = wid.x;
  let kvh = wid.y;
  let b = wid.z;
  let kbase = (b * P.hkv + kvh) * P.tk * P.d;
  decode_load_q(lid, b, kvh);
  // The group's list (its first head's), cut into P.nsplit chunks of whole blocks.
  let mrow = mask_row(b, kvh * P.group, 0u);
  let nb = mask_list_count(b, kvh * P.group, mrow, lid);
  let per = (nb + P.nsplit - 1u) / P.nsplit;
  let bstart = min(nb, split * per);
  let nblk = min(min(nb, bstart + per) - bstart, LMAX);
  for (var e = lid; e < nblk; e += WG) { Lst[e] = u32(mask[mrow + 1u + bstart + e] >> 1u) * MASK_KB; }
  workgroupBarrier();

  let w = lid / S;
  let lane = lid % S;
  let kk = lane >> 1u;
  let hh = lane & 1u;
  var m: array<f32, RM>;
  var l: array<f32, RM>;
  var acc: array<vec4<f32>, RM * CPL>;
  for (var r = 0u; r < RM; r++) { m[r] = -BIG; l[r] = 0.0; }
  for (var i = 0u; i < RM * CPL; i++) { acc[i] = vec4<f32>(0.0); }
  let nv = nblk * MASK_KB;
  // The iteration written out by the host (attention_decode.ts lanesUnrolled: constant indices,
  // every load issued before its first use; the form with loops here took 0.047 against 0.039 ms
  // on the H100 for a random tenth of 128K keys, bench/results_lanes_ur_forms_1207_h100.log). Its
  // V values are loaded before its scores, so that their latency runs under the K loads and the
  // softmax, not after them (0.050 against 0.059 ms loaded after, results_lanes2_forms_1207_h100.log).
  // A key that is not visible reads the last valid row (its P is 0, and must not meet a stale NaN).
  // PF (DecodeTune.lanesPrefetch, off: slower on the H100): the next iteration's K and V loaded before this one's math.
{{ITER_BEFORE}}
  for (var v0 = w * KPI; v0 < nv; v0 += W * KPI) {
    let v = min(v0 + kk, nv - 1u);
    let key = Lst[v / MASK_KB] + v % MASK_KB;
    var s: array<f32, RM>;
    for (var r = 0u; r < RM; r++) { s[r] = 0.0; }
{{ITER_LOADS}}
    var alpha: array<f32, RM>;
    for (var r = 0u; r < RM; r++) {
      let dotr = s[r] + subgroupShuffleXor(s[r], 1u);
      let ok = v0 + kk < nv && r < P.rows && visible(r % P.tq, key);
      let mn = max(m[r], subgroupMax(select(-BIG, dotr, ok)));
      alpha[r] = exp(m[r] - mn);
      m[r] = mn;
      let p = select(0.0, exp(dotr - mn), ok);
      l[r] = l[r] * alpha[r] + select(0.0, p, hh == 0u);
      s[r] = p;
    }
    for (var r = 0u; r < RM; r++) {
      for (var i = 0u; i < CPL; i++) { acc[r * CPL + i] *= alpha[r]; }
    }
{{ITER_PV}}
  }
  // The subgroups' (m, l, O) into workgroup memory, merged into the chunk's partial of each row.
  for (var r = 0u; r < RM; r++) {
    let lr = subgroupAdd(l[r]);
    if (lane == 0u) { Wm[w * RM + r] = m[r]; Wl[w * RM + r] = lr; }
    for (var i = 0u; i < CPL; i++) {
      let c = lane + S * i;
      if (c < D4) { Wacc[(w * RM + r) * D4 + c] = acc[r * CPL + i]; }
    }
  }
  workgroupBarrier();
  for (var e = lid; e < RM * D4; e += WG) {
    let r = e / D4;
    let c = e % D4;
    if (r < P.rows) {
      var mm = -BIG;
      for (var ww = 0u; ww < W; ww++) { mm = max(mm, Wm[ww * RM + r]); }
      var o = vec4<f32>(0.0);
      var ll = 0.0;
      for (var ww = 0u; ww < W; ww++) {
        let f = exp(Wm[ww * RM + r] - mm);
        o += f * Wacc[(ww * RM + r) * D4 + c];
        ll += f * Wl[ww * RM + r];
      }
      let at = (P.s0 + split) * P.nrows + qrow(b, kvh, r);
      let cc = 4u * c;
      if (cc < P.d) {
        pacc[at * P.d + cc] = o.x;
        pacc[at * P.d + cc + 1u] = o.y;
        pacc[at * P.d + cc + 2u] = o.z;
        pacc[at * P.d + cc + 3u] = o.w;
      }
      if (c == 0u) { pm[at] = mm; pl[at] = ll; }
    }
  }
}
