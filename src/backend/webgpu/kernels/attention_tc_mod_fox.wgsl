// FoX (the Forgetting Transformer, specs/fpa_depth.md §1; causal) as a score modifier of the
// tensor-core kernels (hooks: attention_tc_mod_none.wgsl): every score gains c[p_i] − c[j], c per
// query head (the inputs: c at (b·h + head)·tk + position), in log2 units. lse then includes the
// bias, as the other FoX kernels' does. The backward's dc needs the row sums Σ_j dS_ij (DQ) and
// the column sums Σ_i dS_ij per query head (DKDV), each in f32 before dS is rounded to f16 and with
// the diagonal left out (there c[p_i] − c[j] = 0), into `aux` in fox_fpa_attention.wgsl's layout
// [rows | (b, h, key)], which its COMBINE turns into dc.
const MOD_REVERSE = false;
const MOD_STAGES = true;
var<private> mod_base: u32;
var<private> mod_sum: f32;

// c of this head at position t, log2 units.
fn mod_c(t: u32) -> f32 { return mod_in(mod_base + t) * 1.4426950408889634; }

#if DKDV
// c at the staged query block's positions.
var<workgroup> RowC: array<f32, BQ>;
var<private> mod_i0: u32;
var<private> mod_key_pos: u32;
var<private> mod_ck: f32;

fn mod_keys(b: u32, g: u32, key: u32, j0: u32, i0: u32, lid: u32) {}

fn mod_key(b: u32, bh: u32, key: u32) {
  mod_base = bh * P.tk;
  mod_key_pos = key;
  mod_ck = mod_c(key);
  mod_sum = 0.0;
}

fn mod_stage_rows(lid: u32, i0: u32) {
  mod_i0 = i0;
  for (var i = lid; i < BQ; i += WG) {
    var x = 0.0;
    if (i0 + i < P.tq) { x = mod_c(u32(i32(i0 + i) + P.qoff)); }
    RowC[i] = x;
  }
}

fn mod_bias_t(c: u32, full: bool) -> f32 { return RowC[c] - mod_ck; }
fn mod_grad_t(c: u32, ds: f32) { if (i32(mod_i0 + c) + P.qoff != i32(mod_key_pos)) { mod_sum += ds; } }

fn mod_fold_t() {}

fn mod_key_end(at: u32, write: bool) {
  let s = mod_sum + subgroupShuffleXor(mod_sum, 1u);
  if (write) { aux[nrows() + at] = s; }
}
#else
// c of the staged key block.
var<workgroup> Ck: array<f32, BK>;
var<private> mod_k0: u32;
var<private> mod_pos: u32;
var<private> mod_cq: f32;

fn mod_row(b: u32, h: u32, row: u32) {
  mod_base = (b * P.h + h) * P.tk;
  mod_pos = u32(i32(row) + P.qoff);
  mod_cq = mod_c(mod_pos);
  mod_sum = 0.0;
}

// Invocation lid < BK fetches key k0 + lid's c (workgroups have at least BK invocations).
var<private> mod_next: f32;
fn mod_fetch(lid: u32, k0: u32) {
  mod_next = 0.0;
  if (lid < BK && k0 + lid < P.kvlen) { mod_next = mod_c(k0 + lid); }
}

fn mod_stage(lid: u32, k0: u32) {
  mod_k0 = k0;
  if (lid < BK) { Ck[lid] = mod_next; }
}

fn mod_prepare(lid: u32) {}
fn mod_block() {}
fn mod_bias(c: u32, full: bool) -> f32 { return mod_cq - Ck[c]; }
fn mod_fold() {}
#if DQ
fn mod_rows(b: u32, h: u32, i0: u32, lid: u32, sg: u32, lane: u32) {}
fn mod_grad(c: u32, ds: f32) { if (mod_k0 + c != mod_pos) { mod_sum += ds; } }
fn mod_after(lid: u32, sg: u32, lane: u32) {}

fn mod_row_end(at: u32, write: bool) {
  let s = mod_sum + subgroupShuffleXor(mod_sum, 1u);
  if (write) { aux[at] = s; }
}
#endif
#endif
