// kvWrite into rows [pos, pos + n) of every (batch, kv head) block of the cache, one dispatch for
// every block (a buffer copy a block cost a decoding step 8 host calls and queue commands a layer
// at GQA 8, for K and again for V). One invocation per u32 word of a block's new rows:
// ALIGNED   rows start on a 4-byte boundary (f32 rows, 16-bit rows of even head dim): each
//           invocation copies one word (s0, tmaxd, len in words);
// otherwise odd 16-bit rows: each invocation owns one word of the cache, replacing the halves that
//           lie inside the block and keeping the others (s0, tmaxd, len in halves). Blocks are at
//           least one element apart (tmax > n; a full overwrite is a plain buffer copy), so no two
//           invocations share a word.
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
