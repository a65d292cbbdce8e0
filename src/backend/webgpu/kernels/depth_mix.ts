/**
 * WebGPU Depth-Attention mixing (Backend.depthMix / depthMixBackward, specs/fpa_depth.md §3.1),
 * checked against src/backend/cpu/depth_mix.ts by test/backend/webgpu_depth_mix.test.ts. One WGSL
 * file, depth_mix.wgsl: one invocation per (batch, kv head, token) row, f32 arithmetic over any
 * storage dtype (q̄ in a private array of DM = head dim rounded up to a power of two ≥ 16).
 *
 * The m candidates come as separate tensors; a dispatch has at most 8 storage bindings, so the keys
 * and the values are first stacked into one buffer each with buffer copies (candidate c at element
 * c·pitch, pitch rounded so every slot starts on a 4-byte boundary, as packed f16/bf16 words need).
 * The backward writes dk and dv stacked the same way and splits them into one tensor per candidate
 * (copies, or a cast for dtypes a kernel cannot store element by element). The mix itself is a few
 * multiply-adds per element (§3.1: "< 0.01 % FLOPs"), so these copies, O(m·B·Hkv·T·D), are its cost;
 * reading the candidates' cache slots in place (§4.2) would need one binding per candidate.
 */
import { UnsupportedError } from '../../../errors.ts';
import { bytesPerElement, type DType } from '../../../tensor/dtype.ts';
import type { DepthMixArgs } from '../../backend.ts';
import type { GpuHandle, GpuRef, KernelTable, WebGpuBackend } from '../backend.ts';
import { f32bits, grid, type Kernel } from '../runtime.ts';
import { wgslSource } from '../sources.ts';
import { header, preprocess, storesDirectly, type Binding, type Variant } from '../wgsl.ts';
import { viaStorable } from './elementwise.ts';

export const DEPTH_MIX_FILES = ['depth_mix'];

const PARAMS = 'b: u32, h: u32, hkv: u32, t: u32, d: u32, m: u32, scale: f32, r: u32, rows: u32, pitch: u32, opitch: u32';

const dt = (v: Variant, key: string) => v[key] as DType;

function bindings(v: Variant): Binding[] {
  const x = dt(v, 'X');
  const ins: Binding[] = [{ name: 'q', dtype: x }, { name: 'kk', dtype: x }, { name: 'vv', dtype: x }];
  if (v.FWD) return [...ins, { name: 'out', dtype: dt(v, 'Y'), write: true }, { name: 'alpha', dtype: 'f32', write: true }];
  const y = dt(v, 'Y');
  return [...ins, { name: 'alpha', dtype: 'f32' }, { name: 'g', dtype: x }, { name: 'dq', dtype: y, write: true }, { name: 'dk', dtype: y, write: true }, { name: 'dv', dtype: y, write: true }];
}

const kernel: Kernel = {
  name: 'depth_mix',
  source: (v, caps) => preprocess(wgslSource('depth_mix'), { ...v, HEADER: header(bindings(v), caps.f16, PARAMS) }),
};

const roundUp4 = (bytes: number) => Math.ceil(bytes / 4) * 4;

/** Elements per stacked slot of a (B, Hkv, T, D) tensor of `dtype`: n rounded so a slot is whole 4-byte words. */
function pitchOf(n: number, dtype: DType): number {
  const bpe = bytesPerElement(dtype);
  return roundUp4(n * bpe) / bpe;
}

function headPitch(d: number): number {
  if (d > 256) throw new UnsupportedError(`webgpu: depthMix takes head dims up to 256, got ${d}`);
  let p = 16;
  while (p < d) p *= 2;
  return p;
}

/** The m tensors copied end to end into one new buffer, slot c at byte c·pitch·bpe. */
function stack(be: WebGpuBackend, refs: readonly GpuRef[], n: number, pitch: number, what: string): GpuHandle {
  const dtype = refs[0].dtype, bpe = bytesPerElement(dtype);
  const out = be.alloc(dtype, Math.max(1, refs.length * pitch), what);
  const enc = be.rt.commandEncoder();
  const bytes = roundUp4(n * bpe);
  if (bytes > 0) refs.forEach((r, c) => enc.copyBufferToBuffer(r.h.buffer, 0, out.buffer, c * pitch * bpe, bytes));
  return out;
}

function uniforms(a: DepthMixArgs, pitch: number, opitch: number): number[] {
  return [a.batch, a.heads, a.kvHeads, a.t, a.d, a.m, f32bits(a.scale), a.heads / a.kvHeads, a.batch * a.kvHeads * a.t, pitch, opitch];
}

