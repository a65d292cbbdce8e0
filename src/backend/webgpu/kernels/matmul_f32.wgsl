// Tiled GEMM on the plain ALUs: C[b] = op(A[b]) · op(B[b]), f32 accumulation, any M, N, K.
//
// A workgroup of (BM/TM)·(BN/TN) invocations computes a BM×BN block of C. Each K-slice of BK is
// copied global → registers → workgroup memory (k-major, so the inner loop reads whole vec4s of
// both operands), double-buffered: the next slice's global loads are in flight while the current
// slice is multiplied, and one barrier per slice suffices. Each invocation keeps a TM×TN block of
// C in registers, split into 4×4 pieces spread BM/(TM/4) rows and BN/(TN/4) columns apart so that
// neighbouring invocations read neighbouring vec4s of workgroup memory (no bank conflicts).
//
// Variant flags: TRANS_A / TRANS_B (operand stored (K, M) / (N, K)); VEC_A / VEC_B (f32 operand
// whose contiguous axis is a multiple of 4: one vec4 load, else four guarded scalar loads through
// ld_a / ld_b, which also serve f16 and bf16); VEC_C (f32 output with N a multiple of 4).
// Out-of-range elements load as zero; stores are guarded. ALIGNED (M, N, K multiples of BM, BN,
// BK, K > 0, VEC_A, VEC_B and VEC_C) drops every bounds check. GROUP > 0 walks the blocks in
// column-major groups of GROUP block rows (L2 reuse of B).
{{HEADER}}
{{COMMON}}

const BM = {{BM}}u;
const BN = {{BN}}u;
const BK = {{BK}}u;
const TM = {{TM}}u;
const TN = {{TN}}u;
const NTY = BM / TM;          // invocations along M
const NTX = BN / TN;          // invocations along N
const WG = NTX * NTY;
const RM = TM / 4u;           // 4-row pieces per invocation
const RN = TN / 4u;           // 4-column pieces per invocation
const LA = BM * BK / 4u / WG; // vec4 global loads of A per invocation per slice
const LB = BN * BK / 4u / WG;
const SA = BK * BM / 4u;      // vec4s per buffer of As
const SB = BK * BN / 4u;
const GROUP = {{GROUP}}u;

var<workgroup> As: array<vec4<f32>, 2u * SA>; // [buf][k][m/4]
var<workgroup> Bs: array<vec4<f32>, 2u * SB>; // [buf][k][n/4]

// The 4 values of A that load slot q reads: 4 along M (TRANS_A) or along K.
fn loadA(q: u32, base: u32, m0: u32, k0: u32) -> vec4<f32> {
#if TRANS_A
  let gk = k0 + q / (BM / 4u);
  let gm = m0 + (q % (BM / 4u)) * 4u;
  let i = base + gk * P.m + gm;
#if ALIGNED
  return a[i >> 2u];
#else
  if (gk >= P.k) { return vec4<f32>(0.0); }
#if VEC_A
  if (gm < P.m) { return a[i >> 2u]; }
  return vec4<f32>(0.0);
#else
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) { if (gm + j < P.m) { v[j] = ld_a(i + j); } }
  return v;
#endif
#endif
#else
  let gm = m0 + q / (BK / 4u);
  let gk = k0 + (q % (BK / 4u)) * 4u;
  let i = base + gm * P.k + gk;
#if ALIGNED
  return a[i >> 2u];
#else
  if (gm >= P.m) { return vec4<f32>(0.0); }
#if VEC_A
  if (gk < P.k) { return a[i >> 2u]; }
  return vec4<f32>(0.0);
#else
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) { if (gk + j < P.k) { v[j] = ld_a(i + j); } }
  return v;
#endif
#endif
#endif
}

fn storeA(q: u32, buf: u32, v: vec4<f32>) {
#if TRANS_A
  As[buf * SA + q] = v; // q = k·(BM/4) + m/4 already
#else
  let m = q / (BK / 4u);
  let k = (q % (BK / 4u)) * 4u;
  let at = buf * SA + k * (BM / 4u) + m / 4u;
  let c = m % 4u;
  As[at][c] = v.x;
  As[at + BM / 4u][c] = v.y;
  As[at + 2u * (BM / 4u)][c] = v.z;
  As[at + 3u * (BM / 4u)][c] = v.w;
#endif
}

// The 4 values of B that load slot q reads: 4 along N, or along K (TRANS_B).
fn loadB(q: u32, base: u32, n0: u32, k0: u32) -> vec4<f32> {
#if TRANS_B
  let gn = n0 + q / (BK / 4u);
  let gk = k0 + (q % (BK / 4u)) * 4u;
  let i = base + gn * P.k + gk;
#if ALIGNED
  return b[i >> 2u];
#else
  if (gn >= P.n) { return vec4<f32>(0.0); }
#if VEC_B
  if (gk < P.k) { return b[i >> 2u]; }
  return vec4<f32>(0.0);
#else
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) { if (gk + j < P.k) { v[j] = ld_b(i + j); } }
  return v;
