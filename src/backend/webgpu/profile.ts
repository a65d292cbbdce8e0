/**
 * GPU time per kernel from timestamp queries (GpuRuntime.startProfile / stopProfile): where a training step or a decode
 * spends its device time, measured rather than guessed. Each dispatch runs in its own compute pass
 * whose beginning and end write a timestamp; at each submit the pairs are resolved into a buffer,
 * read back without blocking, and summed per kernel and variant. The extra passes cost a little
 * time of their own (one pass boundary per dispatch), so totals run slightly above a normal run's.
 *
 * Dawn quantises timestamps unless its `timestamp_quantization` toggle is off; the Node adapter
 * turns it off (platform/node_gpu.ts). Browsers may quantise (to 100 µs in Chrome).
 */

/** Time of one kernel (name and variant) over the dispatches profiled. */
export interface KernelTime {
  kernel: string;
  variant: string;
  dispatches: number;
  /** Summed GPU time of its dispatches, ms. */
  ms: number;
}

interface Batch { labels: string[]; staging: GPUBuffer; done: Promise<void>; generation: number }

export class GpuProfiler {
  private querySet: GPUQuerySet;
  private resolve: GPUBuffer;
  /** Kernel key (name + '\u0000' + variant) of each dispatch in the pending submit, in order. */
  private labels: string[] = [];
  private pending: Batch[] = [];
  private totals = new Map<string, { dispatches: number; ns: bigint }>();
  /** Bumped by reset: batches from before it are left out of the totals. */
  private generation = 0;

  /**
   * `perSubmit`: the most dispatches the runtime records between submits (two queries each);
   * `echo` hears each dispatch's time as it comes back (FON_DEBUG=2).
   */
  constructor(private device: GPUDevice, perSubmit: number, private echo?: (kernel: string, variant: string, ms: number) => void) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * perSubmit });
    this.resolve = device.createBuffer({ size: 2 * perSubmit * 8, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  }

  /** The timestamp writes for the next dispatch's own pass. */
  passFor(kernel: string, variant: string): GPUComputePassDescriptor {
    const i = 2 * this.labels.length;
    this.labels.push(`${kernel}\u0000${variant}`);
    return { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: i, endOfPassWriteIndex: i + 1 } };
  }

  /** Records the resolve and copy of this submit's timestamps into `encoder` (its passes ended). */
  beforeSubmit(encoder: GPUCommandEncoder): (() => void) | null {
    if (this.labels.length === 0) return null;
    const n = 2 * this.labels.length;
    const staging = this.device.createBuffer({ size: n * 8, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    encoder.resolveQuerySet(this.querySet, 0, n, this.resolve, 0);
    encoder.copyBufferToBuffer(this.resolve, 0, staging, 0, n * 8);
    const labels = this.labels;
    this.labels = [];
    // After the submit: read the pairs back when the GPU is done, without blocking the caller.
    return () => {
      const batch: Batch = { labels, staging, done: Promise.resolve(), generation: this.generation };
      batch.done = staging.mapAsync(GPUMapMode.READ).then(() => {
        const t = new BigUint64Array(staging.getMappedRange(0, n * 8));
        for (let d = 0; d < labels.length; d++) {
          const ns = t[2 * d + 1] > t[2 * d] ? t[2 * d + 1] - t[2 * d] : 0n;
          const row = this.totals.get(labels[d]) ?? { dispatches: 0, ns: 0n };
          row.dispatches++;
          row.ns += ns;
          // A batch submitted before the last reset still echoes, but does not count.
          if (batch.generation === this.generation) this.totals.set(labels[d], row);
          if (this.echo) { const [kernel, variant] = labels[d].split('\u0000'); this.echo(kernel, variant, Number(ns) / 1e6); }
        }
        staging.unmap();
      }, () => { /* device lost: the runtime reports it */ }).finally(() => {
        staging.destroy();
        this.pending.splice(this.pending.indexOf(batch), 1);
      });
      this.pending.push(batch);
    };
  }

  /** Forgets the totals so far (a profile starting while FON_DEBUG=2 already times every dispatch). */
  reset(): void {
    this.totals.clear();
    this.generation++;
  }

  /** Every kernel's time since the last `take`, slowest first; clears the totals. */
  async take(): Promise<KernelTime[]> {
    while (this.pending.length) await Promise.all(this.pending.map((b) => b.done));
    const rows = [...this.totals].map(([key, r]) => {
      const [kernel, variant] = key.split('\u0000');
      return { kernel, variant, dispatches: r.dispatches, ms: Number(r.ns) / 1e6 };
    });
    this.totals.clear();
    return rows.sort((a, b) => b.ms - a.ms);
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolve.destroy();
  }
}

/**
 * A markdown table of kernel times, kernels summed over their variants unless `byVariant`: the
 * `top` slowest, the rest as one row, and the total.
 */
export function profileTable(rows: readonly KernelTime[], opts: { top?: number; byVariant?: boolean } = {}): string {
  const merged = new Map<string, KernelTime>();
  for (const r of rows) {
    const key = opts.byVariant ? `${r.kernel} ${r.variant}` : r.kernel;
    const m = merged.get(key) ?? { kernel: key, variant: '', dispatches: 0, ms: 0 };
    m.dispatches += r.dispatches;
    m.ms += r.ms;
    merged.set(key, m);
  }
  const sorted = [...merged.values()].sort((a, b) => b.ms - a.ms);
  const total = sorted.reduce((s, r) => s + r.ms, 0);
  const top = opts.top ?? 20;
  const line = (name: string, n: number, ms: number) =>
    `| ${name} | ${n} | ${ms.toFixed(3)} | ${n ? ((ms / n) * 1000).toFixed(1) : '—'} | ${total > 0 ? ((100 * ms) / total).toFixed(1) : '0.0'}% |`;
  const out = ['| kernel | dispatches | ms | µs each | share |', '|---|---|---|---|---|'];
  for (const r of sorted.slice(0, top)) out.push(line(r.kernel, r.dispatches, r.ms));
  const rest = sorted.slice(top);
  if (rest.length) out.push(line(`(${rest.length} others)`, rest.reduce((s, r) => s + r.dispatches, 0), rest.reduce((s, r) => s + r.ms, 0)));
  out.push(line('total', sorted.reduce((s, r) => s + r.dispatches, 0), total));
  return out.join('\n');
}
