// Tensor-core GEMM through `chromium_experimental_subgroup_matrix`: f16 operands, f32
// accumulation, C[b] = op(A[b]) · op(B[b]) for any M, N, K.
//
// A workgroup of SGM×SGN subgroups (32 invocations each) computes a BM×BN block of C; each
// subgroup owns TM×TN result tiles of 16×16 (named accumulators c<i>_<j>, which matmul.ts
// generates unrolled into the MMA placeholder, so no matrix lives in an indexed array). Each
// K-slice of BK goes global → registers (8 halves per vec4<u32> load, or 8 guarded scalar loads
// when the contiguous axis is not a multiple of 8) → workgroup memory laid out as the operand is
// in global memory (so the transposes are only the col_major flag of subgroupMatrixLoad), rows
// padded by PAD halves against bank conflicts. COOP (experimental, off by default) stages whole
// 16×16 fragments instead: subgroupMatrixLoad from global, subgroupMatrixStore into workgroup
// memory, FA + FB fragments per subgroup per slice. matmul.ts takes it only when M, N and K are
// multiples of 16: on the H200 it gave wrong results at 300×200×160 under Dawn's robustness
// (right with disable_robustness; cause not established) and it was slower there anyway. The next slice's global loads are issued before
// the current slice is multiplied (PREFETCH; without it a slice is loaded, stored and multiplied
// in turn, holding fewer registers). Out-of-range elements load as zero.
//
// Epilogue: with DIRECT_C (f32 output) a block that lies wholly inside C is stored straight from
// the accumulators; otherwise each subgroup stores one tile at a time into its own 16×16 f32
// scratch and its invocations write the in-range elements (converting to f16 when C is f16).
//
// Matrix offsets derive from subgroup_id, which is subgroup-uniform but not workgroup-uniform;
// Tint's analysis only knows the latter, hence the diagnostic(off, ...) in the header.
{{HEADER}}

const SGM = {{SGM}}u;           // subgroups along M
const SGN = {{SGN}}u;           // subgroups along N
const TM = {{TM}}u;             // 16-row tiles per subgroup
const TN = {{TN}}u;             // 16-column tiles per subgroup
const BK = {{BK}}u;
const BM = SGM * TM * 16u;
const BN = SGN * TN * 16u;
const WG = SGM * SGN * 32u;
const AR = {{AR}}u;             // rows of the A slice as stored (BM, or BK when TRANS_A)
const AC = {{AC}}u;             // its columns (the contiguous axis)
const BR = {{BR}}u;
const BC = {{BC}}u;
const LDA = AC + {{PAD}}u;
const LDB = BC + {{PAD}}u;
const LA = AR * AC / 8u / WG;   // 8-half loads of A per invocation per slice
const LB = BR * BC / 8u / WG;
const COLA = {{COLA}};
const COLB = {{COLB}};
const FA = {{FA}}u;             // A fragments each subgroup stages per slice (COOP)
const FB = {{FB}}u;

var<workgroup> As: array<f16, AR * LDA>;
var<workgroup> Bs: array<f16, BR * LDB>;
var<workgroup> Cs: array<f32, SGM * SGN * 256u>;

// Global element index → 8 halves packed in a vec4<u32>; `left` of them lie inside the row.
fn ldA8(i: u32, left: u32) -> vec4<u32> {
#if VEC_A
  if (left >= 8u) { return a[i >> 3u]; }
  return vec4<u32>(0u);
#else
  var h: array<f16, 8>;
  for (var j = 0u; j < 8u; j++) { if (j < left) { h[j] = a[i + j]; } }
  return vec4<u32>(bitcast<u32>(vec2<f16>(h[0], h[1])), bitcast<u32>(vec2<f16>(h[2], h[3])),
                   bitcast<u32>(vec2<f16>(h[4], h[5])), bitcast<u32>(vec2<f16>(h[6], h[7])));
#endif
}

fn ldB8(i: u32, left: u32) -> vec4<u32> {
#if VEC_B
  if (left >= 8u) { return b[i >> 3u]; }
  return vec4<u32>(0u);
#else
  var h: array<f16, 8>;
  for (var j = 0u; j < 8u; j++) { if (j < left) { h[j] = b[i + j]; } }
  return vec4<u32>(bitcast<u32>(vec2<f16>(h[0], h[1])), bitcast<u32>(vec2<f16>(h[2], h[3])),
                   bitcast<u32>(vec2<f16>(h[4], h[5])), bitcast<u32>(vec2<f16>(h[6], h[7])));
#endif
}

// Slot q of the A slice whose stored origin is (r0, c0) in an operand of rlim × clim, row stride ld.
fn loadA(q: u32, base: u32, r0: u32, c0: u32, rlim: u32, clim: u32, ld: u32) -> vec4<u32> {
  let r = r0 + q / (AC / 8u);
  let c = c0 + (q % (AC / 8u)) * 8u;
  if (r >= rlim || c >= clim) { return vec4<u32>(0u); }
  return ldA8(base + r * ld + c, clim - c);
}

fn loadB(q: u32, base: u32, r0: u32, c0: u32, rlim: u32, clim: u32, ld: u32) -> vec4<u32> {
  let r = r0 + q / (BC / 8u);
  let c = c0 + (q % (BC / 8u)) * 8u;
  if (r >= rlim || c >= clim) { return vec4<u32>(0u); }
  return ldB8(base + r * ld + c, clim - c);
}

fn storeA(q: u32, v: vec4<u32>) {
  let at = (q / (AC / 8u)) * LDA + (q % (AC / 8u)) * 8u;
  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
  let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
  As[at] = h0.x; As[at + 1u] = h0.y; As[at + 2u] = h1.x; As[at + 3u] = h1.y;
  As[at + 4u] = h2.x; As[at + 5u] = h2.y; As[at + 6u] = h3.x; As[at + 7u] = h3.y;
}

