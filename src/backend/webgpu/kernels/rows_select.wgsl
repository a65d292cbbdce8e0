// Backend.selectOpen (SELECT) and Backend.flagsMaskTable (MASKTABLE); the CPU reference is
// src/backend/cpu/select.ts.
//
// SELECT, one workgroup per row: entries below P.low and in [P.high, P.valid) are kept, those from
// P.valid on are not; the open ones [low, high) are ranked by their score's order-preserving u32 key
// (descending, ties by the lower index). With MASS (the host's P.p > 0), n_p is found first: θ, the
// largest key whose open entries at or above it hold at least p of the open mass (mass_search),
// then the entries above θ and the ties at θ in index order until the goal is met; take = min(|U|,
// max(n_p, P.count)) (P.count alone without MASS). LOGMASS: the masses come as logarithms,
// exponentiated against the row's largest open one first. Then θ₂, the largest key with at least
// `take` open entries at or above it (count_search: radix select), keeps every entry above θ₂, and
// the ties at θ₂ in index order until `take`. mass_search builds its key four bits a round from the
// top, testing the 15 candidates of a round in one pass over the entries (8 rounds, each ending in a
// workgroup sum: with SG a subgroup sum, then one lane a subgroup; the reference builds the same key
// bit by bit). Masses are summed in f32 (the reference sums in f64: a boundary within rounding of
// p·total may differ). count_search took the count search from 50 to 28 µs a row of 8192 entries
// under top-K 0.1 on the H100, 166 to 102 µs at 32768 (at 512 invocations; the 4-bit search it
// replaced was mass_search on counts: bench/results_select_radix_1207_h100.log).
// Each invocation owns one span of the open entries (in index order: the tie steps walk them so,
// knowing from an exclusive sum how many ties come before) and reads it from memory once, its keys
// (and with MASS its masses) into registers of PER entries (the host's power of two ≥ the span):
// every later pass (the rounds of a search, the counts, the ties) reads registers. The form that read
// the scores from memory in each pass, strided over the workgroup (dev/kernels/rows_select_global.wgsl),
// took 53 µs a row of 8192 entries on the H100 (161 µs at 32768).
{{HEADER}}
{{COMMON}}

{{SELECT_COMMON}}

// Σ of u32 counts over the workgroup through the f32 tree sum (exact: counts stay below 2^24).
fn wg_count(lid: u32, v: u32) -> u32 { return u32(wg_sum(lid, f32(v))); }

// The exclusive prefix sum of v over the invocations (a Hillis–Steele scan in workgroup memory)
// and the workgroup's total, to every invocation (uniform control flow). Counts go through it as
// f32, exactly (they stay below 2^24).
fn wg_scan(lid: u32, v: f32) -> vec2<f32> {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 1u; s < WG; s <<= 1u) {
    var inc = 0.0;
    if (lid >= s) { inc = red[lid - s]; }
    workgroupBarrier();
    red[lid] += inc;
    workgroupBarrier();
  }
  let r = vec2<f32>(red[lid] - v, red[WG - 1u]);
  workgroupBarrier();
  return r;
}

#if SELECT
const PER = {{PER}}u;

// Σ v and the exclusive prefix sum of v over the workgroup, to every invocation (uniform control
// flow). SG: subgroup sums and scans, then one partial a subgroup in red2 (2 barriers, where the
// tree sum takes log2 WG and the Hillis–Steele scan twice that); else wg_sum and wg_scan.
fn sel_sum(lid: u32, sgsize: u32, v: f32) -> f32 {
#if SG
  return sel_scan(lid, sgsize, v).y;
#else
  return wg_sum(lid, v);
#endif
}
fn sel_count(lid: u32, sgsize: u32, v: u32) -> u32 { return u32(sel_sum(lid, sgsize, f32(v))); }
fn sel_scan(lid: u32, sgsize: u32, v: f32) -> vec2<f32> {
#if SG
  let incl = subgroupInclusiveAdd(v);
  let sg = lid / sgsize;
  if (lid % sgsize == sgsize - 1u) { red2[sg] = incl; }
  workgroupBarrier();
  var before = 0.0;
  var total = 0.0;
  for (var g = 0u; g < (WG + sgsize - 1u) / sgsize; g++) {
    let x = red2[g];
    if (g < sg) { before += x; }
    total += x;
  }
  workgroupBarrier();
  return vec2<f32>(before + incl - v, total);
#else
  return wg_scan(lid, v);
#endif
}
// The exclusive prefix sums of v's two parts over the workgroup ([0]) and their totals ([1]), to
// every invocation (uniform control flow): one scan where two would take twice the barriers (SG:
// subgroup scans, one partial a subgroup in `part`; else two wg_scans).
fn sel_scan2(lid: u32, sgsize: u32, v: vec2<f32>) -> array<vec2<f32>, 2> {
#if SG
  let incl = subgroupInclusiveAdd(v);
  let sg = lid / sgsize;
  if (lid % sgsize == sgsize - 1u) { part[sg] = vec4<f32>(incl, 0.0, 0.0); }
  workgroupBarrier();
  var before = vec2<f32>(0.0);
  var total = vec2<f32>(0.0);
  for (var g = 0u; g < (WG + sgsize - 1u) / sgsize; g++) {
    let x = part[g].xy;
    if (g < sg) { before += x; }
    total += x;
  }
  workgroupBarrier();
  return array<vec2<f32>, 2>(before + incl - v, total);
#else
  let a = wg_scan(lid, v.x);
  let b = wg_scan(lid, v.y);
  return array<vec2<f32>, 2>(vec2<f32>(a.x, b.x), vec2<f32>(a.y, b.y));
#endif
}

