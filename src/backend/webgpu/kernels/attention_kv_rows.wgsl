// kvWrite where rows start on a 4-byte boundary (f32 rows, or 16-bit rows of even head dim): one
// invocation per u32 word of the n new rows of every (batch, kv head) block, copied to rows
// [pos, pos + n) of that block in the cache. One dispatch for every block, where a buffer copy a
// block (8 of them a layer at GQA 8) each cost the host a call and the queue a command.
struct Params { s0: u32, tmaxw: u32, len: u32, blocks: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 64u;
  if (i >= P.blocks * P.len) { return; }
  let bh = i / P.len;
  cache[bh * P.tmaxw + P.s0 + i % P.len] = x[i];
}