fn storeB(q: u32, v: vec4<u32>) {
  let at = (q / (BC / 8u)) * LDB + (q % (BC / 8u)) * 8u;
  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
  let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
  Bs[at] = h0.x; Bs[at + 1u] = h0.y; Bs[at + 2u] = h1.x; Bs[at + 3u] = h1.y;
  Bs[at + 4u] = h2.x; Bs[at + 5u] = h2.y; Bs[at + 6u] = h3.x; Bs[at + 7u] = h3.y;
}

// Offset in As of the 16×16 left tile at row r (of M), column kk (of the slice).
fn offA(r: u32, kk: u32) -> u32 {
#if TRANS_A
  return kk * LDA + r;
#else
  return r * LDA + kk;
#endif
}

fn offB(n: u32, kk: u32) -> u32 {
#if TRANS_B
  return n * LDB + kk;
#else
  return kk * LDB + n;
#endif
}

// COOP staging: fragment q of a slice as (row of M or N in the block, column of K in the slice),
// and its offset and row stride in global memory.
fn frag(q: u32) -> vec2<u32> { return vec2<u32>(q / (BK / 16u) * 16u, q % (BK / 16u) * 16u); }

fn gA(base: u32, m0: u32, k0: u32, f: vec2<u32>) -> u32 {
#if TRANS_A
  return base + (k0 + f.y) * P.m + m0 + f.x;
#else
  return base + (m0 + f.x) * P.k + k0 + f.y;
#endif
}

fn gB(base: u32, n0: u32, k0: u32, f: vec2<u32>) -> u32 {
#if TRANS_B
  return base + (n0 + f.x) * P.k + k0 + f.y;
#else
  return base + (k0 + f.y) * P.n + n0 + f.x;
#endif
}

fn ldA() -> u32 {
#if TRANS_A
  return P.m;
#else
  return P.k;
#endif
}

fn ldB() -> u32 {
#if TRANS_B
  return P.k;
#else
  return P.n;
#endif
}

// Writes the tile a subgroup left in its scratch to C at (row, col), in-range elements only.
fn putTile(sg: u32, lane: u32, lanes: u32, baseC: u32, row: u32, col: u32) {
  for (var e = lane; e < 256u; e += lanes) {
    let r = row + e / 16u;
    let c = col + e % 16u;
    if (r < P.m && c < P.n) { st_c(baseC + r * P.n + c, Cs[sg * 256u + e]); }
  }
}

// Global loads of the K-slice starting at k0 into registers.
fn fetch(ra: ptr<function, array<vec4<u32>, LA>>, rb: ptr<function, array<vec4<u32>, LB>>, t: u32,
         baseA: u32, baseB: u32, m0: u32, n0: u32, k0: u32) {
  for (var l = 0u; l < LA; l++) {
#if TRANS_A
    (*ra)[l] = loadA(t + l * WG, baseA, k0, m0, P.k, P.m, P.m);
#else
    (*ra)[l] = loadA(t + l * WG, baseA, m0, k0, P.m, P.k, P.k);
#endif
  }
  for (var l = 0u; l < LB; l++) {
#if TRANS_B
    (*rb)[l] = loadB(t + l * WG, baseB, n0, k0, P.n, P.k, P.k);
#else
    (*rb)[l] = loadB(t + l * WG, baseB, k0, n0, P.k, P.n, P.n);
#endif
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
  let batch = wid.z + P.b0;
  let m0 = (wid.y + P.y0) * BM;
  let n0 = wid.x * BN;
  let baseA = batch * P.strideA;
  let baseB = batch * P.strideB;
  let am = (sg % SGM) * TM * 16u; // this subgroup's first row in the block
  let bn = (sg / SGM) * TN * 16u; // and first column
{{ACC}}
#if COOP
{{FRAGS}}
{{FETCH_FIRST}}
  let slices = (P.k + BK - 1u) / BK;
  for (var s = 0u; s < slices; s++) {
{{STAGE}}
    workgroupBarrier();
    if (s + 1u < slices) {
      let k0 = (s + 1u) * BK;
{{FETCH}}
    }
#else
  var ra: array<vec4<u32>, LA>;
  var rb: array<vec4<u32>, LB>;
  let slices = (P.k + BK - 1u) / BK;
#if PREFETCH
  fetch(&ra, &rb, t, baseA, baseB, m0, n0, 0u);
#endif
  for (var s = 0u; s < slices; s++) {
#if PREFETCH
    for (var l = 0u; l < LA; l++) { storeA(t + l * WG, ra[l]); }
    for (var l = 0u; l < LB; l++) { storeB(t + l * WG, rb[l]); }
    workgroupBarrier();
    if (s + 1u < slices) { fetch(&ra, &rb, t, baseA, baseB, m0, n0, (s + 1u) * BK); }
#else
    fetch(&ra, &rb, t, baseA, baseB, m0, n0, s * BK);
    for (var l = 0u; l < LA; l++) { storeA(t + l * WG, ra[l]); }
    for (var l = 0u; l < LB; l++) { storeB(t + l * WG, rb[l]); }
    workgroupBarrier();
#endif
#endif
    for (var kk = 0u; kk < BK; kk += 16u) {
{{MMA}}
    }
    workgroupBarrier();
  }

  let baseC = batch * P.m * P.n;
#if DIRECT_C
  if (m0 + BM <= P.m && n0 + BN <= P.n) {
{{STORE_DIRECT}}
    return;
  }
#endif
{{STORE_SCRATCH}}
}
