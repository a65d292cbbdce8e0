/**
 * FON_DEBUG levels are cumulative on every backend (platform/debug.ts): 1 prints each op, 2 adds
 * kernel times, 3 adds the WGSL of new pipelines (WebGPU). Each level runs a child process
 * (test/fixtures/debug/one_matmul.ts) because the level is read once per process.
 *
 *   node --import tsx --test test/backend/debug_levels.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

// Whether this machine has an adapter at all (the children make their own devices).
await webgpuOrSkip();
exitAfterWebgpu();
const script = join(import.meta.dirname, '../fixtures/debug/one_matmul.ts');

function run(backend: string, level: string): string {
  const r = spawnSync(process.execPath, ['--import', 'tsx', script, backend], { env: { ...process.env, FON_DEBUG: level }, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /sum 16/);
  return r.stderr;
}

test('FON_DEBUG on the CPU: 0 prints nothing, 1 the op, 2 also its kernel time', () => {
  assert.equal(run('cpu', '0'), '');
  const one = run('cpu', '1');
  assert.match(one, /^\[fon\] matmul on cpu: f32\[4, 8\] f32\[4, 8\]$/m);
  assert.doesNotMatch(one, /ms matmul/);
  const two = run('cpu', '2');
  assert.match(two, /^\[fon\] matmul on cpu: f32\[4, 8\] f32\[4, 8\]$/m);
  assert.match(two, /^\[cpu\] \d+\.\d{3} ms matmul$/m);
});

test('FON_DEBUG on WebGPU: 1 the op and its dispatch, 2 also GPU times where timestamps exist, 3 also the WGSL [webgpu]', { skip: webgpuSkipReason() }, () => {
  const one = run('webgpu', '1');
  assert.match(one, /^\[fon\] matmul on webgpu/m);
  assert.match(one, /^\[webgpu\] matmul\w* \{.*\} \d+x\d+x\d+$/m);
  assert.doesNotMatch(one, /@compute/);
  const two = run('webgpu', '2');
  assert.match(two, /^\[webgpu\] matmul\w* \{/m);
  assert.match(two, /^\[webgpu\] (\d+\.\d{3} ms GPU matmul|FON_DEBUG=2: .* has no timestamp-query)/m);
  const three = run('webgpu', '3');
  assert.match(three, /^\[fon\] matmul on webgpu/m);
  assert.match(three, /@compute/);
});
