/**
 * The WebGPU runtime under the backend: pipelines compiled once per (kernel, variant) and cached,
 * many dispatches recorded into one command encoder, uniforms gathered into one ring buffer
 * written once per submit (bound at a dynamic offset, so bind groups are cached per set of
 * buffers), buffers from a pool, and read-back as the only await (STYLE.md §11).
 *
 * Ordering rule: `queue.writeBuffer` runs before any command buffer submitted after it, so an
 * upload into a pooled buffer first submits the pending encoder (whose commands may still read
 * that buffer's previous contents).
 */
import { ArgumentError, DeviceError, UnsupportedError } from '../../errors.ts';
import { debugLevel, debugLine } from '../../platform/debug.ts';
import type { GpuCaps } from './device.ts';
import { BufferPool } from './pool.ts';
import { GpuProfiler, type KernelTime } from './profile.ts';
import { preprocess, type Variant } from './wgsl.ts';

/** A kernel: a name, its WGSL (before preprocessing) and how a variant changes it. */
export interface Kernel {
  readonly name: string;
  /** Full WGSL for a variant (the variant is also the cache key: never put shapes in it). */
  source(v: Variant, caps: GpuCaps): string;
}

export interface Dispatch {
  kernel: Kernel;
  variant: Variant;
  /** Uniform words (u32; floats via f32bits), bound at binding 0 when present. */
  uniforms?: ArrayLike<number>;
  /** Storage buffers bound in order after the uniforms. */
  buffers: readonly GPUBuffer[];
  workgroups: readonly [number, number?, number?];
  /**
   * Uniform words taken from device buffers (copied in before the dispatch, over `uniforms[word]`):
   * values made on the device that a kernel must see as uniform (a loop bound the GPU's compiler
   * then keeps in uniform registers).
   */
  deviceUniforms?: readonly { buffer: GPUBuffer; byteOffset: number; word: number }[];
}

const scratch = new DataView(new ArrayBuffer(4));
/** The u32 bit pattern of an f32 (for float uniforms). */
export function f32bits(x: number): number {
  scratch.setFloat32(0, x, true);
  return scratch.getUint32(0, true);
}

const RING_BYTES = 1 << 20;
/** The dynamic offsets of a bind group without uniforms (shared: never written). */
const NO_OFFSETS: number[] = [];
/**
 * Dispatches recorded before the encoder is submitted on its own. Submitting in pieces lets the GPU
 * start on a step while the host still records the rest of it; one submit at the end (4096 before)
 * left the GPU idle for the whole recording (the small preset's training step: 92 ms wall against
 * 65 ms of GPU time on the H200, bench/train_lm.ts --profile).
 */
export const FLUSH_DISPATCHES = 128;
/** Bind groups kept for reuse (runtime.bindGroup), least recently used dropped first. */
const BIND_GROUP_CACHE = 4096;
/** Bytes of idle read-back buffers kept for reuse (GpuRuntime.parkStaging). */
const STAGING_BYTES = 64 << 20;

/**
 * An explicit bind group layout for WGSL whose group-0 bindings are exactly 0 … n−1, each a
 * uniform buffer (dynamic offset: the ring) or a storage buffer; kinds holds 'u', 'r' (read-only
 * storage) or 'w' per binding. Null for anything else (the pipeline keeps layout 'auto').
 */