// This invocation's span of the open entries: the first one, how many, their keys (and masses).
var<private> first: u32;
var<private> mine: u32;
var<private> ks: array<u32, PER>;
#if MASS
var<private> ms: array<f32, PER>;
#endif

fn is_open(e: u32) -> bool { return e >= P.low && e < P.high; }

// The span [first, first + mine) of invocation lid (spans of ⌈|U|/WG⌉ entries; none where not live),
// read into registers.
fn load_span(lid: u32, live: bool, base: u32) {
  let span = (P.high - P.low + WG - 1u) / WG;
  first = min(P.high, P.low + lid * span);
  mine = select(0u, min(P.high, first + span) - first, live);
  for (var i = 0u; i < PER; i++) {
    if (i < mine) {
      ks[i] = order_key(ld_s(base + first + i));
#if MASS
      ms[i] = ld_m(base + first + i);
#endif
    }
  }
}

#if MASS
// The largest key θ whose open entries at or above it hold at least `goal` of the mass, four bits a
// round from the top: a round with θ's higher digits fixed finds F(θ | j << s), the mass at or above
// each candidate j = 1 … 15, in one pass (an entry at or above θ reaches candidates 1 … min(15,
// (key − θ) >> s)), and keeps the largest j with F ≥ goal (0 if none; F only falls with j). As the
// bitwise search: θ = 2³² − 1 where goal ≤ 0.
fn mass_search(lid: u32, sgsize: u32, goal: f32) -> u32 {
  var theta = 0u;
  for (var s = 28i; s >= 0i; s -= 4i) {
    // Zeroed explicitly each round (a declaration in a loop without an initialiser is not safe to rely on).
    var a = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var i = 0u; i < PER; i++) {
      if (i < mine) { digit_count(&a, ks[i], theta, u32(s), ms[i]); }
    }
    theta |= digit_pick(wg_sum16(lid, sgsize, a), goal) << u32(s);
  }
  return theta;
}
#endif

// The largest key θ with at least `goal` open entries at or above it, by radix select: the bits below the prefix
// every open key shares (the first differing bit of the row's least and largest key) taken eight a
// round from the top in four rounds, each a 256-bin histogram of the open keys whose higher bits
// equal θ's, counted by workgroup atomics (an invocation adds a run of equal digits at once), and the
// largest digit d whose count at or above (`above`: the keys above θ's prefix, plus the bins from d
// up) reaches goal; `above` then becomes that count less bin d. The answer is the goal-th largest
// key, so it lies between the least and largest key and shares their prefix (goal, a count `take`,
// never exceeds the open entries). θ = 2³² − 1 where goal = 0, as the bitwise search gives. Where
// a round's digit holds the last of the goal exactly, the search stops there (θ just below that
// digit's keys: the same entries above θ, none at it).
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> kext: array<atomic<u32>, 2>;
var<workgroup> pick: vec3<u32>;
const BPT = max(1u, 256u / WG); // bins an invocation scans

// The mask of the bits at and above bit `at` (0 where at = 32).
fn bits_from(at: u32) -> u32 { return select(~((1u << at) - 1u), 0u, at >= 32u); }

