// GEMM for few rows of A (M ≤ 4: a decode step's projections), C[b] = op(A[b]) · op(B[b]) with
// f32 accumulation. The tiled kernels give such a call one workgroup per 64 (or 128) columns of C
// walking all of K alone; at d_model 2048 → 16 outputs that is one workgroup for the whole GEMM
// (519 µs on the H200, bench/fox_fpa.ts --profile). Here K is split across the lanes of a
// workgroup and summed:
//   VEC     (B stored (N, K), A not transposed, K a multiple of 4: a Linear's weight; the default
//           for 2 … 4 rows, matmul.ts ROWS_DEFAULTS): LC lanes a column, WG / LC columns a workgroup, every row of A at
//           once: each lane reads 4-wide groups of its column's row of B (16-byte loads of f32,
//           8-byte of 16-bit storage) once and dots them with up to 4 rows of A, then the LC
//           partials are summed (SGR: subgroupShuffleXor within a subgroup; SGT, a column of
//           whole subgroups: subgroupAdd, then one partial a subgroup in workgroup memory; else a
//           tree in workgroup memory). One workgroup per (column block, batch);
//   TRANS_B (the scalar form, any K): 4 columns a workgroup, 64 lanes along K each (consecutive
//           lanes read consecutive k of one row of B), then a tree sum of 64;
//   else    (B stored (K, N)): 64 columns a workgroup (consecutive lanes read consecutive n), 4
//           groups along K each, then a sum of 4.
// The scalar forms: one workgroup per (column block, row of C, batch); 16-bit inputs through ld_a / ld_b.
// MANY (the VEC form over NW = 2 or 3 weights of one input, Backend.matmulMany: a decoding step's
// projections of one row in one dispatch): the columns of C run over the weights' rows in turn (b,
// then b1 from P.o1, b2 from P.o2), each weight's C in its own output (c, c1, c2; batch 1).
{{HEADER}}

#if VEC
const WG = {{WG}}u;
const LC = {{LC}}u;
const NCV = WG / LC;

#if SGR
#else
var<workgroup> red4: array<vec4<f32>, WG>;
#endif

#if MANY
const NW = {{NW}}u;
// Which weight column j belongs to (0, 1, 2) and its row there.
fn weight_of(j: u32) -> u32 { return select(select(0u, 1u, j >= P.o1), 2u, NW > 2u && j >= P.o2); }
fn weight_row(w: u32, j: u32) -> u32 { return j - select(select(0u, P.o1, w == 1u), P.o2, w == 2u); }
fn weight_rows(w: u32) -> u32 { return select(select(P.o1, P.o2 - P.o1, w == 1u), P.n - P.o2, w == 2u); }
// Group g of 4 values of weight w.
fn ld4_w(w: u32, g: u32) -> vec4<f32> {
  if (w == 1u) { return ld4_b1(g); }
#if NW3
  if (w == 2u) { return ld4_b2(g); }
#endif
  return ld4_b(g);
}
// C of weight w at (row r, its column jw).
fn st_w(w: u32, r: u32, jw: u32, x: f32) {
  let i = r * weight_rows(w) + jw;
  if (w == 1u) { st_c1(i, x); return; }
#if NW3
  if (w == 2u) { st_c2(i, x); return; }
#endif
  st_c(i, x);
}
#endif

