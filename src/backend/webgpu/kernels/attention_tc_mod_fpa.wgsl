// FPA, First Passage Attention (the [P] design of specs/fpa_depth.md §2.2, one penalty per kv
// head; causal), as a score modifier of the tensor-core forward (hooks: attention_tc_mod_none.wgsl):
// every visible score loses λ·relu(ℓ_j − M_ij), M_ij = min φ over (j, e_i], e_i = min(p_i, kvlen − 1)
// (+∞ for j = e_i), in log2 units. The key blocks run from the last to the first (MOD_REVERSE), and
// each row carries R = min φ over the keys of the blocks already visited (those after the current
// one, up to e_i), §2.4's carry: then M_ij = min(R, min φ over the block's keys after j, up to e_i).
// A block wholly before e_i reads that inner minimum from Sf (the suffix minima of its φ, computed
// once per block); the block holding e_i (at most one per row) takes it by a short scan.
// The inputs: [φ | ℓ | λ], φ and ℓ per (batch, kv head, key), λ per kv head. Forward only: FPA's
// backward runs the register-blocked kernels (attention_plan.ts modifierBackwardPlan says why).
const MOD_REVERSE = true;
const MOD_STAGES = true;
var<workgroup> Fk: array<f32, BK>;
var<workgroup> Lk: array<f32, BK>;
var<workgroup> Sf: array<f32, BK>;
var<private> mod_base: u32;
var<private> mod_lam: f32;
var<private> mod_end: i32;
var<private> mod_k0: u32;
var<private> mod_hi: i32;
var<private> mod_carry: f32;

fn mod_inf() -> f32 { return f32_from_bits(0x7f800000u); }

fn mod_row(b: u32, h: u32, row: u32) {
  let g = h / P.group;
  mod_base = (b * P.hkv + g) * P.tk;
  mod_lam = mod_in(2u * P.b * P.hkv * P.tk + g) * 1.4426950408889634;
  mod_end = min(i32(row) + P.qoff, i32(P.kvlen) - 1);
  mod_carry = mod_inf();
}

// FPA's φ and ℓ are loaded where they are staged (not prefetched: only the forward, untimed that way).
fn mod_fetch(lid: u32, k0: u32) {}

// φ (+∞ past kvlen, so that it never lowers a minimum) and ℓ of the block's keys.
fn mod_stage(lid: u32, k0: u32) {
  mod_k0 = k0;
  for (var t = lid; t < BK; t += WG) {
    var f = mod_inf();
    var l = 0.0;
    if (k0 + t < P.kvlen) { f = mod_in(mod_base + k0 + t); l = mod_in(P.b * P.hkv * P.tk + mod_base + k0 + t); }
    Fk[t] = f;
    Lk[t] = l;
  }
}

// Sf[t] = min φ over the block's keys after t (+∞ for the last).
fn mod_prepare(lid: u32) {
  for (var t = lid; t < BK; t += WG) {
    var s = mod_inf();
    for (var u = t + 1u; u < BK; u++) { s = min(s, Fk[u]); }
    Sf[t] = s;
  }
}

// The row's last key inside the block, relative to its start (−1: none, BK − 1: all).
fn mod_block() { mod_hi = min(i32(BK) - 1, mod_end - i32(mod_k0)); }

fn mod_bias(c: u32, full: bool) -> f32 {
  var m = mod_carry;
  if (full || mod_hi == i32(BK) - 1) {
    m = min(m, Sf[c]);
  } else {
    for (var u = c + 1u; i32(u) <= mod_hi; u++) { m = min(m, Fk[u]); }
  }
  return -mod_lam * max(Lk[c] - m, 0.0);
}

fn mod_fold() {
  if (mod_hi == i32(BK) - 1) {
    mod_carry = min(mod_carry, min(Fk[0], Sf[0]));
  } else {
    for (var u = 0; u <= mod_hi; u++) { mod_carry = min(mod_carry, Fk[u]); }
  }
}