#endif
#endif
#else
  let gk = k0 + q / (BN / 4u);
  let gn = n0 + (q % (BN / 4u)) * 4u;
  let i = base + gk * P.n + gn;
#if ALIGNED
  return b[i >> 2u];
#else
  if (gk >= P.k) { return vec4<f32>(0.0); }
#if VEC_B
  if (gn < P.n) { return b[i >> 2u]; }
  return vec4<f32>(0.0);
#else
  var v = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) { if (gn + j < P.n) { v[j] = ld_b(i + j); } }
  return v;
#endif
#endif
#endif
}

fn storeB(q: u32, buf: u32, v: vec4<f32>) {
#if TRANS_B
  let n = q / (BK / 4u);
  let k = (q % (BK / 4u)) * 4u;
  let at = buf * SB + k * (BN / 4u) + n / 4u;
  let c = n % 4u;
  Bs[at][c] = v.x;
  Bs[at + BN / 4u][c] = v.y;
  Bs[at + 2u * (BN / 4u)][c] = v.z;
  Bs[at + 3u * (BN / 4u)][c] = v.w;
#else
  Bs[buf * SB + q] = v;
#endif
}


@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
  let blk = blockOf(wid, nwg);
  let batch = wid.z + P.b0;
  let m0 = (blk.x + P.y0) * BM;
  let n0 = blk.y * BN;
  let baseA = batch * P.strideA;
  let baseB = batch * P.strideB;
  let tx = t % NTX;
  let ty = t / NTX;

  var acc: array<vec4<f32>, TM * RN>; // [row in TM][piece in RN]
  var ra: array<vec4<f32>, LA>;
  var rb: array<vec4<f32>, LB>;

  let slices = (P.k + BK - 1u) / BK;
  for (var l = 0u; l < LA; l++) { storeA(t + l * WG, 0u, loadA(t + l * WG, baseA, m0, 0u)); }
  for (var l = 0u; l < LB; l++) { storeB(t + l * WG, 0u, loadB(t + l * WG, baseB, n0, 0u)); }
  workgroupBarrier();

  for (var s = 0u; s < slices; s++) {
    let cur = s & 1u;
    let more = s + 1u < slices;
    if (more) {
      let k1 = (s + 1u) * BK;
      for (var l = 0u; l < LA; l++) { ra[l] = loadA(t + l * WG, baseA, m0, k1); }
      for (var l = 0u; l < LB; l++) { rb[l] = loadB(t + l * WG, baseB, n0, k1); }
    }
    for (var k = 0u; k < BK; k++) {
      var av: array<vec4<f32>, RM>;
      var bv: array<vec4<f32>, RN>;
      for (var g = 0u; g < RM; g++) { av[g] = As[cur * SA + k * (BM / 4u) + g * NTY + ty]; }
      for (var h = 0u; h < RN; h++) { bv[h] = Bs[cur * SB + k * (BN / 4u) + h * NTX + tx]; }
      for (var g = 0u; g < RM; g++) {
        for (var i = 0u; i < 4u; i++) {
          let x = av[g][i];
          for (var h = 0u; h < RN; h++) {
            acc[(g * 4u + i) * RN + h] = fma(vec4<f32>(x), bv[h], acc[(g * 4u + i) * RN + h]);
          }
        }
      }
    }
    if (more) {
      for (var l = 0u; l < LA; l++) { storeA(t + l * WG, cur ^ 1u, ra[l]); }
      for (var l = 0u; l < LB; l++) { storeB(t + l * WG, cur ^ 1u, rb[l]); }
    }
    workgroupBarrier();
  }

  let baseC = batch * P.m * P.n;
  for (var g = 0u; g < RM; g++) {
    for (var i = 0u; i < 4u; i++) {
      let row = m0 + g * 4u * NTY + ty * 4u + i;
#if ALIGNED
      for (var h = 0u; h < RN; h++) {
        let col = n0 + h * 4u * NTX + tx * 4u;
        c[(baseC + row * P.n + col) >> 2u] = acc[(g * 4u + i) * RN + h];
      }
#else
      if (row >= P.m) { continue; }
      for (var h = 0u; h < RN; h++) {
        let col = n0 + h * 4u * NTX + tx * 4u;
        let v = acc[(g * 4u + i) * RN + h];
        let at = baseC + row * P.n + col;
#if VEC_C
        if (col < P.n) { c[at >> 2u] = v; }
#else
        for (var j = 0u; j < 4u; j++) { if (col + j < P.n) { st_c(at + j, v[j]); } }
#endif
      }
#endif
    }
  }
}
