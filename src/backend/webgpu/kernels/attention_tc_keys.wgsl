// The key blocks a query block of the tensor-core forward and DQ visits, pasted into their main
// (the KEY_BLOCKS placeholder) after i0 (the block's first row), b and h: pmin … pmax are the
// positions of the block's first and last rows (a cut-off last block moved back to end at tq),
// [kfirst, kend) the keys they can see, nblocks the blocks of BK keys visited — all of that range,
// or those the block mask lists (attention_mask.wgsl; mrow its row).
  let pmin = i32(min(i0, P.tq - 16u)) + P.qoff;
  let pmax = i32(min(i0 + BQ, P.tq)) - 1 + P.qoff;
  var hi = i32(P.kvlen);
  if (P.causal != 0u) { hi = min(hi, pmax + 1); }
  var lo = 0;
  if (P.window != 0u) { lo = max(0, pmin - i32(P.window) + 1); }
  let kfirst = u32(lo) / BK * BK;
  let kend = u32(max(hi, lo));
#if MASK
  let mrow = mask_row(b, h, i0);
  let nblocks = mask_count(mrow, MASK_KB, BK, lid);
#else
  let mrow = 0u;
  let nblocks = (kend - kfirst + BK - 1u) / BK;
#endif
