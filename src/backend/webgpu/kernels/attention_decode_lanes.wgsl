// Flash-decoding, split pass, lane-team form (16-bit K/V, head dim DK a multiple of 8): the
// chunk's keys are shared among teams of LPK adjacent lanes of one subgroup, and each team is an
// independent online-softmax decoder over its keys with no barrier inside the loop:
//   loads   lane e of a team reads NL 16-byte pieces (8 packed halves each) of a key's K row and
//           of its V row, columns 8·(e + LPK·n) …: a team reads whole rows, adjacent lanes
//           adjacent bytes; U keys a step are loaded before any of them is used, so a lane has
//           2·U·NL loads in flight;
//   scores  each lane dots its columns with the query rows' (RM rows, pre-scaled, in registers),
//           then the team's partial dots meet by subgroupShuffleXor over log2(LPK) steps;
//   softmax the team's running maximum m, sum l and output O of each row (every lane of the team
//           holds the same m and l, and O for its own columns) are rescaled once per step.
// At the end the teams of a subgroup merge by shuffles, the subgroups of the workgroup through
// workgroup memory, and the chunk's (m, l, unnormalised O) go out as attention_decode.wgsl's
// partials (attention_combine.wgsl merges the chunks). Subgroups must hold at least LPK lanes
// (SGMIN ≥ LPK, checked by the caller); a subgroup's index in the workgroup is taken from an
// atomic counter, so nothing assumes how invocations are laid out in subgroups.
{{HEADER}}
{{COMMON}}

const WG = {{WG}}u;
const RM = {{RM}}u;
const DK = {{DK}}u;
const LPK = {{LPK}}u;
const U = {{U}}u;
// 16-byte pieces of a row a lane reads, and slots for the subgroups of a workgroup.
const NL = DK / (8u * LPK);
const NSG = WG / {{SGMIN}}u;
const TEAMS = WG / LPK;
const C4 = DK / 4u;

var<workgroup> sgCount: atomic<u32>;
var<workgroup> Sm: array<f32, NSG * RM>;
var<workgroup> Sl: array<f32, NSG * RM>;
var<workgroup> So: array<vec4<f32>, NSG * RM * C4>;

fn qrow(b: u32, kvh: u32, r: u32) -> u32 {
  let hh = r / P.tq;
  return (b * P.h + kvh * P.group + hh) * P.tq + r % P.tq;
}

