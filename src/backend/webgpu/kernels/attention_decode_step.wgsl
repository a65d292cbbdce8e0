// The parts of flash-decoding's split pass that attention_decode.wgsl and fox_fpa_decode.wgsl
// share (one copy, spliced into both where they name DECODE_STEP). The including file declares WG (keys per
// step, one per invocation), RM (query rows), D4 (column vec4s), NG = WG / D4 (key groups of the
// P·V loop), the workgroup arrays Qs (RM·D4 vec4), Ss and Mx (RM·WG), Mrow, Arow and Lred (RM),
// Red (RM·D4), with MASK mask_vrow(j, kend) (the V row of virtual key j; with VBLK mask_vblock(k0, bk),
// the first key of the step's listed block bk), the loaders ld_q and ldv4, qrow(b, kvh, r), the outputs pm, pl and pacc, and SG
// where subgroups are used. Experimental forms (attention_decode.wgsl only): VW, the caller loaded
// this invocation's V values of the step into vw (packed 16-bit, unpacked by up4); L1, each row
// sum l is kept per key (the invocation that owns key lid adds its P) instead of by every column
// group of the P·V loop, and summed over the workgroup at the end.

// Whether key j is visible from workgroup row r (query row r % Tq of its head); with MASK also
// inside the row's segment (attention_mask.wgsl's pair_visible).
#if MASK
fn visible_row(r: u32, j: u32) -> bool { return r < P.rows && pair_visible(r % P.tq, j); }
#else
fn visible_row(r: u32, j: u32) -> bool { return r < P.rows && visible(r % P.tq, j); }
#endif

{{DECODE_Q}}

// Key lid's score s for row r into Ss, and into Mx its subgroup's maximum (SG) or s itself: what
// decode_softmax_pv reads.
fn decode_put_score(r: u32, lid: u32, s: f32) {
  Ss[r * WG + lid] = s;
#if SG
  Mx[r * WG + lid] = subgroupMax(s);
#else
  Mx[r * WG + lid] = s;
#endif
}

// One step's softmax and P·V, once every invocation has written its key's score for each row r to
// Ss[r·WG + lid] and to Mx[r·WG + lid] (its subgroup's maximum with SG, else the score itself):
// each row's step maximum, the rescale α of its running (m, l, O), P = exp(s − m) in place, then
// this invocation's share of O += P·V (columns 4·c4 … 4·c4+3, keys g, g + NG, …) and of l.
// sgsize: the subgroup size with SG (unused without).
fn decode_softmax_pv(lid: u32, sgsize: u32, kbase: u32, k0: u32, kend: u32, c4: u32, g: u32, d4: u32,
#if VW
                     vw: ptr<function, array<vec2<u32>, WG / NG>>,
#endif
                     acc: ptr<function, array<vec4<f32>, RM>>, lsum: ptr<function, array<f32, RM>>) {
  workgroupBarrier();
#if SG
  // Each subgroup's maximum sits at every one of its lanes: read one lane per subgroup.
  if (lid < RM) {
    var mx = -BIG;
    for (var i = 0u; i < WG; i += sgsize) { mx = max(mx, Mx[lid * WG + i]); }
    let m = max(Mrow[lid], mx);
    Arow[lid] = exp(Mrow[lid] - m);
    Mrow[lid] = m;
  }
#else
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    for (var u = lid; u < RM * s; u += WG) {
      let r = u / s;
      let i = u % s;
      Mx[r * WG + i] = max(Mx[r * WG + i], Mx[r * WG + i + s]);
    }
    workgroupBarrier();
  }
  if (lid < RM) {
    let m = max(Mrow[lid], Mx[lid * WG]);
    Arow[lid] = exp(Mrow[lid] - m);
    Mrow[lid] = m;
  }
