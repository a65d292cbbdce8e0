/**
 * TensorFlow.js's wasm backend (XNNPACK, SIMD) timing the same GEMMs as FON on the CPU, so the
 * comparison with the TypeScript peer is measured in the same run. A dev dependency: when it is
 * not installed the comparison is left out.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { timeMs } from './report.ts';

export interface TfjsGemm { name: string; ms: Map<number, number> }

export async function tfjsWasmGemm(sizes: readonly number[], iters: number): Promise<TfjsGemm | null> {
  let tf: typeof import('@tensorflow/tfjs-core');
  let wasm: typeof import('@tensorflow/tfjs-backend-wasm');
  try {
    tf = await import('@tensorflow/tfjs-core');
    wasm = await import('@tensorflow/tfjs-backend-wasm');
  } catch {
    return null;
  }
  const require = createRequire(import.meta.url);
  wasm.setWasmPaths(`${dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'))}/`);
  await tf.setBackend('wasm');
  await tf.ready();
  const threads = await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT');
  const ms = new Map<number, number>();
  for (const n of sizes) {
    const a = tf.randomNormal([n, n]), b = tf.randomNormal([n, n]);
    ms.set(n, await timeMs(async () => { const c = tf.matMul(a, b); await c.data(); c.dispose(); }, iters, 2));
    a.dispose(); b.dispose();
  }
  return { name: `TF.js ${tf.version_core} wasm${threads ? ', threaded' : ', one thread (no threads in Node)'}`, ms };
}
