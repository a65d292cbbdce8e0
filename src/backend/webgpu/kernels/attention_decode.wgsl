// Flash-decoding, split pass: few query rows (Tq ≤ 16) against a long KV cache. The visible key
// range is cut into P.nsplit chunks; one workgroup per (chunk, kv head, batch) serves every query
// row of that kv head's GQA group (RM rows: group·Tq, padded to a power of two), so each K and V
// row is read from memory once. Per step of BKD = WG keys:
//   scores  invocation t takes key k0 + t: its K row in 4-element loads (ldk4: vec4<f32>, or
//           vec2<u32> of packed f16/bf16) dotted with every query row (q pre-scaled, in
//           workgroup memory);
//           (K8: 16-byte loads of 8 packed halves where D is a multiple of 8);
//   softmax the step's maximum per row (SG: subgroupMax, then one lane per subgroup; else a
//           tree in workgroup memory), rescale factor α per row, P = exp(s − m) in place;
//   P·V     invocation (c4, g) owns columns 4·c4…4·c4+3 and keys g, g + NG, …: coalesced 4-element
//           V loads, RM accumulators of vec4 (and the row sums l) in registers.
// At the end the NG key groups' accumulators are summed through workgroup memory and the chunk's
// (m, l, unnormalised O) are written as f32 partials; attention_combine merges the chunks.
// MASK: a block mask shared by the workgroup's rows (one list for the GQA group: the mask's heads
// are 1 or the group is one head; decode rows lie in query block 0) names the key blocks to read:
// its listed blocks form one run of virtual keys v (listed block v / MASK_KB, key v % MASK_KB
// inside it), which the chunks cut instead of the visible range; dkey(v) is the key, a step of
// BKD = 2·MASK_KB keys spanning two listed blocks (mask_step; FINE: a fine mask's 16-key blocks,
// BKD / MASK_KB of them a step, each key reading its block's entry). Every key still passes the pair
// predicate (visible, and with SEG one segment), so partial blocks need no bit of their own.
{{HEADER}}
{{COMMON}}
{{MASKING}}

const WG = {{WG}}u;
const BKD = WG;
const RM = {{RM}}u;
const DM = {{DM}}u;
// The head dim as a constant where K8 takes the call (constant trip counts: loads issued together).
const DK = {{DK}}u;
const D4 = DM / 4u;
const NG = WG / D4;

var<workgroup> Qs: array<vec4<f32>, RM * D4>;
var<workgroup> Ss: array<f32, RM * BKD>;
var<workgroup> Mx: array<f32, RM * BKD>;
var<workgroup> Mrow: array<f32, RM>;
var<workgroup> Arow: array<f32, RM>;
var<workgroup> Red: array<vec4<f32>, RM * D4>;
var<workgroup> Lred: array<f32, RM>;

// Query row r of the workgroup: its row in q/out (of B·H·Tq) and its index i along Tq.
fn qrow(b: u32, kvh: u32, r: u32) -> u32 {
  let hh = r / P.tq;
  return (b * P.h + kvh * P.group + hh) * P.tq + r % P.tq;
}

