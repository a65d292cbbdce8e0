// FoX and FPA attention for few query rows (decode), split over the keys (specs/fpa_depth.md §1.1,
// §2.2, §2.6). The visible keys [0, kvlen) are cut into P.nsplit chunks of P.chunk keys; one
// workgroup per (chunk, kv head, batch) serves every query row of the kv head's GQA group (RM rows:
// group·Tq padded to a power of two), so each K and V row is read once, and writes the chunk's f32
// partials (m, l, unnormalised O) that attention_combine.wgsl merges. Entry variants:
//   MINS   (FPA) ex[cmin + (bg, chunk)] = min φ over the chunk's keys at positions ≤ qoff (the
//          first query's position): one workgroup per chunk, strided loads and a tree minimum.
//   (else) the split pass. A chunk is walked in steps of WG keys from its end backwards (the
//          online softmax does not care about order), invocation t scoring key k0 + t against
//          every row. FOX adds c[p_i] − c[j] (c per query head). FPA subtracts
//          λ·relu(ℓ_j − M_ij), M_ij = min φ over (j, p_i], split at qoff into
//            S(j) = min φ over (j, qoff]   — the same for every row: a suffix minimum of the step
//                                            (Hillis–Steele in workgroup memory) and the carry,
//                                            min φ over [step end, qoff] (first the chunk minima of
//                                            the later chunks, then each visited step's minimum);
//            T_i  = min φ over (qoff, p_i] — per row, at most Tq − 1 loads, once;
//          M_ij = min(S(j), T_i) for j < qoff; a key j ≥ qoff (one of the last Tq) takes the min
//          over (j, p_i] directly. Empty spans give BIG, so the diagonal has no penalty. The min is
//          exact, so scores equal the CPU reference's whatever the ties.
//          Softmax and P·V as attention_decode.wgsl: the step's row maxima (SG: subgroupMax, else
//          a tree), rescale α, P = exp(s − m); invocation (c4, g) owns columns 4·c4 … 4·c4 + 3 and
//          keys g, g + NG, … of the step; at the end the NG key groups meet in workgroup memory.
{{HEADER}}
{{COMMON}}

const WG = {{WG}}u;
const RM = {{RM}}u;
const DM = {{DM}}u;
const D4 = DM / 4u;
const NG = WG / D4;

#if FOX
// c of query head row `hr` (of B·H) at position t.
fn c_at(hr: u32, t: u32) -> f32 { return c[hr * P.tk + t]; }
#else
fn phi_at(bg: u32, t: u32) -> f32 { return ex[bg * P.tk + t]; }
fn lvl_at(bg: u32, t: u32) -> f32 { return ex[P.nkv + bg * P.tk + t]; }
fn lam_of(g: u32) -> f32 { return ex[2u * P.nkv + g]; }
// Where chunk s of kv head bg keeps its minimum of φ.
fn cmin_at(bg: u32, s: u32) -> u32 { return 2u * P.nkv + P.hkv + bg * P.nsplit + s; }
#endif

// Keys of chunk `split`: [start, end).
fn chunk_keys(split: u32) -> vec2<u32> {
  let start = split * P.chunk;
  return vec2<u32>(start, min(P.kvlen, start + P.chunk));
}

