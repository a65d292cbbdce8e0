// The tensor-core kernels' score-modifier hooks (attention_tc.wgsl and attention_tc_backward.wgsl
// call them; a modifier file defines them all, this one for softmax attention with no modifier).
// A modifier reads its side inputs through mod_in(i) (word i, f32) and keeps its per-row state in
// private variables. The forward and the backward's DQ pass (rows against key blocks):
//   MOD_REVERSE          key blocks from the last to the first (a per-row carry over later keys)
//   MOD_STAGES           the hooks stage per-key inputs in workgroup memory (an extra barrier)
//   mod_row(b, h, row)   per-row state at the start of each pass
//   mod_fetch(lid, k0)   per-key inputs of key block k0 into the invocation's registers, where the
//                        skeleton fetches the block's K and V (a block early under PREFETCH)
//   mod_stage(lid, k0)   per-key inputs of key block k0 (what mod_fetch took, or loaded here) into
//                        workgroup memory, before the block's staging barrier
//   mod_prepare(lid)     after that barrier, before the scores: what derives from the staged inputs
//   mod_block()          per row, after the scores' barrier: the row's view of the block
//   mod_bias(c, full)    the term added to key k0 + c's score in log2 units (called only where the
//                        key is visible; `full`: every key of the block is visible to every row),
//                        pasted at the skeleton's BIAS placeholder only where a modifier is
//   mod_fold()           per row, after the block: fold it into the carry
// DQ also: mod_rows(b, h, i0, lid, sg, lane) after mod_row (the workgroup's first row i0, the
// invocation's place), mod_grad(c, ds) takes each dS (f32) of the row (where the skeleton's scratch
// Ss[sbase + 16c + r], Ds[…] may be overwritten: S and dP of that pair are read),
// mod_after(lid, sg, lane) after the barrier that follows mod_fold (every invocation; it may hold
// barriers of its own), mod_row_end(at, write) ends the row (called by every lane; `write` on the
// one that stores, at the row's index; it may hold barriers). The DKDV pass (keys against query
// blocks, per query head) has their transposes: mod_keys(b, g, key, j0, i0, lid) once (kv head g,
// the lane's key, the workgroup's first key and first query block; every invocation, it may hold
// barriers), then per query head mod_key(b, bh, key), mod_stage_rows(lid, i0),
// mod_bias_t(c, full) (at BIAS_T), mod_grad_t(c, ds), mod_fold_t() (per key, after the block),
// mod_key_end(at, write).
const MOD_REVERSE = false;
const MOD_STAGES = false;
#if DKDV
fn mod_keys(b: u32, g: u32, key: u32, j0: u32, i0: u32, lid: u32) {}
fn mod_key(b: u32, bh: u32, key: u32) {}
fn mod_stage_rows(lid: u32, i0: u32) {}
fn mod_grad_t(c: u32, ds: f32) {}
fn mod_fold_t() {}
fn mod_key_end(at: u32, write: bool) {}
#else
fn mod_row(b: u32, h: u32, row: u32) {}
fn mod_fetch(lid: u32, k0: u32) {}
fn mod_stage(lid: u32, k0: u32) {}
fn mod_prepare(lid: u32) {}
fn mod_block() {}
fn mod_fold() {}
fn mod_rows(b: u32, h: u32, i0: u32, lid: u32, sg: u32, lane: u32) {}
fn mod_grad(c: u32, ds: f32) {}
fn mod_after(lid: u32, sg: u32, lane: u32) {}
fn mod_row_end(at: u32, write: bool) {}
#endif