#if MASK
// Where the workgroup's list of key blocks starts in the mask table, and the step's two blocks.
var<private> mask_list: u32;
#if FINE
// FINE: listed blocks of MASK_KB < BKD / 2 keys (a fine mask: Spot's 16-token blocks), a step
// spanning BKD / MASK_KB of them: each virtual key reads its block's entry. STAGE (experimental,
// DecodeTune.stageList): the step's BKD / MASK_KB entries are read once into workgroup memory
// (mask_stage, a barrier) and each key takes its block's first key from there.
#if LPRE
// LPRE (the default; DecodeTune.preloadList false turns it off): the chunk's whole list (at most LMAX entries: the
// host cuts at least kBlocks / LMAX chunks) read once into workgroup memory before the loop, each
// entry as its block's first key; a key's place is then a workgroup-memory read, and no step waits
// on a global load before its K loads can start (0.806 ms against 0.853 per key read from the list,
// H100, 128K keys, every block listed).
const LMAX = 512u;
var<workgroup> Lst: array<u32, LMAX>;
var<private> list_k0: u32;
fn mask_preload(kstart: u32, kend: u32, lid: u32) {
  list_k0 = kstart;
  let n = select(0u, (kend - kstart + MASK_KB - 1u) / MASK_KB, kend > kstart);
  for (var e = lid; e < min(n, LMAX); e += WG) { Lst[e] = u32(mask[mask_list + kstart / MASK_KB + e] >> 1u) * MASK_KB; }
  workgroupBarrier();
}
fn mask_step(k0: u32, kend: u32) {}
fn mask_stage(k0: u32, kend: u32, lid: u32) {}
fn dkey(v: u32) -> u32 { return Lst[(v - list_k0) / MASK_KB] + v % MASK_KB; }
// VBLK (experimental, DecodeTune.blockV): the first key of listed block bk of the step at k0, for a
// P·V loop that takes its keys block by block (a list read a block, not a key). Past the chunk's
// list, Lst holds zeros (workgroup memory starts zeroed) or an earlier entry: a valid row, P = 0.
fn mask_vblock(k0: u32, bk: u32) -> u32 { return Lst[min((k0 - list_k0) / MASK_KB + bk, LMAX - 1u)]; }
#else
#if STAGE
var<workgroup> Kblk: array<u32, BKD / MASK_KB>;
var<private> step_k0: u32;
fn mask_step(k0: u32, kend: u32) { step_k0 = k0; }
fn mask_stage(k0: u32, kend: u32, lid: u32) {
  if (lid < BKD / MASK_KB) {
    let v = min(k0 + lid * MASK_KB, kend - 1u);
    Kblk[lid] = u32(mask[mask_list + v / MASK_KB] >> 1u) * MASK_KB;
  }
  workgroupBarrier();
}
fn dkey(v: u32) -> u32 { return Kblk[(v - step_k0) / MASK_KB] + v % MASK_KB; }
#else
fn mask_step(k0: u32, kend: u32) {}
fn mask_stage(k0: u32, kend: u32, lid: u32) {}
fn dkey(v: u32) -> u32 { return u32(mask[mask_list + v / MASK_KB] >> 1u) * MASK_KB + v % MASK_KB; }
#endif
#endif
fn mask_begin(kstart: u32, kend: u32, lid: u32) {
#if LPRE
  mask_preload(kstart, kend, lid);
#endif
}
#else
var<private> step_e: u32;
var<private> step_kb: vec2<u32>;

// The first keys of the listed blocks a step from virtual key k0 (a multiple of MASK_KB) covers.
fn mask_step(k0: u32, kend: u32) {
  step_e = k0 / MASK_KB;
  let first = u32(mask[mask_list + step_e] >> 1u) * MASK_KB;
  var second = first;
  if (k0 + MASK_KB < kend) { second = u32(mask[mask_list + step_e + 1u] >> 1u) * MASK_KB; }
  step_kb = vec2<u32>(first, second);
}

// The key of virtual key v of the current step.
fn dkey(v: u32) -> u32 { return select(step_kb.y, step_kb.x, v / MASK_KB == step_e) + v % MASK_KB; }
fn mask_stage(k0: u32, kend: u32, lid: u32) {}
fn mask_begin(kstart: u32, kend: u32, lid: u32) {}
#endif

// The row a key's K and V are read from: a listed block may run past kvlen (the last one past tk,
// into the next head's rows), whose P = 0 must not meet a stale NaN, so those read the last valid row.
fn drow(key: u32) -> u32 { return min(key, P.kvlen - 1u); }

// The V row of virtual key j (the P·V loop's; keys past kend read the last one). Looked up again
// through the list, not kept from the scores in a workgroup array: that store (Krow[lid], one word a
// key a step) made the split pass 3.4× dense's time per key at 128K on the H100 (0.83 ms against
// 0.24; without it and with the chunks cut as below, 0.26: dev/kernels/spot_decode.ts, patches M1, M2).
fn mask_vrow(j: u32, kend: u32) -> u32 { return drow(dkey(min(j, kend - 1u))); }
#endif

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
  let kbase = (b * P.hkv + kvh) * P.tk * P.d;
  let d4 = (P.d + 3u) / 4u;
  decode_load_q(lid, b, kvh);
  if (lid < RM) { Mrow[lid] = -BIG; }
#if MASK
  // The group's list (its first head's; the plan takes masks the group's heads share), cut into
  // P.nsplit chunks of whole blocks; a chunk past the list's end is empty (weight 0 in the combine).
  let mrow = mask_row(b, kvh * P.group, 0u);
  // UCOUNT: the count from the uniforms (copied there from the table before the dispatch), so the
  // loop's bounds are uniform to the GPU's compiler too: 0.824 ms against 0.862 with the count read
  // from the table (H100, 128K keys, every block listed; dev/kernels/spot_decode.ts). Not the cause
  // of the masked decode's 3.1–3.4× dense's per-key time, which stays (BENCHMARKS.md, Spot's third run).
  let nb = mask_list_count(b, kvh * P.group, mrow, lid);
  // Chunks of whole steps (BKD keys; the host keeps a chunk's list within LMAX blocks): no step but
  // the list's last is partly empty.
  let chunk = ((nb * MASK_KB + P.nsplit - 1u) / P.nsplit + BKD - 1u) / BKD * BKD;
  let kstart = split * chunk;
  let kend = min(nb * MASK_KB, kstart + chunk);
  mask_list = mrow + 1u;
  seg_start(b);
  mask_begin(kstart, kend, lid);