// s (row r of A in component r) += A's rows at group g · bv (rows past P.m left alone).
fn rows_fma(s: ptr<function, vec4<f32>>, abase: u32, k4: u32, g: u32, bv: vec4<f32>) {
  (*s).x += dot(ld4_a(abase + g), bv);
  if (P.m > 1u) { (*s).y += dot(ld4_a(abase + k4 + g), bv); }
  if (P.m > 2u) { (*s).z += dot(ld4_a(abase + 2u * k4 + g), bv); }
  if (P.m > 3u) { (*s).w += dot(ld4_a(abase + 3u * k4 + g), bv); }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32
#if SGT
        , @builtin(subgroup_size) sgsize: u32, @builtin(subgroup_invocation_id) sgl: u32
#endif
        ) {
  let bz = wid.z + P.b0;
  let c = lid / LC;
  let kl = lid % LC;
  let j = wid.x * NCV + c;
  let k4 = P.k / 4u;
  let abase = bz * (P.strideA / 4u);
#if MANY
  let w = weight_of(j);
  let jw = weight_row(w, j);
  let brow = jw * k4;
#else
  let brow = bz * (P.strideB / 4u) + j * k4;
#endif
  // Row r of A's partial dot in component r (rows past P.m stay 0).
  var s = vec4<f32>(0.0);
  if (j < P.n) {
    var g = kl;
#if MANY
    // MANY: four of the lane's groups of B a loop step, loaded before any is used (the loop's bound
    // is a uniform and its loads pass through the weight's branch: written out, they are issued together).
    for (; g + 3u * LC < k4; g += 4u * LC) {
      let b0 = ld4_w(w, brow + g);
      let b1 = ld4_w(w, brow + g + LC);
      let b2 = ld4_w(w, brow + g + 2u * LC);
      let b3 = ld4_w(w, brow + g + 3u * LC);
      rows_fma(&s, abase, k4, g, b0);
      rows_fma(&s, abase, k4, g + LC, b1);
      rows_fma(&s, abase, k4, g + 2u * LC, b2);
      rows_fma(&s, abase, k4, g + 3u * LC, b3);
    }
#endif
    for (; g < k4; g += LC) {
#if MANY
      let bv = ld4_w(w, brow + g);
#else
      let bv = ld4_b(brow + g);
#endif
      rows_fma(&s, abase, k4, g, bv);
    }
  }
#if SGR
  // A column's LC lanes lie in one subgroup (LC ≤ the least subgroup size, lanes contiguous).
  for (var o = LC / 2u; o > 0u; o >>= 1u) { s += subgroupShuffleXor(s, o); }
#else
#if SGT
  // SGT: a column's LC lanes fill whole subgroups (the largest subgroup size ≤ LC): each subgroup's
  // sum, then the column's first lane adds its LC / sgsize subgroups' sums.
  s = subgroupAdd(s);
  if (sgl == 0u) { red4[lid / sgsize] = s; }
  workgroupBarrier();
  if (kl == 0u) {
    for (var g2 = 1u; g2 < LC / sgsize; g2++) { s += red4[lid / sgsize + g2]; }
  }
#else
  red4[lid] = s;
  workgroupBarrier();
  for (var w = LC / 2u; w > 0u; w >>= 1u) {
    if (kl < w) { red4[lid] += red4[lid + w]; }
    workgroupBarrier();
  }
  s = red4[lid];
#endif
#endif
  if (kl == 0u && j < P.n) {
#if MANY
    st_w(w, 0u, jw, s.x);
    if (P.m > 1u) { st_w(w, 1u, jw, s.y); }
    if (P.m > 2u) { st_w(w, 2u, jw, s.z); }
    if (P.m > 3u) { st_w(w, 3u, jw, s.w); }
#else
    let cb = bz * P.m * P.n + j;
    st_c(cb, s.x);
    if (P.m > 1u) { st_c(cb + P.n, s.y); }
    if (P.m > 2u) { st_c(cb + 2u * P.n, s.z); }
    if (P.m > 3u) { st_c(cb + 3u * P.n, s.w); }
#endif
  }
}
#else

const WG = 256u;
#if TRANS_B
const NC = 4u;
const NK = 64u;
#else
const NC = 64u;
const NK = 4u;
#endif

var<workgroup> red: array<f32, WG>;

fn a_at(base: u32, i: u32, kk: u32) -> f32 {
#if TRANS_A
  return ld_a(base + kk * P.m + i);
#else
  return ld_a(base + i * P.k + kk);
#endif
}

fn b_at(base: u32, kk: u32, j: u32) -> f32 {
#if TRANS_B
  return ld_b(base + j * P.k + kk);
#else
  return ld_b(base + kk * P.n + j);
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.y + P.y0;
  let bz = wid.z + P.b0;
#if TRANS_B
  let c = lid / NK;
  let kl = lid % NK;
#else
  let c = lid % NC;
  let kl = lid / NC;
#endif
  let j = wid.x * NC + c;
  let abase = bz * P.strideA;
  let bbase = bz * P.strideB;
  var s = 0.0;
  if (j < P.n) {
    for (var kk = kl; kk < P.k; kk += NK) { s += a_at(abase, i, kk) * b_at(bbase, kk, j); }
  }
  red[lid] = s;
  workgroupBarrier();
#if TRANS_B
  // Column c's 64 partials sit at red[c·NK …]: a tree sum, then lane 0 of the column stores.
  for (var w = NK / 2u; w > 0u; w >>= 1u) {
    if (kl < w) { red[lid] += red[lid + w]; }
    workgroupBarrier();
  }
  if (kl == 0u && j < P.n) { st_c((bz * P.m + i) * P.n + j, red[lid]); }
#else
  // Column c's 4 partials sit at red[g·NC + c], g = 0 … 3.
  if (kl == 0u && j < P.n) {
    var t = 0.0;
    for (var g = 0u; g < NK; g++) { t += red[g * NC + c]; }
    st_c((bz * P.m + i) * P.n + j, t);
  }
#endif
}
#endif
