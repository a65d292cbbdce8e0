// What the tensor-core attention kernels share for block masks (attention/block_mask.ts), pasted
// after their header (the MASKING placeholder): the blocks a workgroup visits, in order. Without MASK a loop
// visits [first, end) in steps of its block; with MASK it visits what the mask's table lists, whose
// values reach every invocation through workgroup memory (workgroupUniformLoad), so that the loops
// around the kernels' barriers stay uniform. With SEG (a mask of segments, P.mseg > 0 where the
// table's segment ids start, or of bit words, P.mbits > 0 where they start) a pair is visible only
// inside one segment and where its words share no bit, and a listed block is whole only where its
// entry's partial bit says so (pair_visible, mask_whole).
#if MASK
var<workgroup> Mval: u32;

fn mask_head(h: u32) -> u32 {
  if (P.mheads == 1u) { return 0u; }
  return h;
}

// Where the by-query list of the query block holding row i0 starts (its count; the entries follow),
// read from the table's by-query index (the table is compact: attention/block_mask.ts).
fn mask_row(b: u32, h: u32, i0: u32) -> u32 {
  return u32(mask[(b * P.mheads + mask_head(h)) * P.mqblocks + i0 / MASK_QB]);
}

// Where the by-key list of the key block holding key j0 starts, from the by-key index.
fn mask_key_row(b: u32, h: u32, j0: u32) -> u32 {
  return u32(mask[P.mbykey + (b * P.mheads + mask_head(h)) * P.mkblocks + j0 / MASK_KB]);
}

// Blocks of `step` rows a list row names (each entry a mask block of `span` rows).
fn mask_count(mrow: u32, span: u32, step: u32, lid: u32) -> u32 {
  workgroupBarrier();
  if (lid == 0u) { Mval = u32(mask[mrow]) * (span / step); }
  return workgroupUniformLoad(&Mval);
}

// The listed blocks of a decode workgroup's list at mrow (batch entry b, head h's): with UCOUNT (the
// decode kernels only) from the uniforms' mcount, where the host copied or knew them, else from the
// table (call from uniform control flow).
fn mask_list_count(b: u32, h: u32, mrow: u32, lid: u32) -> u32 {
#if UCOUNT
  let crow = b * P.mheads + mask_head(h);
  return P.mcount[crow / 4u][crow % 4u];
#else
  return mask_count(mrow, MASK_KB, MASK_KB, lid);
#endif
}
#endif

#if SEG
var<private> seg_base: u32;
var<private> bits_base: u32;

// Where batch entry b's segment ids and bit words start in the table (each only where P.mseg, P.mbits > 0).
fn seg_start(b: u32) { seg_base = P.mseg + b * P.tk; bits_base = P.mbits + b * P.tk; }

// visible() inside one segment (where the mask has segments) and for words that share no bit
// (where it has bit words): query row i (at position i + qoff, a key position) and key j.
fn pair_visible(i: u32, j: u32) -> bool {
  let p = u32(i32(i) + P.qoff);
  return visible(i, j) && (P.mseg == 0u || mask[seg_base + p] == mask[seg_base + j])
    && (P.mbits == 0u || (mask[bits_base + p] & mask[bits_base + j]) == 0);
}

// Whether the it-th block of `step` rows of list row mrow lies in a mask block marked whole.
fn mask_whole(mrow: u32, it: u32, span: u32, step: u32) -> bool {
  return (mask[mrow + 1u + it / (span / step)] & 1) == 0;
}
#else
fn seg_start(b: u32) {}
fn pair_visible(i: u32, j: u32) -> bool { return visible(i, j); }
fn mask_whole(mrow: u32, it: u32, span: u32, step: u32) -> bool { return true; }
#endif

// The first row (key) of the it-th block of `step` visited: first + it·step, or the mask's.
fn visit(it: u32, first: u32, step: u32, span: u32, mrow: u32, lid: u32) -> u32 {
#if MASK
  workgroupBarrier();
  if (lid == 0u) { Mval = u32(mask[mrow + 1u + it / (span / step)] >> 1u) * span + (it % (span / step)) * step; }
  return workgroupUniformLoad(&Mval);
#else
  return first + it * step;
#endif
}
