/**
 * INT4 microscale codes (ops/int4.ts): the CPU op equals the host form SpotAttention's tests check
 * (attention/spot/int4_keys.ts), and WebGPU's kernels (int4.wgsl) equal the CPU: the same codes and
 * scales up to a division rounded the other way at a code boundary (a code off by one, rarely), and
 * dequantization of the same codes exactly; f32 and f16 inputs, zero groups, bad shapes refused.
 * Run: VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node --import tsx --test test/backend/webgpu_int4.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { dequantizeInt4, quantizeInt4 } from '../../src/ops/int4.ts';
import { quantizeKeysInt4 } from '../../src/attention/spot/int4_keys.ts';
import { ArgumentError } from '../../src/errors.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const cpu = await fon.initBackend('cpu');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();

const [N, D] = [37, 128];
function values(): Float32Array {
  let s = 3;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  return Float32Array.from({ length: N * D }, (_, i) => (Math.floor(i / 32) % 9 === 4 ? 0 : (rnd() - 0.5) * (i % 53 === 0 ? 30 : 3)));
}
const words = (t: fon.Tensor) => Array.from(new Uint32Array((t.dataSync() as Int32Array).buffer.slice(0)));

test('the CPU op is the host form: the same words and scales; dequantized values within half a step', () => {
  const x = values();
  const host = quantizeKeysInt4(x, D);
  const q = quantizeInt4(fon.tensor(x, [N, D], { backend: cpu }));
  assert.deepEqual(q.codes.shape, [N, D / 8]);
  assert.deepEqual(q.scales.shape, [N, D / 32]);
  assert.deepEqual(words(q.codes), Array.from(host.codes));
  assert.deepEqual(Array.from(q.scales.dataSync() as Uint16Array), Array.from(host.scales));
  const y = dequantizeInt4(q.codes, q.scales).dataSync() as Float32Array;
  const s = fon.cast(q.scales, 'f32').dataSync() as Float32Array;
  for (let i = 0; i < x.length; i++) assert.ok(Math.abs(y[i] - x[i]) <= s[Math.floor(i / 32)] / 2 + 1e-7, `value ${i}`);
  assert.throws(() => quantizeInt4(fon.zeros([2, 48], { backend: cpu })), (e) => e instanceof ArgumentError && /needs a last axis that is a multiple of 32/.test(e.message));
  assert.throws(() => dequantizeInt4(q.codes, fon.zeros([N, 3], { backend: cpu, dtype: 'f16' })), /expected \(…, d\/8\) and \(…, d\/32\)/);
});

test('WebGPU INT4 codes equal the CPU\'s (a rare code off by one where the division rounds the other way); dequantization of the same codes exact; f32 and f16 [webgpu]', { skip: webgpuSkipReason() }, async () => {
  for (const dtype of ['f32', 'f16'] as const) {
    const x = values();
    const xc = fon.cast(fon.tensor(x, [N, D], { backend: cpu }), dtype), xg = fon.cast(fon.tensor(x, [N, D], { backend: gpu! }), dtype);
    const qc = quantizeInt4(xc), qg = quantizeInt4(xg);
    assert.deepEqual(Array.from((await qg.scales.data()) as Uint16Array), Array.from(qc.scales.dataSync() as Uint16Array), `${dtype}: scales`);
    const wc = words(qc.codes), wg = Array.from(new Uint32Array(((await qg.codes.data()) as Int32Array).buffer.slice(0)));
    let off = 0;
    for (let w = 0; w < wc.length; w++) {
      for (let j = 0; j < 8; j++) {
        const a = (wc[w] >>> (4 * j)) & 15, b = (wg[w] >>> (4 * j)) & 15;
        assert.ok(Math.abs(a - b) <= 1, `${dtype}: code ${8 * w + j}: ${a - 8} against ${b - 8}`);
        if (a !== b) off++;
      }
    }
    assert.ok(off <= N * D * 0.001, `${dtype}: ${off} codes differ`);
    // Dequantizing the CPU's codes and scales on the GPU gives the CPU's values, in f32 and f16.
    for (const out of ['f32', 'f16'] as const) {
      const codes = fon.tensor(qc.codes.dataSync() as Int32Array, [N, D / 8], { backend: gpu!, dtype: 'i32' });
      const scales = fon.tensor(qc.scales.dataSync() as Uint16Array, [N, D / 32], { backend: gpu!, dtype: 'f16' });
      const yg = await fon.cast(dequantizeInt4(codes, scales, out), 'f32').data();
      const yc = fon.cast(dequantizeInt4(qc.codes, qc.scales, out), 'f32').dataSync();
      assert.deepEqual(Array.from(yg as Float32Array), Array.from(yc as Float32Array), `${dtype} → ${out}`);
    }
  }
});
