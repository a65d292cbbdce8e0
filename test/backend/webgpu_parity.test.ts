/**
 * The whole parity suite (test/parity) on WebGPU against the CPU reference: every op × dtype ×
 * shape case, forward and gradients. On a machine without a GPU it runs on SwiftShader:
 *
 *   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_parity.test.ts
 */
import { test } from 'node:test';
import { assertParity, formatReport, runParity } from '../parity/run.ts';
import { skipsFor } from '../parity/skips.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = await webgpuOrSkip();
exitAfterWebgpu();

test('every op matches the CPU reference, forward and gradients [webgpu]', { skip: webgpuSkipReason() }, async (t) => {
  const report = await runParity(gpu!, { skip: skipsFor('webgpu') });
  t.diagnostic(formatReport(report));
  assertParity(report);
});
