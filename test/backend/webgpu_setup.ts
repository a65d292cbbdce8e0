/**
 * Shared setup for WebGPU test files: get the backend or skip (with the reason) when this machine
 * has no adapter — unless FON_REQUIRE_WEBGPU=1, which turns a missing adapter into a failure —
 * and end the process after the file's tests (Dawn's Node binding otherwise keeps it alive).
 *
 *   const gpu = await webgpuOrSkip();
 *   exitAfterWebgpu();
 *   test('op [webgpu]', { skip: webgpuSkipReason() }, async () => { ... gpu! ... });
 *
 * Run on a machine without a GPU with
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/<file>.test.ts
 */
import { after } from 'node:test';
import * as fon from '../../src/index.ts';
import type { Backend } from '../../src/index.ts';

let skipReason: string | false = false;

/** The webgpu backend, or null (and a skip reason) when no adapter is found here. */
export async function webgpuOrSkip(): Promise<Backend | null> {
  try {
    await import('../../src/backend/webgpu/index.ts');
    const gpu = await fon.initBackend('webgpu');
    skipReason = false;
    return gpu;
  } catch (e) {
    const why = `no WebGPU here: ${(e as Error).message}`;
    if (process.env.FON_REQUIRE_WEBGPU === '1') throw new Error(`FON_REQUIRE_WEBGPU=1 but ${why}`);
    skipReason = `${why} (set FON_REQUIRE_WEBGPU=1 to make this a failure)`;
    console.warn(`skipping WebGPU tests: ${skipReason}`);
    return null;
  }
}

/** `false` once webgpuOrSkip found a device, else the reason to pass as a test's `skip` option. */
export function webgpuSkipReason(): string | false {
  return skipReason;
}

/** Registers an after() hook that destroys the backends and then ends the process. */
export function exitAfterWebgpu(): void {
  after(async () => {
    await fon.shutdownBackends();
    setImmediate(() => process.exit(process.exitCode ?? 0));
  });
}
