// Bitonic sort of (id, position) pairs, ascending by id then position, for embeddingBackward: the
// sorted order lists each id's tokens together and in token order, which makes the sum over
// repeated ids deterministic. KEYS builds the pairs (ids out of [0, V) and the padding up to the
// power of two np sort last as NONE); MERGE is one compare-exchange step (k, j) over the whole
// array; BLOCK runs every step with j < 512 for k in [k, k_end] inside one workgroup's 512 pairs.
const NONE = 0xffffffffu;
#if KEYS
struct Params { t: u32, np: u32, v: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> keys: array<vec2<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let p = gid.x + gid.y * nw.x * 256u;
  if (p >= P.np) { return; }
  var key = vec2<u32>(NONE, NONE);
  if (p < P.t) {
    let id = ids[p];
    key = vec2<u32>(select(NONE, u32(id), id >= 0 && u32(id) < P.v), p);
  }
  keys[p] = key;
}
#else
struct Params { k: u32, j: u32, k_end: u32, np: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> keys: array<vec2<u32>>;

fn greater(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x > b.x || (a.x == b.x && a.y > b.y); }
#endif
#if MERGE
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let t = gid.x + gid.y * nw.x * 256u;
  if (t >= P.np / 2u) { return; }
  let i = 2u * P.j * (t / P.j) + t % P.j;
  let l = i + P.j;
  let a = keys[i];
  let b = keys[l];
  if (greater(a, b) == ((i & P.k) == 0u)) {
    keys[i] = b;
    keys[l] = a;
  }
}
#endif
#if BLOCK
var<workgroup> s: array<vec2<u32>, 512>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let base = (wid.x + wid.y * nw.x) * 512u;
  for (var h = 0u; h < 2u; h++) {
    let q = lid + h * 256u;
    s[q] = select(vec2<u32>(NONE, NONE), keys[min(base + q, P.np - 1u)], base + q < P.np);
  }
  workgroupBarrier();
  var k = P.k;
  var j = P.j;
  loop {
    loop {
      if (j == 0u) { break; }
      let i = 2u * j * (lid / j) + lid % j;
      let l = i + j;
      if (base + l < P.np) {
        let a = s[i];
        let b = s[l];
        if (greater(a, b) == (((base + i) & k) == 0u)) {
          s[i] = b;
          s[l] = a;
        }
      }
      workgroupBarrier();
      j = j / 2u;
    }
    if (k >= P.k_end) { break; }
    k = k * 2u;
    j = k / 2u;
  }
  for (var h = 0u; h < 2u; h++) {
    let q = lid + h * 256u;
    if (base + q < P.np) { keys[base + q] = s[q]; }
  }
}
#endif