function explicitLayout(device: GPUDevice, code: string, label: string): { layout: GPUBindGroupLayout; kinds: string } | null {
  const found = new Map<number, string>();
  for (const m of code.matchAll(/@group\(\s*(\d+)\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var\s*(<[^>]*>)?/g)) {
    if (m[1] !== '0') return null;
    const space = (m[3] ?? '').replace(/[<>\s]/g, '');
    const kind = space === 'uniform' ? 'u' : space === 'storage' || space === 'storage,read' ? 'r' : space === 'storage,read_write' ? 'w' : null;
    if (kind === null || found.has(Number(m[2]))) return null;
    found.set(Number(m[2]), kind);
  }
  let kinds = '';
  for (let i = 0; i < found.size; i++) {
    const k = found.get(i);
    if (k === undefined || (k === 'u' && i !== 0)) return null;
    kinds += k;
  }
  const entries: GPUBindGroupLayoutEntry[] = [...kinds].map((k, binding) => ({
    binding, visibility: GPUShaderStage.COMPUTE,
    buffer: k === 'u' ? { type: 'uniform', hasDynamicOffset: true } : { type: k === 'r' ? 'read-only-storage' : 'storage' },
  }));
  return { layout: device.createBindGroupLayout({ entries, label }), kinds };
}

/** One dispatch as recordDispatches logs it. */
export interface DispatchRecord { kernel: string; variant: Variant; workgroups: [number, number, number] }

export class GpuRuntime {
  readonly pool: BufferPool;
  private pipelines = new Map<string, GPUComputePipeline>();
  /** Per pipeline: its explicit layout, binding kinds and a number for cache keys (see `bindGroup`), else null. */
  private layouts = new Map<GPUComputePipeline, { layout: GPUBindGroupLayout; kinds: string; id: number } | null>();
  /** Bind groups of recent dispatches, most recent last, keyed by pipeline and buffers (`bindGroup`). */
  private groups = new Map<string, GPUBindGroup>();
  private bufferIds = new WeakMap<GPUBuffer, number>();
  /** Idle MAP_READ buffers by size, and their bytes. */
  private staging = new Map<number, GPUBuffer[]>();
  private stagingBytes = 0;
  private nextBufferId = 0;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  /** The pipeline last set in `pass` (a pass keeps it across dispatches, so it is set only when it changes). */
  private passPipeline: GPUComputePipeline | null = null;
  /** FON_DEBUG's level (platform/debug.ts): ≥ 1 prints dispatches, ≥ 2 their GPU times, ≥ 3 the WGSL of new pipelines. */
  private readonly debug = debugLevel();
  private ringCpu = new Uint32Array(RING_BYTES / 4);
  private ringUsed = 0;
  /** The uniform ring: one buffer, rewritten per submit (queue order makes reuse safe). */
  private ringBuffer: GPUBuffer | null = null;
  private dispatches = 0;
  private lostReason: string | null = null;
  private uncaptured: string | null = null;
  /** Dispatches recorded since creation (for FON_DEBUG and tests). */
  totalDispatches = 0;
  /** Submits so far (flush), and bind groups made (a cache miss in bindGroup): benchmarks read them. */
  submits = 0;
  bindGroupsMade = 0;
  /**
   * Dispatches recorded before the encoder is submitted on its own (FLUSH_DISPATCHES; a benchmark
   * that times the GPU alone raises it to record a whole batch before one submit).
   */
  flushEvery = FLUSH_DISPATCHES;
  /** The dispatch log while one is kept (recordDispatches). */
  private log: DispatchRecord[] | null = null;
  /** GPU time per kernel while profiling (startProfile … stopProfile; profile.ts). */
  private profiler: GpuProfiler | null = null;

  constructor(readonly device: GPUDevice, readonly caps: GpuCaps) {
    this.pool = new BufferPool(device, caps.maxBuffer, caps.maxBinding);
    device.lost.then((info) => { this.lostReason = `${info.reason}: ${info.message}`; });
    device.onuncapturederror = (e) => { this.uncaptured ??= e.error.message; };
    if (this.debug >= 2) {
      if (caps.timestamps) this.profiler = new GpuProfiler(device, FLUSH_DISPATCHES, (k, v, ms) => debugLine(`[webgpu] ${ms.toFixed(3)} ms GPU ${k} ${v}`));
      else debugLine(`[webgpu] FON_DEBUG=2: ${caps.adapterName} has no timestamp-query, so kernel times are not available`);
    }
  }

  private checkAlive(): void {
    if (this.lostReason !== null) throw new DeviceError(`webgpu: device lost (${this.lostReason})`);
  }

  private pipeline(key: string, kernel: Kernel, variant: Variant): GPUComputePipeline {
    let p = this.pipelines.get(key);
    if (!p) {
      const code = kernel.source(variant, this.caps);
      if (this.debug >= 3) debugLine(`// ${key}\n${code}`);
      const module = this.device.createShaderModule({ code, label: kernel.name });
      const explicit = explicitLayout(this.device, code, key);
      const layout = explicit ? this.device.createPipelineLayout({ bindGroupLayouts: [explicit.layout], label: key }) : 'auto';
      p = this.device.createComputePipeline({ layout, compute: { module, entryPoint: 'main' }, label: key });
      this.pipelines.set(key, p);
      this.layouts.set(p, explicit && { ...explicit, id: this.layouts.size });
    }
    return p;
  }

  /**
   * The bind group of a dispatch. A pipeline whose bindings are 0 … n−1 with the uniforms (if any)
   * at 0 has an explicit layout with a dynamic uniform offset, so its bind groups depend only on
   * the storage buffers and are cached: creating one costs ~19 µs of host time on this project's
   * CPU machine, and calls over the same buffers (a decode over one KV cache) repeat them. Other
   * pipelines (layout 'auto') get a new group each dispatch. Returns the dynamic offsets to set.
   */
  private bindGroup(pipeline: GPUComputePipeline, key: string, uniformAt: number, uniformBytes: number, buffers: readonly GPUBuffer[]): [GPUBindGroup, number[]] {
    const explicit = this.layouts.get(pipeline);
    const hasUniforms = uniformBytes > 0;
    if (!explicit) return [this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: this.entries(uniformAt, uniformBytes, buffers) }), NO_OFFSETS];
    if (explicit.kinds.length !== buffers.length + (hasUniforms ? 1 : 0) || (explicit.kinds[0] === 'u') !== hasUniforms) {
      throw new DeviceError(`webgpu: kernel ${key} declares bindings '${explicit.kinds}' (u uniform, r/w storage) but the dispatch binds ${hasUniforms ? 'uniforms and ' : ''}${buffers.length} buffers`);
    }
    let ids = `${explicit.id}|${uniformBytes}`;
    for (const b of buffers) {
      let id = this.bufferIds.get(b);
      if (id === undefined) { id = this.nextBufferId++; this.bufferIds.set(b, id); }
      ids += `,${id}`;
    }
    let group = this.groups.get(ids);
    if (group) this.groups.delete(ids);
    else {
      group = this.device.createBindGroup({ layout: explicit.layout, entries: this.entries(0, uniformBytes, buffers) });
      this.bindGroupsMade++;
      if (this.groups.size >= BIND_GROUP_CACHE) this.groups.delete(this.groups.keys().next().value!);
    }
    this.groups.set(ids, group);
    return [group, hasUniforms ? [uniformAt] : NO_OFFSETS];
  }

  /** A bind group's entries: the ring's `bytes` at `offset` first where there are uniforms, then the buffers. */
  private entries(offset: number, bytes: number, buffers: readonly GPUBuffer[]): GPUBindGroupEntry[] {
    const out: GPUBindGroupEntry[] = bytes > 0 ? [{ binding: 0, resource: { buffer: this.ring(), offset, size: bytes } }] : [];
    for (const b of buffers) out.push({ binding: out.length, resource: { buffer: b } });
    return out;
  }

  private ring(): GPUBuffer {
    this.ringBuffer ??= this.device.createBuffer({ size: RING_BYTES, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    return this.ringBuffer;
  }

  /** Records one compute dispatch into the pending encoder. */
  run(d: Dispatch): void {
    this.checkAlive();
    const [x, y = 1, z = 1] = d.workgroups;
    if (x === 0 || y === 0 || z === 0) return;
    const variantKey = JSON.stringify(d.variant);
    const key = d.kernel.name + variantKey;
    const pipeline = this.pipeline(key, d.kernel, d.variant);
    let at = 0, bytes = 0;
    if (d.uniforms) {
      const words = Math.max(4, Math.ceil(d.uniforms.length / 4) * 4);
      const align = this.caps.minUniformAlignment / 4;
      if (this.ringUsed + words > this.ringCpu.length) this.flush();
      at = this.ringUsed;
      this.ringCpu.set(d.uniforms as ArrayLike<number>, at);
      this.ringCpu.fill(0, at + d.uniforms.length, at + words);
      this.ringUsed = Math.ceil((at + words) / align) * align;
      at *= 4;
      bytes = words * 4;
    }
    const [group, offsets] = this.bindGroup(pipeline, key, at, bytes, d.buffers);
    if (d.deviceUniforms?.length) {
      // After flush's writeBuffer of the ring and before the dispatch: the copies land over those words.
      const encoder = this.commandEncoder();
      for (const u of d.deviceUniforms) {
        if (!d.uniforms || u.word >= d.uniforms.length) throw new Error(`webgpu: ${d.kernel.name}: device uniform word ${u.word} outside its ${d.uniforms?.length ?? 0} uniform words`);
        encoder.copyBufferToBuffer(u.buffer, u.byteOffset, this.ring(), at + 4 * u.word, 4);
      }
    }
    if (this.profiler) {
      // Each dispatch in a pass of its own, timed at its beginning and end.
      const encoder = this.commandEncoder();
      this.pass = encoder.beginComputePass(this.profiler.passFor(d.kernel.name, variantKey));
      this.passPipeline = null;
    }
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    if (!this.pass) { this.pass = this.encoder.beginComputePass(); this.passPipeline = null; }
    if (pipeline !== this.passPipeline) { this.pass.setPipeline(pipeline); this.passPipeline = pipeline; }
    this.pass.setBindGroup(0, group, offsets);
    this.pass.dispatchWorkgroups(x, y, z);
    if (this.profiler) { this.pass.end(); this.pass = null; }
    this.dispatches++;
    this.totalDispatches++;
    this.log?.push({ kernel: d.kernel.name, variant: d.variant, workgroups: [x, y, z] });
    if (this.debug >= 1) debugLine(`[webgpu] ${d.kernel.name} ${variantKey} ${x}x${y}x${z}`);
    if (this.dispatches >= this.flushEvery) this.flush();
  }

  /**
   * Runs fn and returns, beside its result, every dispatch it recorded in order: how tests learn
   * which kernel ran (and with which variant and grid) without counters in the kernels' hosts.
   * Logs nest: an inner call's dispatches also appear in the outer one's.
   */
  recordDispatches<T>(fn: () => T): { result: T; dispatches: DispatchRecord[] } {
    const outer = this.log, mine: DispatchRecord[] = [];
    this.log = mine;
    try {
      return { result: fn(), dispatches: mine };
    } finally {
      outer?.push(...mine);
      this.log = outer;
    }
  }

  /** The pending encoder, with any compute pass ended (for copies). */
  commandEncoder(): GPUCommandEncoder {
    if (this.pass) { this.pass.end(); this.pass = null; }
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    return this.encoder;
  }

  /** Submits everything recorded so far (uniforms first). */
  flush(): void {
    if (!this.encoder) return;
    if (this.pass) { this.pass.end(); this.pass = null; }
    if (this.ringUsed > 0) {
      this.device.queue.writeBuffer(this.ring(), 0, this.ringCpu.buffer, 0, this.ringUsed * 4);
      // writeBuffer is ordered after every earlier submit, so the next batch may reuse the buffer.
      this.ringUsed = 0;
    }
    const afterSubmit = this.profiler?.beforeSubmit(this.encoder);
    this.device.queue.submit([this.encoder.finish()]);
    this.submits++;
    afterSubmit?.();
    this.encoder = null;
    this.dispatches = 0;
  }

  /** Copies host bytes into `buf` after everything recorded so far. */
  write(buf: GPUBuffer, data: ArrayBufferView, byteLength = data.byteLength): void {
    this.checkAlive();
    this.flush();
    const padded = Math.ceil(byteLength / 4) * 4;
    if (padded === byteLength) this.device.queue.writeBuffer(buf, 0, data.buffer, data.byteOffset, byteLength);
    else {
      const tmp = new Uint8Array(padded);
      tmp.set(new Uint8Array(data.buffer, data.byteOffset, byteLength));
      this.device.queue.writeBuffer(buf, 0, tmp);
    }
  }

  /** Reads `byteLength` bytes of `buf` back to the host. */
  async read(buf: GPUBuffer, byteLength: number): Promise<ArrayBuffer> {
    this.checkAlive();
    const padded = Math.max(4, Math.ceil(byteLength / 4) * 4);
    const staging = this.takeStaging(padded) ?? this.device.createBuffer({ size: padded, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this.commandEncoder().copyBufferToBuffer(buf, 0, staging, 0, padded);
    this.flush();
    try {
      await staging.mapAsync(GPUMapMode.READ);
    } catch (e) {
      staging.destroy();
      this.checkAlive();
      throw new DeviceError(`webgpu: read-back of ${byteLength} bytes failed: ${(e as Error).message}`);
    }
    const out = staging.getMappedRange(0, padded).slice(0, byteLength);
    staging.unmap();
    this.parkStaging(staging);
    await this.checkErrors();
    return out;
  }

  /**
   * Keeps an unmapped read-back buffer for the next read of its size (a decode step reads its
   * logits row every step), up to STAGING_BYTES in all; beyond that it is destroyed.
   */
  private parkStaging(b: GPUBuffer): void {
    if (this.stagingBytes + b.size > STAGING_BYTES) { b.destroy(); return; }
    let list = this.staging.get(b.size);
    if (!list) { list = []; this.staging.set(b.size, list); }
    list.push(b);
    this.stagingBytes += b.size;
  }

  /** A parked read-back buffer of `size` bytes, taken out of the parked set (undefined if none). */
  private takeStaging(size: number): GPUBuffer | undefined {
    const b = this.staging.get(size)?.pop();
    if (b) this.stagingBytes -= size;
    return b;
  }

  private destroyStaging(): void {
    for (const list of this.staging.values()) for (const b of list) b.destroy();
    this.staging.clear();
    this.stagingBytes = 0;
  }

  /** Throws a DeviceError for a lost device, a failed allocation or a validation error. */
  async checkErrors(): Promise<void> {
    this.checkAlive();
    await this.pool.check();
    if (this.uncaptured !== null) {
      const m = this.uncaptured;
      this.uncaptured = null;
      throw new DeviceError(`webgpu: ${m}`);
    }
  }

  async sync(): Promise<void> {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    await this.checkErrors();
  }

  /**
   * Times every dispatch from here on, each in a pass of its own (profile.ts), until stopProfile.
   * Needs the timestamp-query feature.
   */
  startProfile(): void {
    if (!this.caps.timestamps) throw new UnsupportedError(`webgpu: profiling needs the timestamp-query feature, which ${this.caps.adapterName} does not offer`);
    this.flush();
    // A submit holds at most FLUSH_DISPATCHES dispatches, so the query set is sized for that many.
    if (this.profiler) this.profiler.reset();
    else this.profiler = new GpuProfiler(this.device, FLUSH_DISPATCHES);
  }

  /** GPU time per kernel since startProfile, slowest first; dispatches run untimed again after it (except under FON_DEBUG=2, which times them all). */
  async stopProfile(): Promise<KernelTime[]> {
    const p = this.profiler;
    if (!p) throw new ArgumentError('webgpu: stopProfile without startProfile');
    this.flush();
    // Under FON_DEBUG=2 the profiler stays: it times every dispatch for the debug lines.
    const keep = this.debug >= 2;
    if (!keep) this.profiler = null;
    try {
      const rows = await p.take();
      this.checkAlive(); // a lost device leaves read-backs unanswered: its totals would be partial
      return rows;
    } finally {
      if (!keep) p.destroy();
    }
  }

  /**
   * Destroys the pool's parked buffers (e.g. after a phase with different shapes). Submits the
   * pending encoder first: its commands may still bind a buffer released since they were recorded.
   */
  trimPool(): void {
    this.flush();
    this.groups.clear();
    this.pool.destroyParked();
    this.destroyStaging();
  }

  destroy(): void {
    try { this.flush(); } catch { /* device may be gone */ }
    this.pool.destroyParked();
    this.destroyStaging();
    this.ringBuffer?.destroy();
    this.ringBuffer = null;
    this.profiler?.destroy();
    this.device.destroy();
  }
}

/** Workgroups for n invocations of size wg: a 2-D grid when one axis would pass 65535. */
export function grid(n: number, wg: number): [number, number] {
  const groups = Math.ceil(n / wg);
  if (groups <= 65535) return [groups, 1];
  const y = Math.ceil(groups / 65535);
  return [Math.ceil(groups / y), y];
}

export { preprocess };
