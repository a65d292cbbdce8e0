// Backend.lighthouseSelect (specs/lighthouse_fon.md §1.4–§1.5); the CPU reference is
// src/backend/cpu/lighthouse.ts, which these variants reproduce row for row on equal scores.
//
// SCORES (one invocation per list and padded token): s = Σ_j x_j², f32 in index order, for q (list
//   s) and k (list ⌊s/group⌋); 0 past n. Written to level 1 of the score pyramids sq and sk
//   (lists, total), laid out as the concatenated pyramid.
// POOL (one invocation per list and coarse pyramid row): a level-l entry's score is the max of its
//   window's token scores (max is exact, so this equals the reference's max of maxes).
// CASCADE (one workgroup per list and tile): the coarse-to-fine cascade, level L … 2. A tile's
//   candidates live in `cand` (global memory, the tile's stretch of lists·S words: level L first,
//   then each finer level's), a word 2·index + refined. At a level with more than `tile`
//   candidates: θ_A, the largest key with at least qk candidates at or above it by s^QK (digit
//   search: eight rounds of four bits, 15 thresholds counted per pass, as rows_select.wgsl), marks
//   A = keys above θ_A and the ties at θ_A in index order until qk (chunks of WG in index order, an
//   exclusive scan giving each tie its rank); θ_B likewise over the unmarked candidates by s^KQ with
//   goal tile − qk marks B; the refined candidates' children (p each) are written, in index order
//   (a second scan), as the next level's candidates. With no more than `tile` candidates all are
//   refined. No candidate is held in workgroup memory, so Cc (the coarsest candidates a tile owns:
//   thousands at 512K tokens) has no limit here; an invocation touches only candidates e ≡ lid
//   (mod WG) within a level, and a storageBarrier separates the levels.
// PLACE (one invocation per emitted entry): tiles are contiguous in the key order (every key of tile
//   t lies in [2^(L−1)·start_t, 2^(L−1)·end_t)), and within a tile each level's candidates, in index
//   order, have increasing keys; so an entry's place in the tile's stretch of the output is its
//   place within its level plus, for every other level, how many of that level's candidates have a
//   smaller key (a binary search). Keys are taken relative to the tile's first token (u32; the host
//   checks 2^(L−1)·Cc·p^(L−1) < 2^32).
{{HEADER}}
{{COMMON}}

fn lv_offset(l: u32) -> u32 { return P.lv[l - 1u].x; }
fn lv_count(l: u32) -> u32 { return P.lv[l - 1u].y; }
fn lv_span(l: u32) -> u32 { return P.lv[l - 1u].z; }
fn lv_cands(l: u32) -> u32 { return P.lv[l - 1u].w; }
fn lv_base(l: u32) -> u32 { return P.lb[l - 1u].x; }

#if SCORES
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * WG;
  if (i >= P.lists * P.padded) { return; }
  let s = i / P.padded;
  let t = i % P.padded;
  var aq = 0.0;
  var ak = 0.0;
  if (t < P.n) {
    let qb = (s * P.n + t) * P.d;
    let kb = ((s / P.group) * P.n + t) * P.d;
    for (var j = 0u; j < P.d; j++) {
      let x = ld_q(qb + j);
      aq = aq + x * x;
      let y = ld_k(kb + j);
      ak = ak + y * y;
    }
  }
  st_sq(s * P.total + t, aq);
  st_sk(s * P.total + t, ak);
}
#endif

#if POOL
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let coarse = P.total - P.padded;
  let i = gid.x + gid.y * nw.x * WG;
  if (i >= P.lists * coarse) { return; }
  let s = i / coarse;
  let r = P.padded + i % coarse;
  var l = 2u;
  while (l < P.levels && r >= lv_offset(l + 1u)) { l++; }
  let c = lv_span(l);
  let first = s * P.total + (r - lv_offset(l)) * c;
  var mq = ld_sq(first);
  var mk = ld_sk(first);
  for (var j = 1u; j < c; j++) {
    mq = max(mq, ld_sq(first + j));
    mk = max(mk, ld_sk(first + j));
  }
  st_sq(s * P.total + r, mq);
  st_sk(s * P.total + r, mk);
}
#endif

