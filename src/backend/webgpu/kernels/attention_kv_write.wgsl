// kvWrite into rows [pos, pos + n) of every (batch, kv head) block of the cache, one dispatch for
// every block (a buffer copy a block cost a decoding step 8 host calls and queue commands a layer
// at GQA 8, for K and again for V). One invocation per u32 word of a block's new rows:
// ALIGNED   rows start on a 4-byte boundary (f32 rows, 16-bit rows of even head dim): each
//           invocation copies one word (s0, tmaxd, len in words);
// otherwise odd 16-bit rows: each invocation owns one word of the cache, replacing the halves that
//           lie inside the block and keeping the others (s0, tmaxd, len in halves). Blocks are at
//           least one element apart (tmax > n; a full overwrite is a plain buffer copy), so no two
//           invocations share a word.
// MANY (Backend.kvWriteMany, aligned rows only): NW writes of one step in one dispatch (K, V and
// Spot's selector keys), write j into cache_j from x_j with its own (s0, tmaxd, words, blocks) in
// P.w[j], the invocations of write j after those of the writes before it.
#if MANY
const NW = {{NW}}u;
struct Params { w: array<vec4<u32>, NW> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read_write> cache1: array<u32>;
@group(0) @binding(4) var<storage, read> x1: array<u32>;
#if NW3
@group(0) @binding(5) var<storage, read_write> cache2: array<u32>;
@group(0) @binding(6) var<storage, read> x2: array<u32>;
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  var i = gid.x + gid.y * nw.x * 64u;
  for (var j = 0u; j < NW; j++) {
    let p = P.w[j];
    let n = p.z * p.w;
    if (i < n) {
      let at = (i / p.z) * p.y + p.x + i % p.z;
      if (j == 0u) { cache[at] = x[i]; }
      if (j == 1u) { cache1[at] = x1[i]; }
#if NW3
      if (j == 2u) { cache2[at] = x2[i]; }
#endif
      return;
    }
    i -= n;
  }
}
#else
struct Params { s0: u32, tmaxd: u32, len: u32, words: u32, blocks: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 64u;
  if (i >= P.blocks * P.words) { return; }
  let bh = i / P.words;
#if ALIGNED
  cache[bh * P.tmaxd + P.s0 + i % P.words] = x[i];
#else
  let s = bh * P.tmaxd + P.s0;
  let word = (s >> 1u) + i % P.words;
  if (word * 2u >= s + P.len) { return; }
  var v = cache[word];
  for (var half = 0u; half < 2u; half++) {
    let e = word * 2u + half;
    if (e >= s && e < s + P.len) {
      let src = bh * P.len + (e - s);
      let bits = (x[src >> 1u] >> ((src & 1u) * 16u)) & 0xffffu;
      let sh = half * 16u;
      v = (v & ~(0xffffu << sh)) | (bits << sh);
    }
  }
  cache[word] = v;
#endif
}
#endif
