// What both GEMM kernels share (substituted for the COMMON placeholder after the header).

// This workgroup's (block row, block column): the dispatch order, or with GROUP the blocks in
// groups of GROUP block rows walked column by column.
fn blockOf(wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
#if GROUP
  let id = wid.y * nwg.x + wid.x;
  let per = GROUP * nwg.x;
  let first = id / per * GROUP;
  let rows = min(nwg.y - first, GROUP);
  let r = id % per;
  return vec2<u32>(first + r % rows, r / rows);
#else
  return vec2<u32>(wid.y, wid.x);
#endif
}
