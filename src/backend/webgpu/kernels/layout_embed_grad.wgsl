// embeddingBackward after the (id, position) pairs are sorted (layout_sort.wgsl). HEADS: the
// first sorted position of each present id goes to head[id] (head starts at -1). SUM: output
// element (v, c) adds dy[t, c] over id v's tokens in token order, starting from 0 — the
// reference's order, with f32 accumulation; absent ids give 0.
#if HEADS
const NONE = 0xffffffffu;
struct Params { t: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> keys: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> head: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let p = gid.x + gid.y * nw.x * 256u;
  if (p >= P.t) { return; }
  let id = keys[p].x;
  if (id == NONE) { return; }
  if (p == 0u || keys[p - 1u].x != id) { head[id] = i32(p); }
}
#else
{{HEADER}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  let v = i / P.c;
  let col = i % P.c;
  var acc = 0.0;
  let h = head[v];
  if (h >= 0) {
    for (var p = u32(h); p < P.t; p++) {
      if (bitcast<u32>(keys[2u * p]) != v) { break; }
      acc += ld_dy(u32(keys[2u * p + 1u]) * P.c + col);
    }
  }
  st_y(i, acc);
}
#endif
