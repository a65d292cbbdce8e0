// Device copy of n 16-byte words (buffers are pooled in size classes that are multiples of 16
// bytes, so the rounded-up tail stays inside both buffers). Faster than copyBufferToBuffer on
// Vulkan: 16-byte loads and stores, every thread busy.
struct Params { n: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  dst[i] = src[i];
}