export function depthMix(be: WebGpuBackend, q: GpuRef, keys: readonly GpuRef[], values: readonly GpuRef[], a: DepthMixArgs): [GpuHandle, GpuHandle] {
  const rows = a.batch * a.kvHeads * a.t, n = rows * a.d;
  const alpha = be.alloc('f32', rows * a.m, 'depthMix alpha');
  if (rows === 0 || a.d === 0) {
    const out = be.alloc(values[0].dtype, n, 'depthMix');
    if (n > 0) be.rt.commandEncoder().clearBuffer(out.buffer);
    return [out, alpha];
  }
  const dm = headPitch(a.d);
  const pitch = pitchOf(n, q.dtype);
  const kk = stack(be, keys, n, pitch, 'depthMix keys'), vv = stack(be, values, n, pitch, 'depthMix values');
  const out = viaStorable(be, values[0].dtype, n, 'depthMix', (buf, y) => be.rt.run({
    kernel, variant: { FWD: true, X: q.dtype, Y: y, DM: dm },
    uniforms: uniforms(a, pitch, 0), buffers: [q.h.buffer, kk.buffer, vv.buffer, buf, alpha.buffer], workgroups: grid(rows, 64),
  }));
  be.free(kk);
  be.free(vv);
  return [out, alpha];
}

export function depthMixBackward(be: WebGpuBackend, q: GpuRef, keys: readonly GpuRef[], values: readonly GpuRef[], alpha: GpuRef, g: GpuRef, a: DepthMixArgs): [GpuHandle, GpuHandle[], GpuHandle[]] {
  const rows = a.batch * a.kvHeads * a.t, n = rows * a.d, dtype = q.dtype;
  if (g.dtype !== dtype) throw new UnsupportedError(`webgpu: depthMixBackward takes dout in the inputs' dtype ${dtype}, got ${g.dtype}`);
  const zeros = (size: number, what: string) => {
    const h = be.alloc(dtype, size, what);
    if (size > 0) be.rt.commandEncoder().clearBuffer(h.buffer);
    return h;
  };
  if (rows === 0 || a.d === 0) {
    return [zeros(a.batch * a.heads * a.t * a.d, 'depthMix dq'), keys.map(() => zeros(n, 'depthMix dk')), values.map(() => zeros(n, 'depthMix dv'))];
  }
  const dm = headPitch(a.d);
  const pitch = pitchOf(n, dtype);
  const kk = stack(be, keys, n, pitch, 'depthMix keys'), vv = stack(be, values, n, pitch, 'depthMix values');
  // Outputs in the dtype itself where a kernel can store it element by element, else in f32 and cast after.
  const y: DType = storesDirectly(dtype, be.caps.f16) ? dtype : 'f32';
  const opitch = pitchOf(n, y);
  const dks = be.alloc(y, a.m * opitch, 'depthMix dk (stacked)'), dvs = be.alloc(y, a.m * opitch, 'depthMix dv (stacked)');
  const dq = viaStorable(be, dtype, a.batch * a.heads * a.t * a.d, 'depthMix dq', (buf, yq) => be.rt.run({
    kernel, variant: { BWD: true, X: dtype, Y: yq, DM: dm },
    uniforms: uniforms(a, pitch, opitch), buffers: [q.h.buffer, kk.buffer, vv.buffer, alpha.h.buffer, g.h.buffer, buf, dks.buffer, dvs.buffer], workgroups: grid(rows, 64),
  }));
  be.free(kk);
  be.free(vv);
  // viaStorable picks the same store dtype for dq as y above, so one variant serves all three outputs.
  const split = (stacked: GpuHandle, what: string): GpuHandle[] => Array.from({ length: a.m }, (_, c) => viaStorable(be, dtype, n, what, (buf) => {
    be.rt.commandEncoder().copyBufferToBuffer(stacked.buffer, c * opitch * bytesPerElement(y), buf, 0, roundUp4(n * bytesPerElement(y)));
  }));
  const dk = split(dks, 'depthMix dk'), dv = split(dvs, 'depthMix dv');
  be.free(dks);
  be.free(dvs);
  return [dq, dk, dv];
}

export function depthMixKernels(be: WebGpuBackend): Pick<KernelTable, 'depthMix' | 'depthMixBackward'> {
  return {
    depthMix: (q, keys, values, a) => depthMix(be, q, keys, values, a),
    depthMixBackward: (q, keys, values, alpha, g, a) => depthMixBackward(be, q, keys, values, alpha, g, a),
  };
}