fn count_search(lid: u32, sgsize: u32, goal: u32) -> u32 {
  var lo = 0xffffffffu;
  var hi = 0u;
  for (var i = 0u; i < PER; i++) { if (i < mine) { lo = min(lo, ks[i]); hi = max(hi, ks[i]); } }
  if (lid == 0u) { atomicStore(&kext[0], 0xffffffffu); atomicStore(&kext[1], 0u); }
  workgroupBarrier();
#if SG
  lo = subgroupMin(lo);
  hi = subgroupMax(hi);
  if (lid % sgsize == 0u) { atomicMin(&kext[0], lo); atomicMax(&kext[1], hi); }
#else
  atomicMin(&kext[0], lo);
  atomicMax(&kext[1], hi);
#endif
  workgroupBarrier();
  lo = atomicLoad(&kext[0]);
  hi = atomicLoad(&kext[1]);
  // top: the bits below the shared prefix (0 where every open key is the same).
  let top = select(32u - countLeadingZeros(lo ^ hi), 0u, lo == hi);
  var theta = lo & bits_from(top);
  var above = 0u;
  for (var r = 0u; r < 4u; r++) {
    let end = max(i32(top) - 8 * i32(r), 0); // the round's digit: bits [s, end)
    let s = u32(max(end - 8, 0));
    let width = u32(end) - s;
    let fixed = bits_from(u32(end));
    for (var b = lid; b < 256u; b += WG) { atomicStore(&hist[b], 0u); }
    workgroupBarrier();
    if (lid == 0u) { pick = vec3<u32>(0u, above, 0u); }
    if (width > 0u) {
      var run = 0u;
      var at = 0u;
      for (var i = 0u; i < PER; i++) {
        if (i < mine && (ks[i] & fixed) == (theta & fixed)) {
          let d = (ks[i] >> s) & ((1u << width) - 1u);
          if (run > 0u && d != at) { atomicAdd(&hist[at], run); run = 0u; }
          at = d;
          run += 1u;
        }
      }
      if (run > 0u) { atomicAdd(&hist[at], run); }
    }
    workgroupBarrier();
    var h: array<u32, BPT>;
    var own = 0u;
    for (var j = 0u; j < BPT; j++) {
      let b = lid * BPT + j;
      h[j] = select(0u, atomicLoad(&hist[b]), b < 256u);
      own += h[j];
    }
    let sc = sel_scan(lid, sgsize, f32(own)); // the bins below this invocation's, and all of them
    var below = u32(sc.x);
    let total = u32(sc.y);
    for (var j = 0u; j < BPT; j++) {
      let b = lid * BPT + j;
      let f = above + total - below; // open keys at or above digit b
      if (width > 0u && b < (1u << width) && f >= goal && f - h[j] < goal) { pick = vec3<u32>(b, f - h[j], select(0u, 1u, f == goal && (theta | (b << s)) > 0u)); }
      below += h[j];
    }
    let got = workgroupUniformLoad(&pick);
    theta |= got.x << s;
    above = got.y;
    // The keys at or above this digit are exactly `goal`: every key of its bin is kept, so the bin's
    // least possible key less one serves as θ (the keys above it are the goal-th largest and those
    // above; none ties at it), and the rounds below are skipped.
    if (got.z != 0u) { return theta - 1u; }
  }
  return select(theta, 0xffffffffu, goal == 0u);
}

