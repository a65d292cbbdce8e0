/** WebGPU failures become FonErrors that say what failed: oversize allocations, a destroyed device. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { DeviceError } from '../../src/index.ts';
import { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = await webgpuOrSkip();
exitAfterWebgpu();

test('an allocation above the binding limit names the allocation and its size [webgpu]', { skip: webgpuSkipReason() }, () => {
  const limit = (gpu as WebGpuBackend).caps.maxBinding;
  const n = Math.floor(limit / 4) + 1024;
  assert.throws(() => fon.zeros([n], { backend: gpu! }), (e: Error) => {
    assert.ok(e instanceof DeviceError, `expected DeviceError, got ${e.name}`);
    assert.match(e.message, new RegExp(`fill needs ${n * 4} bytes \\(${n} × f32\\)`));
    assert.match(e.message, /maxStorageBufferBindingSize/);
    return true;
  });
});

test('using a destroyed backend is a DeviceError, not a crash [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const other = await WebGpuBackend.create();
  const t = fon.ones([4], { backend: other });
  other.destroy();
  assert.throws(() => fon.add(t, t), DeviceError);
  await assert.rejects(() => t.data(), DeviceError);
});
