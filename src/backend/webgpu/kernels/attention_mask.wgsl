// What the tensor-core attention kernels share for block masks (attention/block_mask.ts), pasted
// after their header (the MASKING placeholder): the blocks a workgroup visits, in order. Without MASK a loop
// visits [first, end) in steps of its block; with MASK it visits what the mask's table lists, whose
// values reach every invocation through workgroup memory (workgroupUniformLoad), so that the loops
// around the kernels' barriers stay uniform.
#if MASK
var<workgroup> Mval: u32;

fn mask_head(h: u32) -> u32 {
  if (P.mheads == 1u) { return 0u; }
  return h;
}

// Row of the by-query list for the query block holding row i0.
fn mask_row(b: u32, h: u32, i0: u32) -> u32 {
  return ((b * P.mheads + mask_head(h)) * P.mqblocks + i0 / MASK_QB) * (P.mkblocks + 1u);
}

// Row of the by-key list for the key block holding key j0.
fn mask_key_row(b: u32, h: u32, j0: u32) -> u32 {
  return P.mbykey + ((b * P.mheads + mask_head(h)) * P.mkblocks + j0 / MASK_KB) * (P.mqblocks + 1u);
}

// Blocks of `step` rows a list row names (each entry a mask block of `span` rows).
fn mask_count(mrow: u32, span: u32, step: u32, lid: u32) -> u32 {
  workgroupBarrier();
  if (lid == 0u) { Mval = u32(mask[mrow]) * (span / step); }
  return workgroupUniformLoad(&Mval);
}
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