#if CASCADE
{{SELECT_COMMON}}

// The key of candidate word w at a level whose scores start at `at` in the score pyramids: by s^KQ where `by_k`, else s^QK.
fn cand_key(w: i32, at: u32, by_k: bool) -> u32 {
  let i = at + (u32(w) >> 1u);
  if (by_k) { return order_key(ld_sk(i)); }
  return order_key(ld_sq(i));
}


// The exclusive prefix sum of v over the invocations (Hillis–Steele in workgroup memory) and the
// workgroup's total, to every invocation (uniform control flow).
var<workgroup> scan_buf: array<u32, WG>;
fn wg_scan(lid: u32, v: u32) -> vec2<u32> {
  scan_buf[lid] = v;
  workgroupBarrier();
  for (var s = 1u; s < WG; s <<= 1u) {
    var inc = 0u;
    if (lid >= s) { inc = scan_buf[lid - s]; }
    workgroupBarrier();
    scan_buf[lid] += inc;
    workgroupBarrier();
  }
  let r = vec2<u32>(scan_buf[lid] - v, scan_buf[WG - 1u]);
  workgroupBarrier();
  return r;
}

// The largest key θ with at least `goal` of the n candidates at `cb` (those not yet refined where
// `skip_refined`) at or above it, four bits a round from the top (rows_select.wgsl's digit_search:
// a round counts, for each j = 1 … 15, the candidates at or above θ | j << s, and keeps the largest
// j whose count reaches the goal). θ = 2³² − 1 where goal is 0.
fn digit_search(lid: u32, sgsize: u32, live: bool, cb: u32, n: u32, at: u32, by_k: bool, skip_refined: bool, goal: f32) -> u32 {
  var theta = 0u;
  for (var s = 28i; s >= 0i; s -= 4i) {
    var a = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if (live) {
      for (var e = lid; e < n; e += WG) {
        let w = ldi_cand(cb + e);
        if (skip_refined && (w & 1i) != 0i) { continue; }
        digit_count(&a, cand_key(w, at, by_k), theta, u32(s), 1.0);
      }
    }
    theta |= digit_pick(wg_sum16(lid, sgsize, a), goal) << u32(s);
  }
  return theta;
}

// How many of the n candidates at `cb` (not refined where `skip_refined`) have a key above θ, to every invocation.
fn count_above(lid: u32, live: bool, cb: u32, n: u32, at: u32, by_k: bool, skip_refined: bool, theta: u32) -> u32 {
  var c = 0u;
  if (live) {
    for (var e = lid; e < n; e += WG) {
      let w = ldi_cand(cb + e);
      if (skip_refined && (w & 1i) != 0i) { continue; }
      if (cand_key(w, at, by_k) > theta) { c += 1u; }
    }
  }
  return wg_scan(lid, c).y;
}

