// Backend.gatherBlocks (CPU reference: backend/cpu/select.ts gatherBlocks): the K and V rows of each
// batch entry's selected fine blocks, compacted in block order, for a dense decode over them (Spot's
// gathered decode). One workgroup per (slice of SL flags, kv head, batch entry): it counts the
// selected blocks before its slice (every invocation striding, a tree sum; each kv head's workgroup
// counts them again, cheaper than a second dispatch), lists its slice's
// selected blocks in order (one invocation: SL flags), then copies their rows word by word (the
// host checks that a row is whole 32-bit words), K and V together; rows whose output block lies
// past the count are dropped. The last slice's workgroups zero the output rows past the selected
// blocks where there are fewer than the count.
// LIST (Backend.gatherListed): the blocks come as a selectBlockList table's list (row b's list at
// table[b]: the count, then 2·block + partial), so no workgroup counts flags: one workgroup per (C
// list entries, kv head, batch entry) copies each entry's block whole, a UNIT an invocation (16
// bytes where rows are whole 16-byte groups, else a word: the host checks rows are whole words), K
// and V, a block's rows contiguous in and out; list places from the list's count up to P.count get
// zero rows. P.w4: UNITs a row.
#if LIST
struct Params { batch: u32, count: u32, fine: u32, hkv: u32, tmax: u32, w4: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> table: array<i32>;
@group(0) @binding(2) var<storage, read> k: array<{{UNIT}}>;
@group(0) @binding(3) var<storage, read> v: array<{{UNIT}}>;
@group(0) @binding(4) var<storage, read_write> ko: array<{{UNIT}}>;
@group(0) @binding(5) var<storage, read_write> vo: array<{{UNIT}}>;

const WG = 256u;
const C = {{C}}u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let b = wid.z;
  let list = u32(table[b]);
  let listed = min(u32(table[list]), P.count);
  let rows = P.count * P.fine;
  let src0 = (b * P.hkv + h) * P.tmax;
  let dst0 = (b * P.hkv + h) * rows;
  let per = P.fine * P.w4;
  for (var i = wid.x * C; i < min(P.count, wid.x * C + C); i++) {
    let e = select(0u, u32(table[list + 1u + i]) >> 1u, i < listed);
    for (var t = lid; t < per; t += WG) {
      let r = t / P.w4;
      let at = (dst0 + i * P.fine + r) * P.w4 + t % P.w4;
      let src = (src0 + min(e * P.fine + r, P.tmax - 1u)) * P.w4 + t % P.w4;
      if (i < listed) {
        ko[at] = k[src];
        vo[at] = v[src];
      } else {
        ko[at] = {{UNIT}}();
        vo[at] = {{UNIT}}();
      }
    }
  }
}
#else
struct Params { batch: u32, valid: u32, fine: u32, count: u32, hkv: u32, tmax: u32, words: u32, slices: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> flags: array<i32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read_write> ko: array<u32>;
@group(0) @binding(5) var<storage, read_write> vo: array<u32>;

const WG = 256u;
const SL = {{SL}}u;

var<workgroup> red: array<u32, WG>;
var<workgroup> lst: array<u32, SL>;
var<workgroup> nsel: u32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let slice = wid.x;
  let h = wid.y;
  let b = wid.z;
  let s0 = slice * SL;
  let fbase = b * P.valid;
  var c = 0u;
  for (var e = lid; e < s0; e += WG) { if (flags[fbase + e] != 0i) { c += 1u; } }
  red[lid] = c;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w >>= 1u) {
    if (lid < w) { red[lid] += red[lid + w]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    var n = 0u;
    for (var e = s0; e < min(s0 + SL, P.valid); e++) {
      if (flags[fbase + e] != 0i) { lst[n] = e; n += 1u; }
    }
    nsel = n;
  }
  workgroupBarrier();
  let first = red[0];
  let nb = nsel;
  let rows = P.count * P.fine;
  let src0 = (b * P.hkv + h) * P.tmax;
  let dst0 = (b * P.hkv + h) * rows;
  let total = nb * P.fine * P.words;
  for (var t = lid; t < total; t += WG) {
    let rr = t / P.words;
    let wd = t % P.words;
    let i = rr / P.fine;
    let r = rr % P.fine;
    let o = first + i;
    if (o < P.count) {
      let srow = min(lst[i] * P.fine + r, P.tmax - 1u);
      let at = (dst0 + o * P.fine + r) * P.words + wd;
      let src = (src0 + srow) * P.words + wd;
      ko[at] = k[src];
      vo[at] = v[src];
    }
  }
  if (slice == P.slices - 1u && first + nb < P.count) {
    // Fewer selected blocks than the count: the rows after them are zero.
    let z0 = (first + nb) * P.fine * P.words;
    for (var t = z0 + lid; t < rows * P.words; t += WG) {
      ko[dst0 * P.words + t] = 0u;
      vo[dst0 * P.words + t] = 0u;
    }
  }
}
#endif
