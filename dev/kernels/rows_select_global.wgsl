// The earlier form of Backend.selectOpen (rows_select.wgsl SELECT until 2026-12-07), kept for
// dev/kernels/select_open.ts to time beside the current one: every pass over a row (8 rounds a
// threshold search, the counts, the ties) reads the scores (and masses) from memory, strided over
// the workgroup. The CPU reference is src/backend/cpu/select.ts. Only its SELECT part: the runner
// puts it in place of rows_select.wgsl's (whose header and helpers, wg_count and wg_scan, it uses).
//
// SELECT, one workgroup per row: entries below P.low and in [P.high, P.valid) are kept, those from
// P.valid on are not; the open ones [low, high) are ranked by their score's order-preserving u32 key
// (descending, ties by the lower index). With P.p > 0, n_p is found first: θ, the largest key whose
// open entries at or above it hold at least p of the open mass (digit_search), then the entries above
// θ and the ties at θ in index order until the goal is met; take = min(|U|, max(n_p, P.count))
// (P.count alone where P.p = 0). LOGMASS: the masses come as logarithms, exponentiated against the
// row's largest open one first. Then θ₂, the largest key with at least `take` open entries at or
// above it (digit_search on counts), keeps every entry above θ₂, and the ties at θ₂ in index order
// until `take` (each invocation walks a span of the open entries, knowing from an exclusive sum how
// many ties come before it; the ties at θ likewise, with their masses). digit_search builds its key
// four bits a round from the top, testing the 15 candidates of a round in one pass over the entries
// (8 rounds where a bit a round took 32, each ending in a workgroup sum: with SG a subgroup sum, then
// one lane a subgroup; the reference builds the same key bit by bit). Masses are summed in f32 (the
// reference sums in f64: a boundary within rounding of p·total may differ).
#if SELECT
fn is_open(e: u32) -> bool { return e >= P.low && e < P.high; }

// LOGMASS: masses come as logarithms, exponentiated against the row's largest open one.
var<private> lmax: f32;
fn mass_at(i: u32) -> f32 {
#if LOGMASS
  return exp(ld_m(i) - lmax);
#else
  return ld_m(i);
#endif
}


// The largest key θ whose open entries at or above it weigh at least `goal` (their masses where
// `mass`, else one each), four bits a round from the top: a round with θ's higher digits fixed finds
// F(θ | j << s), the weight at or above each candidate j = 1 … 15, in one pass (an entry at or above
// θ reaches candidates 1 … min(15, (key − θ) >> s)), and keeps the largest j with F ≥ goal (0 if
// none; F only falls with j). As the bitwise search: θ = 2³² − 1 where goal ≤ 0.
fn digit_search(lid: u32, sgsize: u32, live: bool, base: u32, goal: f32, mass: bool) -> u32 {
  var theta = 0u;
  for (var s = 28i; s >= 0i; s -= 4i) {
    // Zeroed explicitly each round (a declaration in a loop without an initialiser is not safe to rely on).
    var a = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if (live) {
      for (var e = P.low + lid; e < P.high; e += WG) {
        let key = order_key(ld_s(base + e));
        var w = 1.0;
        if (mass && key >= theta) { w = mass_at(base + e); }
        digit_count(&a, key, theta, u32(s), w);
      }
    }
    theta |= digit_pick(wg_sum16(lid, sgsize, a), goal) << u32(s);
  }
  return theta;
}

// Invocation lid's span of the open entries, for the steps that must go in index order.
fn span_lo(lid: u32) -> u32 { return min(P.high, P.low + lid * ((P.high - P.low + WG - 1u) / WG)); }
fn span_hi(lid: u32) -> u32 { return min(P.high, span_lo(lid) + (P.high - P.low + WG - 1u) / WG); }

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
  let row = flat_id(wid, nw);
  let live = row < P.rows; // a whole workgroup agrees: the barriers below stay uniform
  let base = row * P.n;
  let open_count = select(0u, P.high - P.low, P.high > P.low);
  var take = min(open_count, P.count);
  // The masses are read only for top-p (P.p uniform: the barriers inside stay uniform).
  if (P.p > 0.0) {
#if LOGMASS
    var top = -3.0e38;
    if (live) {
      for (var e = P.low + lid; e < P.high; e += WG) { top = max(top, ld_m(base + e)); }
    }
    lmax = wg_max(lid, top);
#endif
    var msum = 0.0;
    if (live) {
      for (var e = P.low + lid; e < P.high; e += WG) { msum += mass_at(base + e); }
    }
    let goal = P.p * wg_sum(lid, msum);
    let theta = digit_search(lid, sgsize, live, base, goal, true);
    var above = 0.0;
    var n_above = 0u;
    if (live) {
      for (var e = P.low + lid; e < P.high; e += WG) {
        if (order_key(ld_s(base + e)) > theta) { above += mass_at(base + e); n_above += 1u; }
      }
    }
    let m_above = wg_sum(lid, above);
    let c_above = wg_count(lid, n_above);
    // The ties at θ in index order until the goal is met: each invocation walks its own span,
    // starting from the mass and count of the ties before it (exclusive sums over the workgroup).
    var tie_m = 0.0;
    var tie_c = 0u;
    if (live) {
      for (var e = span_lo(lid); e < span_hi(lid); e++) {
        if (order_key(ld_s(base + e)) == theta) { tie_m += mass_at(base + e); tie_c += 1u; }
      }
    }
    var m = m_above + wg_scan(lid, tie_m).x;
    var c = c_above + u32(wg_scan(lid, f32(tie_c)).x);
    var taken = 0u;
    if (live) {
      for (var e = span_lo(lid); e < span_hi(lid); e++) {
        if (m >= goal && c > 0u) { break; }
        if (order_key(ld_s(base + e)) == theta) { m += mass_at(base + e); c += 1u; taken += 1u; }
      }
    }
    let np = select(0u, max(1u, c_above + wg_count(lid, taken)), open_count > 0u);
    take = min(open_count, max(np, P.count));
  }
  // θ₂: the largest key with at least `take` open entries at or above it.
  let theta2 = digit_search(lid, sgsize, live, base, f32(take), false);
  var n_above2 = 0u;
  if (live) {
    for (var e = lid; e < P.n; e += WG) {
      var kept = e < P.valid && !is_open(e);
      if (is_open(e) && order_key(ld_s(base + e)) > theta2) { kept = true; n_above2 += 1u; }
      sti_y(base + e, select(0i, 1i, kept));
    }
  }
  let c_above2 = wg_count(lid, n_above2);
  // The ties at θ₂ in index order until `take`: each invocation keeps those of its span that come
  // before the need, counting the ties of the spans before it.
  var ties = 0u;
  if (live) {
    for (var e = span_lo(lid); e < span_hi(lid); e++) { if (order_key(ld_s(base + e)) == theta2) { ties += 1u; } }
  }
  var k = u32(wg_scan(lid, f32(ties)).x);
  let need = select(0u, take - c_above2, take > c_above2);
  storageBarrier();
  if (live && k < need) {
    for (var e = span_lo(lid); e < span_hi(lid) && k < need; e++) {
      if (order_key(ld_s(base + e)) == theta2) { sti_y(base + e, 1i); k += 1u; }
    }
  }
}
#endif
