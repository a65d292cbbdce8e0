/**
 * SpotAttention's INT4 microscale selector keys (attention/spot/int4_keys.ts): every value comes
 * back within half its group's stored scale, the largest of a group exactly representable ones
 * come back exactly, a zero group stays zero, the bytes are 72 per 128-dimension key (3.56× below
 * f16), and bad widths or values are refused by name.
 * Run: node --import tsx --test test/attention/spot_int4.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError } from '../../src/errors.ts';
import { f16BitsToF32 } from '../../src/tensor/dtype.ts';
import { dequantizeKeysInt4, INT4_GROUP, int4KeyBytes, quantizeKeysInt4 } from '../../src/attention/spot/int4_keys.ts';

test('INT4 keys round-trip within half a step of their group\'s scale; grid values and zero groups come back exactly', () => {
  let s = 9;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const n = 50, d = 128;
  const x = Float32Array.from({ length: n * d }, (_, i) => (Math.floor(i / 32) % 7 === 3 ? 0 : (rnd() - 0.5) * (i % 97 === 0 ? 40 : 2)));
  const k = quantizeKeysInt4(x, d);
  assert.equal(k.codes.length, n * d / 8);
  assert.equal(k.scales.length, n * d / INT4_GROUP);
  const y = dequantizeKeysInt4(k);
  let worstSteps = 0;
  for (let i = 0; i < x.length; i++) {
    const step = f16BitsToF32(k.scales[Math.floor(i / INT4_GROUP)]);
    if (step === 0) { assert.equal(y[i], 0, `zero group at ${i}`); continue; }
    worstSteps = Math.max(worstSteps, Math.abs(y[i] - x[i]) / step);
  }
  assert.ok(worstSteps <= 0.5 + 1e-6, `worst error ${worstSteps} steps`);
  assert.ok(worstSteps > 0.3, 'random values are not all on the grid');
  // Values on the grid of their group's scale come back exactly (scale 0.5: codes −7 … 7).
  const grid = Float32Array.from({ length: 32 }, (_, i) => ((i % 15) - 7) * 0.5);
  assert.deepEqual(Array.from(dequantizeKeysInt4(quantizeKeysInt4(grid, 32))), Array.from(grid));
});

test('INT4 keys take 72 bytes per 128 dimensions (3.56x below f16); widths and values that cannot be stored are refused', () => {
  assert.equal(int4KeyBytes(128), 72);
  assert.equal(Number((256 / int4KeyBytes(128)).toFixed(2)), 3.56);
  assert.throws(() => quantizeKeysInt4(new Float32Array(48), 48), (e: Error) => e instanceof ArgumentError && e.message === 'spot: INT4 selector keys need a width that is a positive multiple of 32; got 48');
  assert.throws(() => quantizeKeysInt4(new Float32Array(40), 32), /spot: 40 values are not whole keys of 32/);
  const bad = new Float32Array(64);
  bad[40] = Number.POSITIVE_INFINITY;
  assert.throws(() => quantizeKeysInt4(bad, 32), /spot: selector key value Infinity at 40 \(key 1\) is not finite/);
});
