// Backend.invertRows (CPU reference: backend/cpu/lighthouse.ts), after a fill of the output with m:
// out[s, rows[s, j]] = j, one invocation per listed row. Rows are distinct within a list, so no two
// invocations write one word; a row out of range is skipped (the CPU throws).
{{HEADER}}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i >= P.lists * P.m) { return; }
  let s = i / P.m;
  let r = ldi_rows(i);
  if (r >= 0i && u32(r) < P.n) { sti_out(s * P.n + u32(r), i32(i % P.m)); }
}