#endif
  workgroupBarrier();
  for (var r = 0u; r < RM; r++) {
    let s = Ss[r * WG + lid];
    let p = select(0.0, exp(s - Mrow[r]), s > VIS);
    Ss[r * WG + lid] = p;
#if L1
    (*lsum)[r] = (*lsum)[r] * Arow[r] + p;
#endif
  }
  workgroupBarrier();
  for (var r = 0u; r < RM; r++) {
    (*acc)[r] *= Arow[r];
#if L1
#else
    (*lsum)[r] *= Arow[r];
#endif
  }
  if (c4 < d4) {
    // Keys past kend have P = 0; their (clamped) V rows are read without a branch.
#if VBLK
    var vblk = 0u;
#endif
    for (var i = 0u; i < WG / NG; i++) {
      let jj = g + i * NG;
#if VW
      let vv = up4((*vw)[i]);
#else
#if VBLK
      // Keys g, g + NG, … take the step's listed blocks in order, MASK_KB / NG keys each: a block's
      // first key read once, its rows by offset (keys past kend read some valid row: P = 0 there).
      if (i % (MASK_KB / NG) == 0u) { vblk = mask_vblock(k0, i / (MASK_KB / NG)); }
      let vv = ldv4(kbase + drow(vblk + jj % MASK_KB) * P.d + 4u * c4, P.d - 4u * c4);
#else
#if MASK
      let vv = ldv4(kbase + mask_vrow(k0 + jj, kend) * P.d + 4u * c4, P.d - 4u * c4);
#else
      let vv = ldv4(kbase + min(k0 + jj, kend - 1u) * P.d + 4u * c4, P.d - 4u * c4);
#endif
#endif
#endif
      for (var r = 0u; r < RM; r++) {
        let p = Ss[r * WG + jj];
        (*acc)[r] += p * vv;
#if L1
#else
        (*lsum)[r] += p;
#endif
      }
    }
  }
}

// The end of the split pass: the NG key groups' accumulators summed into group 0 (l from column
// group 0 of each key group), then the chunk's partial (m, l, unnormalised O) of every row written
// for attention_combine.wgsl.
fn decode_write_partials(split: u32, b: u32, kvh: u32, c4: u32, g: u32, lid: u32,
                         acc: ptr<function, array<vec4<f32>, RM>>, lsum: ptr<function, array<f32, RM>>) {
#if L1
  // Each invocation holds its keys' part of l: the workgroup's sum of each row, through Ss.
  workgroupBarrier();
  for (var r = 0u; r < RM; r++) { Ss[r * WG + lid] = (*lsum)[r]; }
  workgroupBarrier();
  // The sum goes to invocation (c4 0, g 0), zero to the others, so the key-group merge below adds nothing more.
  // That merge (Lred) still runs: without it the split pass took 0.75 ms at 128K on the H200 instead of
  // 0.22, with the same values (dev/kernels/attention.ts cL against d2, BENCHMARKS.md). Keep it.
  for (var r = 0u; r < RM; r++) {
    var t = 0.0;
    if (g == 0u && c4 == 0u) { for (var i = 0u; i < WG; i++) { t += Ss[r * WG + i]; } }
    (*lsum)[r] = t;
  }
#endif
  for (var gg = 1u; gg < NG; gg++) {
    workgroupBarrier();
    if (g == gg) {
      for (var r = 0u; r < RM; r++) {
        Red[r * D4 + c4] = (*acc)[r];
        if (c4 == 0u) { Lred[r] = (*lsum)[r]; }
      }
    }
    workgroupBarrier();
    if (g == 0u) {
      for (var r = 0u; r < RM; r++) {
        (*acc)[r] += Red[r * D4 + c4];
        (*lsum)[r] += Lred[r];
      }
    }
  }
  if (g == 0u) {
    for (var r = 0u; r < P.rows; r++) {
      let at = split * P.nrows + qrow(b, kvh, r);
      let c = 4u * c4;
      if (c < P.d) { pacc[at * P.d + c] = (*acc)[r].x; }
      if (c + 1u < P.d) { pacc[at * P.d + c + 1u] = (*acc)[r].y; }
      if (c + 2u < P.d) { pacc[at * P.d + c + 2u] = (*acc)[r].z; }
      if (c + 3u < P.d) { pacc[at * P.d + c + 3u] = (*acc)[r].w; }
      if (c4 == 0u) {
        pm[at] = Mrow[r];
        pl[at] = (*lsum)[r];
      }
    }
  }
}
