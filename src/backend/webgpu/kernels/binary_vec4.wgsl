// out = a op b for f32 tensors of one shape whose size is a multiple of 4: 16-byte loads and
// stores (the bandwidth-bound fast path of binary.wgsl's FLAT case), the op applied per lane.
struct Params { n4: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;

fn fop(a: f32, b: f32) -> f32 { return {{EXPR}}; }

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n4) { return; }
  let av = a[i];
  let bv = b[i];
  y[i] = vec4<f32>(fop(av.x, bv.x), fop(av.y, bv.y), fop(av.z, bv.z), fop(av.w, bv.w));
}
