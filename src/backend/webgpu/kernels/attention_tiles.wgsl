// What the plain tiled attention kernels share (attention_plain.wgsl, fox_fpa_attention.wgsl;
// substituted for their TILES placeholder): the f32 workgroup tiles of q, k, v and the scores, the
// forward's per-row softmax state or the backward's dO tile, dS tile and row statistics, their
// loaders and the row·column dot products. The including kernel defines WG, BQ, BK, DM and, for its
// backward, row_lse(row) and row_delta(row): where its saved logsumexp and Σ dO·O live.
var<workgroup> Qs: array<f32, BQ * DM>;
var<workgroup> Ks: array<f32, BK * DM>;
var<workgroup> Vs: array<f32, BK * DM>;
var<workgroup> Ss: array<f32, BQ * BK>;
#if FWD
var<workgroup> Ms: array<f32, BQ>;
var<workgroup> Ls: array<f32, BQ>;
var<workgroup> As: array<f32, BQ>;
#else
var<workgroup> Gs: array<f32, BQ * DM>;
var<workgroup> Ds: array<f32, BQ * BK>;
var<workgroup> Rl: array<f32, BQ>;
var<workgroup> Rd: array<f32, BQ>;
#endif

// Rows [i0, i0 + BQ) of q (and dO, lse, delta for the backward) of the (batch, head) whose first
// row is qrow0; rows past tq and columns past d read as zero.
fn load_queries(lid: u32, qrow0: u32, i0: u32) {
  for (var e = lid; e < BQ * DM; e += WG) {
    let r = e / DM;
    let c = e % DM;
    var x = 0.0;
#if FWD
#else
    var g = 0.0;
#endif
    if (i0 + r < P.tq && c < P.d) {
      let o = (qrow0 + i0 + r) * P.d + c;
      x = ld_q(o);
#if FWD
#else
      g = ld_g(o);
#endif
    }
    Qs[e] = x;
#if FWD
#else
    Gs[e] = g;
#endif
  }
#if FWD
#else
  if (lid < BQ) {
    var l = 0.0;
    var dl = 0.0;
    if (i0 + lid < P.tq) { l = row_lse(qrow0 + i0 + lid); dl = row_delta(qrow0 + i0 + lid); }
    Rl[lid] = l;
    Rd[lid] = dl;
  }
#endif
}

// Rows [k0, k0 + BK) of k and v starting at element kbase; rows past kvlen read as zero.
fn load_keys(lid: u32, kbase: u32, k0: u32) {
  for (var e = lid; e < BK * DM; e += WG) {
    let j = e / DM;
    let c = e % DM;
    var kx = 0.0;
    var vx = 0.0;
    if (k0 + j < P.kvlen && c < P.d) {
      let o = kbase + (k0 + j) * P.d + c;
      kx = ld_k(o);
      vx = ld_v(o);
    }
    Ks[e] = kx;
    Vs[e] = vx;
  }
}

fn dot_qk(r: u32, j: u32) -> f32 {
  var s = 0.0;
  for (var c = 0u; c < P.d; c++) { s += Qs[r * DM + c] * Ks[j * DM + c]; }
  return s;
}

#if BWD
fn dot_gv(r: u32, j: u32) -> f32 {
  var s = 0.0;
  for (var c = 0u; c < P.d; c++) { s += Gs[r * DM + c] * Vs[j * DM + c]; }
  return s;
}
#endif