fn visible_row(r: u32, j: u32) -> bool { return r < P.rows && visible(r % P.tq, j); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sgsize: u32) {
  let split = wid.x;
  let kvh = wid.y;
  let b = wid.z;
  var sgi = 0u;
  if (subgroupElect()) { sgi = atomicAdd(&sgCount, 1u); }
  sgi = subgroupBroadcastFirst(sgi);
  let team = sgi * (sgsize / LPK) + sl / LPK;
  let e = sl % LPK;
  let kbase = (b * P.hkv + kvh) * P.tk * DK;

  // This lane's query values: row r, piece n at columns 8·(e + LPK·n) … +7, pre-scaled.
  var qv: array<vec4<f32>, RM * NL * 2u>;
  for (var r = 0u; r < RM; r++) {
    for (var n = 0u; n < NL; n++) {
      let c = 8u * (e + LPK * n);
      var lo = vec4<f32>(0.0);
      var hi = vec4<f32>(0.0);
      if (r < P.rows) {
        let o = qrow(b, kvh, r) * DK + c;
        lo = vec4<f32>(ld_q(o), ld_q(o + 1u), ld_q(o + 2u), ld_q(o + 3u)) * P.scale;
        hi = vec4<f32>(ld_q(o + 4u), ld_q(o + 5u), ld_q(o + 6u), ld_q(o + 7u)) * P.scale;
      }
      qv[(r * NL + n) * 2u] = lo;
      qv[(r * NL + n) * 2u + 1u] = hi;
    }
  }
  var m: array<f32, RM>;
  var l: array<f32, RM>;
  var acc: array<vec4<f32>, RM * NL * 2u>;
  for (var r = 0u; r < RM; r++) { m[r] = -BIG; l[r] = 0.0; }
  for (var i = 0u; i < RM * NL * 2u; i++) { acc[i] = vec4<f32>(0.0); }

  let kstart = P.lo + split * P.chunk;
  let kend = min(P.hi, kstart + P.chunk);
  // The step loop is the same for every lane (subgroup operations need uniform control flow):
  // step k1 gives team t the keys k1 + U·t … k1 + U·t + U − 1.
  for (var k1 = kstart; k1 < kend; k1 += TEAMS * U) {
    let k0 = k1 + team * U;
    // Every load of the step first (keys past kend read the chunk's last row; masked below).
    var kw: array<vec4<u32>, U * NL>;
    var vw: array<vec4<u32>, U * NL>;
    for (var u = 0u; u < U; u++) {
      let row = (kbase + min(k0 + u, kend - 1u) * DK) >> 3u;
      for (var n = 0u; n < NL; n++) {
        kw[u * NL + n] = k[row + e + LPK * n];
        vw[u * NL + n] = v[row + e + LPK * n];
      }
    }
    var s: array<f32, U * RM>;
    for (var u = 0u; u < U; u++) {
      for (var r = 0u; r < RM; r++) { s[u * RM + r] = 0.0; }
      for (var n = 0u; n < NL; n++) {
        let w = kw[u * NL + n];
        let klo = up4(w.xy);
        let khi = up4(w.zw);
        for (var r = 0u; r < RM; r++) {
          s[u * RM + r] += dot(qv[(r * NL + n) * 2u], klo) + dot(qv[(r * NL + n) * 2u + 1u], khi);
        }
      }
    }
    for (var o = 1u; o < LPK; o <<= 1u) {
      for (var i = 0u; i < U * RM; i++) { s[i] += subgroupShuffleXor(s[i], o); }
    }
    for (var r = 0u; r < RM; r++) {
      var mx = m[r];
      for (var u = 0u; u < U; u++) {
        let j = k0 + u;
        let sc = select(-BIG, s[u * RM + r], j < kend && visible_row(r, j));
        s[u * RM + r] = sc;
        mx = max(mx, sc);
      }
      let alpha = exp(m[r] - mx);
      m[r] = mx;
      l[r] *= alpha;
      for (var n = 0u; n < NL * 2u; n++) { acc[r * NL * 2u + n] *= alpha; }
    }
    for (var u = 0u; u < U; u++) {
      var vlo: array<vec4<f32>, NL>;
      var vhi: array<vec4<f32>, NL>;
      for (var n = 0u; n < NL; n++) {
        vlo[n] = up4(vw[u * NL + n].xy);
        vhi[n] = up4(vw[u * NL + n].zw);
      }
      for (var r = 0u; r < RM; r++) {
        let sc = s[u * RM + r];
        let p = select(0.0, exp(sc - m[r]), sc > VIS);
        l[r] += p;
        for (var n = 0u; n < NL; n++) {
          acc[(r * NL + n) * 2u] += p * vlo[n];
          acc[(r * NL + n) * 2u + 1u] += p * vhi[n];
        }
      }
    }
  }

  // Teams of one subgroup merge by shuffles (offsets LPK … sgsize/2).
  for (var o = LPK; o < sgsize; o <<= 1u) {
    for (var r = 0u; r < RM; r++) {
      let m2 = subgroupShuffleXor(m[r], o);
      let l2 = subgroupShuffleXor(l[r], o);
      let mm = max(m[r], m2);
      let a1 = exp(m[r] - mm);
      let a2 = exp(m2 - mm);
      m[r] = mm;
      l[r] = l[r] * a1 + l2 * a2;
      for (var n = 0u; n < NL * 2u; n++) {
        let i = r * NL * 2u + n;
        acc[i] = acc[i] * a1 + subgroupShuffleXor(acc[i], o) * a2;
      }
    }
  }
  // The first team of each subgroup writes its state; then the subgroups merge.
  if (sl < LPK) {
    for (var r = 0u; r < RM; r++) {
      if (e == 0u) {
        Sm[sgi * RM + r] = m[r];
        Sl[sgi * RM + r] = l[r];
      }
      for (var n = 0u; n < NL; n++) {
        let c4 = 2u * (e + LPK * n);
        So[(sgi * RM + r) * C4 + c4] = acc[(r * NL + n) * 2u];
        So[(sgi * RM + r) * C4 + c4 + 1u] = acc[(r * NL + n) * 2u + 1u];
      }
    }
  }
  workgroupBarrier();
  let nsg = WG / sgsize;
  for (var t = lid; t < RM * C4; t += WG) {
    let r = t / C4;
    let c4 = t % C4;
    if (r >= P.rows) { continue; }
    var mm = -BIG;
    for (var g = 0u; g < nsg; g++) { mm = max(mm, Sm[g * RM + r]); }
    var ll = 0.0;
    var oo = vec4<f32>(0.0);
    for (var g = 0u; g < nsg; g++) {
      let a = exp(Sm[g * RM + r] - mm);
      ll += Sl[g * RM + r] * a;
      oo += So[(g * RM + r) * C4 + c4] * a;
    }
    let at = split * P.nrows + qrow(b, kvh, r);
    let c = 4u * c4;
    pacc[at * DK + c] = oo.x;
    pacc[at * DK + c + 1u] = oo.y;
    pacc[at * DK + c + 2u] = oo.z;
    pacc[at * DK + c + 3u] = oo.w;
    if (c4 == 0u) {
      pm[at] = mm;
      pl[at] = ll;
    }
  }
}
