// y[offset + Σ k_d·stride_d] = x[i] for every element i = (k_0, …) of the view: the scatter half
// of assignStrided. y holds one element per u32 word (32-bit dtypes, or a widened copy of a packed
// base), so no two invocations share a word; x may be packed (SP elements per word). Along an axis
// of stride 0 only the last index writes, as the in-order reference leaves it.
struct Params { n: u32, rank: u32, offset: u32, pad: u32, shape: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

const SP = {{SP}}u;

fn load_bits(s: u32) -> u32 {
  return (x[s / SP] >> ((s % SP) * (32u / SP))) & (0xffffffffu >> (32u - 32u / SP));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.n) { return; }
  var rem = i;
  var o = P.offset;
  for (var d = i32(P.rank) - 1; d >= 0; d--) {
    let dim = P.shape[d / 4][d % 4];
    let stride = P.strides[d / 4][d % 4];
    let k = rem % dim;
    if (stride == 0u && k != dim - 1u) { return; }
    o += k * stride;
    rem = rem / dim;
  }
  y[o] = load_bits(i);
}
