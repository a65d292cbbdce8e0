// Backend.gatherListed (CPU reference: backend/cpu/select.ts gatherListed): the K and V rows of the
// blocks a selectBlockList table lists (row b's list at table[b]: the count, then 2·block + partial),
// compacted in list order, for a dense decode over them (Spot's gathered decode). One workgroup per
// (C list entries, kv head, batch entry) copies each entry's block whole, a UNIT an invocation (16
// bytes where rows are whole 16-byte groups, else a word: the host checks rows are whole words), K
// and V, a block's rows contiguous in and out (rows past tmax from its last row); list places from
// the list's count up to P.count get zero rows. P.w4: UNITs a row. (An earlier form took the flags
// and counted them before each slice: 138 against 42 µs a Spot step at 128K on the H100.)
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