// Whether entry i of this invocation's span is kept: above θ₂, or a tie at θ₂ among the first
// `need` in index order (*k: the ties at θ₂ before it, counted on).
fn kept_at(i: u32, theta2: u32, need: u32, k: ptr<function, u32>) -> bool {
  if (ks[i] != theta2) { return ks[i] > theta2; }
  *k += 1u;
  return *k - 1u < need;
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
  let row = flat_id(wid, nw);
  let live = row < P.rows; // a whole workgroup agrees: the barriers below stay uniform
  let base = row * P.n;
  let open_count = select(0u, P.high - P.low, P.high > P.low);
  load_span(lid, live, base);
  var take = min(open_count, P.count);
#if MASS
#if LOGMASS
  var top = -3.0e38;
  for (var i = 0u; i < PER; i++) { if (i < mine) { top = max(top, ms[i]); } }
  let lmax = wg_max(lid, top);
  for (var i = 0u; i < PER; i++) { if (i < mine) { ms[i] = exp(ms[i] - lmax); } }
#endif
  var msum = 0.0;
  for (var i = 0u; i < PER; i++) { if (i < mine) { msum += ms[i]; } }
  let goal = P.p * sel_sum(lid, sgsize, msum);
  let theta = mass_search(lid, sgsize, goal);
  var above = 0.0;
  var n_above = 0u;
  var tie_m = 0.0;
  var tie_c = 0u;
  for (var i = 0u; i < PER; i++) {
    if (i < mine) {
      if (ks[i] > theta) { above += ms[i]; n_above += 1u; }
      if (ks[i] == theta) { tie_m += ms[i]; tie_c += 1u; }
    }
  }
  let m_above = sel_sum(lid, sgsize, above);
  let c_above = sel_count(lid, sgsize, n_above);
  // The ties at θ in index order until the goal is met: each invocation walks its own span,
  // starting from the mass and count of the ties before it (exclusive sums over the workgroup).
  var m = m_above + sel_scan(lid, sgsize, tie_m).x;
  var c = c_above + u32(sel_scan(lid, sgsize, f32(tie_c)).x);
  var taken = 0u;
  for (var i = 0u; i < PER; i++) {
    if (i < mine && !(m >= goal && c > 0u) && ks[i] == theta) { m += ms[i]; c += 1u; taken += 1u; }
  }
  let np = select(0u, max(1u, c_above + sel_count(lid, sgsize, taken)), open_count > 0u);
  take = min(open_count, max(np, P.count));
#endif
  // θ₂: the largest key with at least `take` open entries at or above it; the ties at θ₂ are kept in
  // index order until `take` (k: the ties of the spans before this one).
  let theta2 = count_search(lid, sgsize, take);
  var n_above2 = 0u;
  var ties = 0u;
  for (var i = 0u; i < PER; i++) {
    if (i < mine) {
      if (ks[i] > theta2) { n_above2 += 1u; }
      if (ks[i] == theta2) { ties += 1u; }
    }
  }
  // One scan gives the count above θ₂ (its total), the ties of the spans before this one (k0) and,
  // for the list, the kept entries before this span: those above θ₂ and min(k0, need) ties.
  let sc2 = sel_scan2(lid, sgsize, vec2<f32>(f32(n_above2), f32(ties)));
  let c_above2 = u32(sc2[1].x);
  let k0 = u32(sc2[0].y);
  let need = select(0u, take - c_above2, take > c_above2);
  if (live) {
#if NOFLAGS
    // NOFLAGS (BlockListArgs.flags false): the table alone (a Spot step's flags took 6 of 32 µs at
    // 128K on the H100: dev/kernels/select_open.ts, bench/results_select_list_1207_h100.log).
#else
    var k = k0;
    for (var i = 0u; i < PER; i++) {
      if (i < mine) { sti_y(base + first + i, select(0i, 1i, kept_at(i, theta2, need, &k))); }
    }
    for (var e = lid; e < P.n; e += WG) {
      if (!is_open(e)) { sti_y(base + e, select(0i, 1i, e < P.valid)); }
    }
#endif
  }
#if LIST
  // LIST (Backend.selectBlockList): the row's fine mask table too, as Backend.flagsMaskTable writes
  // it with one fine block a mask block and no segment ids: its by-query index entry, its by-key
  // index at the empty list, and its list (the count, then 2·e + partial for each kept entry e in
  // index order, zeros after): the reserved entries below P.low first, the kept open ones at the
  // places the spans' kept counts before them give (sc2), then the reserved ones from P.high.
  if (live) {
    let stride = P.valid + 1u;
    let empty = P.rows + P.rows * P.kblocks;
    let list = empty + 1u + row * stride;
    let kept_open = c_above2 + min(u32(sc2[1].y), need);
    let count = P.low + kept_open + (P.valid - P.high);
    if (lid == 0u) {
      sti_t(row, i32(list));
      sti_t(list, i32(count));
      if (row == 0u) { sti_t(empty, 0i); }
    }
    for (var c = lid; c < P.kblocks; c += WG) { sti_t(P.rows + row * P.kblocks + c, i32(empty)); }
    var at = P.low + u32(sc2[0].x) + min(k0, need);
    var k = k0;
    for (var i = 0u; i < PER; i++) {
      if (i < mine) {
        if (kept_at(i, theta2, need, &k)) { sti_t(list + 1u + at, entry_of(first + i)); at += 1u; }
      }
    }
    for (var e = lid; e < P.valid; e += WG) {
      if (e < P.low) { sti_t(list + 1u + e, entry_of(e)); }
      if (e >= P.high) { sti_t(list + 1u + P.low + kept_open + (e - P.high), entry_of(e)); }
    }
    for (var x = count + lid; x < P.valid; x += WG) { sti_t(list + 1u + x, 0i); }
  }
#endif
}