// The p children of candidate word w, written as the candidates `slot`·p … of the next level at nb.
fn write_children(w: i32, nb: u32, slot: u32) {
  let i = u32(w) >> 1u;
  for (var j = 0u; j < P.pool; j++) { sti_cand(nb + slot * P.pool + j, i32((P.pool * i + j) << 1u)); }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SG
        , @builtin(subgroup_size) sgsize: u32
#endif
        ) {
#if SG
#else
  let sgsize = 0u;
#endif
  let flat = flat_id(wid, nw);
  let live = flat < P.lists * P.tiles; // a whole workgroup agrees: the barriers below stay uniform
  let s = flat / P.tiles;
  let t = flat % P.tiles;
  let base = s * P.gathered + t * P.emitted;
  // Level L's candidates: the tile's Cc coarsest entries.
  if (live) {
    for (var e = lid; e < P.per_tile; e += WG) { sti_cand(base + e, i32((t * P.per_tile + e) << 1u)); }
  }
  storageBarrier();
  for (var l = P.levels; l >= 2u; l--) {
    let n = lv_cands(l);
    let cb = base + lv_base(l);
    let nb = base + lv_base(l - 1u);
    let at = s * P.total + lv_offset(l);
    if (n <= P.tile) {
      if (live) {
        for (var e = lid; e < n; e += WG) {
          let w = ldi_cand(cb + e);
          sti_cand(cb + e, w | 1i);
          write_children(w, nb, e);
        }
      }
    } else {
      // A: the qk largest by s^QK, ties to the lower index.
      let theta_a = digit_search(lid, sgsize, live, cb, n, at, false, false, f32(P.qk));
      let need_a = P.qk - count_above(lid, live, cb, n, at, false, false, theta_a);
      var ties = 0u;
      for (var c0 = 0u; c0 < n; c0 += WG) {
        let e = c0 + lid;
        let ok = live && e < n;
        var w = 0i;
        var key = 0u;
        if (ok) { w = ldi_cand(cb + e); key = cand_key(w, at, false); }
        let tie = ok && key == theta_a;
        let tie_scan = wg_scan(lid, select(0u, 1u, tie));
        if (ok && (key > theta_a || (tie && ties + tie_scan.x < need_a))) { sti_cand(cb + e, w | 1i); }
        ties += tie_scan.y;
      }
      storageBarrier();
      // B: the tile − qk largest of the rest by s^KQ; then every refined candidate's children, in index order.
      let goal_b = P.tile - P.qk;
      let theta_b = digit_search(lid, sgsize, live, cb, n, at, true, true, f32(goal_b));
      let need_b = goal_b - count_above(lid, live, cb, n, at, true, true, theta_b);
      var ties_b = 0u;
      var refined = 0u;
      for (var c0 = 0u; c0 < n; c0 += WG) {
        let e = c0 + lid;
        let ok = live && e < n;
        var w = 0i;
        var key = 0u;
        var in_a = false;
        if (ok) { w = ldi_cand(cb + e); in_a = (w & 1i) != 0i; key = cand_key(w, at, true); }
        let tie = ok && !in_a && key == theta_b;
        let tie_scan = wg_scan(lid, select(0u, 1u, tie));
        let in_b = ok && !in_a && (key > theta_b || (tie && ties_b + tie_scan.x < need_b));
        let is_refined = in_a || in_b;
        let ref_scan = wg_scan(lid, select(0u, 1u, is_refined));
        if (in_b) { sti_cand(cb + e, w | 1i); }
        if (is_refined) { write_children(w, nb, refined + ref_scan.x); }
        ties_b += tie_scan.y;
        refined += ref_scan.y;
      }
    }
    storageBarrier();
  }
}
#endif

#if PLACE
// The tile-relative key of candidate word w of level l (tile t): kept-coarse and tokens
// 2^(L−1)·c_l·i, refined parents 2^(L−1)·c_l·(i+1) − 2^(L−l), i counted from the tile's first entry
// of level l.
fn rel_key(w: i32, l: u32, t: u32) -> u32 {
  let c = lv_span(l);
  let first = t * P.per_tile * (lv_span(P.levels) / c);
  let i = (u32(w) >> 1u) - first;
  let scale = 1u << (P.levels - 1u);
  if ((w & 1i) != 0i) { return scale * c * (i + 1u) - (1u << (P.levels - l)); }
  return scale * c * i;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * WG;
  if (i >= P.lists * P.gathered) { return; }
  let s = i / P.gathered;
  let t = (i % P.gathered) / P.emitted;
  let e = i % P.emitted;
  let base = s * P.gathered + t * P.emitted;
  var l = P.levels;
  while (l > 1u && e >= lv_base(l) + lv_cands(l)) { l--; }
  let w = ldi_cand(base + e);
  let key = rel_key(w, l, t);
  var place = e - lv_base(l);
  for (var m = 1u; m <= P.levels; m++) {
    if (m == l) { continue; }
    // How many of level m's candidates (increasing keys) have a key below this one.
    var lo = 0u;
    var hi = lv_cands(m);
    let mb = base + lv_base(m);
    while (lo < hi) {
      let mid = (lo + hi) / 2u;
      if (rel_key(ldi_cand(mb + mid), m, t) < key) { lo = mid + 1u; } else { hi = mid; }
    }
    place += lo;
  }
  sti_rows(base + place, i32(lv_offset(l) + (u32(w) >> 1u)));
}
#endif
