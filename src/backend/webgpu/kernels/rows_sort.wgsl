// Stable sort of each row of x (rows, cols) by bitonic networks over (key, index) pairs: key is the
// value mapped to an order-preserving u32 (−0 = +0; NaN above +inf), ties go by original index, so
// the order is total and the sort stable; desc flips only the key comparison. A row is padded to
// n2 = next power of two; pad slots (index ≥ cols) sort after every real element.
//
// Default entry: one workgroup sorts a block of B = min(n2, L) slots in workgroup memory (L, the
// capacity, is a variant: a small one for short rows keeps occupancy up), running
// the stages k = kfirst…klast (only the steps j < B of each). With B = n2 that is the whole sort.
// Longer rows: LOAD_X blocks run k = 2…B (blocks come out alternately ordered, as bitonic sort
// wants), then for each k = 2B…n2 the STEP entry does the global steps j = k/2…B (one dispatch
// each, pairs in the (rows, n2) scratch tk/ti) and the default entry the steps j < B.
// STORE_OUT writes the final indices and the values gathered from x; otherwise the scratch
// (keys bitcast into i32 storage).
{{HEADER}}
{{COMMON}}

fn key_of(v: f32) -> u32 {
  var u = bitcast<u32>(v);
  if ((u & 0x7fffffffu) == 0u) { u = 0u; }
  if (is_nan(v)) { u = 0x7fc00000u; }
  return select(u | 0x80000000u, ~u, (u & 0x80000000u) != 0u);
}

// True when (ka, ia) goes before (kb, ib). Branch-free: an early return here crashed SwiftShader.
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  let by_index = ia >= P.cols || ib >= P.cols || ka == kb;
  let by_key = select((ka < kb), (ka > kb), P.desc != 0u);
  return select(by_key, (ia < ib), by_index);
}

#if STEP
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let q = gid.x + gid.y * nw.x * WG;
  let halfn = P.n2 / 2u;
  if (q >= P.rows * halfn) { return; }
  let row = q / halfn;
  let p = q % halfn;
  let j = P.j;
  let lo = ((p & ~(j - 1u)) << 1u) | (p & (j - 1u));
  let hi = lo | j;
  let a = row * P.n2 + lo;
  let b = row * P.n2 + hi;
  let ka = bitcast<u32>(tk[a]); let ia = u32(ti[a]); let kb = bitcast<u32>(tk[b]); let ib = u32(ti[b]);
  let up = (lo & P.k) == 0u;
  if (select(before(ka, ia, kb, ib), before(kb, ib, ka, ia), up)) {
    tk[a] = bitcast<i32>(kb); ti[a] = i32(ib); tk[b] = bitcast<i32>(ka); ti[b] = i32(ia);
  }
}
#else
const L: u32 = {{L}}u;
var<workgroup> sk: array<u32, L>;
var<workgroup> si: array<u32, L>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = flat_id(wid, nw);
  let nblk = P.n2 / P.blk;
  if (w >= P.rows * nblk) { return; }
  let row = w / nblk;
  let start = (w % nblk) * P.blk;
  let base = row * P.cols;
  let sbase = row * P.n2 + start;
  for (var p = lid; p < P.blk; p += WG) {
#if LOAD_X
    let g = start + p;
    var key = 0u;
    if (g < P.cols) { key = key_of(ld_x(base + g)); }
    sk[p] = key;
    si[p] = g;
#else
    sk[p] = bitcast<u32>(tk[sbase + p]);
    si[p] = u32(ti[sbase + p]);
#endif
  }
  workgroupBarrier();
  for (var k = P.kfirst; k <= P.klast; k <<= 1u) {
    for (var j = min(k, P.blk) >> 1u; j > 0u; j >>= 1u) {
      for (var q = lid; q < P.blk / 2u; q += WG) {
        let lo = ((q & ~(j - 1u)) << 1u) | (q & (j - 1u));
        let hi = lo | j;
        let ka = sk[lo]; let ia = si[lo]; let kb = sk[hi]; let ib = si[hi];
        let up = ((start + lo) & k) == 0u;
        if (select(before(ka, ia, kb, ib), before(kb, ib, ka, ia), up)) {
          sk[lo] = kb; si[lo] = ib; sk[hi] = ka; si[hi] = ia;
        }
      }
      workgroupBarrier();
    }
  }
  for (var p = lid; p < P.blk; p += WG) {
#if STORE_OUT
    let g = start + p;
    if (g < P.cols) {
      let src = si[p];
      sti_idx(base + g, i32(src));
      st_y(base + g, ld_x(base + src));
    }
#else
    tk[sbase + p] = bitcast<i32>(sk[p]);
    ti[sbase + p] = i32(si[p]);
#endif
  }
}
#endif