#if MINS
var<workgroup> Mn: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let bg = wid.z * P.hkv + wid.y;
  let ks = chunk_keys(wid.x);
  // Positions after qoff belong to the per-row tails, not to the shared suffix minimum.
  let lim = min(ks.y, u32(max(P.qoff + 1, 0)));
  var m = BIG;
  for (var t = ks.x + lid; t < lim; t += WG) { m = min(m, phi_at(bg, t)); }
  Mn[lid] = m;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { Mn[lid] = min(Mn[lid], Mn[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { ex[cmin_at(bg, wid.x)] = Mn[0]; }
}
#else

var<workgroup> Qs: array<vec4<f32>, RM * D4>;
var<workgroup> Ss: array<f32, RM * WG>;
var<workgroup> Mx: array<f32, RM * WG>;
var<workgroup> Mrow: array<f32, RM>;
var<workgroup> Arow: array<f32, RM>;
var<workgroup> Red: array<vec4<f32>, RM * D4>;
var<workgroup> Lred: array<f32, RM>;
#if FOX
// c[p_i] of each row.
var<workgroup> Cq: array<f32, RM>;
#else
// The step's φ (positions ≤ qoff, else BIG), then its suffix minima.
var<workgroup> Suf: array<f32, WG>;
// T_i of each row.
var<workgroup> Tail: array<f32, RM>;
#endif

// Query head (of B·H) of workgroup row r.
fn head_row(b: u32, kvh: u32, r: u32) -> u32 { return b * P.h + kvh * P.group + r / P.tq; }

// Row r's row in q/out (of B·H·Tq).
fn qrow(b: u32, kvh: u32, r: u32) -> u32 { return head_row(b, kvh, r) * P.tq + r % P.tq; }

{{DECODE_STEP}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SG
        , @builtin(subgroup_size) sgsize: u32
#endif
        ) {
  let split = wid.x;
  let kvh = wid.y;
  let b = wid.z;
  let bg = b * P.hkv + kvh;
  let kbase = bg * P.tk * P.d;
  let d4 = (P.d + 3u) / 4u;
  decode_load_q(lid, b, kvh);
  if (lid < RM) {
    Mrow[lid] = -BIG;
    let p = P.qoff + i32(lid % P.tq);
#if FOX
    var cp = 0.0;
    if (lid < P.rows && p >= 0) { cp = c_at(head_row(b, kvh, lid), u32(p)); }
    Cq[lid] = cp;
#else
    var m = BIG;
    if (lid < P.rows) {
      for (var t = max(P.qoff + 1, 0); t <= p; t++) { m = min(m, phi_at(bg, u32(t))); }
    }
    Tail[lid] = m;
#endif
  }
#if FOX
#else
  let lam = lam_of(kvh);
  // The carry into this chunk's last step: min φ over the later chunks (their parts ≤ qoff).
  var cm = BIG;
  for (var s = split + 1u + lid; s < P.nsplit; s += WG) { cm = min(cm, ex[cmin_at(bg, s)]); }
  Suf[lid] = cm;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { Suf[lid] = min(Suf[lid], Suf[lid + s]); }
    workgroupBarrier();
  }
  var carry = Suf[0];
#endif
  let ks = chunk_keys(split);
  let kstart = ks.x;
  let kend = ks.y;
  let nsteps = (max(kend, kstart) - kstart + WG - 1u) / WG;
  let c4 = lid % D4;
  let g = lid / D4;
  var acc: array<vec4<f32>, RM>;
  var lsum: array<f32, RM>;
  for (var r = 0u; r < RM; r++) { acc[r] = vec4<f32>(0.0); lsum[r] = 0.0; }
  for (var st = nsteps; st > 0u; st--) {
    let k0 = kstart + (st - 1u) * WG;
    workgroupBarrier();
    let j = k0 + lid;
    // Past kend the chunk's last key is read again (no branch around the loads); its scores are masked.
    let jc = min(j, kend - 1u);
    var dots: array<f32, RM>;
    for (var r = 0u; r < RM; r++) { dots[r] = 0.0; }
    let base = kbase + jc * P.d;
    for (var cc = 0u; cc < d4; cc++) {
      let kv = ldk4(base + 4u * cc, P.d - 4u * cc);
      for (var r = 0u; r < RM; r++) { dots[r] += dot(Qs[r * D4 + cc], kv); }
    }
#if FOX
#else
    var f = BIG;
    if (j < kend && i32(j) <= P.qoff) { f = phi_at(bg, j); }
    Suf[lid] = f;
    workgroupBarrier();
    for (var off = 1u; off < WG; off <<= 1u) {
      var x = Suf[lid];
      if (lid + off < WG) { x = min(x, Suf[lid + off]); }
      workgroupBarrier();
      Suf[lid] = x;
      workgroupBarrier();
    }
    // S(j): min φ over (j, qoff], from this step's keys after j and the carry.
    var sj = carry;
    if (lid + 1u < WG) { sj = min(sj, Suf[lid + 1u]); }
    carry = min(carry, Suf[0]);
    let lv = lvl_at(bg, jc);
#endif
    for (var r = 0u; r < RM; r++) {
      let vis = j < kend && visible_row(r, j);
      var s = -BIG;
      if (vis) {
#if FOX
        s = dots[r] + (Cq[r] - c_at(head_row(b, kvh, r), j));
#else
        var m = min(sj, Tail[r]);
        if (i32(j) >= P.qoff) {
          m = BIG;
          let p = P.qoff + i32(r % P.tq);
          for (var t = i32(j) + 1; t <= p; t++) { m = min(m, phi_at(bg, u32(t))); }
        }
        let gap = lv - m;
        s = dots[r] - select(0.0, lam * gap, gap > 0.0);
#endif
      }
      decode_put_score(r, lid, s);
    }
#if SG
    decode_softmax_pv(lid, sgsize, kbase, k0, kend, c4, g, d4, &acc, &lsum);
#else
    decode_softmax_pv(lid, 0u, kbase, k0, kend, c4, g, d4, &acc, &lsum);
#endif
  }
  decode_write_partials(split, b, kvh, c4, g, lid, &acc, &lsum);
}
#endif