#else
  let kstart = P.lo + split * P.chunk;
  let kend = min(P.hi, kstart + P.chunk);
#endif
  let c4 = lid % D4;
  let g = lid / D4;
  var acc: array<vec4<f32>, RM>;
  var lsum: array<f32, RM>;
  for (var r = 0u; r < RM; r++) { acc[r] = vec4<f32>(0.0); lsum[r] = 0.0; }
#if PF
  // PF (experimental): this invocation's K row of the next step, loaded a step ahead so the loads
  // run under the current step's softmax and P·V.
  var kw: array<vec4<u32>, DK / 8u>;
  if (kstart < kend) {
    let base0 = kbase + min(kstart + lid, kend - 1u) * P.d;
    for (var c8 = 0u; c8 < DK / 8u; c8++) { kw[c8] = k[(base0 >> 3u) + c8]; }
  }
#endif
  for (var k0 = kstart; k0 < kend; k0 += BKD) {
    workgroupBarrier();
    // Scores of key k0 + lid against every row.
    // Past kend the last row is read again (no branch around the loads); its scores are masked.
    let j = k0 + lid;
    var dots: array<f32, RM>;
    for (var r = 0u; r < RM; r++) { dots[r] = 0.0; }
#if MASK
    mask_step(k0, kend);
    mask_stage(k0, kend, lid);
    let jk = dkey(min(j, kend - 1u));
    let base = kbase + drow(jk) * P.d;
#else
    let base = kbase + min(j, kend - 1u) * P.d;
#endif
#if VE
    // VE (experimental): this invocation's V values of the step (the keys and columns its P·V
    // share takes), loaded before the scores so their latency hides under the K loads and the
    // softmax instead of stalling the P·V loop a load at a time.
    var vw: array<vec2<u32>, WG / NG>;
    decode_load_v(&vw, kbase, k0, kend, c4, g, d4);
#endif
#if K8
#if PF
    let nbase = kbase + min(j + BKD, kend - 1u) * P.d;
#endif
    for (var c8 = 0u; c8 < DK / 8u; c8++) {
#if PF
      let w = kw[c8];
      kw[c8] = k[(nbase >> 3u) + c8];
#else
      let w = k[(base >> 3u) + c8];
#endif
      let lo = up4(w.xy);
      let hi = up4(w.zw);
      for (var r = 0u; r < RM; r++) { dots[r] += dot(Qs[r * D4 + 2u * c8], lo) + dot(Qs[r * D4 + 2u * c8 + 1u], hi); }
    }
#else
    for (var c = 0u; c < d4; c++) {
      let kv = ldk4(base + 4u * c, P.d - 4u * c);
      for (var r = 0u; r < RM; r++) { dots[r] += dot(Qs[r * D4 + c], kv); }
    }
#endif
#if VM
    // VM (experimental): the step's V values loaded once the scores are in registers (K's
    // registers free again), so they arrive under the softmax without holding K and V at once.
    var vw: array<vec2<u32>, WG / NG>;
    decode_load_v(&vw, kbase, k0, kend, c4, g, d4);
#endif
    for (var r = 0u; r < RM; r++) {
#if MASK
      let s = select(-BIG, dots[r], j < kend && visible_row(r, jk));
#else
      let s = select(-BIG, dots[r], j < kend && visible_row(r, j));
#endif
      decode_put_score(r, lid, s);
    }
#if SG
    decode_softmax_pv(lid, sgsize, kbase, k0, kend, c4, g, d4,
#if VW
                      &vw,
#endif
                      &acc, &lsum);
#else
    decode_softmax_pv(lid, 0u, kbase, k0, kend, c4, g, d4,
#if VW
                      &vw,
#endif
                      &acc, &lsum);
#endif
  }
  decode_write_partials(P.s0 + split, b, kvh, c4, g, lid, &acc, &lsum); // s0: this call's first chunk in a shared partials buffer
}

#if VW
// This invocation's V values of the step (keys g, g + NG, … and columns 4·c4 …), packed.
fn decode_load_v(vw: ptr<function, array<vec2<u32>, WG / NG>>, kbase: u32, k0: u32, kend: u32, c4: u32, g: u32, d4: u32) {
  if (c4 < d4) {
    for (var i = 0u; i < WG / NG; i++) {
      (*vw)[i] = v[(kbase + min(k0 + g + i * NG, kend - 1u) * P.d + 4u * c4) >> 2u];
    }
  }
}
#endif