#if LIST
// The list entry of fine block e: 2·e, plus 1 where the block reaches past the visible keys (partial).
fn entry_of(e: u32) -> i32 { return i32(2u * e + select(0u, 1u, min((e + 1u) * P.fine, P.tk) > P.kvlen)); }
#endif
#endif

#if MASKTABLE
// Backend.flagsMaskTable over P.groups workgroups per batch entry (flat id = b·groups + w), so a long
// cache's table is written by many workgroups at once, not one. Workgroup w of entry b writes its
// slice of the by-key index (every row at the empty list) and of the segment ids, and its chunk of the
// list (the mask blocks holding a selected fine block, compacted in index order: the blocks of the
// chunks before it are counted first, every invocation striding over them, then the chunk is scanned
// in steps of WG; an entry is whole where every key of it up to tk is visible and selected). The last
// workgroup of an entry writes its by-query index entry, the list's count and the zeros after it;
// workgroup 0 writes the empty list.
// P: rows (= batch), valid, fine, per, tk, kblocks, kvlen (keys from it on carry segment 1), groups,
// segs (0: the table has no segment ids).

// Whether mask block c of batch entry b holds a selected fine block (how many it holds).
fn mt_selected(b: u32, c: u32) -> u32 {
  var n = 0u;
  for (var u = 0u; u < P.per; u++) {
    let e = c * P.per + u;
    if (e < P.valid) { if (ldi_x(b * P.valid + e) != 0i) { n += 1u; } }
  }
  return n;
}

// [lo, hi) of a length n cut into P.groups slices: slice w.
fn mt_slice(n: u32, w: u32) -> vec2<u32> {
  let per = (n + P.groups - 1u) / P.groups;
  return vec2<u32>(min(n, w * per), min(n, (w + 1u) * per));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let flat = flat_id(wid, nw);
  let b = flat / P.groups;
  let w = flat % P.groups;
  let live = b < P.rows; // a whole workgroup agrees: the barriers below stay uniform
  let kb = (P.valid + P.per - 1u) / P.per;
  let stride = kb + 1u;
  let q_rows = P.rows;
  let empty = q_rows + P.rows * P.kblocks;
  let lists = empty + 1u;
  let segs = lists + q_rows * stride;
  if (live) {
    if (flat == 0u && lid == 0u) { sti_y(empty, 0i); }
    let kr = mt_slice(P.kblocks, w);
    for (var c = kr.x + lid; c < kr.y; c += WG) { sti_y(q_rows + b * P.kblocks + c, i32(empty)); }
    let tr = mt_slice(select(0u, P.tk, P.segs != 0u), w);
    for (var t = tr.x + lid; t < tr.y; t += WG) {
      let e = t / P.fine;
      var seg = 1i;
      if (e < P.valid && t < P.kvlen) { if (ldi_x(b * P.valid + e) != 0i) { seg = 0i; } }
      sti_y(segs + b * P.tk + t, seg);
    }
  }
  // This workgroup's chunk of the list: its first entry is the count of listed blocks before it.
  let cr = mt_slice(kb, w);
  var n_before = 0u;
  if (live) {
    for (var c = lid; c < cr.x; c += WG) { if (mt_selected(b, c) > 0u) { n_before += 1u; } }
  }
  var carry = wg_count(lid, n_before);
  for (var c0 = cr.x; c0 < cr.y; c0 += WG) {
    let c = c0 + lid;
    var n = 0u;
    if (live && c < cr.y) { n = mt_selected(b, c); }
    let f = select(0u, 1u, n > 0u);
    let scan = wg_scan(lid, f32(f));
    let before = carry + u32(scan.x);
    if (f == 1u) {
      // Whole: every key of the mask block (up to tk) visible and in a selected fine block.
      let end = min((c + 1u) * P.per * P.fine, P.tk);
      let partial = select(1u, 0u, end <= P.kvlen && n == (end + P.fine - 1u) / P.fine - c * P.per);
      sti_y(lists + b * stride + 1u + before, i32(2u * c + partial));
    }
    carry += u32(scan.y);
  }
  if (live && w == P.groups - 1u) {
    if (lid == 0u) {
      sti_y(b, i32(lists + b * stride));
      sti_y(lists + b * stride, i32(carry));
    }
    for (var e = carry + lid; e < kb; e += WG) { sti_y(lists + b * stride + 1u + e, 0i); }
  }
}
#endif
