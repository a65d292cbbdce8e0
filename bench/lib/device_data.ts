/** Device-side inputs and pool trimming the long-context benches (bench/focus.ts, bench/spot.ts) share. */
import * as fon from '../../src/index.ts';
import type { Backend, Tensor } from '../../src/index.ts';

/**
 * Random (1, n, rows, width) f16 on the device: a draw of at most 65536 rows (the draws are made on
 * the host, which is slow) repeated along the rows, each copy scaled a little differently.
 */
export function deviceRandn(b: Backend, n: number, rows: number, width: number, seed: number): Tensor {
  const base = fon.randn([1, n, Math.min(rows, 65536), width], { seed, backend: b, dtype: 'f16' });
  if (rows <= 65536) return base;
  const parts: Tensor[] = [];
  for (let r = 0; r < rows; r += 65536) {
    const m = Math.min(65536, rows - r);
    parts.push(fon.mul(m === 65536 ? base : fon.narrow(base, 2, 0, m), 1 - r / (4 * rows)));
  }
  const out = fon.keep(fon.concat(parts, 2));
  for (const p of parts) p.dispose();
  base.dispose();
  return out;
}

/**
 * Gives the pool's parked buffers back to the device between runs of different shapes: each run
 * parks its own sizes, and a later, larger run could otherwise run out of device memory.
 */
export const trim = (b: Backend): void => (b as unknown as { rt?: { trimPool(): void } }).rt?.trimPool();

/**
 * A ParamFactory `draw` for benches of large models: one block of 2^20 f16 normals drawn on the host
 * once, tiled on the device to each parameter's size and scaled by its std (a billion host draws
 * would take about a minute; the bench times the model, not its values). `dispose` frees the block.
 */
export function deviceDraw(b: Backend): { draw: (name: string, shape: readonly number[], std: number) => Tensor; dispose(): void } {
  const m = 1 << 20;
  let block: Tensor | undefined;
  return {
    draw: (_name, shape, std) => {
      block ??= fon.keep(fon.randn([1, m], { seed: 77, backend: b, dtype: 'f16' }));
      const n = shape.reduce((a, x) => a * x, 1);
      const rows = Math.ceil(n / m);
      return fon.tidy(() => fon.mul(fon.reshape(fon.narrow(fon.reshape(fon.broadcastTo(block!, [rows, m]), [rows * m]), 0, 0, n), shape), std));
    },
    dispose: () => block?.dispose(),
  };
}
